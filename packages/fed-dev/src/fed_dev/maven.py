"""JVM parts from Maven Central, through ``mvn``: a classpath resolved from a pom, one artifact,
a jar built from source. Everything lands in ``~/.m2`` (or the fed-dev cache) once; later runs
fetch nothing."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from importlib.abc import Traversable
from importlib.resources import files
from pathlib import Path

JVM = files("fed_dev") / "jvm"
#: Some Hive poms name repositories of their own: every request goes to Maven Central instead.
_SETTINGS = JVM / "settings.xml"
CACHE = Path(os.environ.get("FED_DEV_CACHE", Path.home() / ".cache" / "fed-dev"))
#: Bindings that would fight log4j2's for slf4j (the servers log through log4j2).
_EXCLUDED_JARS = ("slf4j-log4j12", "slf4j-reload4j", "reload4j")


class MissingToolError(RuntimeError):
    """A program a server needs (java, mvn) is not installed, or Maven could not fetch a part."""


def _mvn(*args: str, what: str) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MissingToolError(f"{what} comes from Maven Central: install Maven (mvn)")
    with tempfile.NamedTemporaryFile("wb", suffix=".xml") as settings:
        settings.write(_SETTINGS.read_bytes())
        settings.flush()
        done = subprocess.run(
            [mvn, "-q", "-B", "-s", settings.name, *args], capture_output=True, text=True, check=False
        )
    if done.returncode != 0:
        raise MissingToolError(f"mvn failed on {what}: {done.stdout[-3000:]}{done.stderr[-1000:]}")


def classpath(pom: Traversable, what: str) -> str:
    """The runtime classpath of ``pom``'s dependencies (its jars fetched once into ~/.m2).

    Resolved by ``mvn`` once per version of the pom (5 to 6 s of Maven's start and
    resolution, for every server a test session starts), then kept in the fed-dev cache; a
    kept classpath one of whose jars has left ~/.m2 is resolved (and fetched) again."""
    data = pom.read_bytes()
    kept = CACHE / f"classpath-{hashlib.sha256(data + _SETTINGS.read_bytes()).hexdigest()[:16]}.txt"
    jars = kept.read_text().split(os.pathsep) if kept.is_file() else []
    if not jars or not all(os.path.isfile(jar) for jar in jars):
        with tempfile.TemporaryDirectory(prefix="fed-pom-") as folder:
            copy = Path(folder) / "pom.xml"
            copy.write_bytes(data)
            out = Path(folder) / "classpath.txt"
            _mvn("-f", str(copy), "dependency:build-classpath", f"-Dmdep.outputFile={out}", what=what)
            jars = out.read_text().strip().split(os.pathsep)
        CACHE.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=CACHE, prefix=".classpath-", delete=False) as staged:
            staged.write(os.pathsep.join(jars))
        os.replace(staged.name, kept)  # whole or not at all: sessions may start servers at once
    return os.pathsep.join(j for j in jars if not any(x in j for x in _EXCLUDED_JARS))


def artifact(coordinates: str, what: str) -> Path:
    """The file of one Maven artifact (``group:artifact:version:type[:classifier]``) in ~/.m2."""
    group, name, version, kind, *classifier = coordinates.split(":")
    suffix = "".join(f"-{c}" for c in classifier)
    path = (
        Path.home()
        / ".m2"
        / "repository"
        / group.replace(".", "/")
        / name
        / version
        / f"{name}-{version}{suffix}.{kind}"
    )
    if not path.exists():
        _mvn("dependency:get", f"-Dartifact={coordinates}", "-Dtransitive=false", what=what)
    if not path.exists():
        raise MissingToolError(f"mvn did not fetch {coordinates} ({what})")
    return path


def build(project: Traversable, jar_name: str, what: str) -> Path:
    """The jar a Maven project under ``fed_dev/jvm`` packages, built once per version of its
    sources and kept in the fed-dev cache."""
    sources = sorted(_walk(project))
    digest = hashlib.sha256()
    for relative, entry in sources:
        digest.update(relative.encode() + b"\0" + entry.read_bytes())
    target = CACHE / f"{jar_name}-{digest.hexdigest()[:12]}.jar"
    if target.exists():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fed-build-", dir=CACHE) as folder:
        for relative, entry in sources:
            out = Path(folder, relative)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(entry.read_bytes())
        _mvn("-f", str(Path(folder) / "pom.xml"), "package", what=what)
        built = Path(folder) / "target" / f"{jar_name}.jar"
        if not built.exists():
            raise MissingToolError(f"mvn built no {built.name} ({what})")
        shutil.move(str(built), target)
    return target


def _walk(entry: Traversable, prefix: str = "") -> list[tuple[str, Traversable]]:
    out = []
    for child in entry.iterdir():
        relative = f"{prefix}{child.name}"
        if child.is_dir():
            out += _walk(child, relative + "/")
        elif not child.name.endswith((".pyc",)):
            out.append((relative, child))
    return out
