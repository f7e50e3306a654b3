"""A real Trino server (476) on loopback, for tests and benchmarks.

Trino's server and its connector plugins come from Maven Central through ``mvn`` (cached in
``~/.m2``; unpacked once under ``~/.cache/fed-dev``); it runs on Java 24 or later (the
Temurin 25 JDK these machines carry beside the default Java 17, or ``TRINO_JAVA_HOME``). One
node, coordinator and worker at once, with an Iceberg catalog (and optionally a Hive
catalog) on a Hive metastore and a loopback S3 server."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
import uuid
import zipfile
from collections.abc import Mapping
from pathlib import Path

from fed_dev import maven, stack
from fed_dev.maven import MissingToolError
from fed_dev.metastore import s3_settings
from fed_dev.process import ProcessServer, free_port
from fed_dev.servers import S3Endpoint

VERSION = stack.TRINO_VERSION
#: Maven coordinates of the server and of each connector plugin used.
_SERVER = f"io.trino:trino-server-core:{VERSION}:tar.gz"
_PLUGINS = {"iceberg": f"io.trino:trino-iceberg:{VERSION}:zip", "hive": f"io.trino:trino-hive:{VERSION}:zip"}


def java_home() -> str:
    """A JDK of version 24 or later: ``TRINO_JAVA_HOME``, else one under /usr/lib/jvm."""
    given = os.environ.get("TRINO_JAVA_HOME")
    candidates = (
        [given]
        if given
        else sorted(glob.glob("/usr/lib/jvm/*-2[4-9]*")) + sorted(glob.glob("/usr/lib/jvm/*-3[0-9]*"))
    )
    for home in candidates:
        if home and Path(home, "bin", "java").exists():
            return home
    raise MissingToolError(
        "Trino 476 runs on Java 24 or later: none found under /usr/lib/jvm; install one (e.g. Temurin 25) "
        "or set TRINO_JAVA_HOME to its folder"
    )


def trino_home(plugins: tuple[str, ...] = ("iceberg",)) -> Path:
    """Trino's server with the given connector plugins, unpacked once into the cache."""
    home = maven.CACHE / f"trino-server-{VERSION}"
    if not (home / "bin" / "launcher").exists():
        tarball = maven.artifact(_SERVER, "Trino's server")
        maven.CACHE.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="trino-", dir=maven.CACHE))
        subprocess.run(["tar", "xzf", str(tarball), "-C", str(staging)], check=True)
        unpacked = next(staging.iterdir())
        unpacked.rename(home)
        shutil.rmtree(staging)
    for name in plugins:
        target = home / "plugin" / f"trino-{name}-{VERSION}"
        if not target.exists():
            staging = Path(tempfile.mkdtemp(prefix=f"plugin-{name}-", dir=home / "plugin"))
            with zipfile.ZipFile(maven.artifact(_PLUGINS[name], f"Trino's {name} plugin")) as archive:
                archive.extractall(staging)
            next(staging.iterdir()).rename(target)
            shutil.rmtree(staging)
    return home


class TrinoServer(ProcessServer):
    """``start()`` (or a with-block); ``port`` is its HTTP port on 127.0.0.1. Catalogs:
    ``iceberg`` (and ``hive`` with ``hive=True``) on the metastore at ``metastore_uri``,
    reading ``s3://`` through the S3 endpoint ``s3``; ``iceberg``: more Iceberg catalog settings;
    ``catalogs``: more catalogs, by name (``stack.trino_rest_catalog``'s, say)."""

    def __init__(
        self,
        metastore_uri: str,
        s3: S3Endpoint,
        *,
        hive: bool = False,
        iceberg: Mapping[str, str] | None = None,
        catalogs: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        super().__init__()
        self.metastore_uri = metastore_uri
        self.s3 = s3
        self.hive = hive
        self.iceberg = dict(iceberg or {})  # more settings of the Iceberg catalog
        self.catalogs = {name: dict(settings) for name, settings in (catalogs or {}).items()}
        self.port = 0

    def start(self, timeout: float = 180.0) -> TrinoServer:
        home = trino_home(("iceberg", "hive") if self.hive else ("iceberg",))
        java = java_home()
        root = self.folder
        etc = root / "etc"
        (etc / "catalog").mkdir(parents=True)
        self.port = free_port()
        _write(etc / "node.properties", {
            "node.environment": "test", "node.id": str(uuid.uuid4()), "node.data-dir": str(root / "data"),
        })  # fmt: skip
        _write(etc / "config.properties", {
            "coordinator": "true",
            "node-scheduler.include-coordinator": "true",
            "http-server.http.port": str(self.port),
            "discovery.uri": f"http://127.0.0.1:{self.port}",
            "query.max-memory": "1GB",
            "query.max-memory-per-node": "1GB",
        })  # fmt: skip
        (etc / "jvm.config").write_text(
            "\n".join(
                [
                    "-server",
                    "-Xmx3G",
                    "-XX:+UseG1GC",
                    "-XX:+ExitOnOutOfMemoryError",
                    "-Djdk.attach.allowAttachSelf=true",
                ]
            )
            + "\n"
        )
        s3 = s3_settings(self.s3)
        catalog = stack.trino_iceberg_catalog(metastore_uri=self.metastore_uri, s3=s3)
        _write(etc / "catalog" / "iceberg.properties", {**catalog, **self.iceberg})
        if self.hive:
            hive = {"connector.name": "hive", **stack.trino_s3(metastore_uri=self.metastore_uri, s3=s3)}
            _write(etc / "catalog" / "hive.properties", hive)
        for name, settings in self.catalogs.items():
            _write(etc / "catalog" / f"{name}.properties", settings)
        env = {**os.environ, "JAVA_HOME": java, "PATH": f"{java}/bin:{os.environ.get('PATH', '')}"}
        launcher = [str(home / "bin" / "launcher"), "run", f"--etc-dir={etc}", f"--data-dir={root / 'data'}"]
        process = self.spawn(launcher, env)
        deadline = time.monotonic() + timeout
        while not self._ready():
            if process.poll() is not None or time.monotonic() > deadline:
                raise self.failed("Trino")
            time.sleep(0.5)
        return self

    def _ready(self) -> bool:
        """Started, and answering queries: a node that says it is no longer starting may not
        have announced itself, or a catalog, yet ("No nodes available to run query"), so a
        query must run, and one that scans each catalog (its information schema)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/info", timeout=2) as response:
                if json.load(response).get("starting") is not False:
                    return False
            names = ["iceberg", *(["hive"] if self.hive else []), *self.catalogs]
            queries = ["SELECT 1", *(f"SELECT count(*) FROM {n}.information_schema.schemata" for n in names)]
            return all(self._answers(sql) for sql in queries)
        except (OSError, ValueError):
            return False

    def _answers(self, sql: str) -> bool:
        """Whether Trino runs ``sql`` to the end without an error (its HTTP protocol, followed
        page by page)."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/v1/statement",
            data=sql.encode(),
            headers={"X-Trino-User": "fed-dev"},
            method="POST",
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with urllib.request.urlopen(request, timeout=10) as response:
                page = json.load(response)
            if page.get("error"):
                return False
            following = page.get("nextUri")
            if not following:
                return True
            request = urllib.request.Request(following, headers={"X-Trino-User": "fed-dev"})
        return False


def _write(path: Path, settings: Mapping[str, str]) -> None:
    path.write_text(stack.properties(settings))
