"""Apache Hudi's own Spark reader, one bundle per Hudi version, fetched once with Maven.

The bundles come from Maven Central through ``mvn dependency:get`` into the local Maven
repository (``~/.m2``), where every later run finds them. Each version writes and reads in
a process of its own (``hudi_job.py``): one JVM holds one Hudi on its class path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

#: Hudi releases whose Spark reader opens table-version 6 tables (fed's), Spark 3.5 builds.
HUDI_VERSIONS = ("0.15.0", "1.0.2")
ARTIFACT = "org.apache.hudi:hudi-spark3.5-bundle_2.12"
JOB = Path(__file__).with_name("hudi_job.py")


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


def run_hudi(version: str, job: dict[str, object]) -> dict[str, dict[str, Any]]:
    """Run ``job`` (writes, then reads) with Hudi ``version``'s Spark writer and reader in a
    process of its own (see ``hudi_job.py``): what it answered."""
    done = subprocess.run(
        [sys.executable, str(JOB), str(bundle(version))],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        pytest.fail(f"Hudi {version}'s Spark job failed to run:\n{done.stderr[-4000:]}")
    answer: dict[str, dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


class HudiSession:
    """Hudi ``version``'s Spark writer and reader in one process kept open (``hudi_job.py
    --serve``): ``run(job)`` as ``run_hudi`` does, without a new JVM per job."""

    def __init__(self, version: str, time_zone: str | None = None) -> None:
        """``time_zone``: the JVM's local time zone (``TZ``), which Hudi's writers make instant
        times in unless the table's config says UTC."""
        self.version = version
        self.process = subprocess.Popen(
            [sys.executable, str(JOB), str(bundle(version)), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "TZ": time_zone} if time_zone else None,
        )
        self._answer()  # the JVM is up

    def _answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                answer: dict[str, Any] = json.loads(line)
                return answer
        pytest.fail(f"Hudi {self.version}'s Spark session ended (exit {self.process.wait()})")

    def run(self, job: dict[str, object]) -> dict[str, dict[str, Any]]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()


def read_with_hudi(
    version: str, tables: dict[str, str | list[str]], country: str
) -> dict[str, dict[str, object]]:
    """What Hudi ``version``'s Spark reader returns for each table of trips (a path, or [path,
    query type]): ``{"rows": [[id, country, fare], ...], "pruned": rows with ``country``}``,
    or ``{"error": ...}`` where Hudi refused the table."""
    reads = {}
    for name, table in tables.items():
        path, query_type = (table, "snapshot") if isinstance(table, str) else table
        reads[name] = {
            "path": path,
            "query_type": query_type,
            "columns": ["id", "country", "fare"],
            "where": f"country = '{country}'",
        }
    answers = run_hudi(version, {"reads": reads})["reads"]
    return {
        name: {"rows": found["rows"], "pruned": found["count"]} if "rows" in found else found
        for name, found in answers.items()
    }
