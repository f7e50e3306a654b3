"""A read-only file that fetches exactly the byte ranges asked for, and counts them.

Parquet readers seek to the footer and then to the row groups they need; over an
object store each such read should be one ranged GET of just those bytes, not a
read-ahead of the whole file (s3fs's default). The counts let tests and
benchmarks check that a lookup reads what it needs and nothing more.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass

from fsspec import AbstractFileSystem


@dataclass
class ReadStats:
    requests: int = 0
    bytes: int = 0

    def add(self, requests: int, nbytes: int) -> None:
        self.requests += requests
        self.bytes += nbytes


class RangedFile(io.RawIOBase):
    def __init__(self, fs: AbstractFileSystem, path: str, size: int, stats: ReadStats) -> None:
        super().__init__()
        self._fs, self._path, self._size, self._stats = fs, path, size, stats
        self._position = 0
        self._spans: list[tuple[int, bytes]] = []

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def prefetch(self, spans: Iterable[tuple[int, int]]) -> None:
        """Fetch these byte spans now, one request per run of touching spans, the runs
        concurrently.

        A Parquet reader decoding on one thread asks for column chunk after column
        chunk; fetching the chosen row groups whole first keeps a lookup at one
        request per run of adjacent row groups, not one per column."""
        runs: list[list[int]] = []
        for start, end in sorted(spans):
            if runs and start <= runs[-1][1]:
                runs[-1][1] = max(runs[-1][1], end)
            else:
                runs.append([start, end])
        if len(runs) == 1:
            start, end = runs[0]
            found = [self._fs.cat_file(self._path, start=start, end=min(end, self._size))]
        else:  # concurrently, where the store allows: one round trip
            found = self._fs.cat_ranges(
                [self._path] * len(runs), [r[0] for r in runs], [min(r[1], self._size) for r in runs]
            )
        for (start, _), data in zip(runs, found, strict=True):
            if isinstance(data, BaseException):
                raise data
            self._stats.add(1, len(data))
            self._spans.append((start, bytes(data)))

    def read_span(self, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end``, fetched now unless a prefetch holds them."""
        held = self._prefetched(start, end)
        if held is not None:
            return bytes(held)
        data = bytes(self._fs.cat_file(self._path, start=start, end=end))
        self._stats.add(1, len(data))
        return data

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        end = min(self._size, self._position + len(buffer))
        if end <= self._position:
            return 0
        data = self._prefetched(self._position, end)
        if data is None:
            data = self._fs.cat_file(self._path, start=self._position, end=end)
            self._stats.add(1, len(data))
        buffer[: len(data)] = data
        self._position += len(data)
        return len(data)

    def _prefetched(self, start: int, end: int) -> bytes | memoryview | None:
        for offset, data in self._spans:
            if offset <= start and end <= offset + len(data):
                return memoryview(data)[start - offset : end - offset]
        return None

    def size(self) -> int:
        return self._size
