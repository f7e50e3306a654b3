"""A Python with PySpark 4 and fed-spark beside the hudi env's PySpark 3.5 (Hudi's), so that
tables written through fed-spark's write paths can be read by Apache Hudi's own readers.

Made once with ``venv`` and pip (fedcore and fed-spark installed from this checkout, in
editable mode), in ``$FED_SPARK_VENV`` (tox gives ``.tox/hudi-fed-spark``), and reused while
the packages' pyproject files are unchanged.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("packages/fedcore", "packages/fed-spark")


@pytest.fixture(scope="session")
def fed_spark_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The interpreter of a virtualenv with fed-spark (and PySpark 4) from this checkout."""
    home = os.environ.get("FED_SPARK_VENV")
    venv = Path(home) if home else tmp_path_factory.mktemp("fed-spark-venv")
    stamp = hashlib.sha256(b"".join((ROOT / p / "pyproject.toml").read_bytes() for p in PACKAGES))
    marker = venv / "fed-test-stamp"
    python = venv / "bin" / "python"
    if marker.is_file() and marker.read_text() == stamp.hexdigest() and python.is_file():
        return str(python)
    for argv in (
        [sys.executable, "-m", "venv", "--clear", str(venv)],
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            *(a for p in PACKAGES for a in ("-e", str(ROOT / p))),
        ],
    ):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=1200)
        if done.returncode != 0:
            pytest.fail(f"making the fed-spark virtualenv failed: {' '.join(argv)}\n{done.stderr[-3000:]}")
    marker.write_text(stamp.hexdigest())
    return str(python)
