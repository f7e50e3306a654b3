"""Upserts and deletes in Spark, shuffled by file group (Hudi's way, in Spark's own stages).

1. Tag: each row gets its partition path and record key (fedcore's vectorised functions).
2. Index: the driver lists the latest slices of the partitions the rows touch (metadata
   table, no listing) and reads the record-key column of those base files (Spark tasks
   do, when they are many); a key in several files (inserted twice) updates each.
3. Route: the rows join the index on (partition, key): a match is an update (or a delete)
   of that file group. Unmatched rows of an upsert are inserts: they go to the partition's
   small file groups first, then to new ones, by a hash of their key over each target's
   room (as Hudi's upsert partitioner does), so a key's duplicates meet in one place.
4. Rewrite: Spark shuffles the rows by (partition, target file group); each task combines
   duplicates (greatest precombine value), rewrites each of its file groups once (the base
   file's records that stay, then the new ones) and returns the write stats.

Only the file groups that hold a changed key, or receive inserts, are rewritten.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from fed_spark.errors import one_line
from fed_spark.write import STATS_SCHEMA, stat_batch, stats_from, task_ids
from fedcore.engine import DELETE, BaseFile, WriteJob, WritePlanner, WriteStat
from fedcore.exceptions import DataFileMissingError

PARTITION = "_fed_partition_path"
KEY = "_fed_record_key"
FILE = "_fed_file_id"
TARGET = "_fed_target"
SLOT = "_fed_slot"
#: The base files whose keys an upsert's driver reads itself, at most (``_key_index``).
DRIVER_INDEX_BYTES = 256 * 2**20


def rewrite_by_file_group(
    spark: SparkSession, data: DataFrame, job: WriteJob, begin: Callable[[], None]
) -> list[WriteStat]:
    """Run an upsert or delete of ``data`` in Spark; the write stats of every file written.

    ``begin`` begins the job's instant: called once the rows are tagged and their keys looked
    up, so rows the tag step refuses (a key that does not fit the table's type, a null
    ordering value) are refused before anything of the write exists."""
    planner = WritePlanner(job)
    tagged_schema = StructType(
        [*data.schema.fields, StructField(PARTITION, StringType()), StructField(KEY, StringType())]
    )

    @one_line
    def tag(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            paths, keys = planner.tag(pa.Table.from_batches([batch]))
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, paths, keys], [*batch.schema.names, PARTITION, KEY]
            )

    tagged = data.mapInArrow(tag, tagged_schema).cache()
    # The input's distinct keys, by partition: what the key index keeps (the base files'
    # other keys never leave their tasks).
    # Made distinct on the driver: Spark's ``distinct()`` is a shuffle stage of its own, which
    # costs more than collecting the few duplicates an upsert's input holds.
    wanted = tagged.select(PARTITION, KEY).toArrow().group_by([PARTITION, KEY]).aggregate([])
    by_partition = _keys_by_partition(wanted)
    slices = planner.latest_base_files(sorted(by_partition))
    parallelism = max(1, int(spark.conf.get("spark.sql.shuffle.partitions") or 1))
    # The key index holds the input's keys only, so it is as small as the input's keys: it
    # comes to the driver, which sends it back to the tasks with the routes of the inserts.
    found = _key_index(spark, planner, slices, by_partition, parallelism)
    index = _owners(found)
    routes: dict[str, tuple[np.ndarray, list[str]]] = {}
    if job.operation != DELETE:
        inserts = {
            partition: len(keys) - int(pc.sum(pc.is_in(keys, value_set=index[partition][0])).as_py() or 0)
            if partition in index
            else len(keys)
            for partition, keys in by_partition.items()
        }
        routes = _insert_routes(planner, {p: n for p, n in inserts.items() if n}, slices)
    shared_index = spark.sparkContext.broadcast(index)
    deleting = job.operation == DELETE
    begin()  # the rewrite tasks below write the instant's files

    @one_line
    def route(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            partitions = batch.column(PARTITION).to_numpy(zero_copy_only=False)
            keys = batch.column(KEY)
            slots = batch.column(SLOT).to_numpy(zero_copy_only=False)
            # Each row once per group holding its key (a key several groups hold updates each),
            # an insert once: (row, file group or None, target).
            taken: list[np.ndarray] = []
            files: list[np.ndarray] = []
            targets: list[np.ndarray] = []
            for partition in np.unique(partitions):
                mine = np.flatnonzero(partitions == partition)
                hit = np.zeros(len(mine), dtype=bool)
                known = shared_index.value.get(partition)
                if known is not None:
                    unique_keys, offsets, owners = known
                    at = pc.index_in(keys.take(pa.array(mine)), value_set=unique_keys)
                    hit = pc.is_valid(at).to_numpy(zero_copy_only=False)
                    found_at = at.fill_null(0).to_numpy(zero_copy_only=False)[hit]
                    first = offsets[found_at]
                    counts = offsets[found_at + 1] - first
                    runs = np.repeat(first - np.cumsum(np.r_[0, counts[:-1]]), counts)
                    positions = runs + np.arange(int(counts.sum()))
                    owned = np.asarray(owners, dtype=object)[positions]
                    taken.append(np.repeat(mine[hit], counts))
                    files.append(owned)
                    targets.append(owned)
                new = mine[~hit]
                if len(new) and not deleting:
                    ends, ids = routes[partition]
                    picked = np.searchsorted(ends, slots[new] % ends[-1], side="right")
                    taken.append(new)
                    files.append(np.full(len(new), None, dtype=object))
                    targets.append(np.asarray(ids, dtype=object)[picked])
            if not taken:
                continue  # a delete of keys the table does not hold has nothing to do
            rows = np.concatenate(taken)
            columns = [
                *batch.take(pa.array(rows, pa.int64())).columns,
                pa.array(np.concatenate(files), pa.string()),
                pa.array(np.concatenate(targets), pa.string()),
            ]
            yield pa.RecordBatch.from_arrays(columns, [*batch.schema.names, FILE, TARGET])

    slotted = tagged.withColumn(SLOT, F.pmod(F.xxhash64(KEY), F.lit(2**62)))
    routed_schema = StructType(
        [*slotted.schema.fields, StructField(FILE, StringType()), StructField(TARGET, StringType())]
    )
    # One shuffle partition per file group written at most: Spark's default of 200 tasks for
    # a write touching 16 groups is 184 empty tasks, each scheduled and each a Python worker.
    groups = {(p, f) for p, (_, _, files) in index.items() for f in files}
    groups.update((p, target) for p, (_, targets) in routes.items() for target in targets)
    tasks = max(1, min(parallelism, len(groups)))
    routed = slotted.mapInArrow(route, routed_schema).repartition(tasks, PARTITION, TARGET)

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

    try:
        return stats_from(routed.mapInArrow(rewrite, STATS_SCHEMA).collect())
    finally:
        tagged.unpersist()


def _key_index(
    spark: SparkSession,
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
    shared = spark.sparkContext.broadcast(wanted)
    named = sorted(slices)  # (partition, file id) of each file to look in
    # Spread over tasks as they are made: a repartition would be a shuffle stage of its own.
    spread = spark.sparkContext.parallelize(named, max(1, min(parallelism, len(named))))
    files = spark.createDataFrame(spread, "partition string, file string")
    schema = StructType([StructField(name, StringType()) for name in (PARTITION, KEY, FILE)])

    @one_line
    def keys_of(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            named = zip(*(c.to_pylist() for c in batch.columns), strict=True)
            mine = {(p, f): slices[(p, f)] for p, f in named}
            try:
                found = planner.found_keys(mine, shared.value)
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


def _owners(found: pa.Table) -> dict[str, tuple[pa.Array, np.ndarray, list[str]]]:
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
        out[partition] = (unique_keys, offsets, part.column(FILE).to_pylist())
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


def _insert_routes(
    planner: WritePlanner, inserts: dict[str, int], slices: dict[tuple[str, str], BaseFile]
) -> dict[str, tuple[np.ndarray, list[str]]]:
    """Per partition, where its inserts go (the planner's small-file routing), as cumulative
    slot ends and the target of each range: a row's slot (a hash of its key) picks its
    target, so a key's duplicates meet in one place."""
    routes: dict[str, tuple[np.ndarray, list[str]]] = {}
    for partition, count in inserts.items():
        targets = planner.insert_targets(planner.insert_candidates(partition, slices), count)
        ends = np.cumsum([t.rows for t in targets]).astype(np.int64)
        routes[partition] = (ends, [t.file_id for t in targets])
    return routes
