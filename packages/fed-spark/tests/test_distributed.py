"""``fed_spark.write``: upserts and deletes distributed, partitions shuffled to tasks."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark import cloudpickle
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import fed_spark
from fed_dev.testing import Backend
from fed_spark import upsert
from fedcore.exceptions import UnsupportedTableError
from fedcore.table import load_table
from fedcore.write import job as write_job
from fedcore.write.client import WriteClient
from fedcore.write.job import WriteJob

from .test_write import frame, hudi_options, ids, referenced

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(params=["driver", "tasks"])
def key_index(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Where an upsert reads the keys of the base files it looks in: the driver (the files are
    few) or Spark tasks (``DRIVER_INDEX_BYTES`` at 0: any file is too many)."""
    if request.param == "tasks":
        monkeypatch.setattr(upsert, "DRIVER_INDEX_BYTES", 0)
    return str(request.param)


def test_distributed_upsert_and_delete_touch_only_the_groups_they_change(
    fed: SparkSession, backend: Backend
) -> None:
    spark = fed
    path = f"{backend.table_path}-distributed"
    # Sized at 1 KB a record: the rows make several file groups a partition.
    options = hudi_options(backend) | {
        "hoodie.parquet.max.file.size": str(64 * 1024),
        "hoodie.copyonwrite.record.size.estimate": "1024",
    }
    first = fed_spark.write(frame(spark, 0, 4000), path, options)
    assert (first.operation, first.inserted) == ("bulk_insert", 4000)
    table = load_table(path, storage_options=backend.storage_options)
    before = {(s.partition_path, s.file_id): s.base_instant for s in table.file_slices()}
    assert len(before) > 8  # several file groups per partition
    # Update ids 100..149 (in every partition, a few groups) and insert 4000..4019.
    changes = frame(spark, 100, 150, ts=2).union(frame(spark, 4000, 4020, ts=2))
    upsert = {"hoodie.datasource.write.operation": "upsert"}
    result = fed_spark.write(changes, path, upsert)
    assert (result.updated, result.inserted) == (50, 20)
    table = load_table(path, storage_options=backend.storage_options)
    assert ids(table) == list(range(4020))
    assert table.scan([("ts", "=", 2)]).count() == 70
    after = {(s.partition_path, s.file_id): s.base_instant for s in table.file_slices()}
    rewritten = {g for g, instant in after.items() if instant == result.instant}
    untouched = {g for g in before if after.get(g) == before[g]}
    assert rewritten  # only the groups holding changed keys were rewritten
    assert untouched
    assert len(rewritten) < len(before) / 2
    # The same upsert through one process gives the same table (idempotent, same routing).
    again = WriteClient(table).upsert(changes.toArrow())
    assert (again.updated, again.inserted) == (70, 0)
    gone = spark.range(0, 40).selectExpr("id", "concat('r', cast(id % 4 as string)) AS region")
    deleted = fed_spark.write(gone, path, {"hoodie.datasource.write.operation": "delete"})
    assert deleted.deleted == 40
    assert ids(load_table(path, storage_options=backend.storage_options)) == list(range(40, 4020))
    assert backend.data_files() >= referenced(table)


def test_a_retried_rewrite_task_commits_once_and_leaves_no_orphan(
    local_fed: SparkSession, tmp_path: Path
) -> None:
    spark = local_fed
    backend = Backend("local", f"file://{tmp_path}/tables/t", f"file://{tmp_path}/storage", None)
    fed_spark.write(frame(spark, 0, 400), backend.table_path, hudi_options(backend))
    original = WriteJob.write_groups
    lost = tmp_path / "lost"

    def flaky(self: WriteJob, groups: Any, source: Any, names: Any, put: Any, done: Any = None) -> Any:
        stats = original(self, groups, source, names, put, done)  # the files are written ...
        if stats and names[0].token.endswith("-0") and self.operation == "upsert":
            lost.write_text("\n".join(s.path for s in stats))
            raise RuntimeError("... and then the task attempt is lost")
        return stats

    # The tasks get the patched class: its module is pickled to them by value for this write.
    WriteJob.write_groups = flaky  # type: ignore[method-assign]
    cloudpickle.register_pickle_by_value(write_job)
    try:
        result = fed_spark.write(frame(spark, 300, 500, ts=2), backend.table_path, {})  # upsert
    finally:
        cloudpickle.unregister_pickle_by_value(write_job)
        WriteJob.write_groups = original  # type: ignore[method-assign]
    assert lost.exists()  # an attempt did fail after writing its files
    assert (result.updated, result.inserted) == (100, 100)
    table = load_table(backend.table_path)
    assert ids(table) == list(range(500))
    assert backend.data_files() == referenced(table)


