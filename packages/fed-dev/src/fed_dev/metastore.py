"""A real Hive metastore (Apache Hive 4.0.1, or 3.1.3; standalone, Thrift) on loopback, for tests.

Its jars come from Maven Central through ``mvn`` (cached in ``~/.m2``: about 420 MB the first
time for 4.0.1, 90 MB for 3.1.3, then nothing); it keeps its catalog in an embedded Derby
database in a temporary folder and serves ``s3://`` locations through Hadoop's S3A, pointed at
a loopback S3 server when one is given. Java 17 (the machine's default ``java``) runs it.

Hive 3.1.3's schema (its lock tables included) is made by Hive's own schema tool from the
scripts in Hive's binary release (an artifact of the same Maven coordinates). Hive 3.1.3 has
no bind-host setting: it listens on every interface while a test runs, where 4.0.1 listens on
127.0.0.1 only."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

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


#: Hive 3.1.3's binary release, for the schema scripts its schema tool runs.
HIVE3_RELEASE = "org.apache.hive:hive-standalone-metastore:3.1.3:tar.gz:bin"
_HIVE3_SCRIPTS = "scripts/metastore/upgrade/derby"


class HiveMetastore(ProcessServer):
    """``start()`` (or a with-block) runs it; ``uri`` is its ``thrift://127.0.0.1:PORT``.
    ``version``: "4.0.1" or "3.1.3"; ``txn_timeout_s`` (3.1.3): how long a lock nobody
    heartbeats lives (Hive's default is 300 s)."""

    grace = 10.0

    def __init__(
        self, s3: S3Endpoint | None = None, version: str = "4.0.1", txn_timeout_s: int = 300
    ) -> None:
        super().__init__()
        if version not in ("4.0.1", "3.1.3"):
            raise ValueError(f"Hive metastore {version}: 4.0.1 or 3.1.3")
        self._s3 = s3
        self.version = version
        self.txn_timeout_s = txn_timeout_s
        self.port = 0

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> HiveMetastore:
        command = java()
        conf = self.folder / "conf"
        conf.mkdir()
        self.port = free_port()
        s3 = None if self._s3 is None else s3_settings(self._s3)
        warehouse = f"file://{self.folder / 'warehouse'}"
        flags: list[str] = ["-Xmx1g"]
        env = None
        if self.version == "4.0.1":
            classpath = maven.classpath(maven.JVM / "metastore-pom.xml", "the Hive metastore")
            site = stack.metastore_site(
                database=str(self.folder / "db"), warehouse=warehouse, host="127.0.0.1", port=self.port, s3=s3
            )
        else:
            classpath = maven.classpath(maven.JVM / "metastore3-pom.xml", "the Hive 3.1.3 metastore")
            site = stack.metastore3_site(
                database=str(self.folder / "db"),
                warehouse=warehouse,
                port=self.port,
                s3=s3,
                txn_timeout_s=self.txn_timeout_s,
            )
            flags += stack.HIVE_JAVA_OPTIONS
            env = {**os.environ, "METASTORE_HOME": str(_hive3_scripts())}
        (conf / "metastore-site.xml").write_text(stack.hadoop_xml(site))
        path = f"{conf}{os.pathsep}{classpath}"
        if self.version == "3.1.3":
            self._make_schema([command, *flags, "-cp", path], env)
        main = "org.apache.hadoop.hive.metastore.HiveMetaStore"
        process = self.spawn([command, *flags, "-cp", path, main], env=env)
        deadline = time.monotonic() + timeout
        while not listening(self.port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise self.failed(f"the Hive {self.version} metastore")
            time.sleep(0.3)
        return self

    def _make_schema(self, java_command: list[str], env: dict[str, str] | None) -> None:
        tool = "org.apache.hadoop.hive.metastore.tools.MetastoreSchemaTool"
        done = self.spawn([*java_command, tool, "-initSchema", "-dbType", "derby"], env=env)
        try:
            code: int | None = done.wait(300)
        except subprocess.TimeoutExpired:
            code = None
        if code != 0:
            raise self.failed("Hive 3.1.3's schema tool")  # (stops it)


def _hive3_scripts() -> Path:
    """A folder holding Hive 3.1.3's Derby schema scripts (``METASTORE_HOME`` for its schema
    tool), taken once from its binary release."""
    home = maven.CACHE / "hive-standalone-metastore-3.1.3"
    if (home / _HIVE3_SCRIPTS / "hive-schema-3.1.0.derby.sql").is_file():
        return home
    release = maven.artifact(HIVE3_RELEASE, "Hive 3.1.3's schema scripts")
    staging = home.with_name(home.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(release) as archive:
        for member in archive.getmembers():
            relative = member.name.split("/", 1)[-1]
            if member.isfile() and relative.startswith(_HIVE3_SCRIPTS + "/") and ".." not in relative:
                source = archive.extractfile(member)
                assert source is not None  # a regular file
                target = staging / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(source.read())
    shutil.rmtree(home, ignore_errors=True)
    staging.rename(home)
    return home
