"""``fed_spark.register(spark)``: the ``fed`` source in a session's DataFrame API and SQL.

A session is a classic one (the JVM in this process, or a driver this process runs) or a
Spark Connect client (``SparkSession.builder.remote(...)``), which reaches the server only
through the DataFrame API and SQL: fed-spark uses nothing else on either. Where the two
differ (how a session is told apart, how many tasks a scan of the cluster gets) it is
decided here, once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

from pyspark.sql import SparkSession
from pyspark.sql.functions import max as max_of
from pyspark.sql.functions import spark_partition_id

from fed_spark.options import (
    DEFAULT_MAX_PARTITION_BYTES,
    DEFAULT_OPEN_COST_BYTES,
    FILTER_PUSHDOWN,
    MAX_PARTITION_BYTES,
    OPEN_COST_BYTES,
    PARALLELISM_KEYS,
    SessionSettings,
)
from fed_spark.source import FedDataSource
from fedcore.engine import StorageOptions
from fedcore.exceptions import ConfigError

if TYPE_CHECKING:
    from pyspark.sql.connect.session import SparkSession as ConnectSession

#: A classic session or a Spark Connect client's: fed-spark takes either.
AnySession: TypeAlias = "SparkSession | ConnectSession"


def register(spark: AnySession, storage_options: StorageOptions | None = None) -> type[FedDataSource]:
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
    spark.conf.set(FILTER_PUSHDOWN, "true")
    settings = settings_of(spark, storage_options)
    _registered[session_key(spark)] = settings
    # A subclass carries the settings: Spark pickles the class it registers (by value, as
    # it is made here) and instantiates it in its Python workers.
    source: type[FedDataSource] = type("FedDataSource", (FedDataSource,), {"settings": settings})
    source.__module__ = __name__
    spark.dataSource.register(source)
    return source


#: What each session was registered with (``session_key``): fed_spark.read and write use it.
_registered: dict[str, SessionSettings] = {}


def is_connect(spark: AnySession) -> bool:
    """Whether ``spark`` is a Spark Connect client's session (no JVM, no SparkContext here)."""
    return not isinstance(spark, SparkSession)


def session_key(spark: AnySession) -> str:
    """What tells sessions apart: a classic session's application (its sessions share the
    registration, as they share the JVM), a Spark Connect session's id (each is a session
    of its own on the server, its data sources its own)."""
    if is_connect(spark):
        return f"connect:{spark.session_id}"
    return str(spark.conf.get("spark.app.id"))


def registered(spark: AnySession) -> SessionSettings:
    """The settings ``register`` bound to ``spark`` (``ConfigError`` if it was not called)."""
    found = _registered.get(session_key(spark))
    if found is None:
        raise ConfigError("fed_spark.register", "call fed_spark.register(spark) before reading or writing")
    return found


def settings_of(spark: AnySession, storage_options: StorageOptions | None) -> SessionSettings:
    """What a session tells fed's reads and writes."""
    conf = spark.conf
    return SessionSettings(
        storage_options=storage_options,
        parallelism=parallelism(spark),
        max_partition_bytes=bytes_of(conf.get(MAX_PARTITION_BYTES), DEFAULT_MAX_PARTITION_BYTES),
        open_cost_bytes=bytes_of(conf.get(OPEN_COST_BYTES), DEFAULT_OPEN_COST_BYTES),
    )


def parallelism(spark: AnySession) -> int:
    """How many tasks a scan is spread over at least, as Spark's file sources take it:
    ``spark.sql.files.minPartitionNum``, else the leaf nodes' default parallelism (the
    cluster's cores, unless configured). A Spark Connect client cannot ask the cluster its
    cores: it counts the partitions of a range the server splits by that default (one
    small job, at registration; every partition of a range at least as long holds a row)."""
    for key in PARALLELISM_KEYS:
        value = spark.conf.get(key, None)
        if value:
            return max(1, int(value))
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    counted = spark.range(1 << 16).select(spark_partition_id().alias("p")).agg(max_of("p")).first()
    return int(counted[0]) + 1 if counted is not None and counted[0] is not None else 1


def bytes_of(text: Any, default: int) -> int:
    """Spark's byte sizes: ``134217728``, ``128m``, ``128MB``."""
    if text is None:
        return default
    value = str(text).strip().lower().removesuffix("b")
    units = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
    if value and value[-1] in units:
        return int(float(value[:-1]) * units[value[-1]])
    return int(value)
