"""Random sequences of writes against a plain-Python model of Hudi's write semantics.

Each example creates a table (key ``id`` int64, partition ``p``, ordering ``ts``, data ``v``
and Hudi's ``_hoodie_is_deleted``), runs a random sequence of bulk inserts, inserts,
upserts, deletes and (merge-on-read) compactions whose inputs come in random Arrow types
(integer keys as int32, int64 or whole float64, as pandas makes them of a column with a
null; partitions as string, large string or dictionary), with keys repeated within a batch,
delete markers and ordering ties; after every write the table must read exactly as the
model says, as a multiset of whole rows with their record keys and partition paths, and its
key and partition columns keep their types.

The model is Hudi 0.15's (checked against Hudi's own writer in ``tox -e hudi``): an upsert
first combines a batch's records of one key (the greatest ordering value, the later on a
tie), then applies each to the stored record by the payload (``latest``: it replaces it, or
deletes it when marked deleted; ``ordering``: likewise unless the stored record's ordering
value is greater); a record marked deleted is never inserted; an insert writes its records
as they are but those marked deleted, a bulk insert writes every record; a delete removes
the keys it names. Inserts take keys the table has never held (a key inserted twice is two
records, and what a later upsert of it does depends on which file Hudi's index finds first).
Merge-on-read tables get ordering values that grow from one write to the next: Hudi combines
a slice's log records by ordering value before it merges them onto the base record, so
a write older than the one before it would decide by file layout, not by the model's order.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedcore import properties as P
from fedcore.log.merge import IS_DELETED
from fedcore.table import Table, create_table

SCHEMA = pa.schema(
    [("id", pa.int64()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.int64()), (IS_DELETED, pa.bool_())]
)
COLUMNS = ["_hoodie_record_key", "_hoodie_partition_path", *SCHEMA.names]
PARTITIONS = ("a", "b", "c")
KEYS = 12  # keys an upsert or delete draws from: small, so that writes meet
#: (table type, payload, extra table properties) of each configuration run.
CONFIGS = {
    "cow-latest": (P.TABLE_TYPE_COW, P.OVERWRITE_WITH_LATEST_PAYLOAD, {}),
    "cow-ordering": (P.TABLE_TYPE_COW, P.DEFAULT_HOODIE_PAYLOAD, {}),
    "mor-latest": (P.TABLE_TYPE_MOR, P.OVERWRITE_WITH_LATEST_PAYLOAD, {}),
    "mor-ordering": (P.TABLE_TYPE_MOR, P.DEFAULT_HOODIE_PAYLOAD, {}),
    "cow-ordering-virtual-keys": (
        P.TABLE_TYPE_COW,
        P.DEFAULT_HOODIE_PAYLOAD,
        {str(P.POPULATE_META_FIELDS): "false"},
    ),
}

Record = tuple[int, str, int, int, bool]  # id, p, ts, v, deleted


@dataclass
class Model:
    """What the table holds: (partition, key) -> its record (inserts never repeat a key)."""

    payload: str
    rows: dict[tuple[str, int], Record] = field(default_factory=dict)

    def bulk_insert(self, records: list[Record]) -> None:
        for r in records:
            self.rows[(r[1], r[0])] = r

    def insert(self, records: list[Record]) -> None:
        self.bulk_insert([r for r in records if not r[4]])

    def upsert(self, records: list[Record]) -> None:
        latest: dict[tuple[str, int], Record] = {}
        for r in records:  # combine: the greatest ordering value, the later on a tie
            found = latest.get((r[1], r[0]))
            if found is None or r[2] >= found[2]:
                latest[(r[1], r[0])] = r
        for place, r in latest.items():
            stored = self.rows.get(place)
            if stored is not None and self.payload == P.DEFAULT_HOODIE_PAYLOAD and stored[2] > r[2]:
                continue  # the stored record is newer: it stays
            if r[4]:
                self.rows.pop(place, None)
            else:
                self.rows[place] = r

    def delete(self, records: list[Record]) -> None:
        for r in records:
            self.rows.pop((r[1], r[0]), None)

    def expected(self) -> list[tuple[Any, ...]]:
        return sorted((str(i), f"p={p}", i, p, ts, v, d) for (i, p, ts, v, d) in self.rows.values())


def arrow(records: list[Record], types: dict[str, pa.DataType], key_only: bool = False) -> pa.Table:
    """Records in the input types drawn for this write."""
    columns: dict[str, pa.Array] = {
        "id": pa.array(
            [float(r[0]) if pa.types.is_floating(types["id"]) else r[0] for r in records], types["id"]
        ),
        "p": pa.array([r[1] for r in records], types["p"]),
    }
    if key_only:
        return pa.table(columns)
    columns |= {
        "ts": pa.array([r[2] for r in records], types["ts"]),
        "v": pa.array([r[3] for r in records], types["v"]),
        IS_DELETED: pa.array([r[4] for r in records], pa.bool_()),
    }
    return pa.table(columns)


KEY_TYPES = st.sampled_from([pa.int64(), pa.int32(), pa.float64(), pa.uint16()])
PARTITION_TYPES = st.sampled_from([pa.string(), pa.large_string(), pa.dictionary(pa.int8(), pa.string())])
INT_TYPES = st.sampled_from([pa.int64(), pa.int32()])


@st.composite
def writes(draw: st.DrawFn, merge_on_read: bool) -> list[tuple[str, list[Record], dict[str, pa.DataType]]]:
    """A sequence of (operation, records, input types): a bulk insert first."""
    steps = []
    next_new = 1000
    operations = ["bulk_insert", "insert", "upsert", "upsert", "delete"] + (
        ["compact"] if merge_on_read else []
    )
    for index in range(draw(st.integers(2, 6))):
        operation = "bulk_insert" if index == 0 else draw(st.sampled_from(operations))
        types = {
            "id": draw(KEY_TYPES),
            "p": draw(PARTITION_TYPES),
            "ts": draw(INT_TYPES),
            "v": draw(INT_TYPES),
        }
        # Merge-on-read: each write's ordering values above every earlier write's.
        low, high = (10 * index, 10 * index + 3) if merge_on_read else (0, 4)
        records = []
        for _ in range(draw(st.integers(1, 8))):
            if index == 0:  # the first load: keys the later upserts and deletes meet
                key = draw(st.integers(0, KEYS - 1))
            elif operation in ("bulk_insert", "insert"):
                key, next_new = next_new, next_new + 1
            else:
                key = draw(st.integers(0, KEYS - 1))
            partition = draw(st.sampled_from(PARTITIONS))
            deleted = index > 0 and draw(st.booleans())
            records.append((key, partition, draw(st.integers(low, high)), draw(st.integers(-5, 5)), deleted))
        if index == 0:  # a bulk insert writes a key twice if given twice: the load gives it once
            records = list({(r[1], r[0]): r for r in records}.values())
        steps.append((operation, records, types))
    return steps


def make(root: str, config: str) -> Table:
    table_type, payload, extra = CONFIGS[config]
    return create_table(
        f"file://{root}/t",
        name="t",
        record_key_fields=["id"],
        partition_fields=["p"],
        precombine_field="ts",
        table_type=table_type,  # type: ignore[arg-type]
        schema=SCHEMA,
        properties={P.PAYLOAD_CLASS: payload, **extra},
    )


def read(table: Table) -> list[tuple[Any, ...]]:
    data = table.read(columns=COLUMNS)
    return sorted(zip(*(data.column(c).to_pylist() for c in COLUMNS), strict=True))


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_random_writes_read_as_the_model_says(config: str) -> None:
    merge_on_read = CONFIGS[config][0] == P.TABLE_TYPE_MOR

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(steps=writes(merge_on_read))
    def run(steps: list[tuple[str, list[Record], dict[str, pa.DataType]]]) -> None:
        with tempfile.TemporaryDirectory() as root:
            table = make(root, config)
            model = Model(CONFIGS[config][1])
            for operation, records, types in steps:
                if operation == "compact":
                    table.compact()
                elif operation == "delete":
                    table.delete(arrow(records, types, key_only=True))
                    model.delete(records)
                else:
                    table.write(arrow(records, types), operation)  # type: ignore[arg-type]
                    getattr(model, operation)(records)
                got = read(table)
                assert got == model.expected(), (operation, records)
                places = [(r[1], r[0]) for r in got]
                assert len(places) == len(set(places)), "a (partition, key) at most once"
                schema = table.schema()
                assert schema is not None
                assert (schema.field("id").type, schema.field("p").type) == (pa.int64(), pa.string())

    run()