def test_one_partition_is_rewritten_by_several_tasks(
    local_fed: SparkSession, tmp_path: Path, key_index: str
) -> None:
    """The shuffle is by file group: one big partition's groups spread over tasks."""
    spark = local_fed
    backend = Backend("local", f"file://{tmp_path}/tables/t", f"file://{tmp_path}/storage", None)
    options = hudi_options(backend) | {
        "hoodie.parquet.max.file.size": str(32 * 1024),
        "hoodie.copyonwrite.record.size.estimate": "1024",  # several file groups
    }
    one = frame(spark, 0, 6000).withColumn("region", F.lit("all"))
    fed_spark.write(one, backend.table_path, options)
    table = load_table(backend.table_path)
    assert len(table.file_slices()) >= 8
    before = table.read(columns=["id", "_hoodie_file_name"]).to_pylist()
    holding = {r["_hoodie_file_name"].split("_")[0] for r in before if r["id"] % 50 == 0}
    changed = frame(spark, 0, 6000, ts=2).withColumn("region", F.lit("all")).where("id % 50 = 0")
    result = fed_spark.write(changed, backend.table_path, {})
    assert (result.updated, result.inserted) == (120, 0)
    assert result.files_written == len(holding) > 1  # exactly the groups holding a changed key
    tokens = {s.base_file_name.split("_")[1] for s in load_table(backend.table_path).file_slices()}
    assert len({token.split("-")[0] for token in tokens}) >= 2  # written by several tasks
    assert ids(load_table(backend.table_path)) == list(range(6000))


def test_bad_modes_are_refused(local_fed: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="append"):
        fed_spark.write(frame(local_fed, 0, 1), f"{tmp_path}/t", {}, mode="error")  # type: ignore[arg-type]


KILLED_DRIVER = """
import os, sys
os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
import fed_spark
from fedcore.write.job import WriteJob

def die(self, *args, **kwargs):
    os._exit(3)  # the driver dies after every task wrote its files, before anything commits

WriteJob.commit = die
spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
fed_spark.register(spark)
rows = spark.range(300, 500).selectExpr(
    "id", "concat('r', cast(id % 4 as string)) AS region", "2L AS ts", "CAST(id AS DOUBLE) AS v"
)
fed_spark.write(rows, sys.argv[1], {"hoodie.datasource.write.operation": sys.argv[2]})
"""


