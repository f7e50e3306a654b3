"""One local SparkSession (PySpark 3.5) with Apache Iceberg's Spark runtime and its AWS bundle
(S3FileIO, the Glue catalog), both fetched once with mvn into ``~/.m2``. Catalogs are set on
the running session by each test module (Spark makes a catalog on its first use)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from fed_dev import maven
from fed_dev.servers import ACCESS_KEY, REGION, SECRET_KEY

ICEBERG_VERSION = "1.10.0"
RUNTIME = f"org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:{ICEBERG_VERSION}:jar"
AWS_BUNDLE = f"org.apache.iceberg:iceberg-aws-bundle:{ICEBERG_VERSION}:jar"


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    jars = [
        maven.artifact(RUNTIME, "Apache Iceberg's Spark runtime"),
        maven.artifact(AWS_BUNDLE, "Iceberg's AWS bundle"),
    ]
    # The AWS SDK in the JVM finds the loopback server's (fake) credentials where a deployment
    # keeps its own: the environment the JVM starts with.
    os.environ.update(
        {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION}
    )
    session = (
        SparkSession.builder.master("local[2]")
        .appName("iceberg-reads-fed")
        .config("spark.jars", ",".join(str(jar) for jar in jars))
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    yield session
    session.stop()
