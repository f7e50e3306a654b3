"""The file writer: one file group's next base file, encoded with Arrow and put through the
federated filesystem (marker first), wherever the write runs.

Below the commit protocol and above the handle: it knows an instant's time, a table's
filesystem and its record keys, never the timeline. ``WriteClient`` calls it in threads of
one process; an engine's tasks (Spark) call it in theirs, with the same result: a file
under the strategy's location for its partition, a marker naming it, and a ``WriteStat``
for the commit.
"""

from __future__ import annotations

import base64
import contextlib
import io
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from fsspec import AbstractFileSystem

from fedcore import properties as P
from fedcore.files.filenames import base_file_name, new_file_id
from fedcore.handle import TableHandle
from fedcore.io.filesystems import open_sized
from fedcore.io.parquet import file_stats, open_parquet
from fedcore.keygen.keys import record_keys
from fedcore.log.blocks import avro_data_block, delete_block, parquet_data_block
from fedcore.log.merge import MergeRules, merge_into_base
from fedcore.schema.avro import to_avro_json
from fedcore.schema.evolution import conform_to
from fedcore.schema.meta import (
    COMMIT_SEQNO,
    COMMIT_TIME,
    FILE_NAME,
    META_COLUMNS,
    PARTITION_PATH,
    RECORD_KEY,
    with_meta_fields,
)
from fedcore.timeline import Timeline
from fedcore.timeline.commit_metadata import WriteStat

NO_ROWS: Final = np.empty(0, np.int64)
_UNIQUE_META_COLUMNS: Final = frozenset({COMMIT_SEQNO, RECORD_KEY})
#: Meta columns holding one value per new file (``_with_meta``'s ``packed``).
_PACKED_META_COLUMNS: Final = frozenset({COMMIT_TIME, PARTITION_PATH, FILE_NAME})
#: The footer key under which Arrow keeps a file's Arrow schema.
ARROW_SCHEMA: Final = b"ARROW:schema"

#: Rows of the input whose encoding sizes the files of a table with no write yet.
SIZE_SAMPLE_ROWS: Final = 20_000

#: Puts a data file (logical path, bytes) whose marker batch is written (``mark_files``).
PutFile = Callable[[str, bytes], None]


@dataclass
class FileGroupWrite:
    """One new file of a file group: its next base file (a new version, or a new file group),
    or (merge-on-read, ``log_version`` set) a log file appended onto its latest slice."""

    partition: str
    file_id: str
    base: tuple[str, str] | None = None  # (base instant, file name) of the version replaced
    base_size: int | None = None
    rows: np.ndarray = field(default_factory=lambda: NO_ROWS)  # input rows written into it
    updates: int = 0  # of ``rows``, those replacing a record of the base file
    deletes: int = 0
    #: Keys whose records in the base file the new version leaves out (updated or deleted).
    removed_keys: pa.Array | None = None
    #: The base file's record keys, when the key lookup has read them already.
    base_keys: pa.ChunkedArray | None = None
    #: The whole base file, when the key lookup has fetched it already (object stores).
    base_bytes: bytes | None = None
    #: Merge-on-read: the place in the slice of ``base`` of the log file this write adds onto
    #: it (its updates as a data block, its deletes as a delete block; ``FileGroup.logs_onto``:
    #: the file's version up to table version 6, its rank from 8); None: a base file.
    log_version: int | None = None
    #: Its partition may be new (no file group of it was found): the write gives the partition
    #: Hudi's partition metadata file, without which Hudi's readers do not see the partition.
    new_partition: bool = False


class InputChunk(NamedTuple):
    """What every file group of a chunk of input is encoded with."""

    instant: str
    data: pa.Table
    keys: pa.Array | None  # the rows' record keys, when the write computed them already
    schema: pa.Schema | None  # the table's data schema (None: the input's)
    parquet: dict[str, Any]
    #: How a base file's rewrite merges the rows into it (Hudi's payload; ``merge_into_base``);
    #: None writes the rows as they are (a bulk insert, an overwrite: no payload runs).
    rules: MergeRules | None = None


