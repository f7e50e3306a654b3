"""The Iceberg view's old files deleted: what no retained version of the view reaches.

Every publish writes a metadata file, a manifest list per snapshot and the manifests of the
partitions it changed; a losing publisher leaves its manifests behind. Nothing reads a
version once engines have moved past it, so the view keeps its newest ``RETAINED_VERSIONS``
metadata files (an engine that read the metadata location from its catalog a moment ago
may still be opening one of them) and everything they reach: the manifest lists of their
snapshots (the view's snapshot history, kept as long as fed's timeline keeps the instants)
and the manifests those lists name. Everything else in the view's folder goes, but for files
written after the newest version: those may be a publisher's still at work.

It runs after a publish once every ``CLEAN_EVERY`` versions, so its listing and reads are a
small part of what publishing costs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from pyiceberg.manifest import read_manifest_list
from pyiceberg.table.metadata import TableMetadataUtil

from fedcore.iceberg.fileio import FedFileIO
from fedcore.iceberg.locations import HINT, version_of
from fedcore.io.errors import storage_errors
from fedcore.io.filesystems import read_existing, read_objects, remove_files

if TYPE_CHECKING:
    from fedcore.handle import TableHandle

#: Versions of the view kept whole (each with every file it reaches).
RETAINED_VERSIONS: Final = 10
#: A publish cleans the view when its version is a multiple of this.
CLEAN_EVERY: Final = 10


@dataclass(frozen=True)
class ViewCleanup:
    """What a clean of the view found and did."""

    kept_versions: int
    reachable: int
    deleted: list[str]


def clean_view(table: TableHandle, folder: str, newest: str) -> ViewCleanup:
    """Delete the files of the view's ``folder`` that no retained version reaches (see the
    module docstring); ``newest``: the location of the newest version's metadata file."""
    fs = table.fs.table_fs
    with storage_errors(folder):
        listed = fs.ls(folder, detail=True, refresh=True)
    # A listed name as the view's locations spell it: the folder's URI and the name.
    entries = {f"{folder}/{str(e['name']).rpartition('/')[2]}": e for e in listed if e.get("type") == "file"}
    versions = sorted((n for n in entries if version_of(n) >= 0), key=version_of)
    kept = [v for v in versions if version_of(v) <= version_of(newest)][-RETAINED_VERSIONS:]
    reachable = set(kept) | {f"{folder}/{HINT}"}  # the hint is never deleted
    io = FedFileIO(fs)
    lists: set[str] = set()
    # The kept versions' metadata files, then their manifest lists, each set read concurrently:
    # two round trips to the store, not one for each of some 30 files.
    for data in read_objects(fs, kept):
        metadata = TableMetadataUtil.parse_raw(data.decode())
        lists.update(s.manifest_list for s in metadata.snapshots if s.manifest_list)
    # A list missing is of a snapshot an older clean already let go: nothing of it to keep.
    found = read_existing(fs, sorted(lists))
    for manifest_list in sorted(lists):
        reachable.add(manifest_list)
        if manifest_list in found:
            held = io.held_input(manifest_list, found[manifest_list])
            reachable.update(m.manifest_path for m in read_manifest_list(held))
    newest_time = _modified(entries.get(newest))
    doomed = [
        path
        for path, entry in entries.items()
        if path not in reachable and newest_time is not None and (_modified(entry) or 0) < newest_time
    ]
    remove_files(fs, doomed)
    return ViewCleanup(len(kept), len(reachable), sorted(doomed))


def _modified(entry: dict[str, object] | None) -> float | None:
    """A listed file's modification time in seconds (local: ``mtime``; S3: ``LastModified``)."""
    if entry is None:
        return None
    found = entry.get("mtime", entry.get("LastModified"))
    if found is None:
        return None
    if hasattr(found, "timestamp"):
        return float(found.timestamp())
    return float(found)  # type: ignore[arg-type]
