"""Instant times in the table's timeline zone (``hoodie.table.timeline.timezone``).

Apache Hudi writes ``LOCAL`` into the tables it creates (and assumes it when the key is
absent): each writer makes instant times from its local clock. fed made them in UTC on every
table, so beside a Hudi writer in a zone west of UTC, Hudi's later commits sorted before
fed's (a newer record version read as the older one), and east of UTC a dead fed writer's
instant looked alive for hours. These tests run in such zones (``TZ``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from fed_dev.testing import Backend, trips
from fedcore import properties as P
from fedcore.commit.transaction import Transaction, is_failed, roll_back_failed_writes
from fedcore.table import Table
from fedcore.timeline import COMMIT, parse_instant_time

from ..write.test_writes import make_table


@pytest.fixture
def local(tmp_path: Path) -> Backend:
    return Backend("local", f"file://{tmp_path}/tables/trips", f"file://{tmp_path}/storage", None)


@pytest.fixture
def zone(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """This process's local zone for the test (``TZ``), restored after it."""
    monkeypatch.setenv("TZ", request.param)
    time.tzset()
    yield request.param
    monkeypatch.undo()
    time.tzset()


def _made_at(table: Table) -> datetime:
    """When the table's latest instant was made, read in the table's zone."""
    latest = table.timeline().completed()[-1]
    return parse_instant_time(latest.time, table.config.timeline_zone)


@pytest.mark.parametrize("zone", ["America/New_York", "Asia/Tokyo"], indirect=True)
@pytest.mark.parametrize("kept", ["LOCAL", "UTC"])
def test_instant_times_are_made_in_the_tables_zone(local: Backend, zone: str, kept: str) -> None:
    table = make_table(local, **{P.TIMELINE_TIMEZONE: kept})
    table.upsert(trips([1], "us"))
    instant = table.timeline().completed()[-1].time
    now = datetime.now(timezone.utc)
    assert abs((_made_at(table) - now).total_seconds()) < 60
    wall = datetime.now().astimezone() if kept == "LOCAL" else now  # what the instant spells
    assert (
        abs((datetime.strptime(instant, "%Y%m%d%H%M%S%f") - wall.replace(tzinfo=None)).total_seconds()) < 60
    )


@pytest.mark.parametrize("zone", ["Asia/Tokyo"], indirect=True)
def test_a_dead_writer_on_a_local_table_east_of_utc_expires_on_time(local: Backend, zone: str) -> None:
    """Read as UTC, its instant time lay 9 hours ahead: never failed before then."""
    table = make_table(local, **{P.TIMELINE_TIMEZONE: "LOCAL"})
    table.upsert(trips([1], "us"))
    dead = Transaction(table.handle, COMMIT)
    dead.begin()
    assert dead.heartbeat is not None
    dead.heartbeat.stop()  # it died: its heartbeat file stays, nothing beats it
    instant = table.timeline().pending()[0]
    time.sleep(table.handle.heartbeat_interval_ms * (table.handle.heartbeat_tolerable_misses + 2) / 1000)
    assert is_failed(table.handle, instant)
    assert roll_back_failed_writes(table.handle) == [instant.time]
    assert not table.timeline().pending()