class FileName(NamedTuple):
    """How a file is named: Hudi's write token (``<task>-<stage>-<attempt>``; unique per
    task attempt, so a retried task never overwrites its first attempt's file), the
    ``_hoodie_commit_seqno`` prefix of its rows (``<instant>_<n>_``), and the token of a
    log file. A base file's name holds its instant; a log file's holds its slice's base
    instant only (up to table version 6; from 8 the delta commit's, and version 1 always),
    so its token holds the writing instant (as the stage): two writers appending onto one
    slice at once never name the same file, and the loser of the claim deletes its own."""

    token: str
    sequence: str
    log_token: str


def file_names(
    instant: str, count: int, *, task: int | None = None, attempt: int = 0, start: int = 0
) -> list[FileName]:
    """The names of ``count`` files an instant writes. In one process (``task`` None) the
    files are numbered from ``start`` through the instant (Hudi's ``<n>-1-0`` tokens and
    ``<instant>_<n>_`` sequence prefixes); an engine's task numbers its own files, and its
    ``task`` and ``attempt`` make them unique across the job and its retries."""
    if task is None:
        return [
            FileName(f"{n}-1-0", f"{instant}_{n}_", f"{n}-{instant}-0") for n in range(start, start + count)
        ]
    return [
        FileName(f"{task}-{n}-{attempt}", f"{instant}_{task}-{n}_", f"{task}-{instant}{n:06d}-{attempt}")
        for n in range(start, start + count)
    ]


def new_groups(
    partition: str, rows: np.ndarray, per_file: int, new_partition: bool = True
) -> list[FileGroupWrite]:
    """New file groups for ``rows``, at most ``per_file`` rows each (``new_partition``: the
    partition may be new, see ``FileGroupWrite.new_partition``)."""
    return [
        FileGroupWrite(
            partition, new_file_id(), rows=rows[start : start + per_file], new_partition=new_partition
        )
        for start in range(0, len(rows), per_file)
    ]


def put_data_file(table: TableHandle, relative_path: str, data: bytes) -> None:
    """A data file whose marker is written (``mark_files``), created exclusively. Owned: its
    name carries this write's file token and instant, so no other writer makes it."""
    table.fs.pipe_file(relative_path, data, mode="create", owned=True)


def copy_data_file(
    table: TableHandle, relative_path: str, source_fs: AbstractFileSystem, source_path: str, *, tail: int = 0
) -> bytes | None:
    """A copy of another table's data file (a migration's files that need no change), marked
    like any other; server-side where the store allows. Its last ``tail`` bytes when the copy
    streamed them through this process (``FederatedFileSystem.copy_in``), else None."""
    return table.fs.copy_in(source_fs, source_path, relative_path, tail=tail)


def relative_path(table: TableHandle, group: FileGroupWrite, naming: FileName, instant: str) -> str:
    """Where ``instant`` writes ``group``'s new file: a log file is named as the table's
    version names them (``TableLayout.log_files``), a base file as every version does."""
    if group.log_version is not None:
        assert group.base is not None, "a log file is appended onto a slice"
        name = table.layout.log_files.name(
            group.file_id,
            base_instant=group.base[0],
            instant=instant,
            place=group.log_version,
            write_token=naming.log_token,
        )
    else:
        name = base_file_name(group.file_id, naming.token, instant)
    return f"{group.partition}/{name}" if group.partition else name


