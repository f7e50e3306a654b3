"""Each service's settings, in one place: the in-process servers the tests start
(``fed_dev.metastore``, ``fed_dev.hive``, ``fed_dev.trino``) and the files of the ``docker/``
stack are both written from these functions, so what the compose stack runs is what the
tests ran. Only addresses, folders and credentials differ, and they are parameters here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from xml.sax.saxutils import escape

#: Iceberg's default catalog in HiveServer2 reads each table's metadata_location from the
#: metastore (fed_dev/jvm/hive4-iceberg; Hive 4's bundled handler does this natively).
HIVE_ICEBERG_CATALOG = "fed.hive4.MetastoreCatalog"
ICEBERG_CATALOG_KEY = "iceberg.catalog.default_iceberg.catalog-impl"
HIVE_VERSION = "4.0.1"
TRINO_VERSION = "476"


@dataclass(frozen=True)
class S3Settings:
    """How a JVM service reaches the S3 server: endpoint URL, credentials, region."""

    endpoint_url: str
    access_key: str
    secret_key: str
    region: str


def hadoop_s3(s3: S3Settings) -> dict[str, str]:
    """Hadoop's S3A, serving ``s3://`` and ``s3a://`` paths (metastore, HiveServer2)."""
    return {
        "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "fs.s3a.endpoint": s3.endpoint_url,
        "fs.s3a.endpoint.region": s3.region,
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": str(s3.endpoint_url.startswith("https:")).lower(),
        "fs.s3a.access.key": s3.access_key,
        "fs.s3a.secret.key": s3.secret_key,
    }


def metastore_site(
    *, database: str, warehouse: str, host: str, port: int, s3: S3Settings | None
) -> dict[str, str]:
    """The standalone metastore's ``metastore-site.xml``: an embedded Derby ``database`` folder."""
    settings = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={database};create=true",
        "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
        "datanucleus.schema.autoCreateAll": "true",
        "metastore.schema.verification": "false",
        "metastore.warehouse.dir": warehouse,
        "metastore.thrift.bind.host": host,
        "metastore.thrift.port": str(port),
        "metastore.event.db.notification.api.auth": "false",
    }
    return settings | (hadoop_s3(s3) if s3 is not None else {})


def metastore3_site(
    *, database: str, warehouse: str, port: int, s3: S3Settings | None, txn_timeout_s: int
) -> dict[str, str]:
    """A Hive 3.1 standalone metastore's ``metastore-site.xml``: its schema made by Hive's schema
    tool (the lock tables are not DataNucleus's), and stale locks expired: a lock nobody has
    heartbeated for ``txn_timeout_s`` goes (Hive 3.1 runs the housekeeper that expires them
    only beside a compactor, which needs hive-exec, unless it is named an always-on task)."""
    settings = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={database};create=true",
        "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
        "javax.jdo.option.ConnectionUserName": "APP",
        "javax.jdo.option.ConnectionPassword": "derby",
        "metastore.schema.verification": "true",
        "metastore.warehouse.dir": warehouse,
        "metastore.thrift.port": str(port),
        "metastore.event.db.notification.api.auth": "false",
        # The default proxy is hive-exec's, which a standalone metastore does not have.
        "metastore.expression.proxy": "org.apache.hadoop.hive.metastore.DefaultPartitionExpressionProxy",
        "metastore.task.threads.always": "org.apache.hadoop.hive.metastore.events.EventCleanerTask,"
        "org.apache.hadoop.hive.metastore.txn.AcidHouseKeeperService",
        "metastore.compactor.initiator.on": "false",
        "metastore.txn.timeout": f"{txn_timeout_s}s",
        "metastore.timedout.txn.reaper.start": "1s",
        "metastore.timedout.txn.reaper.interval": "2s",
    }
    return settings | (hadoop_s3(s3) if s3 is not None else {})


def hiveserver2_site(
    *, metastore_uri: str, host: str, port: int, scratch: str, s3: S3Settings | None
) -> dict[str, str]:
    """HiveServer2's ``hive-site.xml``: tables from the metastore, queries run in-process
    (local MapReduce), Hive's default authentication (NONE: any user name), Iceberg tables opened
    through their ``metadata_location``."""
    settings = {
        "hive.metastore.uris": metastore_uri,
        "hive.server2.thrift.bind.host": host,
        "hive.server2.thrift.port": str(port),
        "hive.server2.enable.doAs": "false",
        "hive.server2.webui.port": "0",
        "hive.server2.logging.operation.enabled": "false",
        "hive.execution.engine": "mr",
        "mapreduce.framework.name": "local",
        "fs.defaultFS": "file:///",
        "hive.fetch.task.conversion": "more",
        "hive.scheduled.queries.executor.enabled": "false",
        # No polling of the metastore's notification log (a cache for replication, unused here).
        "hive.notification.event.poll.interval": "0s",
        "hive.stats.autogather": "false",
        "hive.stats.column.autogather": "false",
        "hive.compute.query.using.stats": "false",
        # Iceberg 1.4's record reader does not produce Hive 4's vectorized batches.
        "hive.vectorized.execution.enabled": "false",
        "hive.exec.scratchdir": f"{scratch}/hdfs",
        "hive.exec.local.scratchdir": f"{scratch}/local",
        "hive.downloaded.resources.dir": f"{scratch}/resources",
        "hive.querylog.location": f"{scratch}/querylog",
        "hive.async.log.enabled": "false",
        ICEBERG_CATALOG_KEY: HIVE_ICEBERG_CATALOG,
    }
    return settings | (hadoop_s3(s3) if s3 is not None else {})


