"""Apache Hudi's own Spark reader, one bundle per Hudi version, fetched once with Maven.

The bundles come from Maven Central through ``mvn dependency:get`` into the local Maven
repository (``~/.m2``), where every later run finds them. Each version writes and reads in
a process of its own (``hudi_job.py``): one JVM holds one Hudi on its class path. Also the
checks the suites share: Hudi's time travel against fedcore's (``check_time_travel``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from fedcore.exceptions import InstantNotRetainedError
from fedcore.table import Table

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


def session_fixture(versions: Sequence[str]) -> Any:
    """A module fixture: a ``HudiSession`` of each of ``versions`` in turn, kept open for the
    module's tests (one JVM per version, not per test); the name it is assigned to is its name."""

    @pytest.fixture(scope="module", params=versions)
    def session(request: pytest.FixtureRequest) -> Iterator[HudiSession]:
        """Hudi's Spark writer and reader of the version the parameter names."""
        opened = HudiSession(request.param)
        yield opened
        opened.close()

    return session


#: Hudi's refusal of time travel to an instant whose files its cleaner deleted.
CLEANED_UP = "Cleaner cleaned up the timestamp of interest"


def check_time_travel(
    run: Callable[[dict[str, object]], dict[str, dict[str, Any]]],
    table: Table,
    path: str,
    instants: Sequence[str],
    columns: list[str],
) -> int:
    """Hudi's reader (``run``: a job run by one Hudi version) and fedcore each read ``table`` (at
    ``path``) as of every one of ``instants``: where Hudi refuses an instant as cleaned, fedcore
    refuses it too (``InstantNotRetainedError``); elsewhere both return the same whole rows
    (``columns``), as multisets. How many instants Hudi answered."""
    reads = {
        instant: {
            "path": path,
            "query_type": "snapshot",
            "columns": columns,
            "options": {"as.of.instant": instant},
        }
        for instant in instants
    }
    answers = run({"reads": reads})["reads"]
    answered = 0
    for instant, answer in answers.items():
        if CLEANED_UP in answer.get("error", ""):
            with pytest.raises(InstantNotRetainedError, match="were cleaned at"):
                table.read(columns=columns, as_of=instant)
            continue
        assert "rows" in answer, (instant, answer)
        ours = table.read(columns=columns, as_of=instant)
        fed = zip(*(ours.column(c).to_pylist() for c in columns), strict=True)
        mine = Counter(json.dumps(list(row), default=str) for row in fed)
        assert mine == Counter(json.dumps(row, default=str) for row in answer["rows"]), (instant, answer)
        answered += 1
    return answered


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
