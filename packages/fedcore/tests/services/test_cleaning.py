"""Incremental cleaning: the clean after a commit looks only where the commit wrote."""

from __future__ import annotations

import random
from pathlib import Path

from fed_dev.testing import Backend
from fedcore import properties as P
from fedcore.services.cleaning import EMPTY_CLEAN_WINDOW, _doomed, clean, plan_clean
from fedcore.table import Table
from fedcore.timeline import CLEAN
from fedcore.write.client import WriteClient

from ..write.test_writes import make_table, rows, trips

COUNTRIES = ["us", "de", "fr", "br"]


def local(tmp_path: Path) -> Backend:
    return Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", {})


def full_plan(table: Table, earliest: str) -> dict[str, dict[str, int]]:
    """What a clean looking at every partition would delete."""
    found = {
        p: _doomed(files, earliest, table.handle.layout.log_files, table.handle.log_slicing(table.timeline()))
        for p, files in table.handle.file_index.files().items()
    }
    return {p: doomed for p, doomed in found.items() if doomed}


def test_incremental_clean_deletes_what_a_full_look_would(tmp_path: Path) -> None:
    table = make_table(local(tmp_path), **{P.CLEAN_AUTOMATIC: "false"})
    writer = WriteClient(table)
    writer.upsert(trips(range(40), [COUNTRIES[i % 4] for i in range(40)]))
    rng = random.Random(7)
    model = {i: (COUNTRIES[i % 4], 10.0 + i) for i in range(40)}
    cleans = 0
    written = [set(COUNTRIES)]  # partitions each write touched
    for step in range(14):
        country = rng.choice(COUNTRIES)
        ids = [i for i, (c, _) in sorted(model.items()) if c == country][: rng.randint(1, 5)] or [100 + step]
        if step == 6:
            writer.insert_overwrite(trips(ids, country, fare=500.0))
            model = {i: v for i, v in model.items() if v[0] != country}
        else:
            writer.upsert(trips(ids, country, fare=100.0 * step))
        model.update({i: (country, (500.0 if step == 6 else 100.0 * step) + i) for i in ids})
        written.append({country})

        plan = plan_clean(table.handle, 3)
        if plan is None:
            continue
        assert plan.doomed == full_plan(table, plan.earliest_retained)
        if cleans:
            # Past the first clean, only where the write that fell out of retention wrote.
            assert plan.partitions == {f"country={c}" for c in written[-4]}
        if clean(table.handle, 3).instant is not None:
            cleans += 1
        assert rows(table) == model
    assert cleans >= 10
    assert len(table.timeline().completed([CLEAN])) == cleans


def test_a_clean_that_deletes_nothing_is_recorded_once_its_window_is_long(tmp_path: Path) -> None:
    table = make_table(local(tmp_path), **{P.CLEAN_AUTOMATIC: "false"})
    writer = WriteClient(table)
    for i in range(3):
        writer.bulk_insert(trips([i]))
    assert clean(table.handle, 2).instant is not None  # the first clean looks at everything: worth recording
    for i in range(3, 3 + EMPTY_CLEAN_WINDOW):
        writer.bulk_insert(trips([i], "de"))  # new file groups only: nothing ever to delete
        plan = plan_clean(table.handle, 2)
        assert plan is not None
        assert plan.doomed == {}
        if plan.window < EMPTY_CLEAN_WINDOW:
            assert clean(table.handle, 2).instant is None
    assert clean(table.handle, 2).instant is not None
    assert plan_clean(table.handle, 2) is None  # the next one starts where that one left off
    assert len(table.timeline().completed([CLEAN])) == 2