#: JDK packages HiveServer2 reflects into: Java 17 must open them to it.
_OPENED = (
    "java.lang",
    "java.lang.reflect",
    "java.lang.invoke",
    "java.io",
    "java.net",
    "java.nio",
    "java.util",
    "java.util.concurrent",
    "java.util.concurrent.atomic",
    "java.util.regex",
    "java.time",
    "java.text",
    "java.math",
    "java.security",
    "javax.security.auth",
    "sun.nio.ch",
    "sun.nio.cs",
    "sun.security.action",
    "sun.util.calendar",
    "jdk.internal.misc",
)
#: Java 17 flags HiveServer2 needs.
HIVE_JAVA_OPTIONS = (
    *(f"--add-opens=java.base/{package}=ALL-UNNAMED" for package in _OPENED),
    "--add-opens=java.sql/java.sql=ALL-UNNAMED",
    "-Djava.net.preferIPv4Stack=true",
)


def trino_iceberg_catalog(*, metastore_uri: str, s3: S3Settings) -> dict[str, str]:
    """Trino's ``etc/catalog/iceberg.properties``: Iceberg tables from the metastore, read-only
    (the view is fed's to write), ``s3://`` through Trino's native S3 client."""
    return {
        "connector.name": "iceberg",
        "iceberg.catalog.type": "hive_metastore",
        "iceberg.security": "read_only",
        **trino_s3(metastore_uri=metastore_uri, s3=s3),
    }


def trino_s3(*, metastore_uri: str, s3: S3Settings) -> dict[str, str]:
    """The metastore and S3 settings Trino's Iceberg and Hive connectors share."""
    return {**trino_native_s3(s3), "hive.metastore.uri": metastore_uri}


def trino_native_s3(s3: S3Settings) -> dict[str, str]:
    """``s3://`` through Trino's native S3 client, with the reader's own credentials."""
    return {
        "fs.native-s3.enabled": "true",
        "s3.endpoint": s3.endpoint_url,
        "s3.path-style-access": "true",
        "s3.region": s3.region,
        "s3.aws-access-key": s3.access_key,
        "s3.aws-secret-key": s3.secret_key,
    }


def trino_rest_catalog(*, uri: str, token: str, s3: S3Settings) -> dict[str, str]:
    """A Trino catalog on fed's Iceberg REST catalog (``fed serve``): tables listed and
    loaded there (each load shows the table's latest commit), read-only, with a bearer token."""
    return {
        "connector.name": "iceberg",
        "iceberg.catalog.type": "rest",
        "iceberg.rest-catalog.uri": uri,
        "iceberg.rest-catalog.security": "OAUTH2",
        "iceberg.rest-catalog.oauth2.token": token,
        "iceberg.security": "read_only",
        **trino_native_s3(s3),
    }


def trino_glue_catalog(*, endpoint_url: str | None, s3: S3Settings) -> dict[str, str]:
    """A Trino catalog on AWS Glue (where ``fed sync --glue`` registers views), read-only;
    ``endpoint_url``: Glue's endpoint when not the region's (a loopback server's)."""
    settings = {
        "connector.name": "iceberg",
        "iceberg.catalog.type": "glue",
        "hive.metastore.glue.region": s3.region,
        "hive.metastore.glue.aws-access-key": s3.access_key,
        "hive.metastore.glue.aws-secret-key": s3.secret_key,
        "iceberg.security": "read_only",
        **trino_native_s3(s3),
    }
    if endpoint_url is not None:
        settings["hive.metastore.glue.endpoint-url"] = endpoint_url
    return settings


def hadoop_xml(settings: Mapping[str, str]) -> str:
    """Settings as a Hadoop configuration file (``*-site.xml``)."""
    body = "".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
        for k, v in settings.items()
    )
    return f"<configuration>\n{body}</configuration>\n"


def properties(settings: Mapping[str, str]) -> str:
    """Settings as a Java properties file (Trino's ``etc/``)."""
    return "".join(f"{k}={v}\n" for k, v in settings.items())
