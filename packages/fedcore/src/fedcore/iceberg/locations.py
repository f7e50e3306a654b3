"""Where the Iceberg view's files are: its folder under the table path, its versions'
metadata files and the version hint."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

import xxhash

if TYPE_CHECKING:
    from fedcore.handle import TableHandle

#: The view's folder, under the table path.
FOLDER: Final = ".hoodie/iceberg"
#: The version hint's name in the metadata folder (the newest version's number, or one before).
HINT: Final = "version-hint.text"
_VERSION_RE: Final = re.compile(r"/(\d+)-[0-9a-f]{16}\.metadata\.json$")


def metadata_folder(table: TableHandle) -> str:
    return f"{table.path}/{FOLDER}/metadata"


def metadata_file(table: TableHandle, version: int) -> str:
    """Version ``version``'s metadata file. Its name carries a tag of the table's path: Trino
    caches metadata files by path without the bucket (and by time and length), so two tables
    at one key in two buckets, published in the same second, were confused (seen here with
    Trino 476); with the tag, no two tables share a metadata file name."""
    tag = str(xxhash.xxh64_hexdigest(table.path.encode()))
    return f"{metadata_folder(table)}/{version:05d}-{tag}.metadata.json"  # Iceberg's own form


def version_of(location: str) -> int:
    """The version number of a metadata file of the view (-1 for another file)."""
    match = _VERSION_RE.search(location)
    return int(match[1]) if match else -1
