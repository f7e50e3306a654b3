"""Partition paths: from record values to folder names and back, as Hudi spells them.

A partition path is part of every logical file path and of the hash input of
some layouts, so it must be the same string Hudi would write, and it must never
name a folder outside the table: a value is escaped the way Hudi's
``PartitionPathEncodeUtils`` does, and a value that would still escape its
folder is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from fedcore import properties as P
from fedcore.exceptions import InvalidPartitionValueError

DEFAULT_PARTITION: Final = "__HIVE_DEFAULT_PARTITION__"
#: One folder name: NAME_MAX of local file systems (ext4, xfs, APFS).
MAX_SEGMENT_BYTES: Final = 255
#: A whole partition path, leaving room in a 1,024-byte S3 key for the storage path,
#: hash prefix, table name and file name.
MAX_PATH_BYTES: Final = 640

# Hudi's escapePathName set: control characters and the characters that mean
# something in a path or a URI.
_ESCAPED: Final = frozenset([*map(chr, range(1, 32)), *"\"#%'*/:=?\\{[]^", "\x7f"])


def escape(value: str) -> str:
    if not any(ch in _ESCAPED for ch in value):
        return value
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPED else ch for ch in value)


def unescape(value: str) -> str:
    if "%" not in value:
        return value
    out, i = [], 0
    while i < len(value):
        if value[i] == "%" and _is_hex(value[i + 1 : i + 3]):
            out.append(chr(int(value[i + 1 : i + 3], 16)))
            i += 3
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def _is_hex(text: str) -> bool:
    return len(text) == 2 and all(ch in "0123456789abcdefABCDEF" for ch in text)


def value_text(value: Any) -> str:
    """A partition value as Hudi's key generators print it (Java ``toString``)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def value_texts(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``value_text`` of every value of a column, nulls kept null: Arrow's cast where it
    spells values as ``value_text`` does (integers, booleans, strings, dates, timestamps
    without a zone), else ``value_text`` once per distinct value (floats, decimals, zoned
    or nanosecond timestamps, binary, nested), never once per row."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    kind = array.type
    if pa.types.is_string(kind):
        return array
    if pa.types.is_dictionary(kind):
        return value_texts(array.dictionary).take(array.indices)
    if (
        pa.types.is_large_string(kind)
        or pa.types.is_string_view(kind)
        or pa.types.is_integer(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_date32(kind)
    ):
        return pc.cast(array, pa.string())
    if pa.types.is_timestamp(kind) and kind.tz is None and kind.unit != "ns":
        # isoformat(sep=" "): microseconds only when there are any.
        text = pc.cast(pc.cast(array, pa.timestamp("us")), pa.string())
        return pc.replace_substring_regex(text, r"\.000000$", "")
    encoded = pc.dictionary_encode(array)
    texts = pa.array([value_text(v) for v in encoded.dictionary.to_pylist()], pa.string())
    return texts.take(encoded.indices)


#: Key generators whose partition path is the partition columns' values as text, one
#: segment per column (Hudi's simple, complex and non-partitioned generators, by class in
#: table version 6 and by type in 8). Any other (timestamp-based, custom, a user's class)
#: maps values to paths in its own way, so a path says nothing a reader may prune by.
VALUE_ENCODING_KEY_GENERATORS: Final = frozenset(
    {P.SIMPLE_KEY_GENERATOR, P.COMPLEX_KEY_GENERATOR, P.NON_PARTITIONED_KEY_GENERATOR}
)
VALUE_ENCODING_KEY_GENERATOR_TYPES: Final = frozenset({"SIMPLE", "COMPLEX", "NON_PARTITION"})


def fed_makes_paths(config: Mapping[str, str]) -> bool:
    """Whether fedcore makes the partition paths of a table as its key generator does: the
    table is not partitioned, or its generator spells the columns' values. A timestamp-based,
    custom or user's generator maps values to paths its own way: fedcore would write an
    upserted key into a second partition beside the one the key has."""
    generator = P.key_generator(config)
    partitioned = bool(config.get(P.PARTITION_FIELDS, "").strip())
    return not partitioned or not generator or generator in VALUE_ENCODING_KEY_GENERATORS


@dataclass(frozen=True)
class PartitionScheme:
    """How a table turns partition column values into a partition path.

    ``encodes_values``: whether a partition path provably holds the columns' values
    (see ``VALUE_ENCODING_KEY_GENERATORS``); only then may a reader prune by it."""

    fields: tuple[str, ...]
    hive_style: bool = True
    url_encode: bool = True
    encodes_values: bool = True

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> PartitionScheme:
        fields = tuple(f.strip() for f in config.get(P.PARTITION_FIELDS, "").split(",") if f.strip())
        generator = P.key_generator(config)
        generator_type = config.get(P.KEY_GENERATOR_TYPE, "").strip().upper()
        return cls(
            fields,
            hive_style=config.get(P.HIVE_STYLE_PARTITIONING, "false").strip().lower() == "true",
            url_encode=config.get(P.URL_ENCODE_PARTITIONING, "false").strip().lower() == "true",
            encodes_values=generator in VALUE_ENCODING_KEY_GENERATORS
            or generator_type in VALUE_ENCODING_KEY_GENERATOR_TYPES,
        )

    def path_of(self, values: Sequence[Any]) -> str:
        """The partition path of one record's partition column values."""
        return self.path_of_texts([value_text(value) for value in values])

    def path_of_texts(self, texts: Sequence[str]) -> str:
        """The partition path of partition column values spelled by ``value_text``."""
        segments = []
        for field, text in zip(self.fields, texts, strict=True):
            text = text or DEFAULT_PARTITION
            segment = escape(text) if self.url_encode else text
            if "/" in segment or "\\" in segment or not segment.isprintable():
                # Only a table whose paths are not URL-encoded gets here, and that is fixed when
                # the table is created: flipping it would spell the partitions already written
                # another way, so each upserted key would land in a second partition.
                raise InvalidPartitionValueError(
                    f"partition value {text!r} of {field!r} contains a path separator or a control "
                    f"character, which this table's partition paths cannot hold: they are not "
                    f"URL-encoded ({P.URL_ENCODE_PARTITIONING}=false since the table was created); "
                    "write the value without them"
                )
            if self.hive_style:
                segment = f"{field}={segment}"
            elif segment in (".", ".."):
                raise InvalidPartitionValueError(
                    f"partition value {text!r} of {field!r} would name a folder outside its partition"
                )
            if len(segment.encode()) > MAX_SEGMENT_BYTES:
                raise InvalidPartitionValueError(
                    f"partition value {text[:40]!r}... of {field!r} is too long: its folder name "
                    f"{field + '=' if self.hive_style else ''}... would be {len(segment.encode())} bytes; "
                    f"file systems allow {MAX_SEGMENT_BYTES}"
                )
            segments.append(segment)
        path = "/".join(segments)
        if len(path.encode()) > MAX_PATH_BYTES:
            raise InvalidPartitionValueError(
                f"partition path {path[:60]!r}... is {len(path.encode())} bytes; at most {MAX_PATH_BYTES} "
                "leave room for the storage prefix and file name within an object key (S3: 1,024 bytes)"
            )
        return path

    def values_of(self, partition_path: str) -> dict[str, str | None] | None:
        """Partition column values (as text) of a path; None for a column in Hudi's default
        partition (the row's value was null or empty). None for the whole path when it does
        not provably encode the values: a key generator that maps values its own way, or a
        path whose segments do not match the columns one to one (a value holding '/' that
        was not URL-encoded)."""
        if not self.fields:
            return {}
        if not self.encodes_values:
            return None
        segments = partition_path.split("/") if partition_path else []
        if len(segments) != len(self.fields):
            return None
        values: dict[str, str | None] = {}
        if self.hive_style:
            for field, segment in zip(self.fields, segments, strict=True):
                name, sep, text = segment.partition("=")
                if not sep or name != field:
                    return None
                values[field] = text
        else:
            values = dict(zip(self.fields, segments, strict=True))
        out: dict[str, str | None] = {}
        for field in self.fields:
            found = values.get(field)
            if found is None or found == DEFAULT_PARTITION:
                out[field] = None
            else:
                out[field] = unescape(found) if self.url_encode else found
        return out
