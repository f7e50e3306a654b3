"""``fed_spark.register(spark)``: the ``fed`` source in a session's DataFrame API and SQL."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from fed_spark.options import DEFAULT_MAX_PARTITION_BYTES, DEFAULT_OPEN_COST_BYTES, SessionSettings
from fed_spark.source import FedDataSource
from fedcore.engine import StorageOptions
from fedcore.exceptions import ConfigError

MAX_PARTITION_BYTES = "spark.sql.files.maxPartitionBytes"
OPEN_COST_BYTES = "spark.sql.files.openCostInBytes"


def register(spark: SparkSession, storage_options: StorageOptions | None = None) -> type[FedDataSource]:
    """Make ``format("fed")`` and ``USING fed`` available in ``spark``.

    Args:
        spark: the session.
        storage_options: fsspec options per protocol or storage root (as ``fedcore.load_table``
            takes them), e.g. ``{"s3": {"client_kwargs": {"endpoint_url": ...}}}``; a read's
            ``fed.storage.*`` options go over them.

    Returns:
        The registered data source class (bound to the session's settings).
    """
    # Without it Spark never offers a Python source its filters, and nothing is pruned.
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    settings = settings_of(spark, storage_options)
    _registered[spark.sparkContext.applicationId] = settings
    # A subclass carries the settings: Spark pickles the class it registers (by value, as
    # it is made here) and instantiates it in its Python workers.
    source: type[FedDataSource] = type("FedDataSource", (FedDataSource,), {"settings": settings})
    source.__module__ = __name__
    spark.dataSource.register(source)
    return source


#: What each session (by application id) was registered with: fed_spark.read and write use it.
_registered: dict[str, SessionSettings] = {}


def registered(spark: SparkSession) -> SessionSettings:
    """The settings ``register`` bound to ``spark`` (``ConfigError`` if it was not called)."""
    found = _registered.get(spark.sparkContext.applicationId)
    if found is None:
        raise ConfigError("fed_spark.register", "call fed_spark.register(spark) before reading or writing")
    return found


def settings_of(spark: SparkSession, storage_options: StorageOptions | None) -> SessionSettings:
    """What a session tells fed's reads and writes."""
    conf = spark.conf
    return SessionSettings(
        storage_options=storage_options,
        parallelism=spark.sparkContext.defaultParallelism,
        max_partition_bytes=_bytes(conf.get(MAX_PARTITION_BYTES), DEFAULT_MAX_PARTITION_BYTES),
        open_cost_bytes=_bytes(conf.get(OPEN_COST_BYTES), DEFAULT_OPEN_COST_BYTES),
    )


def _bytes(text: Any, default: int) -> int:
    """Spark's byte sizes: ``134217728``, ``128m``, ``128MB``."""
    if text is None:
        return default
    value = str(text).strip().lower().removesuffix("b")
    units = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
    if value and value[-1] in units:
        return int(float(value[:-1]) * units[value[-1]])
    return int(value)