def write_group(
    table: TableHandle,
    group: FileGroupWrite,
    source: InputChunk,
    naming: FileName,
    encoder: Executor,
    put: PutFile,
) -> WriteStat:
    """Write one file group's new file (encoded on ``encoder``) and say what it holds."""
    relative = relative_path(table, group, naming, source.instant)
    if group.log_version is not None:
        return _write_log(table, group, source, naming, encoder, put, relative)
    name = relative.rpartition("/")[2]
    base = group.base_bytes
    group.base_bytes = None  # held by this call only from here
    fs = table.fs
    base_path = ""
    if group.base is not None:
        base_path = f"{group.partition}/{group.base[1]}" if group.partition else group.base[1]
    if group.base is not None and base is None:
        with fs.errors(base_path), open_sized(fs, base_path, group.base_size) as handle:
            base = handle.read()
    # The base file is decoded as it is merged: its damage is named as the file's.
    with fs.errors(base_path) if base_path else contextlib.nullcontext():
        payload, rows_written, column_stats = encoder.submit(
            encode_group, table, source, naming, name, group, base
        ).result()
    put(relative, payload)
    updates = group.updates
    return WriteStat(
        file_id=group.file_id,
        path=relative,
        partition_path=group.partition,
        prev_commit=group.base[0] if group.base else "null",
        num_writes=rows_written,
        num_inserts=len(group.rows) - updates,
        num_update_writes=updates,
        num_deletes=group.deletes,
        total_write_bytes=len(payload),
        file_size=len(payload),
        column_stats=column_stats,
    )


def _write_log(
    table: TableHandle,
    group: FileGroupWrite,
    source: InputChunk,
    naming: FileName,
    encoder: Executor,
    put: PutFile,
    relative: str,
) -> WriteStat:
    assert group.base is not None
    assert group.log_version is not None
    payload, written = encoder.submit(encode_log, table, source, naming, group).result()
    put(relative, payload)
    return WriteStat(
        file_id=group.file_id,
        path=relative,
        partition_path=group.partition,
        prev_commit=group.base[0],
        num_writes=written,
        num_inserts=len(group.rows) - group.updates,
        num_update_writes=group.updates,
        num_deletes=group.deletes,
        total_write_bytes=len(payload),
        file_size=len(payload),
        log_version=group.log_version,
        base_file=group.base[1],
    )


def encode_log(
    table: TableHandle, source: InputChunk, naming: FileName, group: FileGroupWrite
) -> tuple[bytes, int]:
    """A merge-on-read log file: the group's rows as a data block (Parquet, or Avro with
    ``hoodie.logfile.data.block.format=avro``; meta columns first, ``_hoodie_file_name`` the
    file id, as Hudi's append handle writes them), and its deleted keys as a delete block;
    with the rows written."""
    instant, schema, parquet = source.instant, source.schema, source.parquet
    assert schema is not None, "a log file is written onto a table that has a schema"
    avro = to_avro_json(with_meta_fields(schema), table.name)
    blocks = []
    n = len(group.rows)
    if n:
        rows = file_rows(table, _with_meta(table, source, naming, group, group.file_id), log=True)
        if P.LOG_DATA_BLOCK_FORMAT.of(table.options) == "avro":
            blocks.append(avro_data_block(rows, instant, avro))
        else:
            blocks.append(parquet_data_block(rows, instant, avro, parquet["compression"]))
    if group.deletes and group.removed_keys is not None:
        count = len(group.removed_keys)
        # Ordering 0, as Hudi's deletes carry: the delete wins by arrival order.
        zeros = pa.array(np.zeros(count, np.int32))
        partitions = pa.repeat(pa.scalar(group.partition), count)
        blocks.append(delete_block(group.removed_keys, partitions, zeros, instant, avro))
    return b"".join(blocks), n


