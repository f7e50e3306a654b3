"""A real Hive metastore (Apache Hive 4.0.1, standalone, Thrift) on loopback, for tests.

Its jars come from Maven Central through ``mvn`` (cached in ``~/.m2``: about 420 MB the first
time, then nothing); it keeps its catalog in an embedded Derby database in a temporary
folder and serves ``s3://`` locations through Hadoop's S3A, pointed at a loopback S3 server
when one is given. Java 17 (the machine's default ``java``) runs it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from importlib.resources import files
from pathlib import Path
from xml.sax.saxutils import escape

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


class HiveMetastore:
    """``start()`` (or a with-block) runs it; ``uri`` is its ``thrift://127.0.0.1:PORT``."""

    def __init__(self, s3: S3Endpoint | None = None) -> None:
        self._s3 = s3
        self._process: subprocess.Popen[bytes] | None = None
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        self.port = 0

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        assert self._folder is not None
        return Path(self._folder.name) / "metastore.log"

    def start(self, timeout: float = 120.0) -> HiveMetastore:
        java = shutil.which("java")
        if java is None:
            raise MissingToolError("the Hive metastore runs on Java 17: install a JDK (java)")
        classpath = metastore_classpath()
        self._folder = tempfile.TemporaryDirectory(prefix="fed-metastore-")
        root = Path(self._folder.name)
        conf = root / "conf"
        conf.mkdir()
        self.port = _free_port()
        (conf / "metastore-site.xml").write_text(_site(root, self.port, self._s3))
        self._process = subprocess.Popen(
            [
                java,
                "-Xmx1g",
                "-cp",
                f"{conf}{os.pathsep}{classpath}",
                "org.apache.hadoop.hive.metastore.HiveMetaStore",
            ],
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
            cwd=root,
        )
        deadline = time.monotonic() + timeout
        while not _listening(self.port):
            if self._process.poll() is not None or time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-3000:]
                self.stop()
                raise RuntimeError(f"the Hive metastore did not start:\n{tail}")
            time.sleep(0.3)
        return self

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None

    def __enter__(self) -> HiveMetastore:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0
