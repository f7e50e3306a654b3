"""Hash prefixes for object-store layouts.

Object stores partition their key space by prefix and throttle each partition;
a prefix that is a hash of the file id spreads a table's writes and reads evenly
over the key space, and hashing the file id (not the file name) keeps a file
group's base and log files under one prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import xxhash

from fedcore import properties as P
from fedcore.exceptions import InvalidStorageConfigError

_HEX = {P.HASH_XXH32: xxhash.xxh32_hexdigest, P.HASH_XXH64: xxhash.xxh64_hexdigest}
_INT = {P.HASH_XXH32: xxhash.xxh32_intdigest, P.HASH_XXH64: xxhash.xxh64_intdigest}


class PrefixHasher:
    """Turns ``(partition_path, file_id)`` into a fixed-width lowercase hex prefix."""

    def __init__(self, function: str, hash_input: str, prefix_count: int | None) -> None:
        if function not in _HEX:
            raise InvalidStorageConfigError(
                P.STORAGE_HASH_FUNCTION, f"{function!r} is not one of {', '.join(P.HASH_FUNCTIONS)}"
            )
        if hash_input not in P.HASH_INPUTS:
            raise InvalidStorageConfigError(
                P.STORAGE_HASH_INPUT, f"{hash_input!r} is not one of {', '.join(P.HASH_INPUTS)}"
            )
        self.function = function
        self.hash_input = hash_input
        self.prefix_count = prefix_count
        #: ``(partition, file_id) -> int`` in ``range(prefix_count)``; None when unbounded.
        self.bucket: Callable[[str, str], int] | None = (
            None if prefix_count is None else self._build_bucket(function, hash_input, prefix_count)
        )
        self.prefix: Callable[[str, str], str] = self._build_prefix(function, hash_input, prefix_count)

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> PrefixHasher:
        return cls(
            properties.get(P.STORAGE_HASH_FUNCTION, P.DEFAULT_HASH_FUNCTION).strip().lower(),
            properties.get(P.STORAGE_HASH_INPUT, P.DEFAULT_HASH_INPUT).strip().lower(),
            parse_prefix_count(properties.get(P.STORAGE_PREFIX_COUNT)),
        )

    def properties(self) -> dict[str, str]:
        props = {P.STORAGE_HASH_FUNCTION: self.function, P.STORAGE_HASH_INPUT: self.hash_input}
        if self.prefix_count is not None:
            props[P.STORAGE_PREFIX_COUNT] = str(self.prefix_count)
        return props

    def format_bucket(self, bucket: int) -> str:
        """The fixed-width hex prefix of a bucket (bounded hashers only)."""
        return format(bucket, self._spec)

    # The functions below are built once per hasher, one per mode with no shared helper,
    # so that the per-path call is an encode and a hash: each extra call is a tenth of the
    # conversion budget. The hash input is the UTF-8 of "<partition>/<file_id>", or of
    # "<file_id>" alone (also for unpartitioned tables).

    @staticmethod
    def _build_bucket(function: str, hash_input: str, count: int) -> Callable[[str, str], int]:
        intdigest = _INT[function]
        if hash_input == P.HASH_INPUT_PARTITION_AND_FILE_ID:
            return lambda partition, file_id: (
                intdigest((f"{partition}/{file_id}" if partition else file_id).encode()) % count
            )
        return lambda partition, file_id: intdigest(file_id.encode()) % count

    def _build_prefix(self, function: str, hash_input: str, count: int | None) -> Callable[[str, str], str]:
        if count is not None:
            self._spec = f"0{len(format(count - 1, 'x'))}x"
            bucket, spec = self.bucket, self._spec
            return lambda partition, file_id: format(bucket(partition, file_id), spec)  # type: ignore[misc]
        hexdigest = _HEX[function]
        if hash_input == P.HASH_INPUT_PARTITION_AND_FILE_ID:
            return lambda partition, file_id: hexdigest(
                (f"{partition}/{file_id}" if partition else file_id).encode()
            )
        return lambda partition, file_id: hexdigest(file_id.encode())

    def __reduce__(self) -> tuple[type[PrefixHasher], tuple[str, str, int | None]]:
        return (PrefixHasher, (self.function, self.hash_input, self.prefix_count))


def parse_prefix_count(value: str | int | None) -> int | None:
    if value is None or value == "":
        return None
    try:
        count = int(str(value).strip())
    except ValueError:
        raise InvalidStorageConfigError(P.STORAGE_PREFIX_COUNT, f"{value!r} is not an integer") from None
    if count <= 0:
        raise InvalidStorageConfigError(P.STORAGE_PREFIX_COUNT, f"must be positive, got {count}")
    return count
