"""A real HiveServer2 on loopback, for tests: Apache Hive 4.0.1 (the default) or 3.1.3.

Its jars come from Maven Central through ``mvn`` (cached in ``~/.m2``; the binary tarballs are
not on Central). Queries run inside the server (local MapReduce); Java 17 runs it. Clients
connect with pyhive: ``hive.connect("127.0.0.1", port, username=...)``.

Both read Iceberg tables with Iceberg's Hive runtime 1.4.3, which opens a table through the
``metadata_location`` in its metastore entry:

- Hive 4.0.1 through a small adapter built from ``fed_dev/jvm/hive4-iceberg`` on first use; it
  stands in for the Iceberg handler Hive 4's own distribution bundles, which is not on Central.
- Hive 3.1.3 with the runtime unchanged (it targets Hive 2 and 3). Hive 3 predates Java 9, and
  three things stop it on Java 17, each fixed here rather than by a Java 8 the machine lacks:
  it casts its class loader to ``URLClassLoader`` (so it runs inside one, ``jvm/hive3``); its
  Kryo registration reads ``ArrayList$SubList.parentOffset``, a field Java 9 renamed, so every
  filter pushdown and MapReduce plan fails; and its binary Thrift transport ignores
  ``hive.server2.thrift.bind.host`` (a local variable shadows the field) and listens on every
  interface. The last two are patched in Hive's own sources (its ``-sources`` jars on Central),
  compiled once into the fed-dev cache and put before Hive's jars."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path

from fed_dev import maven, stack
from fed_dev.maven import MissingToolError
from fed_dev.metastore import java, s3_settings
from fed_dev.process import ProcessServer, free_port, listening
from fed_dev.servers import S3Endpoint

VERSIONS = ("4.0.1", "3.1.3")
_MAIN = "org.apache.hive.service.server.HiveServer2"


def iceberg_adapter() -> Path:
    """The Hive-4 build of Iceberg's Hive runtime (built once, kept in the fed-dev cache)."""
    return maven.build(
        maven.JVM / "hive4-iceberg", "fed-hive4-iceberg-1.4.3", "Iceberg's Hive runtime for Hive 4"
    )


def _shade(source: str) -> str:
    """hive-exec ships Kryo and Objenesis relocated under ``org.apache.hive.``."""
    source = re.sub(r"(?<![\w.])com\.esotericsoftware", "org.apache.hive.com.esotericsoftware", source)
    return re.sub(r"(?<![\w.])org\.objenesis", "org.apache.hive.org.objenesis", source)


#: (artifact, source file, [(text, replacement)]): each text must occur exactly once.
_HIVE3_PATCHES = (
    (
        "hive-exec",
        "org/apache/hadoop/hive/ql/exec/SerializationUtilities.java",
        [
            (
                '_parentOffsetField = clazz.getDeclaredField( "parentOffset" );',
                # Java 9+: the sublist's parent is "root" and its offset "offset".
                "java.lang.reflect.Field offset; "
                'try { offset = clazz.getDeclaredField( "parentOffset" ); } '
                "catch (NoSuchFieldException java9) { "
                '_parentField = clazz.getDeclaredField( "root" ); '
                'offset = clazz.getDeclaredField( "offset" ); } '
                "_parentOffsetField = offset;",
            )
        ],
    ),
    (
        "hive-service",
        "org/apache/hive/service/cli/thrift/ThriftCLIService.java",
        # Assign the field (the binary transport binds to it), not a new local.
        [
            (
                '    String hiveHost = System.getenv("HIVE_SERVER2_THRIFT_BIND_HOST");',
                '    hiveHost = System.getenv("HIVE_SERVER2_THRIFT_BIND_HOST");',
            )
        ],
    ),
)