@pytest.mark.parametrize("operation", ["upsert", "bulk_insert"])
def test_a_killed_driver_leaves_nothing_visible_and_the_next_writer_cleans_up(
    local_fed: SparkSession, tmp_path: Path, operation: str
) -> None:
    backend = Backend("local", f"file://{tmp_path}/tables/t", f"file://{tmp_path}/storage", None)
    fed_spark.write(frame(local_fed, 0, 400), backend.table_path, hudi_options(backend))
    died = subprocess.run(
        [sys.executable, "-c", KILLED_DRIVER, backend.table_path, operation],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert died.returncode == 3, died.stderr[-3000:]
    table = load_table(backend.table_path)
    assert ids(table) == list(range(400))  # nothing of the dead job is visible
    assert len(table.timeline().pending()) == 1
    assert backend.data_files() > referenced(table)  # its tasks' files are there, unreferenced
    time.sleep(0.5)  # its heartbeat expires (the next writer below judges it at 100 ms x 3)
    fast = {"hoodie.client.heartbeat.interval_in_ms": "100", "hoodie.client.heartbeat.tolerable.misses": "2"}
    WriteClient(table, fast).upsert(frame(local_fed, 1000, 1001).toArrow())
    table = load_table(backend.table_path)
    assert ids(table) == [*range(400), 1000]
    assert table.timeline().pending() == []
    assert [i.action for i in table.timeline().completed()] == ["commit", "rollback", "commit"]
    assert backend.data_files() == referenced(table)


def test_merge_on_read_upserts_and_deletes_append_log_files_from_tasks(
    local_fed: SparkSession, tmp_path: Path
) -> None:
    """A merge-on-read table fed-spark creates: distributed upserts append log files onto the
    groups holding their keys (inserts top up groups without log files, or start new ones),
    deletes append delete blocks; Spark reads the snapshot and the read-optimized view."""
    spark = local_fed
    backend = Backend("local", f"file://{tmp_path}/tables/t", f"file://{tmp_path}/storage", None)
    options = hudi_options(backend) | {"hoodie.datasource.write.table.type": "MERGE_ON_READ"}
    fed_spark.write(frame(spark, 0, 400), backend.table_path, options)
    table = load_table(backend.table_path)
    assert table.config.table_type == "MERGE_ON_READ"
    bases = {s.file_id: s.base_file_name for s in table.file_slices()}

    changes = frame(spark, 0, 40, ts=2).withColumn("v", F.lit(-1.0))
    updated = fed_spark.write(changes, backend.table_path, {"hoodie.datasource.write.operation": "upsert"})
    assert (updated.updated, updated.inserted) == (40, 0)
    table = load_table(backend.table_path)
    slices = table.file_slices()
    assert {s.file_id: s.base_file_name for s in slices} == bases, "no base file is rewritten"
    assert sum(len(s.log_files) for s in slices) == updated.files_written > 0
    assert all(len(s.log_files) <= 1 for s in slices), "one log file per group per write"

    gone = spark.range(40, 60).selectExpr("id", "concat('r', cast(id % 4 as string)) AS region")
    deleted = fed_spark.write(gone, backend.table_path, {"hoodie.datasource.write.operation": "delete"})
    assert deleted.deleted == 20
    # Ids 0..39 again (their updates stand) and 400..419, new: inserts start new file groups,
    # since every group now has log files.
    more = frame(spark, 400, 420, ts=3)
    inserted = fed_spark.write(more, backend.table_path, {"hoodie.datasource.write.operation": "upsert"})
    assert inserted.inserted == 20

    table = load_table(backend.table_path)
    expected = sorted([*range(0, 40), *range(60, 420)])
    assert ids(table) == expected
    assert {i.action for i in table.timeline()} == {"deltacommit"}
    snapshot = spark.read.format("fed").load(backend.table_path)
    assert sorted(r.id for r in snapshot.select("id").collect()) == expected
    assert snapshot.where("v = -1.0").count() == 40
    reader = spark.read.format("fed").option("hoodie.datasource.query.type", "read_optimized")
    optimized = reader.load(backend.table_path)
    assert sorted(r.id for r in optimized.select("id").collect()) == [*range(0, 400), *range(400, 420)]
    assert optimized.where("v = -1.0").count() == 0
    # Read-optimized reads base files only: Spark's own Parquet reader takes them, exactly.
    native = fed_spark.read(spark, backend.table_path, query_type="read_optimized", scan="native")
    assert sorted(native.collect()) == sorted(optimized.collect())
    with pytest.raises(UnsupportedTableError, match="log files to merge"):
        fed_spark.read(spark, backend.table_path, scan="native")


def test_a_key_two_file_groups_hold_is_upserted_and_deleted_in_both(
    local_fed: SparkSession, tmp_path: Path, key_index: str
) -> None:
    """Bulk-inserted twice, keys 0..3 are each in two file groups of their partition. A
    distributed upsert updates both copies and a delete deletes both, as Hudi's index and
    fedcore's own writer do (``tox -e hudi`` compares fedcore with Hudi)."""
    spark = local_fed
    tables = {}
    for writer in ("spark", "fedcore"):
        backend = Backend(
            "local", f"file://{tmp_path}/tables/{writer}", f"file://{tmp_path}/s-{writer}", None
        )
        for _ in range(2):
            fed_spark.write(frame(spark, 0, 8, parts=1), backend.table_path, hudi_options(backend))
        tables[writer] = backend.table_path
    changes = frame(spark, 0, 2, ts=2, parts=1)
    fed_spark.write(changes, tables["spark"], {"hoodie.datasource.write.operation": "upsert"})
    load_table(tables["fedcore"]).upsert(changes.toArrow())
    gone = spark.range(2, 4).selectExpr("id", "concat('r', cast(id % 4 as string)) AS region")
    fed_spark.write(gone, tables["spark"], {"hoodie.datasource.write.operation": "delete"})
    load_table(tables["fedcore"]).delete(gone.toArrow())

    def rows(path: str) -> list[tuple[int, int]]:
        found = load_table(path).read(columns=["id", "ts"])
        return sorted(zip(found.column("id").to_pylist(), found.column("ts").to_pylist(), strict=True))

    expected = [(0, 2), (0, 2), (1, 2), (1, 2), *sorted([(i, 1) for i in range(4, 8)] * 2)]
    assert rows(tables["fedcore"]) == expected
    assert rows(tables["spark"]) == expected


def _random_ids(batches: Any) -> Any:
    """Each row's id (and region, as ``frame`` makes it) drawn anew on every read: an input no
    two reads of agree on."""
    import numpy as np
    import pyarrow as pa

    draw = np.random.default_rng()
    for batch in batches:
        ids = draw.integers(0, 400, batch.num_rows)
        regions = pa.array(np.char.add("r", (ids % 4).astype(str)).astype(object), pa.string())
        batch = batch.set_column(batch.schema.get_field_index("id"), "id", pa.array(ids, pa.int64()))
        yield batch.set_column(batch.schema.get_field_index("region"), "region", regions)


def test_an_upsert_reads_an_input_that_changes_between_reads_once_through_a_cache(
    local_fed: SparkSession, tmp_path: Path
) -> None:
    """The keys are looked up from one read of the input and the rows routed from another:
    an input that is not cached is cached for the write, so both see the same rows."""
    spark = local_fed
    backend = Backend("local", f"file://{tmp_path}/tables/t", f"file://{tmp_path}/storage", None)
    fed_spark.write(frame(spark, 0, 200), backend.table_path, hudi_options(backend))
    changing = frame(spark, 0, 300, ts=2).mapInArrow(_random_ids, frame(spark, 0, 1).schema)
    result = fed_spark.write(changing, backend.table_path, {})
    table = load_table(backend.table_path)
    found = table.read(columns=["id", "ts"]).to_pylist()
    assert max(Counter(r["id"] for r in found).values()) == 1  # each key once
    assert len(found) == 200 + result.inserted
    assert sum(r["ts"] == 2 for r in found) == result.updated + result.inserted > 0


def test_an_input_whose_rows_change_after_its_keys_were_read_is_refused(
    local_fed: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should the rows routed hold a key the lookup did not see (the cache the write reads
    lost, and the input not deterministic), the write fails with a typed error and the table
    stays as it was: never an update written as an insert, a duplicate key."""
    spark = local_fed
    backend = Backend("local", f"file://{tmp_path}/tables/t", f"file://{tmp_path}/storage", None)
    fed_spark.write(frame(spark, 0, 200), backend.table_path, hudi_options(backend))
    before = load_table(backend.table_path).read().to_pylist()
    changing = frame(spark, 0, 300, ts=2).mapInArrow(_random_ids, frame(spark, 0, 1).schema)
    monkeypatch.setattr(type(changing), "cache", lambda self: self)  # a cache that keeps nothing
    with pytest.raises(
        Exception, match="InvalidRecordsError: the input of the upsert changed between its two reads"
    ):
        fed_spark.write(changing, backend.table_path, {})
    table = load_table(backend.table_path)
    assert Counter(map(repr, table.read().to_pylist())) == Counter(map(repr, before))
