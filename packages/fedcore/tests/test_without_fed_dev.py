"""fedcore's tests that need none of fed-dev (no loopback servers, no lab) run without it
installed: the root conftest imports fed-dev only inside the fixtures that start its servers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parents[2]

#: Runs pytest with every ``fed_dev`` import failing, as where fed-dev is not installed.
_WITHOUT_FED_DEV = """
import sys, pytest

class NoFedDev:
    def find_spec(self, name, path=None, target=None):
        if name == "fed_dev" or name.startswith("fed_dev."):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, NoFedDev())
sys.exit(pytest.main(sys.argv[1:]))
"""


def _pytest_without_fed_dev(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", _WITHOUT_FED_DEV, "-q", "-p", "no:cacheprovider", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_fedcore_tests_that_need_no_fed_dev_run_without_it() -> None:
    standalone = sorted(
        path
        for path in TESTS.rglob("test_*.py")
        if "fed_dev" not in path.read_text() and path != Path(__file__)
    )
    assert len(standalone) >= 10, standalone  # most of the model, key and format tests
    collected = _pytest_without_fed_dev("--collect-only", *map(str, standalone))
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-3000:]
    # A few whole modules run, fixtures and all (tmp_path tables, Hudi's test tables).
    ran = _pytest_without_fed_dev(
        *(str(TESTS / name) for name in ("table/test_table_config.py", "log/test_log_merge.py"))
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    summary = ran.stdout.splitlines()[-1]
    assert " passed" in summary, summary
    assert "skipped" not in summary, summary
