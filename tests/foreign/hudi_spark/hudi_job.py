"""Apache Hudi's own Spark writer and reader: what a user of Hudi would write and read.

Run in a process of its own per Hudi version (one JVM, one bundle on its class path):
``python hudi_job.py BUNDLE_JAR`` with a JSON object on stdin::

    {"writes": {name: {"path": P, "options": {hoodie keys}, "schema": "id long, ...",
                       "steps": [[operation, [row, ...]], ...]}},
     "reads": {name: {"path": P, "query_type": "snapshot" | "read_optimized" | "incremental",
                      "columns": [...], "where": "country = 'usa'" (optional),
                      "options": {reader options, such as "as.of.instant"} (optional)}},
     "timelines": {name: {"path": P}}}

Writes run first, each step an ``append`` of its rows (lists in ``schema``'s column order)
with ``hoodie.datasource.write.operation`` set to the step's operation; then the reads, then
the timelines (Hudi 1.x only) as Hudi's meta client loads them. It prints one JSON line:
``{"writes": {name: "ok" | "<Java exception>: <message>"}, "reads": {name: {"rows": [[...],
...], "count": N} | {"error": ...}}, "timelines": {name: {"active": [[requested, action,
completion], ...], "archived": [[requested, action, completion, detail], ...]} | {"error":
...}}}`` (rows sorted, nulls last; ``count``: rows matching ``where``; ``detail``: the number
of write statistics of an archived commit's metadata, of files a clean deleted, as Hudi reads
the archived bytes). Needs PySpark 3.5 (``tox -e hudi``) and Java 17.

``python hudi_job.py BUNDLE_JAR --serve`` keeps one JVM for many jobs: a job per line on
stdin, its answer a line on stdout, until stdin ends (a test interleaving Hudi's writes with
fed's pays for the JVM once).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession
from pyspark.sql.utils import CapturedException

#: Spark 3.5 on Java 17 needs these packages opened to it.
OPENS = ("java.lang", "java.lang.invoke", "java.nio", "java.util", "sun.nio.ch", "sun.util.calendar")


def session(bundle: str) -> SparkSession:
    options = " ".join(f"--add-opens=java.base/{package}=ALL-UNNAMED" for package in OPENS)
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.jars", bundle)
        .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        .config("spark.sql.extensions", "org.apache.spark.sql.hudi.HoodieSparkSessionExtension")
        .config("spark.driver.extraJavaOptions", options)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def java_error(exc: Exception) -> str:
    """A Java exception as Java names it (PySpark converted it, or py4j carried it)."""
    if isinstance(exc, CapturedException):
        origin = getattr(exc, "_origin", None)
        return str(origin.toString()) if origin is not None else f"{type(exc).__name__}: {exc.desc}"
    assert isinstance(exc, Py4JJavaError)
    return str(exc.java_exception.toString())


def write(spark: SparkSession, spec: dict[str, Any]) -> str:
    try:
        for operation, rows in spec["steps"]:
            frame = spark.createDataFrame(rows, spec["schema"])
            writer = frame.write.format("hudi").options(**spec["options"])
            writer.option("hoodie.datasource.write.operation", operation).mode("append").save(spec["path"])
    except (CapturedException, Py4JJavaError) as exc:
        return java_error(exc)
    return "ok"


def read(spark: SparkSession, spec: dict[str, Any]) -> dict[str, object]:
    try:
        reader = spark.read.format("hudi").option("hoodie.datasource.query.type", spec["query_type"])
        reader = reader.options(**spec.get("options", {}))
        frame = reader.load(spec["path"]).select(*spec["columns"])
        rows = sorted((list(row) for row in frame.collect()), key=_order)
        where = spec.get("where")
        return {"rows": rows, "count": frame.where(where).count() if where else len(rows)}
    except (CapturedException, Py4JJavaError) as exc:
        return {"error": java_error(exc)}


def timelines(spark: SparkSession, spec: dict[str, Any]) -> dict[str, object]:
    """The active and the archived timeline (Hudi 1.x's LSM history) as Hudi's meta client
    loads them; every archived instant's metadata read as Hudi reads it."""
    try:
        jvm = spark._jvm  # type: ignore[attr-defined]
        conf = jvm.org.apache.hudi.hadoop.fs.HadoopFSUtils.getStorageConf(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
        meta = jvm.org.apache.hudi.common.table.HoodieTableMetaClient.builder()
        meta = meta.setConf(conf).setBasePath(spec["path"]).build()
        active = [
            [i.requestedTime(), i.getAction(), i.getCompletionTime()]
            for i in meta.getActiveTimeline().filterCompletedInstants().getInstants()
        ]
        archive = meta.getArchivedTimeline()
        archive.loadCompletedInstantDetailsInMemory()  # a clean's metadata is read only from these
        archived = []
        for instant in archive.getInstants():
            if instant.getAction() == "clean":
                detail = archive.readCleanMetadata(instant).getTotalFilesDeleted()
            else:
                stats = archive.readCommitMetadata(instant).getPartitionToWriteStats()
                detail = sum(stats.get(partition).size() for partition in stats.keySet())
            archived.append(
                [instant.requestedTime(), instant.getAction(), instant.getCompletionTime(), detail]
            )
        return {"active": active, "archived": archived}
    except (CapturedException, Py4JJavaError) as exc:
        return {"error": java_error(exc)}


def _order(row: list[Any]) -> list[tuple[bool, Any]]:
    """Rows in their values' order, a null after every value of its column."""
    return [(value is None, 0 if value is None else value) for value in row]


def run(spark: SparkSession, job: dict[str, dict[str, Any]]) -> str:
    writes = {name: write(spark, spec) for name, spec in job.get("writes", {}).items()}
    reads = {name: read(spark, spec) for name, spec in job.get("reads", {}).items()}
    lines = {name: timelines(spark, spec) for name, spec in job.get("timelines", {}).items()}
    return json.dumps({"writes": writes, "reads": reads, "timelines": lines}, default=str)


def main() -> None:
    bundle, serve = sys.argv[1], "--serve" in sys.argv[2:]
    spark = session(bundle)
    try:
        if not serve:
            print(run(spark, json.load(sys.stdin)))
            return
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            if line.strip():
                print(run(spark, json.loads(line)), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
