"""Apache Hudi's own Spark reader, one bundle per Hudi version, fetched once with Maven.

The bundles come from Maven Central through ``mvn dependency:get`` into the local Maven
repository (``~/.m2``), where every later run finds them. Each version reads in a process
of its own (``read_with_hudi.py``): one JVM holds one Hudi on its class path.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

#: Hudi releases whose Spark reader opens table-version 6 tables (fed's), Spark 3.5 builds.
HUDI_VERSIONS = ("0.15.0", "1.0.2")
ARTIFACT = "org.apache.hudi:hudi-spark3.5-bundle_2.12"
READER = Path(__file__).with_name("read_with_hudi.py")


def bundle(version: str) -> Path:
    """The bundle jar of ``version`` in the local Maven repository, fetched if missing."""
    group, artifact = ARTIFACT.split(":")
    jar = Path.home() / ".m2" / "repository" / group.replace(".", "/") / artifact / version
    jar = jar / f"{artifact}-{version}.jar"
    if jar.is_file():
        return jar
    mvn = shutil.which("mvn")
    if mvn is None:
        pytest.fail(f"{jar} is missing and Maven (mvn) is not on PATH to fetch it from Maven Central")
    fetched = subprocess.run(
        [mvn, "-q", "-B", "dependency:get", f"-Dartifact={ARTIFACT}:{version}", "-Dtransitive=false"],
        capture_output=True,
        text=True,
    )
    if fetched.returncode != 0 or not jar.is_file():
        pytest.fail(
            f"mvn could not fetch {ARTIFACT}:{version}: {fetched.stdout[-2000:]}{fetched.stderr[-2000:]}"
        )
    return jar


def read_with_hudi(
    version: str, tables: dict[str, str | list[str]], country: str
) -> dict[str, dict[str, object]]:
    """What Hudi ``version``'s Spark reader returns for each table (see ``read_with_hudi.py``)."""
    done = subprocess.run(
        [sys.executable, str(READER), str(bundle(version)), country],
        input=json.dumps(tables),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        pytest.fail(f"Hudi {version}'s reader failed to run:\n{done.stderr[-4000:]}")
    answers: dict[str, dict[str, object]] = json.loads(done.stdout.strip().splitlines()[-1])
    return answers
