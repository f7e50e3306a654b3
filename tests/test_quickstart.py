"""The README's Quick start: two commands (the first, the Spark demo, runs in fed-spark's
tests); and fed-dev's demo of fedcore, run as a user runs it: a new process."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def quickstart_commands() -> list[str]:
    text = README.read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\s*\$ (.+)$", section, flags=re.M)


def test_readme_quick_start_has_exactly_two_commands() -> None:
    commands = quickstart_commands()
    assert len(commands) == 2
    assert "tox" in commands[1]


def test_fedcore_demo_runs_from_a_new_process() -> None:
    assert quickstart_commands()[0].split("&&")[-1].strip() == "python3 -m fed_spark demo"
    argv = [sys.executable, "-m", "fed_dev", "demo"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=240, check=False)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "rows, all as expected" in out
    pruned = re.search(r"from (\d+) of (\d+) file slices \((\d+) of 35 partitions\)", out)
    assert pruned is not None, out
    assert int(pruned[1]) < int(pruned[2])
    assert pruned[3] == "3"
    assert "Storage layout of the table: object_store" in out
    assert re.search(r"-> s3://lake-storage-[0-9a-f]{12}/[0-9a-f]{8}/trips-[0-9a-f-]{36}/country=", out)