def _with_meta(
    table: TableHandle,
    source: InputChunk,
    naming: FileName,
    group: FileGroupWrite,
    name: str,
    *,
    packed: bool = False,
) -> pa.Table:
    """The group's new rows with Hudi's meta columns first (``name``: its file name field).
    ``packed``: the columns that hold one value per file (commit time, partition path, file
    name) as dictionary arrays of that value, which the Parquet writer stores as it would the
    strings (``encode_base_file``) without a copy of the value per row to build and hash."""
    instant, data, keys, schema = source.instant, source.data, source.keys, source.schema
    n = len(group.rows)
    new_rows = data.take(group.rows) if n else data.slice(0, 0)
    if schema is not None and n:
        new_rows = new_rows.select(schema.names)
    constant = _constants(n, packed)
    config = table.config
    if not P.POPULATE_META_FIELDS.of(config):
        # Virtual keys: the files hold no meta values, so none is computed; the keys only
        # where the write has them (a rewrite merges by them).
        nulls = pa.nulls(n, pa.string())
        found = nulls if keys is None else keys.take(group.rows)
        meta = [nulls, nulls, found, nulls, constant(name)]
        return pa.Table.from_arrays([*meta, *new_rows.columns], names=[*META_COLUMNS, *new_rows.column_names])
    sequence = pc.cast(pa.array(np.arange(n, dtype=np.int64)), pa.string())
    return pa.Table.from_arrays(
        [
            constant(instant),
            pc.binary_join_element_wise(naming.sequence, sequence, ""),
            record_keys(new_rows, config.record_key_fields, P.key_generator(config))
            if keys is None
            else keys.take(group.rows),
            constant(group.partition),
            constant(name),
            *new_rows.columns,
        ],
        names=[*META_COLUMNS, *new_rows.column_names],
    )


def _constants(n: int, packed: bool) -> Callable[[str], pa.Array]:
    """How ``n`` rows' column of one value is made (``_with_meta``'s ``packed``)."""
    if not packed:
        return lambda value: pa.repeat(pa.scalar(value), n)
    zeros = pa.array(np.zeros(n, np.int32))  # every packed column's indices
    return lambda value: pa.DictionaryArray.from_arrays(zeros, pa.array([value], pa.string()))


def encode_group(
    table: TableHandle,
    source: InputChunk,
    naming: FileName,
    name: str,
    group: FileGroupWrite,
    base: bytes | None,
) -> tuple[bytes, int, str | None]:
    """A file group's new base file: the base file's records that stay, then the new ones
    (merged by the table's payload, ``source.rules``); with its rows and its column
    statistics (``io.parquet.file_stats``)."""
    parquet = source.parquet
    if base is None:  # a new file: its constant meta columns stay packed to the writer
        fresh = _with_meta(table, source, naming, group, name, packed=True)
        if source.rules is not None:  # inserts only: one marked deleted is not written
            fresh = merge_into_base(fresh.schema.empty_table(), fresh, None, source.rules)[1]
        return encode_base_file(table, fresh, parquet)
    fresh = _with_meta(table, source, naming, group, name)
    stored = open_parquet(io.BytesIO(base))
    names = stored.schema_arrow.names
    config = table.config
    # The file name column is the new file's, packed, for every row: the stored one is not read.
    skip = {FILE_NAME} if group.base_keys is None else {FILE_NAME, RECORD_KEY}
    old = stored.read(columns=[c for c in names if c not in skip], use_threads=False)
    if group.base_keys is None:
        if not P.POPULATE_META_FIELDS.of(config) and group.removed_keys is not None:
            old = old.set_column(names.index(RECORD_KEY), RECORD_KEY, table.stored_keys(old))
    else:  # read already
        old = old.add_column(names.index(RECORD_KEY), RECORD_KEY, group.base_keys)
    # Every file a write makes is in the write's schema (evolved, perhaps): the records that
    # stay take it too (a column added since is null for them, a widened one cast).
    target = fresh.schema if source.schema is None else with_meta_fields(source.schema)
    at = target.get_field_index(FILE_NAME)
    target = target.remove(at)
    old, fresh = conform_to(old, target), conform_to(fresh.drop_columns([FILE_NAME]), target)
    if source.rules is not None:
        old, fresh = merge_into_base(old, fresh, group.removed_keys, source.rules)
    elif group.removed_keys is not None:
        old = old.filter(pc.invert(pc.is_in(old.column(RECORD_KEY), value_set=group.removed_keys)))
    rows = pa.concat_tables([old, fresh]) if fresh.num_rows else old
    rows = rows.add_column(at, FILE_NAME, _constants(rows.num_rows, packed=True)(name))
    return encode_base_file(table, rows, parquet)


