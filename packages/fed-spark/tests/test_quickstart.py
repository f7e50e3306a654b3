"""The README's first Quick start command, run as a user runs it: a new process."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[3] / "README.md"


def test_the_spark_demo_runs_from_a_new_process() -> None:
    section = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    job = re.findall(r"^\s*\$ (.+)$", section, flags=re.M)[0].split("&&")[-1].strip()
    assert job == "python3 -m fed_spark demo"  # installed in this environment already
    result = subprocess.run(
        [sys.executable, "-m", "fed_spark", "demo", "--rows", "5000"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert re.search(r"\d+ rows, all as expected", out), out
    assert re.search(r"bulk_insert\s+5,000 records", out)
    assert re.search(r"upsert\s+715 records\s+fare corrections", out)  # ids divisible by 7
    assert re.search(r"delete\s+455 records\s+cancelled trips", out)  # ids divisible by 11
    pruned = re.search(r"planned (\d+) file slices of (\d+) of (\d+) partitions", out)
    assert pruned is not None, out
    assert (pruned[2], pruned[3]) == ("3", "35")
    assert "Storage layout of the table: object_store" in out
    assert re.search(r"-> s3://lake-storage-[0-9a-f]{12}/[0-9a-f]{8}/trips-[0-9a-f-]{36}/country=", out)
