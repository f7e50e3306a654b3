"""The metadata table: partition -> files, fed only from instant metadata.

Under ``.hoodie/.fed/metadata/`` (``FOLDER``; tables created before layout 2 kept it under
``.hoodie/metadata/fed-files/``, the folder Apache Hudi's own metadata table lives in and its
writers delete whole when they drop or rebuild theirs: ``fedcore.commit.upgrade`` moves it):

- ``deltas/<instant>.parquet``: the file changes of one instant (added, deleted,
  file groups replaced), sorted by partition. Written before the instant
  completes and counted only once it has, so a crash anywhere before the commit
  point leaves a delta that no reader ever applies. A commit writes bytes in
  proportion to the files it changed, whatever the size of the table.
- ``base/<instant>-<shard>-<attempt>.parquet`` and ``manifests/<instant>.json``: the
  compacted state. Partitions are hashed into shards; a shard is sorted by
  partition and cut into small row groups, so looking up one partition reads a
  footer and the row groups holding it. Compaction rewrites only the shards its
  deltas touched, doubles the shard count when shards outgrow their target, and
  switches over by creating the manifest exclusively. The manifest carries each shard's
  footer, so a lookup fetches only the row groups it needs, in one request: deflated, of
  a shard with statistics of its partition column only (``packed_footers``: 1.8 KB a shard
  of 31,000 rows, where manifests before carried them whole, 17 KB; they are read as
  before, and the next compaction packs the footers of the shards it keeps).
- ``base/<instant>-partitions-<attempt>.parquet``: the partition list, for filters that do
  not pin every partition column.

This module is that format: the records, the manifest, shard hashing and the Parquet
encoding every job that reads or writes the metadata table shares.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import xxhash

from fedcore import properties as P
from fedcore.exceptions import MetadataTableError
from fedcore.io.parquet import parse_footer, read_parquet
from fedcore.metadata.file_index import PartitionFiles

#: The metadata table's folder under the table path (layout 2, ``properties.METADATA_LAYOUT``).
FOLDER: Final = f"{P.HOODIE_FOLDER}/.fed/metadata"
#: Where layout 1 kept it: inside Hudi's own metadata-table folder.
LEGACY_FOLDER: Final = f"{P.HOODIE_FOLDER}/metadata/fed-files"
SCHEMA_KEY: Final = "fed.schema"
#: The pointer of a table no compaction has run on yet (older than any instant).
NO_MANIFEST: Final = "0" * 17
#: What every error about a damaged metadata table ends with.
REPAIR_HINT: Final = "; run `fed repair TABLE` to rebuild the metadata table from storage"

ADD: Final = 0
#: A file gone from the table (cleaned, or undone by a rollback). Not an operation's name:
#: ``write.job.DELETE`` is the write that deletes records.
REMOVE: Final = 1
REPLACE: Final = 2  # name is a file id retired from the table; size holds the replacing instant
UNREPLACE: Final = 3  # undoes REPLACE (rollback of a replace commit)

SCHEMA: Final = pa.schema(
    [
        pa.field("partition", pa.string(), nullable=False),
        pa.field("name", pa.string(), nullable=False),
        pa.field("size", pa.int64(), nullable=False),
        pa.field("op", pa.int8(), nullable=False),
        # An added file's column statistics (``io.parquet.file_stats``); null where none were
        # taken. Files written before the column existed lack it: read as null.
        pa.field("stats", pa.string()),
    ]
)
PARTITIONS_SCHEMA: Final = pa.schema([pa.field("partition", pa.string(), nullable=False)])


class Op(NamedTuple):
    partition: str
    name: str
    size: int
    op: int
    stats: str | None = None


@dataclass(frozen=True)
class Manifest:
    instant: str
    excluded: frozenset[str]
    shards: tuple[tuple[str, int, int] | None, ...]  # (file name, bytes, rows) per shard
    partitions: tuple[str, int] | None  # (file name, bytes)
    #: Each shard's Parquet footer (base64), so a lookup fetches only the row groups it
    #: needs, in one ranged GET, without first reading the footer: what manifests carried
    #: before ``packed_footers`` (543 KB of them at 1,000,000 files). Empty in manifests
    #: written since (a fedcore of before reads their shards' footers from the shards), and
    #: in those written before footers were kept.
    footers: tuple[str | None, ...] = ()
    #: The Avro schema written by ``schema_instant``, the newest write folded in (so a reader
    #: of a freshly compacted table needs no commit metadata to type its filters).
    schema: str | None = None
    schema_instant: str | None = None
    #: The completed instants of the active timeline (from ``listed_from``, its first instant
    #: then) that this manifest holds the changes of. An instant that completes later with an
    #: older time (a writer whose clock or time zone is behind, such as a Hudi job writing
    #: local times) is in neither this nor ``excluded``, so a view still applies it. None in
    #: manifests written before this was kept: they cover every instant up to ``instant``.
    folded: frozenset[str] | None = None
    listed_from: str | None = None
    #: Each shard's footer as ``pack_footer`` packs it (None: not known, see ``footer``).
    #: Empty in manifests written before it was kept.
    packed_footers: tuple[str | None, ...] = ()

    @property
    def shard_count(self) -> int:
        return len(self.shards)

    def lacks(self, time: str, on_timeline: bool = True) -> bool:
        """Whether completed instant ``time`` is missing from this manifest's state: after it,
        pending when it was made, or completed since with an older time. ``on_timeline``:
        False for an instant only in an archived timeline, which counts as folded when it
        was archived before this manifest's listing began."""
        if time > self.instant or time in self.excluded:
            return True
        if self.folded is None or time in self.folded:
            return False
        return on_timeline or (self.listed_from is not None and time >= self.listed_from)

    def to_bytes(self) -> bytes:
        return json.dumps(
            {
                "instant": self.instant,
                "excluded": sorted(self.excluded),
                "shards": [list(s) if s else None for s in self.shards],
                "partitions": list(self.partitions) if self.partitions else None,
                "footers": list(self.footers),
                "schema": self.schema,
                "schema_instant": self.schema_instant,
                "folded": None if self.folded is None else sorted(self.folded),
                "listed_from": self.listed_from,
                "packed_footers": list(self.packed_footers),
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Manifest:
        body = json.loads(data)
        return cls(
            instant=body["instant"],
            excluded=frozenset(body["excluded"]),
            shards=tuple((s[0], int(s[1]), int(s[2])) if s else None for s in body["shards"]),
            partitions=(body["partitions"][0], int(body["partitions"][1])) if body["partitions"] else None,
            footers=tuple(body.get("footers", ())),
            schema=body.get("schema"),
            schema_instant=body.get("schema_instant"),
            folded=None if body.get("folded") is None else frozenset(body["folded"]),
            listed_from=body.get("listed_from"),
            packed_footers=tuple(body.get("packed_footers") or ()),
        )

    def footer(self, shard: int) -> pq.FileMetaData | None:
        """A shard's footer, as the manifest carries it (None: read it from the shard)."""
        raw = self.footer_bytes(shard)
        return None if raw is None else parse_footer(raw)

    def packed_footer(self, shard: int) -> str | None:
        """A shard's footer as ``packed_footers`` holds it (packed now if carried whole)."""
        packed = self.packed_footers[shard] if shard < len(self.packed_footers) else None
        if packed:
            return packed
        encoded = self.footers[shard] if shard < len(self.footers) else None
        return pack_footer(_b64decode(encoded)) if encoded else None

    def footer_bytes(self, shard: int) -> bytes | None:
        """A shard's footer's bytes (``io.parquet.footer_bytes``), packed or (a manifest from
        before ``packed_footers``) whole; None where the manifest has neither. ValueError
        where what the manifest holds does not decode."""
        packed = self.packed_footers[shard] if shard < len(self.packed_footers) else None
        if packed:
            return unpack_footer(packed)
        encoded = self.footers[shard] if shard < len(self.footers) else None
        return _b64decode(encoded) if encoded else None


def folder_of(layout: int) -> str:
    """The metadata table's folder under the table path, for a table of ``layout``."""
    return FOLDER if layout >= 2 else LEGACY_FOLDER


def shard_of(partition: str, shard_count: int) -> int:
    digest: int = xxhash.xxh32_intdigest(partition.encode())
    return digest % shard_count


def conformed(table: pa.Table) -> pa.Table:
    """Records read from a delta or a shard in ``SCHEMA``'s columns and no schema metadata:
    those written before the ``stats`` column existed get it, null, so they concatenate with
    those written since."""
    if "stats" not in table.column_names:
        table = table.append_column(SCHEMA.field("stats"), pa.nulls(table.num_rows, pa.string()))
    return table.select(SCHEMA.names).replace_schema_metadata(None)


def pack_footer(footer: bytes) -> str:
    """A footer's bytes as a manifest carries them: deflated (a footer repeats its column
    paths and encodings in every row group: a fifth of the size), then base64."""
    return base64.b64encode(zlib.compress(footer, 9)).decode()


def unpack_footer(packed: str) -> bytes:
    try:
        return zlib.decompress(_b64decode(packed))
    except zlib.error as exc:
        raise ValueError(f"a packed footer that does not unpack: {exc}") from exc


def _b64decode(text: object) -> bytes:
    """Base64 from a manifest's JSON; ValueError for anything else (a number, bad padding)."""
    if not isinstance(text, str):
        raise ValueError(f"a footer that is not base64 text: {text!r:.40}")
    return base64.b64decode(text, validate=True)


def parquet_table(data: bytes, path: str) -> pa.Table:
    try:
        return read_parquet(data)
    except pa.ArrowException as exc:
        raise MetadataTableError(f"metadata-table file {path} is unreadable: {exc}{REPAIR_HINT}") from exc


def ops_of(table: pa.Table, wanted: set[str] | None) -> list[Op]:
    """The records of a delta or a shard (those of ``wanted`` partitions: None for all)."""
    table = rows_of(table, wanted)
    columns = [table.column(name).to_pylist() for name in ("partition", "name", "size", "op")]
    stats = table.column("stats").to_pylist() if "stats" in table.column_names else [None] * table.num_rows
    return [Op(*row) for row in zip(*columns, stats, strict=True)]


def rows_of(table: pa.Table, wanted: set[str] | None) -> pa.Table:
    """The rows of ``wanted`` partitions (None: all of them)."""
    if wanted is None:
        return table
    if not wanted:
        return table.slice(0, 0)
    return table.filter(pc.is_in(table.column("partition"), value_set=pa.array(sorted(wanted), pa.string())))


def split_by_partition(table: pa.Table) -> dict[str, pa.Table]:
    """partition -> its rows of ``table`` (slices of the rows sorted by partition: see
    ``detached``)."""
    if table.num_rows == 0:
        return {}
    table = table.sort_by("partition")
    column = table.column("partition").combine_chunks()
    changes = pc.indices_nonzero(pc.not_equal(column[1:], column[:-1])).to_numpy().astype(np.int64)
    starts = np.concatenate([[0], changes + 1])
    ends = np.append(starts[1:], table.num_rows)
    names = column.take(pa.array(starts)).to_pylist()
    return {
        name: table.slice(start, end - start) for name, start, end in zip(names, starts, ends, strict=True)
    }


def detached(table: pa.Table) -> pa.Table:
    """``table`` with buffers of its own (a slice keeps all of its parent's alive)."""
    return table.take(np.arange(table.num_rows)).combine_chunks()


def ops_table(ops: Sequence[Op]) -> pa.Table:
    """Records as a table of ``SCHEMA`` (what a delta holds)."""
    columns = list(zip(*ops, strict=True)) if ops else [()] * len(SCHEMA)
    return pa.table(
        [pa.array(column, field.type) for column, field in zip(columns, SCHEMA, strict=True)], SCHEMA
    )


def row_group_holds(row_group: pq.RowGroupMetaData, wanted: set[str]) -> bool:
    stats = row_group.column(0).statistics
    if stats is None or not stats.has_min_max:
        return True
    low, high = stats.min, stats.max  # (each read builds a new string)
    return any(low <= partition <= high for partition in wanted)


def row_group_span(row_group: pq.RowGroupMetaData) -> tuple[int, int]:
    """The bytes holding a row group's column chunks (dictionary page first when there is one)."""
    starts, ends = [], []
    for index in range(row_group.num_columns):
        column = row_group.column(index)
        start = column.dictionary_page_offset if column.has_dictionary_page else column.data_page_offset
        starts.append(start)
        ends.append(start + column.total_compressed_size)
    return min(starts), max(ends)


def apply_op(state: dict[str, PartitionFiles], op: Op) -> None:
    files = state.setdefault(op.partition, PartitionFiles())
    if op.op == ADD:
        files.files[op.name] = op.size
        if op.stats is not None:
            files.stats[op.name] = op.stats
    elif op.op == REMOVE:
        files.files.pop(op.name, None)
        files.stats.pop(op.name, None)
    elif op.op == REPLACE:
        files.replaced[op.name] = str(op.size)
    elif op.op == UNREPLACE:
        files.replaced.pop(op.name, None)


def state_rows(partition: str, files: PartitionFiles) -> Sequence[dict[str, object]]:
    live_ids = {name.split("_", 1)[0].lstrip(".") for name in files.files}
    rows: list[dict[str, object]] = [
        {"partition": partition, "name": name, "size": size, "op": ADD, "stats": files.stats.get(name)}
        for name, size in sorted(files.files.items())
    ]
    # A replaced file group is remembered while any of its files still exists (until cleaned).
    rows.extend(
        {"partition": partition, "name": file_id, "size": int(instant), "op": REPLACE}
        for file_id, instant in sorted(files.replaced.items())
        if file_id in live_ids
    )
    return rows
