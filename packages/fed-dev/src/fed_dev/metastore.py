"""A real Hive metastore (Apache Hive 4.0.1, standalone, Thrift) on loopback, for tests.

Its jars come from Maven Central through ``mvn`` (cached in ``~/.m2``: about 420 MB the first
time, then nothing); it keeps its catalog in an embedded Derby database in a temporary
folder and serves ``s3://`` locations through Hadoop's S3A, pointed at a loopback S3 server
when one is given. Java 17 (the machine's default ``java``) runs it."""

from __future__ import annotations

import os
import shutil
import time

from fed_dev import maven, stack
from fed_dev.maven import MissingToolError
from fed_dev.process import ProcessServer, free_port, listening
from fed_dev.servers import ACCESS_KEY, REGION, SECRET_KEY, S3Endpoint


def s3_settings(s3: S3Endpoint) -> stack.S3Settings:
    """How a JVM service reaches the loopback S3 server ``s3``."""
    return stack.S3Settings(s3.endpoint_url, ACCESS_KEY, SECRET_KEY, REGION)


def java() -> str:
    """The default ``java`` (17), which runs Hive."""
    found = shutil.which("java")
    if found is None:
        raise MissingToolError("Hive runs on Java 17: install a JDK (java)")
    return found


class HiveMetastore(ProcessServer):
    """``start()`` (or a with-block) runs it; ``uri`` is its ``thrift://127.0.0.1:PORT``."""

    grace = 10.0

    def __init__(self, s3: S3Endpoint | None = None) -> None:
        super().__init__()
        self._s3 = s3
        self.port = 0

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> HiveMetastore:
        command = java()
        classpath = maven.classpath(maven.JVM / "metastore-pom.xml", "the Hive metastore")
        conf = self.folder / "conf"
        conf.mkdir()
        self.port = free_port()
        site = stack.metastore_site(
            database=str(self.folder / "db"),
            warehouse=f"file://{self.folder / 'warehouse'}",
            host="127.0.0.1",
            port=self.port,
            s3=None if self._s3 is None else s3_settings(self._s3),
        )
        (conf / "metastore-site.xml").write_text(stack.hadoop_xml(site))
        main = "org.apache.hadoop.hive.metastore.HiveMetaStore"
        process = self.spawn([command, "-Xmx1g", "-cp", f"{conf}{os.pathsep}{classpath}", main])
        deadline = time.monotonic() + timeout
        while not listening(self.port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise self.failed("the Hive metastore")
            time.sleep(0.3)
        return self
