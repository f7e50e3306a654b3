"""``CREATE TABLE ... USING fed`` in a Hive metastore (Spark's ``enableHiveSupport()``, Derby
behind it): the table outlives the session, and a new session finds and reads it.

Spark fixes its catalog when its JVM starts, so each session here is a process of its own.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pyspark.sql import SparkSession

import fed_spark
from fed_dev.testing import Backend

from .test_write import frame, hudi_options

SESSION = """
import os, sys
os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
import fed_spark

root, path, step = sys.argv[1], sys.argv[2], sys.argv[3]
spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.warehouse.dir", f"{root}/warehouse")
    .config(
        "spark.hadoop.javax.jdo.option.ConnectionURL",
        f"jdbc:derby:;databaseName={root}/metastore_db;create=true",
    )
    .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={root}")
    .enableHiveSupport()
    .getOrCreate()
)
fed_spark.register(spark)
if step == "create":
    spark.sql(f"CREATE TABLE trips USING fed OPTIONS (path '{path}')")
    spark.sql("INSERT INTO trips (id, region, ts, v) VALUES (9000, 'r9', 1, 0.5D)")
tables = ",".join(sorted(t.name for t in spark.catalog.listTables()))
found = spark.sql("SELECT count(*), sum(CASE WHEN region = 'r1' THEN 1 ELSE 0 END) FROM trips").collect()[0]
print(f"RESULT {spark.conf.get('spark.sql.catalogImplementation')} {tables} {found[0]} {found[1]}")
"""


def test_a_hive_metastore_keeps_fed_tables_across_sessions(local_fed: SparkSession, tmp_path: Path) -> None:
    backend = Backend("local", f"file://{tmp_path}/tables/t", f"file://{tmp_path}/storage", None)
    fed_spark.write(frame(local_fed, 0, 100), backend.table_path, hudi_options(backend))
    outputs = []
    for step in ("create", "read"):
        done = subprocess.run(
            [sys.executable, "-c", SESSION, str(tmp_path), backend.table_path, step],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        outputs.append([line for line in done.stdout.splitlines() if line.startswith("RESULT")][-1])
    # Both sessions: Hive's catalog, the table, the 100 rows plus the SQL insert (25 in r1);
    # the second session only found the table in the metastore.
    assert outputs == ["RESULT hive trips 101 25", "RESULT hive trips 101 25"]