def encode_base_file(
    table: TableHandle, fresh: pa.Table, parquet: Mapping[str, Any]
) -> tuple[bytes, int, str | None]:
    """A base file of ``fresh`` (meta columns first), as Hudi writes one: the record-key range
    in its footer; with its rows and its column statistics (``io.parquet.file_stats``). A
    table without meta fields keeps only the file name of them (and no key range), one with
    dropped partition columns leaves them out (``file_rows``)."""
    fresh = file_rows(table, fresh)
    all_keys = fresh.column(RECORD_KEY)
    footer = {}
    if fresh.num_rows and P.POPULATE_META_FIELDS.of(table.config):
        bounds = pc.min_max(all_keys)  # one pass over the keys, not one for each bound
        footer = {
            b"hoodie_min_record_key": str(bounds["min"].as_py()).encode(),
            b"hoodie_max_record_key": str(bounds["max"].as_py()).encode(),
        }
    sink = pa.BufferOutputStream()  # Arrow memory, freed as soon as the bytes are copied out
    # Record keys and sequence numbers are unique per file: a dictionary would only be
    # built to be dropped. Every other column may repeat (the other meta columns do).
    # Min/max statistics of the sequence numbers, which no reader filters on, would take
    # a third of the encoding time; every other column has them, as in Hudi's files.
    columns = fresh.column_names
    schema = fresh.schema.with_metadata(footer)
    packed = [
        i for i, f in enumerate(schema) if f.name in _PACKED_META_COLUMNS and pa.types.is_dictionary(f.type)
    ]
    stored = schema  # the Arrow schema the file keeps: strings, for the packed columns
    for i in packed:
        stored = stored.set(i, schema.field(i).with_type(schema.field(i).type.value_type))
    options = dict(parquet)
    row_group_size = options.pop("row_group_size", None)
    writer = pq.ParquetWriter(
        sink,
        schema,
        # With packed columns the file's Arrow schema is put in its footer here, not taken
        # from the rows: they read back as the strings they stand for.
        store_schema=not packed,
        use_dictionary=[c for c in columns if c not in _UNIQUE_META_COLUMNS],
        write_statistics=[c for c in columns if c != COMMIT_SEQNO],
        **options,
    )
    with writer:
        writer.write_table(fresh.replace_schema_metadata(footer), row_group_size=row_group_size)
        if packed:
            writer.add_key_value_metadata(
                {**footer, ARROW_SCHEMA: base64.b64encode(stored.serialize().to_pybytes())}
            )
    stats = (
        file_stats(writer.writer.metadata, stats_columns(table.options, columns)) if fresh.num_rows else None
    )
    return sink.getvalue().to_pybytes(), fresh.num_rows, stats


def file_rows(table: TableHandle, rows: pa.Table, *, log: bool = False) -> pa.Table:
    """Rows (meta columns first) as the table's data files hold them, as Hudi writes them:
    with ``hoodie.populate.meta.fields=false`` (virtual keys; copy-on-write tables only) the
    meta columns are null but the file name (readers compute the rest); with
    ``hoodie.datasource.write.drop.partition.columns=true`` a base file leaves the partition
    columns out (readers take them from the path; log files keep them, as Hudi's merge-on-read
    upserts do)."""
    config = table.config
    if not P.POPULATE_META_FIELDS.of(config):
        nulls = pa.nulls(rows.num_rows, pa.string())
        name = rows.column(FILE_NAME) if FILE_NAME in rows.column_names else nulls
        data = rows.drop_columns([c for c in META_COLUMNS if c in rows.column_names])
        rows = pa.Table.from_arrays(
            [nulls, nulls, nulls, nulls, name, *data.columns], names=[*META_COLUMNS, *data.column_names]
        )
    if not log and P.DROP_PARTITION_COLUMNS.of(config):
        rows = rows.drop_columns([c for c in config.partition_fields if c in rows.column_names])
    return rows