def hive3_classes(classpath: str) -> tuple[Path, Path]:
    """(the launcher's classes, Hive 3.1.3's patched classes), compiled once into the fed-dev
    cache from ``jvm/hive3`` and Hive's ``-sources`` jars."""
    launcher = maven.JVM / "hive3" / "UrlLauncher.java"
    digest = hashlib.sha256(launcher.read_bytes() + repr(_HIVE3_PATCHES).encode()).hexdigest()[:12]
    target = maven.CACHE / f"hive3-classes-{digest}"
    if target.exists():
        return target / "launcher", target / "patches"
    javac = shutil.which("javac")
    if javac is None:
        raise MissingToolError("HiveServer2 3.1.3's patches are compiled: install a JDK (javac)")
    maven.CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fed-hive3-", dir=maven.CACHE) as folder:
        work = Path(folder)
        sources = []
        for name, member, edits in _HIVE3_PATCHES:
            jar = maven.artifact(f"org.apache.hive:{name}:3.1.3:jar:sources", f"Hive 3.1.3's {name} sources")
            with zipfile.ZipFile(jar) as archive:
                text = archive.read(member).decode()
            for old, new in edits:
                if text.count(old) != 1:
                    raise MissingToolError(f"{name} 3.1.3's {member} is not the one patched here")
                text = text.replace(old, new)
            out = work / "src" / member
            out.parent.mkdir(parents=True)
            out.write_text(_shade(text) if name == "hive-exec" else text)
            sources.append(str(out))
        out = work / "out"
        _javac(javac, "--release", "8", "-cp", classpath, "-d", str(out / "patches"), *sources)
        copy = work / "UrlLauncher.java"
        copy.write_bytes(launcher.read_bytes())
        _javac(javac, "--release", "11", "-d", str(out / "launcher"), str(copy))
        out.rename(target)
    return target / "launcher", target / "patches"


def _javac(javac: str, *args: str) -> None:
    done = subprocess.run([javac, "-nowarn", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise MissingToolError(f"javac failed on HiveServer2 3.1.3's classes: {done.stderr[-3000:]}")


class HiveServer2(ProcessServer):
    """``start()`` (or a with-block); ``port`` is its Thrift port on 127.0.0.1. Tables come from
    the metastore at ``metastore_uri``; ``s3://`` paths go to the S3 endpoint ``s3``.
    ``version``: "4.0.1" or "3.1.3"."""

    grace = 10.0

    def __init__(self, metastore_uri: str, s3: S3Endpoint | None = None, version: str = "4.0.1") -> None:
        super().__init__()
        if version not in VERSIONS:
            raise ValueError(f"HiveServer2 {version}: one of {', '.join(VERSIONS)}")
        self.metastore_uri = metastore_uri
        self.version = version
        self._s3 = s3
        self.port = 0

    @property
    def hive_log(self) -> Path:
        """Hive's own log (what the server did, query by query)."""
        return self.folder / "hive.log"

    def start(self, timeout: float = 180.0) -> HiveServer2:
        command = java()
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
        logs = [f"-Dhive.log.dir={self.folder}", "-Dhive.log.file=hive.log"]  # not /tmp/$USER
        if self.version == "4.0.1":
            classpath = maven.classpath(maven.JVM / "hiveserver2-pom.xml", "HiveServer2")
            # The adapter first: its classes replace the runtime's two that Hive 4 cannot use.
            path = os.pathsep.join([str(conf), str(iceberg_adapter()), classpath])
            main = ["-cp", path, _MAIN]
        else:
            classpath = maven.classpath(maven.JVM / "hiveserver2-3-pom.xml", "HiveServer2 3.1.3")
            launcher, patches = hive3_classes(classpath)
            # The runtime's own default catalog (a HiveCatalog on hive.metastore.uris) reads the
            # entry; no adapter. The results cache wants a world-writable /tmp/hive: off.
            del site[stack.ICEBERG_CATALOG_KEY]
            site["hive.query.results.cache.enabled"] = "false"
            listed = self.folder / "classpath.txt"
            listed.write_text(os.pathsep.join([str(conf), str(patches), classpath]))
            main = ["-cp", str(launcher), "fed.hive3.UrlLauncher", str(listed), _MAIN]
        (conf / "hive-site.xml").write_text(stack.hadoop_xml(site))
        process = self.spawn([command, "-Xmx2g", *stack.HIVE_JAVA_OPTIONS, *logs, *main])
        deadline = time.monotonic() + timeout
        while not listening(self.port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise self.failed(f"HiveServer2 {self.version}")
            time.sleep(0.5)
        return self
