"""The native scan on S3: Spark's own S3A filesystem reads the planned files from the loopback
S3 server, with ``hadoop-aws`` fetched by ``fed_dev.s3a.s3a_jars`` (a session of its own:
jars join a JVM when it starts)."""

from __future__ import annotations

import json
import subprocess
import sys

from pyspark.sql import SparkSession

import fed_spark
from fed_dev.s3a import s3a_conf, s3a_jars
from fed_dev.servers import ACCESS_KEY, SECRET_KEY, LoopbackS3
from fed_dev.testing import Backend

from .test_write import frame, hudi_options

SESSION = """
import json, os, sys
os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
import fed_spark

path, jars, conf, storage = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
builder = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
builder = builder.config("spark.jars", jars)
for key, value in conf.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
fed_spark.register(spark, storage_options=storage)
native = fed_spark.read(spark, path, "region = 'r1'")  # auto: the JVM has S3A now
plan = native._jdf.queryExecution().executedPlan().toString()
rows = sorted(r["id"] for r in native.collect())
python = sorted(r["id"] for r in fed_spark.read(spark, path, "region = 'r1'", scan="python").collect())
paths = [r[0] for r in native.select("_metadata.file_path").distinct().collect()]
found = {"native": "FileScan parquet" in plan, "rows": rows, "same": rows == python}
found["schemes"] = sorted({p.split(":")[0] for p in paths})
found["buckets"] = sorted({p.split("/")[2] for p in paths})
print("RESULT", json.dumps(found))
"""


def test_the_native_scan_reads_s3_through_s3a(spark: SparkSession, s3_server: LoopbackS3) -> None:
    tables, storage = s3_server.create_bucket("s3a-tables"), s3_server.create_bucket("s3a-storage")
    backend = Backend("s3", f"{tables}/trips", storage, s3_server.storage_options())
    fed_spark.register(spark, storage_options=backend.storage_options)
    fed_spark.write(frame(spark, 0, 200), backend.table_path, hudi_options(backend))
    conf = s3a_conf(s3_server.endpoint_url, ACCESS_KEY, SECRET_KEY)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            SESSION,
            backend.table_path,
            ",".join(s3a_jars()),
            json.dumps(conf),
            json.dumps(backend.storage_options),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads([line for line in done.stdout.splitlines() if line.startswith("RESULT")][-1][7:])
    assert found["native"]  # Spark's Parquet reader, not the Python source
    assert found["rows"] == [i for i in range(200) if i % 4 == 1]
    assert found["same"]
    assert found["schemes"] == ["s3a"]
    assert found["buckets"] == [storage.removeprefix("s3://")]
