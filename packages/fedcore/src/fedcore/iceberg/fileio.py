"""PyIceberg's file access through fed's own filesystems: the view is read and written with
the options the table was opened with, and no credential ever reaches Iceberg's metadata."""

from __future__ import annotations

import io
from typing import Any

from fsspec import AbstractFileSystem
from pyiceberg.io import FileIO, InputFile, InputStream, OutputFile, OutputStream

from fedcore.io.errors import storage_errors
from fedcore.io.filesystems import read_object


class FedFileIO(FileIO):
    """Reads and writes the view's metadata files on the filesystem of the table path."""

    def __init__(self, fs: AbstractFileSystem) -> None:
        super().__init__({})
        self._fs = fs

    def new_input(self, location: str) -> InputFile:
        return _WholeInput(location, self._fs)

    def held_input(self, location: str, data: bytes) -> InputFile:
        """The file at ``location`` whose bytes were read already (with others, concurrently)."""
        return _WholeInput(location, self._fs, data)

    def new_output(self, location: str) -> OutputFile:
        return _BufferedOutput(location, self._fs)

    def new_held_output(self, location: str) -> HeldOutput:
        """An output kept in memory when its stream closes, stored by ``upload()`` only: a
        manifest that turns out too large is split instead of stored."""
        return HeldOutput(location, self._fs)

    def delete(self, location: str | InputFile | OutputFile) -> None:
        path = location if isinstance(location, str) else location.location
        with storage_errors(path):
            self._fs.rm_file(path)


class _WholeInput(InputFile):
    """A metadata file read in one GET (no HEAD for its size first): they are small."""

    def __init__(self, location: str, fs: AbstractFileSystem, data: bytes | None = None) -> None:
        super().__init__(location)
        self._fs = fs
        self._data = data

    def _read(self) -> bytes:
        if self._data is None:
            self._data = read_object(self._fs, self.location)
        return self._data

    def __len__(self) -> int:
        return len(self._read())

    def exists(self) -> bool:
        return bool(self._fs.exists(self.location))

    def open(self, seekable: bool = True) -> InputStream:
        return io.BytesIO(self._read())


class _BufferedOutput(OutputFile):
    """A file written in one PUT when its stream closes, whose length is known without asking
    the store (a manifest's length goes into the manifest list)."""

    def __init__(self, location: str, fs: AbstractFileSystem) -> None:
        super().__init__(location)
        self._fs = fs
        self._size: int | None = None

    def __len__(self) -> int:
        if self._size is None:
            raise RuntimeError(f"{self.location} is not written yet")
        return self._size

    def exists(self) -> bool:
        return bool(self._fs.exists(self.location))

    def to_input_file(self) -> InputFile:
        return _WholeInput(self.location, self._fs)

    def create(self, overwrite: bool = False) -> OutputStream:
        return _Upload(self)

    def _upload(self, data: bytes) -> None:
        with storage_errors(self.location):
            self._fs.pipe_file(self.location, data)
        self._size = len(data)


class HeldOutput(_BufferedOutput):
    """A ``_BufferedOutput`` whose bytes stay in memory until ``upload()``."""

    def __init__(self, location: str, fs: AbstractFileSystem) -> None:
        super().__init__(location, fs)
        self._data = b""

    def _upload(self, data: bytes) -> None:
        self._data, self._size = data, len(data)

    def upload(self) -> None:
        with storage_errors(self.location):
            self._fs.pipe_file(self.location, self._data)


class _Upload(io.BytesIO):
    def __init__(self, target: _BufferedOutput) -> None:
        super().__init__()
        self._target = target

    def close(self) -> None:
        if not self.closed:
            self._target._upload(self.getvalue())
        super().close()

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            super().close()  # a failed write uploads nothing
