"""A real HiveServer2 (Apache Hive 4.0.1) on loopback, for tests.

Its jars come from Maven Central through ``mvn`` (cached in ``~/.m2``; the binary tarball is
not on Central). Iceberg tables are read by Iceberg's Hive runtime 1.4.3 through a small
Hive-4 adapter built from ``fed_dev/jvm/hive4-iceberg`` on first use; it stands in for the
Iceberg handler Hive 4's own distribution bundles, which is not on Maven Central, and reads
the same metastore entries. Queries run inside the server (local MapReduce); Java 17 runs
it. Clients connect with pyhive: ``hive.connect("127.0.0.1", port, username=...)``."""

from __future__ import annotations

import os
import time
from pathlib import Path

from fed_dev import maven, stack
from fed_dev.metastore import java, s3_settings
from fed_dev.process import ProcessServer, free_port, listening
from fed_dev.servers import S3Endpoint


def iceberg_adapter() -> Path:
    """The Hive-4 build of Iceberg's Hive runtime (built once, kept in the fed-dev cache)."""
    return maven.build(
        maven.JVM / "hive4-iceberg", "fed-hive4-iceberg-1.4.3", "Iceberg's Hive runtime for Hive 4"
    )


class HiveServer2(ProcessServer):
    """``start()`` (or a with-block); ``port`` is its Thrift port on 127.0.0.1. Tables come from
    the metastore at ``metastore_uri``; ``s3://`` paths go to the S3 endpoint ``s3``."""

    grace = 10.0

    def __init__(self, metastore_uri: str, s3: S3Endpoint | None = None) -> None:
        super().__init__()
        self.metastore_uri = metastore_uri
        self._s3 = s3
        self.port = 0

    @property
    def hive_log(self) -> Path:
        """Hive's own log (what the server did, query by query)."""
        return self.folder / "hive.log"

    def start(self, timeout: float = 180.0) -> HiveServer2:
        command = java()
        classpath = maven.classpath(maven.JVM / "hiveserver2-pom.xml", "HiveServer2")
        adapter = iceberg_adapter()
        conf = self.folder / "conf"
        conf.mkdir()
        self.port = free_port()
        site = stack.hiveserver2_site(
            metastore_uri=self.metastore_uri,
            host="127.0.0.1",
            port=self.port,
            scratch=str(self.folder / "scratch"),
            s3=None if self._s3 is None else s3_settings(self._s3),
        )
        (conf / "hive-site.xml").write_text(stack.hadoop_xml(site))
        main = "org.apache.hive.service.server.HiveServer2"
        # The adapter first: its classes replace the runtime's two that Hive 4 cannot use.
        path = os.pathsep.join([str(conf), str(adapter), classpath])
        logs = [f"-Dhive.log.dir={self.folder}", "-Dhive.log.file=hive.log"]  # not /tmp/$USER
        process = self.spawn([command, "-Xmx2g", *stack.HIVE_JAVA_OPTIONS, *logs, "-cp", path, main])
        deadline = time.monotonic() + timeout
        while not listening(self.port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise self.failed("HiveServer2")
            time.sleep(0.5)
        return self