def stats_columns(options: Mapping[str, str], columns: Sequence[str]) -> frozenset[str]:
    """The columns whose statistics a new file's entry in the metadata table records: those
    ``hoodie.metadata.index.column.stats.column.list`` names, else the first 32 data columns."""
    if not P.COLUMN_STATS_ENABLE.of(options):
        return frozenset()
    listed = P.COLUMN_STATS_COLUMNS.of(options)
    if listed is not None:
        return frozenset(listed)
    return frozenset([c for c in columns if c not in META_COLUMNS][: P.DEFAULT_STATS_COLUMNS])


def write_partition_metadata(table: TableHandle, partitions: Sequence[str], instant: str) -> None:
    """Hudi's ``.hoodie_partition_metadata`` of each partition (a concurrent writer or task
    may have written it: same content but for the time)."""
    for partition in partitions:
        path = f"{partition}/{P.PARTITION_METADATA_FILE}" if partition else P.PARTITION_METADATA_FILE
        depth = len(partition.split("/")) if partition else 0
        stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
        body = f"#partition metadata\n#{stamp}\ncommitTime={instant}\npartitionDepth={depth}\n".encode()
        with contextlib.suppress(FileExistsError):
            table.fs.pipe_file(path, body, mode="create")


def parquet_options(options: Mapping[str, str], record_size: int) -> dict[str, Any]:
    """pyarrow's settings for base files, from Hudi's keys."""
    return {
        "compression": P.PARQUET_COMPRESSION_CODEC.of(options),
        "row_group_size": max(1, P.PARQUET_BLOCK_SIZE.of(options) // record_size),
        "data_page_size": P.PARQUET_PAGE_SIZE.of(options),
    }


def record_size(table: TableHandle, timeline: Timeline) -> int:
    """Bytes per record, from the latest commit that wrote any (Hudi's estimate), else
    ``hoodie.copyonwrite.record.size.estimate``."""
    return written_record_size(table, timeline) or P.RECORD_SIZE_ESTIMATE.of(table.options)


def written_record_size(table: TableHandle, timeline: Timeline) -> int | None:
    """Bytes per record of the latest of the last five commits that wrote more than
    ``hoodie.record.size.estimation.threshold`` times the small file limit (Hudi's rule: a
    small commit's bytes per record are mostly its files' footers); None: none did."""
    options = table.options
    least = P.RECORD_SIZE_ESTIMATION_THRESHOLD.of(options) * P.SMALL_FILE_LIMIT.of(options)
    for instant in reversed(timeline.completed(table.write_actions)[-5:]):
        stats = table.commit_metadata(instant).stats
        written = sum(s.num_writes for s in stats)
        size = sum(s.total_write_bytes for s in stats)
        if written > 0 and size > least:
            return max(1, size // written)
    return None


def sampled_record_size(table: TableHandle, source: InputChunk) -> int:
    """Bytes per record of ``source``'s rows as a base file holds them: a sample of at most
    ``SIZE_SAMPLE_ROWS`` rows spread over the input, encoded as its files will be. A file's
    footer and dictionaries weigh on its rows a little more or less than on the sample's:
    files come within a few percent of the size set, as Hudi's rolled files do."""
    n = source.data.num_rows
    if n == 0:
        return P.RECORD_SIZE_ESTIMATE.of(table.options)
    rows = np.unique(np.linspace(0, n - 1, min(n, SIZE_SAMPLE_ROWS)).astype(np.int64))
    instant = source.instant or "0" * 17  # a placeholder of an instant's length
    group = FileGroupWrite("", new_file_id(), rows=rows)
    naming = file_names(instant, 1)[0]
    name = base_file_name(group.file_id, naming.token, instant)
    sample = _with_meta(table, source._replace(instant=instant), naming, group, name, packed=True)
    # In one row group: the row groups' size in rows is learnt from this too.
    payload, count, _ = encode_base_file(table, sample, {**source.parquet, "row_group_size": len(rows)})
    return max(1, len(payload) // count)
