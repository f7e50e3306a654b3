"""Compaction of the metadata table: the deltas of completed instants folded into the sharded
base, only the shards they touched rewritten (all of them when the shard count doubles), then
switched to by creating the manifest exclusively (see ``metadata.format``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

import pyarrow as pa

from fedcore.exceptions import MetadataTableError, TimelineMovedError
from fedcore.io.atomic import create_exclusive
from fedcore.io.parquet import footer_bytes
from fedcore.metadata.file_index import PartitionFiles
from fedcore.metadata.format import (
    ADD,
    PARTITIONS_SCHEMA,
    REPAIR_HINT,
    SCHEMA,
    Manifest,
    apply_op,
    ops_of,
    pack_footer,
    shard_of,
    state_rows,
)
from fedcore.metadata.table import MetadataTable


def compact_metadata(index: MetadataTable) -> str | None:
    """Fold the deltas of completed instants into the sharded base; the new manifest's instant.

    None when there is nothing to fold, or when another process's compaction got there
    first: one to the same instant, or one past the manifest this one read, after which
    archival deleted files only older views used, or the instants this one listed (archival
    runs after a compaction): a file found gone, or instants archived, back it off quietly."""
    read: list[str] = []  # the newest manifest the compaction's listing knew of
    try:
        return _compact(index, read)
    except TimelineMovedError:
        return None  # another writer archived since the listing: it compacted first
    except FileNotFoundError:
        if read and any(t > read[0] for t in index.manifest_times()):
            return None
        raise


def _compact(index: MetadataTable, read: list[str]) -> str | None:
    timeline = index.load_timeline()
    read.append(max(timeline.manifests, default=""))
    completed = timeline.completed()
    if not completed:
        return None
    upto = completed[-1].time
    old, deltas = index.view(None, timeline, fresh=True)  # the same listing: every delta is <= upto
    if not deltas:
        return None
    changes: dict[str, PartitionFiles] = {}
    found = index.deltas_of(deltas)
    delta_ops = [op for t in deltas for op in ops_of(found[t].rows, None)]
    written = [t for t in deltas if found[t].schema is not None]
    schema, schema_instant = (old.schema, old.schema_instant) if old is not None else (None, None)
    if written:
        schema, schema_instant = found[written[-1]].schema, written[-1]
    touched = {op.partition for op in delta_ops}
    old_count = old.shard_count if old else 1
    old_rows = sum(s[2] for s in old.shards if s) if old else 0
    adds = sum(1 for op in delta_ops if op.op == ADD)
    count = old_count
    while (old_rows + adds) / count > index.shard_rows:
        count *= 2
    rewrite = (
        set(range(count)) if count != old_count or old is None else {shard_of(p, count) for p in touched}
    )
    # The state of every rewritten shard: its old rows (from whichever old shard held
    # them), then the deltas.
    sources = (set(range(old_count)) if count != old_count else rewrite) if old is not None else set()
    for shard in sorted(sources):
        entry = old.shards[shard] if old is not None else None
        if entry is not None:
            for op in index.read_shard(entry, None):
                apply_op(changes, op)
    for op in delta_ops:
        apply_op(changes, op)
    kept = old is not None and count == old_count
    shards: list[tuple[str, int, int] | None] = (
        list(old.shards) if old is not None and kept else [None] * count
    )
    # A kept shard keeps its footer (packed now if an older manifest carried it whole).
    try:
        packed: list[str | None] = (
            [old.packed_footer(i) if i not in rewrite else None for i in range(count)]
            if old is not None and kept
            else [None] * count
        )
    except ValueError as exc:
        raise MetadataTableError(f"manifest {old and old.instant} is unreadable: {exc}{REPAIR_HINT}") from exc
    # Two writers' services may compact up to the same instant at once: each writes its
    # own files, and the exclusive manifest picks one; the loser's files are garbage that
    # ``drop_older_than`` removes once archival passes them.
    attempt = uuid.uuid4().hex[:8]
    write_shards(index, upto, attempt, changes, rewrite, shards, packed)
    for shard, entry in enumerate(shards):  # kept, from a manifest without its footer: read it
        if entry is not None and packed[shard] is None:
            packed[shard] = pack_footer(index.read_footer(entry))
    partitions = write_partitions(index, upto, attempt, _partition_list(index, old, changes, touched))
    pending = frozenset(i.time for i in timeline.pending() if i.time < upto)
    manifest = Manifest(
        upto,
        pending,
        tuple(shards),
        partitions,
        (),
        schema,
        schema_instant,
        folded=frozenset(i.time for i in completed) | frozenset(deltas),
        listed_from=timeline.instants[0].time,
        packed_footers=tuple(packed),
    )
    try:
        create_exclusive(index.fs, index.manifest_path(upto), manifest.to_bytes())
    except FileExistsError:
        return None  # another process compacted up to the same instant
    index.point_to(upto)
    return upto


def write_shards(
    index: MetadataTable,
    upto: str,
    attempt: str,
    state: Mapping[str, PartitionFiles],
    rewrite: Iterable[int],
    shards: list[tuple[str, int, int] | None],
    packed: list[str | None],
) -> None:
    """Write the shards ``rewrite`` of ``state``, filling in their entries and packed footers
    in place. Only the partition column has statistics (lookups pick row groups by it), and
    no Arrow schema is stored: the footer, which the manifest carries, stays small."""
    count = len(shards)
    for shard in sorted(rewrite):
        rows = [
            row
            for partition in sorted(p for p in state if shard_of(p, count) == shard)
            for row in state_rows(partition, state[partition])
        ]
        if not rows:
            shards[shard] = packed[shard] = None
            continue
        data = index.parquet_bytes(
            pa.Table.from_pylist(rows, schema=SCHEMA), statistics=["partition"], arrow_schema=False
        )
        name = f"{upto}-{shard:05d}-{attempt}.parquet"
        create_exclusive(index.fs, f"{index.folder}/base/{name}", data)
        shards[shard] = (name, len(data), len(rows))
        packed[shard] = pack_footer(footer_bytes(data))


def write_partitions(index: MetadataTable, upto: str, attempt: str, partitions: list[str]) -> tuple[str, int]:
    data = index.parquet_bytes(pa.table({"partition": partitions}, schema=PARTITIONS_SCHEMA))
    name = f"{upto}-partitions-{attempt}.parquet"
    create_exclusive(index.fs, f"{index.folder}/base/{name}", data)
    return name, len(data)


def _partition_list(
    index: MetadataTable, old: Manifest | None, changes: dict[str, PartitionFiles], touched: set[str]
) -> list[str]:
    known: set[str] = set()
    if old is not None and old.partitions is not None:
        name, size = old.partitions
        known.update(index.read_whole(f"{index.folder}/base/{name}", size).column("partition").to_pylist())
    for partition in touched:
        if changes.get(partition) and changes[partition].files:
            known.add(partition)
        else:
            known.discard(partition)
    return sorted(known)
