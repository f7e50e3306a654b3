"""Upserts and deletes in Spark, shuffled by file group (Hudi's way, in Spark's own stages).

1. Tag: each row gets its partition path and record key (fedcore's vectorised functions);
   the distinct (partition, key) pairs come to the driver.
2. Index: the driver lists the latest slices of the partitions the rows touch (metadata
   table, no listing) and reads the record-key column of those base files (Spark tasks
   do, when they are many); a key in several files (inserted twice) updates each.
3. Route: the driver gives each key its destinations: every file group holding it (an
   update, or a delete), else, in an upsert, the partition's small file groups first, then
   new ones, the keys taken in turn up to each group's room (``WriteClient``'s sizing).
   The rows, tagged again, look their key up there, so a key's duplicates meet in one place.
4. Rewrite: Spark shuffles the rows by (partition, target file group); each task combines
   duplicates (greatest precombine value), rewrites each of its file groups once (the base
   file's records that stay, then the new ones) and returns the write stats.

Only the file groups that hold a changed key, or receive inserts, are rewritten.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql.types import StringType, StructField, StructType

from fed_spark.errors import one_line
from fed_spark.options import CONNECT_MESSAGE_BYTES, CONNECT_MESSAGE_SIZE, SHUFFLE_PARTITIONS
from fed_spark.session import AnySession, bytes_of, is_connect
from fed_spark.write import STATS_SCHEMA, stat_batch, stats_from, task_ids
from fedcore.engine import DELETE, BaseFile, WriteJob, WritePlanner, WriteStat
from fedcore.exceptions import ConfigError, DataFileMissingError, InvalidRecordsError

PARTITION = "_fed_partition_path"
KEY = "_fed_record_key"
FILE = "_fed_file_id"
TARGET = "_fed_target"
#: The base files whose keys an upsert's driver reads itself, at most (``_key_index``).
DRIVER_INDEX_BYTES = 256 * 2**20


class Route(NamedTuple):
    """Where one partition's rows go, by record key: the keys (distinct), where each key's
    destinations start in ``files`` and ``targets`` (``offsets``, one more than the keys),
    and per destination the file group whose base file holds the key (None: an insert) and
    the file group written (None: nowhere, a delete of a key the table does not hold), each
    as a position in ``ids`` (the partition's file ids, then None at -1): the routes travel
    with the tasks, so a key costs a few bytes in them, not its file id's."""

    keys: pa.Array
    offsets: np.ndarray
    ids: np.ndarray
    files: np.ndarray
    targets: np.ndarray


def rewrite_by_file_group(
    spark: AnySession, data: DataFrame, job: WriteJob, begin: Callable[[], None], *, cached: bool
) -> list[WriteStat]:
    """Run an upsert or delete of ``data`` in Spark; the write stats of every file written.

    ``data`` is read twice: its keys, then its rows, routed. ``cached``: it is read from a
    cache already (the caller's), so both reads see the same rows; else it is cached here
    for the write. ``begin`` begins the job's instant: called once the rows are tagged and
    their keys looked up, so rows the tag step refuses (a key that does not fit the table's
    type, a null ordering value) are refused before anything of the write exists."""
    planner = WritePlanner(job)
    source = data if cached else data.cache()
    try:
        return _rewrite(spark, source, planner, begin)
    finally:
        if not cached:
            source.unpersist()


def _rewrite(
    spark: AnySession, data: DataFrame, planner: WritePlanner, begin: Callable[[], None]
) -> list[WriteStat]:
    job = planner.job
    keys_schema = StructType([StructField(PARTITION, StringType()), StructField(KEY, StringType())])

    @one_line
    def tag(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield pa.RecordBatch.from_arrays(
                list(planner.tag(pa.Table.from_batches([batch]))), [PARTITION, KEY]
            )

    # The input's distinct keys, by partition: what the key index keeps (the base files'
    # other keys never leave their tasks). Only the keys come back from the Python workers:
    # the rows are tagged again as they are routed, which costs less than handing every
    # column back to the JVM and caching it.
    # Made distinct on the driver: Spark's ``distinct()`` is a shuffle stage of its own, which
    # costs more than collecting the few duplicates an upsert's input holds.
    wanted = data.mapInArrow(tag, keys_schema).toArrow().group_by([PARTITION, KEY]).aggregate([])
    by_partition = _keys_by_partition(wanted)
    slices = planner.latest_base_files(sorted(by_partition))
    parallelism = max(1, int(spark.conf.get(SHUFFLE_PARTITIONS) or 1))
    _check_plan_size(spark, by_partition)
    # The key index holds the input's keys only, so it is as small as the input's keys: it
    # comes to the driver, which sends it back to the tasks with the inserts' file groups,
    # in the routing function itself (Spark ships a task's function to each executor once
    # per stage, as a broadcast would; a Spark Connect client has no broadcast of its own).
    found = _key_index(spark, planner, slices, by_partition, parallelism)
    routes = _routes(planner, found, by_partition, slices, inserting=job.operation != DELETE)
    begin()  # the rewrite tasks below write the instant's files

    @one_line
    def route(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            paths, keys = planner.tag(pa.Table.from_batches([batch]))
            partitions = paths.to_numpy(zero_copy_only=False)
            # Each row once per destination of its key: a key several groups hold updates each.
            taken: list[np.ndarray] = []
            files: list[np.ndarray] = []
            targets: list[np.ndarray] = []
            for partition in np.unique(partitions):
                mine = np.flatnonzero(partitions == partition)
                known = routes.get(partition)
                at = pc.index_in(keys.take(pa.array(mine)), value_set=known.keys) if known else None
                if known is None or at is None or at.null_count:
                    raise InvalidRecordsError(
                        f"the input of the {job.operation} changed between its two reads (partition "
                        f"{partition!r} holds a key the first did not): cache it, or make it deterministic"
                    )
                where = at.to_numpy(zero_copy_only=False)
                first = known.offsets[where]
                counts = known.offsets[where + 1] - first
                runs = np.repeat(first - np.cumsum(np.r_[0, counts[:-1]]), counts)
                positions = runs + np.arange(int(counts.sum()))
                taken.append(np.repeat(mine, counts))
                files.append(known.ids[known.files[positions]])
                targets.append(known.ids[known.targets[positions]])
            if not taken:
                continue
            target = pa.array(np.concatenate(targets), pa.string())
            routed = pc.is_valid(target)  # not a delete of a key the table does not hold
            rows = pa.array(np.concatenate(taken), pa.int64()).filter(routed)
            if not len(rows):
                continue
            columns = [
                *batch.take(rows).columns,
                paths.take(rows),
                keys.take(rows),
                pa.array(np.concatenate(files), pa.string()).filter(routed),
                target.filter(routed),
            ]
            yield pa.RecordBatch.from_arrays(columns, [*batch.schema.names, PARTITION, KEY, FILE, TARGET])

    routed_schema = StructType(
        [
            *data.schema.fields,
            *keys_schema.fields,
            StructField(FILE, StringType()),
            StructField(TARGET, StringType()),
        ]
    )
    # One shuffle partition per file group written at most: Spark's default of 200 tasks for
    # a write touching 16 groups is 184 empty tasks, each scheduled and each a Python worker.
    groups = sum(len(np.unique(r.targets[r.targets >= 0])) for r in routes.values())
    tasks = max(1, min(parallelism, groups))
    routed = data.mapInArrow(route, routed_schema).repartition(tasks, PARTITION, TARGET)

    data_columns = list(data.columns)

    @one_line
    def rewrite(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        found = [b for b in batches if b.num_rows]
        if not found:
            yield stat_batch([])
            return
        chunk = pa.Table.from_batches(found)
        # One record per key and file group written (a key two groups hold goes to both).
        group_of = pc.binary_join_element_wise(chunk.column(PARTITION), chunk.column(TARGET), "\x00")
        codes = pc.dictionary_encode(group_of).combine_chunks().indices.to_numpy(zero_copy_only=False)
        codes = codes.astype(np.int64)
        keys = chunk.column(KEY).combine_chunks()
        kept = planner.keep_latest(chunk, codes, keys)
        if len(kept) != chunk.num_rows:
            chunk, keys = chunk.take(kept), keys.take(kept)
        groups = planner.routed_groups(
            chunk.column(PARTITION).to_numpy(zero_copy_only=False),
            chunk.column(TARGET).to_numpy(zero_copy_only=False),
            pc.is_valid(chunk.column(FILE)).to_numpy(zero_copy_only=False),
            keys,
            slices,
        )
        task, attempt = task_ids()
        try:
            stats = job.write_task(groups, chunk.select(data_columns), keys, task, attempt)
        except DataFileMissingError as error:  # a concurrent writer's doing, or a lost file
            raise job.missing_file(error) from error
        yield stat_batch(stats)

    return stats_from(routed.mapInArrow(rewrite, STATS_SCHEMA).collect())


def _check_plan_size(spark: AnySession, wanted: dict[str, pa.Array]) -> None:
    """Over Spark Connect the input's keys and their routes travel in the plans the client
    sends, which the server takes up to its message size: past it, a typed error says what
    to do before the instant begins (rather than gRPC's ``RESOURCE_EXHAUSTED`` after). A
    route costs a key's bytes and 16 more (its offset, file group and target)."""
    if not is_connect(spark):
        return  # a classic driver broadcasts a large function itself
    size = sum(keys.nbytes + 16 * len(keys) for keys in wanted.values())
    key = CONNECT_MESSAGE_SIZE
    # The client's channel takes as much as PySpark's default at most, whatever the server's.
    limit = min(bytes_of(spark.conf.get(key, None), CONNECT_MESSAGE_BYTES), CONNECT_MESSAGE_BYTES)
    if size > limit * 0.9:
        raise ConfigError(
            key,
            f"(with the client's channel) takes {limit / 2**20:.0f} MB, and the routes of this write's "
            f"{sum(len(k) for k in wanted.values()):,} keys take {size / 2**20:.0f} MB of a Spark Connect "
            "plan: write the input in parts, or from a classic session on the cluster",
        )


def _key_index(
    spark: AnySession,
    planner: WritePlanner,
    slices: dict[tuple[str, str], BaseFile],
    wanted: dict[str, pa.Array],
    parallelism: int,
) -> pa.Table:
    """(partition, key, file id) of the input's keys (``wanted``, by partition) found in the
    latest slices; a key in several files is there once per file.

    The driver reads the record-key columns itself while the base files to look in are at most
    ``DRIVER_INDEX_BYTES`` (as Spark broadcasts a small join side instead of shuffling it):
    on two cores a Spark job of its own took 0.3-1.4 s (scheduling, Python workers starting)
    to read the keys of 16 base files of 3 MB, the driver's threads under 0.1 s. Larger
    lookups are Spark tasks, the files spread over them."""
    if sum(base.size for base in slices.values()) <= DRIVER_INDEX_BYTES:
        try:
            return _found_table(planner.found_keys(slices, wanted))
        except DataFileMissingError as error:  # a concurrent writer's doing, or a lost file
            raise planner.job.missing_file(error) from error
    named = sorted(slices)  # (partition, file id) of each file to look in
    # Spread over tasks as a range is made (each task the files at its positions): a
    # repartition would be a shuffle stage of its own. The wanted keys travel with the function.
    files = spark.range(0, len(named), 1, max(1, min(parallelism, len(named))))
    schema = StructType([StructField(name, StringType()) for name in (PARTITION, KEY, FILE)])

    @one_line
    def keys_of(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            mine = {named[i]: slices[named[i]] for i in batch.column(0).to_pylist()}
            try:
                found = planner.found_keys(mine, wanted)
            except DataFileMissingError as error:  # a concurrent writer's doing, or a lost file
                raise planner.job.missing_file(error) from error
            yield from _found_table(found).to_batches()

    return files.mapInArrow(keys_of, schema).toArrow()


def _found_table(found: list[tuple[str, str, pa.Array]]) -> pa.Table:
    """``WritePlanner.found_keys``'s answer as (partition, key, file id) rows."""
    return pa.Table.from_arrays(
        [
            pa.chunked_array([pa.repeat(pa.scalar(p), len(k)) for p, _, k in found], pa.string()),
            pa.chunked_array([k for _, _, k in found], pa.string()),
            pa.chunked_array([pa.repeat(pa.scalar(f), len(k)) for _, f, k in found], pa.string()),
        ],
        [PARTITION, KEY, FILE],
    )


def _owners(found: pa.Table) -> dict[str, tuple[pa.Array, np.ndarray, np.ndarray]]:
    """Per partition, the keys found (distinct, sorted), where each key's groups start in
    ``owners`` (``offsets``, one more than the keys) and the file groups holding them: a key
    several groups hold (a table bulk-inserted twice) updates every one, as Hudi's index tags
    a record with each location it finds."""
    if not found.num_rows:
        return {}
    pairs = found.group_by([PARTITION, KEY, FILE]).aggregate([])
    ordered = pairs.sort_by([(PARTITION, "ascending"), (KEY, "ascending"), (FILE, "ascending")])
    out = {}
    for partition, part in _by_partition(ordered).items():
        keys = part.column(KEY).to_numpy(zero_copy_only=False)
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        offsets = np.r_[starts, len(keys)].astype(np.int64)
        unique_keys = part.column(KEY).combine_chunks().take(pa.array(starts, pa.int64()))
        out[partition] = (unique_keys, offsets, part.column(FILE).to_numpy(zero_copy_only=False))
    return out


def _keys_by_partition(wanted: pa.Table) -> dict[str, pa.Array]:
    """The input's distinct keys, grouped by partition path."""
    return {partition: part.column(KEY).combine_chunks() for partition, part in _by_partition(wanted).items()}


def _by_partition(rows: pa.Table) -> dict[str, pa.Table]:
    """``rows`` split by partition path (slices of one sort, no copy per partition)."""
    if not rows.num_rows:
        return {}
    ordered = rows.sort_by(PARTITION)
    partitions = ordered.column(PARTITION).to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(np.r_[True, partitions[1:] != partitions[:-1]])
    ends = np.r_[starts[1:], len(partitions)]
    return {str(partitions[a]): ordered.slice(a, b - a) for a, b in zip(starts, ends, strict=True)}


def _routes(
    planner: WritePlanner,
    found: pa.Table,
    wanted: dict[str, pa.Array],
    slices: dict[tuple[str, str], BaseFile],
    *,
    inserting: bool,
) -> dict[str, Route]:
    """Per partition, where each of the input's keys goes: to every file group holding it
    (``found``), else (``inserting``) to the file group the planner's small-file routing
    gives it, the keys taken in turn up to each group's room (as ``WriteClient`` does), else
    nowhere. Routed by key, a key's rows meet in one place, whichever tasks read them."""
    owners = _owners(found)
    no_keys = (pa.array([], pa.string()), np.zeros(1, np.int64), np.array([], dtype=object))
    routes = {}
    for partition, keys in wanted.items():
        held, offsets, holding = owners.get(partition, no_keys)
        held, keys = held.cast(pa.string()), keys.cast(pa.string())  # Spark may send large_string
        new = keys.filter(pc.invert(pc.is_in(keys, value_set=held))) if len(held) else keys
        nowhere = np.full(len(new), None, dtype=object)
        placed = nowhere
        if inserting and len(new):
            chosen = planner.insert_targets(planner.insert_candidates(partition, slices), len(new))
            placed = np.repeat(
                np.asarray([t.file_id for t in chosen], dtype=object), [t.rows for t in chosen]
            )
        files = np.concatenate([holding, nowhere])
        targets = np.concatenate([holding, placed])
        # Both as positions in one dictionary of the partition's file ids (None: -1).
        coded = pa.array(np.concatenate([files, targets]), pa.string()).dictionary_encode()
        positions = coded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)
        ids = coded.dictionary.to_numpy(zero_copy_only=False).astype(object)
        routes[partition] = Route(
            pa.concat_arrays([held, new]),
            np.r_[offsets, offsets[-1] + np.arange(1, len(new) + 1)].astype(np.int64),
            np.concatenate([ids, np.array([None], dtype=object)]),
            positions[: len(files)],
            positions[len(files) :],
        )
    return routes
