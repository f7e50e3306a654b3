"""End to end: the pipeline's PySpark job (``fed_dev.pipeline``) writes one object-store
table through fed-spark (bulk insert, upsert, delete), each commit publishing itself to the
metastore (Hudi's hive_sync keys); after each write the same three queries (a pruned
aggregate, a point lookup on a data column, a full count) run through Trino (on the metastore,
and on fed's REST catalog serving the table from its warehouse, as the docker stack does), Hive
and Spark. Each gives fedcore's rows, the next query after a write sees it, and no engine lists
the storage bucket (requests counted at the S3 server)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

import fed_hive
import fed_trino
from fed_dev import pipeline
from fed_dev.hive import HiveServer2
from fed_dev.metastore import HiveMetastore
from fed_dev.servers import ACCESS_KEY, REGION, SECRET_KEY, LoopbackS3
from fed_dev.trino import TrinoServer
from fedcore import Table
from fedcore.catalog.metastore import HIVE_STORAGE_HANDLER, Metastore

Engine = Callable[[str], list[tuple[Any, ...]]]


def engines(
    spark: SparkSession, trino_server: TrinoServer, hiveserver2: HiveServer2, path: str
) -> dict[str, Engine]:
    # Neither client publishes: what they see is what the writes' own syncs registered.
    trino = fed_trino.connect(
        port=trino_server.port, schema=pipeline.DATABASE, read_your_writes=False
    ).cursor()
    hive = fed_hive.connect(
        port=hiveserver2.port, database=pipeline.DATABASE, read_your_writes=False
    ).cursor()

    def on_trino(sql: str) -> list[tuple[Any, ...]]:
        trino.execute(sql)
        return pipeline.normal(trino.fetchall())

    def on_hive(sql: str) -> list[tuple[Any, ...]]:
        hive.execute(sql)
        return pipeline.normal(hive.fetchall())

    # Trino's catalog on fed's REST catalog, which serves the table from its warehouse: each
    # load publishes what the table moved on to, so the client needs no sync of its own.
    rest = fed_trino.connect(
        port=trino_server.port, catalog="fed", schema=pipeline.DATABASE, read_your_writes=False
    ).cursor()

    def on_trino_rest(sql: str) -> list[tuple[Any, ...]]:
        rest.execute(sql)
        return pipeline.normal(rest.fetchall())

    return {
        "trino": on_trino,
        "trino through fed serve": on_trino_rest,
        "hive": on_hive,
        "spark": lambda sql: pipeline.on_spark(spark, path, sql),
    }


def test_every_engine_answers_the_same_queries_after_each_spark_write_without_listing(
    spark: SparkSession,
    trino_server: TrinoServer,
    hiveserver2: HiveServer2,
    metastore: HiveMetastore,
    s3_server: LoopbackS3,
    rest_warehouse: str,
) -> None:
    # The table lies in the REST catalog's warehouse, as the docker stack's does.
    storage = s3_server.create_bucket("e2e-storage")
    path = f"{rest_warehouse}/{pipeline.DATABASE}/{pipeline.TABLE}"
    bucket = storage.removeprefix("s3://")
    asked: list[str] = []

    def ask_every_engine(operation: str, table: Table) -> None:
        want = pipeline.expected(table)
        for engine, ask in engines(spark, trino_server, hiveserver2, path).items():
            for name, sql in pipeline.QUERIES.items():
                s3_server.requests.reset()
                assert ask(sql) == want[name], (operation, engine, name)
                listed = [p for p in s3_server.requests.listed if p.startswith(bucket)]
                assert not listed, (operation, engine, name, listed)
                asked.append(f"{operation}/{engine}/{name}")

    table, warnings = pipeline.run(
        spark,
        path,
        storage,
        metastore.uri,
        storage_options=s3_server.storage_options(),
        after_write=ask_every_engine,
    )
    assert warnings == []  # every commit published itself
    assert len(asked) == 3 * 4 * 3
    final = pipeline.expected(table)
    assert final["point lookup"] == []  # ride 7 was deleted
    upserted = [1000.0 + i for i in range(0, 60, 3) if i != 9]  # ride 9 deleted
    assert final["pruned aggregate"] == [(len(upserted), round(sum(upserted), 6))]
    assert final["full count"] == [(58,)]


def test_the_stacks_job_command_writes_publishes_and_reports_spark_equal_to_fedcore(
    metastore: HiveMetastore, s3_server: LoopbackS3, tmp_path: Path
) -> None:
    """What the docker stack's job container runs, as a process of its own."""
    tables, storage = s3_server.create_bucket("job-tables"), s3_server.create_bucket("job-storage")
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": REGION,
        "PYSPARK_PYTHON": sys.executable,
    }
    command = [
        sys.executable, "-m", "fed_dev", "pipeline",
        f"--table={tables}/{pipeline.TABLE}", f"--storage={storage}", f"--metastore={metastore.uri}",
        f"--s3-endpoint={s3_server.endpoint_url}", "--database=lake_job",
    ]  # fmt: skip
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "warning" not in done.stderr, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert [line for line in lines if line.endswith(": committed")] == [
        f"{operation}: committed" for operation, _ in pipeline.batches()
    ]
    spark = [line.split(":", 1)[1].strip() for line in lines if line.strip().startswith("spark:")]
    fed = [line.split(":", 1)[1].strip() for line in lines if line.strip().startswith("fedcore:")]
    assert len(spark) == len(pipeline.QUERIES)
    assert spark == fed
    assert fed[2] == "[(58,)]"
    with Metastore(metastore.uri) as client:
        params = client.parameters("lake_job", pipeline.TABLE) or {}
    assert params["storage_handler"] == HIVE_STORAGE_HANDLER
