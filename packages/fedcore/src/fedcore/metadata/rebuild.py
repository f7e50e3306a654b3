"""The repair tool's rebuild of the metadata table: the lookup state as of the newest completed
instant replaced, whole, by one rebuilt from storage (``fedcore.services.repair`` works out that state)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping

from fedcore.io.atomic import create_exclusive, replace_atomic
from fedcore.metadata.file_index import PartitionFiles
from fedcore.metadata.folding import write_partitions, write_shards
from fedcore.metadata.format import Manifest
from fedcore.metadata.table import MetadataTable


def rebuild(
    index: MetadataTable,
    upto: str,
    state: Mapping[str, PartitionFiles],
    pending: Iterable[str],
    schema: tuple[str, str] | None,
    hook: Callable[[str], None] | None = None,
    *,
    folded: Iterable[str] = (),
    listed_from: str | None = None,
) -> Manifest:
    """Replace the lookup state as of ``upto`` (the newest completed instant) with
    ``state``, rebuilt from storage by the repair tool.

    Everything is written under new names first; then the manifest of ``upto`` is
    created, or replaced in one atomic write, and the timeline's pointer names it. A
    lookup sees the old manifest or the new one whole, each naming only its own shards,
    so a crash before the switch leaves the old state and unreferenced files that
    archival sweeps. Instants that were ``pending`` (before ``upto``) stay excluded, so
    their deltas apply when they complete, as after a compaction; so do the deltas of
    instants after ``upto``. ``schema``: (write instant, Avro schema) of the newest write.
    ``folded``: the completed instants the state holds, from ``listed_from`` on (``Manifest``)."""
    rows = sum(len(files.files) for files in state.values())
    count = 1
    while rows / count > index.shard_rows:
        count *= 2
    attempt = uuid.uuid4().hex[:8]
    shards: list[tuple[str, int, int] | None] = [None] * count
    packed: list[str | None] = [None] * count
    write_shards(index, upto, attempt, state, range(count), shards, packed)
    partitions = write_partitions(index, upto, attempt, sorted(p for p, f in state.items() if f.files))
    manifest = Manifest(
        upto,
        frozenset(t for t in pending if t < upto),
        tuple(shards),
        partitions,
        (),
        schema[1] if schema else None,
        schema[0] if schema else None,
        folded=frozenset(folded),
        listed_from=listed_from,
        packed_footers=tuple(packed),
    )
    if hook is not None:
        hook("rebuilt")
    try:
        create_exclusive(index.fs, index.manifest_path(upto), manifest.to_bytes())
    except FileExistsError:
        replace_atomic(index.fs, index.manifest_path(upto), manifest.to_bytes())
    if hook is not None:
        hook("switched")
    index.point_to(upto)
    index.cache.forget_manifest()
    return manifest
