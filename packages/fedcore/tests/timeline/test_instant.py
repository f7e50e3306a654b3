"""An instant's completion time: known only where a table version's names carry it, and never
part of what an instant is (its equality, hash and place in the timeline's order)."""

from __future__ import annotations

from fedcore.timeline import COMMIT, COMPLETED, INFLIGHT, Instant
from fedcore.timeline.layout import V6


def test_completion_time_takes_no_part_in_equality_hash_or_order() -> None:
    known = Instant("20260102030405678", COMMIT, COMPLETED, completion_time="20260102030409999")
    unknown = Instant("20260102030405678", COMMIT, COMPLETED)
    later = Instant("20260102030405679", COMMIT, COMPLETED, completion_time="20260102030405680")
    assert known == unknown
    assert hash(known) == hash(unknown)
    assert {known, unknown} == {unknown}
    # Requested-time order, even where completion times would order them the other way.
    assert sorted([later, known]) == [known, later]
    assert str(known) == str(unknown) == "20260102030405678 commit (completed)"


def test_version_6_names_carry_no_completion_time() -> None:
    for name in (
        "20260102030405678.commit",
        "20260102030405678.inflight",
        "20260102030405678.clean.requested",
    ):
        instant = V6.instants.parse(name)
        assert instant is not None
        assert instant.completion_time is None
    assert V6.instants.parse("20260102030405678.inflight") == Instant("20260102030405678", COMMIT, INFLIGHT)
