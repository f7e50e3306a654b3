"""The metadata table's cleanup after archival: once archival has made views older than a
manifest impossible, what only those views needed is deleted."""

from __future__ import annotations

from fedcore.io.filesystems import remove_files
from fedcore.metadata.format import Manifest
from fedcore.metadata.table import MetadataTable


def drop_older_than(index: MetadataTable, boundary: Manifest) -> int:
    """Delete what no view from ``boundary`` on needs (archival made older views
    impossible): older manifests, the deltas folded into it, shards only they used.
    Returns how many files went."""
    index.point_to(boundary.instant)  # lookups that follow pointers start here or later
    used: set[str] = set()
    for manifest in (index.manifest(t) for t in index.manifest_times() if t >= boundary.instant):
        used.update(entry[0] for entry in manifest.shards if entry)
        if manifest.partitions is not None:
            used.add(manifest.partitions[0])
    # Only files named after an instant: a writer's file still being created (a local disk's
    # ".<name>.<uuid>.tmp", hard-linked into place once whole) is another process's, never
    # ours to delete.
    doomed = [
        f"{index.folder}/manifests/{name}"
        for name in _named(index, "manifests")
        if name.endswith(".json") and name[: -len(".json")] < boundary.instant
    ]
    doomed += [
        f"{index.folder}/deltas/{name}"
        for name in _named(index, "deltas")
        if name[:17] <= boundary.instant and not boundary.lacks(name[:17])
    ]
    # A compaction in progress writes shards named after a later instant, and a repair
    # after the newest completed one, which may be the boundary: neither is touched.
    doomed += [
        f"{index.folder}/base/{name}"
        for name in _named(index, "base")
        if name[:17] < boundary.instant and name not in used
    ]
    doomed += [
        index.pointer_path(time) for time in index.load_timeline().manifests if time < boundary.instant
    ]
    remove_files(index.fs, doomed)
    return len(doomed)


def _named(index: MetadataTable, subfolder: str) -> list[str]:
    """The names in a subfolder of the metadata table that start with an instant time."""
    return [name for name in index.names(subfolder) if name[:17].isdigit()]
