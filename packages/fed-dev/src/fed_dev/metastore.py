"""A real Hive metastore (Apache Hive 4.0.1, standalone, Thrift) on loopback, for tests.

Its jars come from Maven Central through ``mvn`` (cached in ``~/.m2``: about 420 MB the first
time, then nothing); it keeps its catalog in an embedded Derby database in a temporary
folder and serves ``s3://`` locations through Hadoop's S3A, pointed at a loopback S3 server
when one is given. Java 17 (the machine's default ``java``) runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from importlib.resources import files
from pathlib import Path
from xml.sax.saxutils import escape

from fed_dev.process import ProcessServer, free_port, listening
from fed_dev.servers import ACCESS_KEY, REGION, SECRET_KEY, S3Endpoint

_POM = files("fed_dev") / "jvm" / "metastore-pom.xml"
#: Bindings that would fight log4j2's for slf4j (the server logs to its own file).
_EXCLUDED_JARS = ("slf4j-log4j12", "slf4j-reload4j", "reload4j")


class MissingToolError(RuntimeError):
    """A program the metastore needs (java, mvn) is not installed."""


def metastore_classpath() -> str:
    """The metastore's classpath, resolved by Maven (its jars fetched once into ~/.m2)."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MissingToolError("the Hive metastore's jars come from Maven Central: install Maven (mvn)")
    with tempfile.TemporaryDirectory(prefix="fed-metastore-pom-") as folder:
        pom = Path(folder) / "pom.xml"
        pom.write_bytes(_POM.read_bytes())
        out = Path(folder) / "classpath.txt"
        done = subprocess.run(
            [mvn, "-q", "-f", str(pom), "dependency:build-classpath", f"-Dmdep.outputFile={out}"],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0 or not out.exists():
            raise MissingToolError(f"mvn could not resolve the Hive metastore's jars: {done.stdout[-2000:]}")
        jars = [
            j for j in out.read_text().strip().split(os.pathsep) if not any(x in j for x in _EXCLUDED_JARS)
        ]
    return os.pathsep.join(jars)


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
        java = shutil.which("java")
        if java is None:
            raise MissingToolError("the Hive metastore runs on Java 17: install a JDK (java)")
        classpath = metastore_classpath()
        conf = self.folder / "conf"
        conf.mkdir()
        self.port = free_port()
        (conf / "metastore-site.xml").write_text(_site(self.folder, self.port, self._s3))
        main = "org.apache.hadoop.hive.metastore.HiveMetaStore"
        process = self.spawn([java, "-Xmx1g", "-cp", f"{conf}{os.pathsep}{classpath}", main])
        deadline = time.monotonic() + timeout
        while not listening(self.port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise self.failed("the Hive metastore")
            time.sleep(0.3)
        return self


def _site(root: Path, port: int, s3: S3Endpoint | None) -> str:
    settings = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'db'};create=true",
        "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
        "datanucleus.schema.autoCreateAll": "true",
        "metastore.schema.verification": "false",
        "metastore.warehouse.dir": f"file://{root / 'warehouse'}",
        "metastore.thrift.bind.host": "127.0.0.1",
        "metastore.thrift.port": str(port),
        "metastore.event.db.notification.api.auth": "false",
    }
    if s3 is not None:  # the metastore's own credentials for the locations it checks
        settings |= {
            "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
            "fs.s3a.endpoint": s3.endpoint_url,
            "fs.s3a.endpoint.region": REGION,
            "fs.s3a.path.style.access": "true",
            "fs.s3a.connection.ssl.enabled": "false",
            "fs.s3a.access.key": ACCESS_KEY,
            "fs.s3a.secret.key": SECRET_KEY,
        }
    body = "".join(
        f"<property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
        for k, v in settings.items()
    )
    return f"<configuration>\n{body}</configuration>\n"
