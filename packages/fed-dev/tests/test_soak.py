"""The soak (``fed_dev.soak``): four writer processes write one table continuously under the
shortest retention, copy-on-write and merge-on-read (compacted inline), on local files and S3.
Every write is committed and visible or refused as a conflict with a concurrent write, the
table is the replay of the committed writes in instant order, and ``fed verify`` passes.

``tox -e soak`` runs these (the fedcore env leaves them out): each run writes for at most
``SECONDS`` (S3 on loopback takes all of it, local files finish their writes first): about two
minutes for the four on a 2-core machine (local 10-17 s each, S3 about 50 s each).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from fed_dev.soak import run_soak
from fed_dev.testing import Backend
from fedcore import properties as P

#: How long the writers write, at most; each writes at most ``WRITES`` writes.
SECONDS: Final = 40.0
WRITES: Final = 40
WRITERS: Final = 4
#: Committed writes a run must reach for its checks to mean something (local files: about 145 of
#: 160; S3: 70 to 90 of 75 to 100, fewer on a loaded machine).
MIN_COMMITTED: Final = 30


@pytest.mark.parametrize("table_type", [P.TABLE_TYPE_COW, P.TABLE_TYPE_MOR], ids=["cow", "mor"])
def test_writers_soak_with_every_write_committed_or_a_conflict(
    backend: Backend, table_type: P.TableType, tmp_path: Path
) -> None:
    report = run_soak(
        backend.table_path,
        f"{backend.storage_path}/soak",
        backend.storage_options,
        table_type=table_type,
        writers=WRITERS,
        writes=WRITES,
        seconds=SECONDS,
        label=f"{table_type.lower()} on {backend.name}",
        log_folder=tmp_path / "writers",  # each write's JSON line, kept for a failed run
    )
    print(report.summary())
    assert not report.violations, report.details()
    assert report.committed >= MIN_COMMITTED, report.summary()
    contenders = {o.writer for o in report.outcomes if o.committed and o.kind == "upsert-shared"}
    assert len(contenders) >= 2, f"writers {contenders} alone committed upserts of the shared keys"
    assert report.cleans >= 1, report.summary()
    assert report.archived >= 1, report.summary()
    if table_type == P.TABLE_TYPE_MOR:
        assert report.compactions >= 1, report.summary()
