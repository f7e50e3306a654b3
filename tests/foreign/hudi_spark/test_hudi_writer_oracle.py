"""Apache Hudi's own writer is the oracle of write semantics: Hudi 0.15's Spark writer and
fedcore run the same sequence of writes, for each payload class and table type, and the two
tables read equal, by Hudi's reader and by fedcore's, as multisets of whole rows with their
record keys and partition paths.

The writes hold what Hudi's payloads decide: updates older than, as old as and newer than
the stored record, delete markers (``_hoodie_is_deleted``) older and newer than it, an
insert marked deleted, a key twice in one batch, deletes (one of a key the table does not
hold), an insert of a key the table holds (Hudi keeps both), and a key written again after
its delete.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from foreign.hudi_spark.bundles import run_hudi

from fedcore import properties as P
from fedcore.table import Table, create_table, load_table

SCHEMA = "id long, p string, ts long, v string, _hoodie_is_deleted boolean"
ARROW = pa.schema(
    [
        ("id", pa.int64()),
        ("p", pa.string()),
        ("ts", pa.int64()),
        ("v", pa.string()),
        ("_hoodie_is_deleted", pa.bool_()),
    ]
)
#: What each side's reads are compared on.
COLUMNS = ["_hoodie_record_key", "_hoodie_partition_path", *ARROW.names]
PAYLOADS = {"latest": P.OVERWRITE_WITH_LATEST_PAYLOAD, "ordering": P.DEFAULT_HOODIE_PAYLOAD}
HUDI = "0.15.0"

Row = list[Any]


def row(key: int, ts: int, v: str, deleted: bool = False) -> Row:
    return [key, "ab"[key % 2], ts, v, deleted]


#: (operation, rows) in order; each row [id, p, ts, v, _hoodie_is_deleted].
STEPS: list[tuple[str, list[Row]]] = [
    ("bulk_insert", [row(i, 10, f"first{i}") for i in range(12)]),
    (
        "upsert",
        [
            row(0, 5, "older"),
            row(1, 10, "tie"),
            row(2, 20, "newer"),
            row(3, 5, "older delete", True),
            row(4, 20, "newer delete", True),
            row(20, 1, "insert marked deleted", True),
            row(21, 1, "new"),
            row(22, 1, "new"),
            row(5, 30, "twice: greater"),
            row(5, 25, "twice: lesser"),
        ],
    ),
    ("delete", [row(6, 0, ""), row(21, 0, ""), row(99, 0, "")]),
    ("insert", [row(7, 1, "inserted again"), row(30, 1, "insert marked deleted", True), row(31, 2, "new")]),
    ("upsert", [row(0, 15, "later"), row(6, 50, "back after its delete"), row(8, 9, "older again")]),
]


def hudi_options(name: str, table_type: str, payload: str) -> dict[str, str]:
    return {
        "hoodie.table.name": name,
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.write.payload.class": payload,
        "hoodie.metadata.enable": "false",
        "hoodie.index.type": "SIMPLE",
        "hoodie.compact.inline": "false",
    }


def fed_write(path: str, name: str, table_type: str, payload: str) -> Table:
    table = create_table(
        path,
        name=name,
        record_key_fields=["id"],
        partition_fields=["p"],
        precombine_field="ts",
        table_type=table_type,  # type: ignore[arg-type]
        properties={P.PAYLOAD_CLASS: payload},
    )
    for operation, rows in STEPS:
        data = pa.Table.from_pylist([dict(zip(ARROW.names, r, strict=True)) for r in rows], ARROW)
        table.write(data, operation)  # type: ignore[arg-type]
    return table


def fed_read(table: Table) -> list[Row]:
    data = table.read(columns=COLUMNS)
    return sorted(
        (list(r) for r in zip(*(data.column(c).to_pylist() for c in COLUMNS), strict=True)), key=order
    )


def order(values: Row) -> list[tuple[bool, Any]]:
    return [(v is None, 0 if v is None else v) for v in values]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every case written by both, and every table read by Hudi (one JVM for them all)."""
    root = tmp_path_factory.mktemp("oracle")
    cases = [(t, p) for t in P.TABLE_TYPES for p in PAYLOADS]
    writes, reads, fed = {}, {}, {}
    for table_type, payload in cases:
        case = f"{table_type.lower()}_{payload}"
        hudi_path, fed_path = f"file://{root}/hudi_{case}", f"file://{root}/fed_{case}"
        writes[case] = {
            "path": hudi_path,
            "options": hudi_options(f"hudi_{case}", table_type, PAYLOADS[payload]),
            "schema": SCHEMA,
            "steps": STEPS,
        }
        fed[case] = fed_write(fed_path, f"fed_{case}", table_type, PAYLOADS[payload])
        for side, path in (("hudi", hudi_path), ("fed", fed_path)):
            reads[f"{side}_{case}"] = {"path": path, "query_type": "snapshot", "columns": COLUMNS}
        if table_type == P.TABLE_TYPE_MOR:
            # fed's compaction of its table, read by Hudi: the same rows, now in base files.
            compacted = f"{fed_path}_compacted"
            fed_write(compacted, f"fed_{case}_compacted", table_type, PAYLOADS[payload]).compact()
            for query_type in ("snapshot", "read_optimized"):
                reads[f"compacted_{query_type}_{case}"] = {
                    "path": compacted,
                    "query_type": query_type,
                    "columns": COLUMNS,
                }
    answer = run_hudi(HUDI, {"writes": writes, "reads": reads})
    return {"answer": answer, "fed": fed, "root": root}


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
@pytest.mark.parametrize("table_type", P.TABLE_TYPES)
def test_fed_writes_what_hudis_writer_writes(written: dict[str, Any], table_type: str, payload: str) -> None:
    case = f"{table_type.lower()}_{payload}"
    answer = written["answer"]
    assert answer["writes"][case] == "ok"
    truth = answer["reads"][f"hudi_{case}"]["rows"]
    assert truth, "Hudi wrote rows"
    assert answer["reads"][f"fed_{case}"]["rows"] == truth, "Hudi reads fed's table as its own"
    assert fed_read(written["fed"][case]) == truth, "fedcore reads its table as Hudi reads Hudi's"
    hudi_table = load_table(f"file://{written['root']}/hudi_{case}")
    assert fed_read(hudi_table) == truth, "fedcore reads Hudi's table as Hudi does"
    if table_type == P.TABLE_TYPE_MOR:
        for query_type in ("snapshot", "read_optimized"):
            assert answer["reads"][f"compacted_{query_type}_{case}"]["rows"] == truth, query_type


def test_the_cases_differ_where_the_payloads_do(written: dict[str, Any]) -> None:
    """The sequence tells the payloads apart (an older update applied by one, not the other),
    so the comparisons above test each payload's rule."""
    reads = written["answer"]["reads"]
    for table_type in P.TABLE_TYPES:
        name = table_type.lower()
        latest, ordering = reads[f"hudi_{name}_latest"]["rows"], reads[f"hudi_{name}_ordering"]["rows"]
        assert latest != ordering
        keys = [r[2] for r in latest]
        assert keys.count(7) == 2, "an insert of a key the table holds: Hudi keeps both"
        assert not {20, 30} & set(keys), "inserts marked deleted are not written"
        values = {r[2]: r[5] for r in ordering}
        assert (values[0], values[3], values.get(4)) == ("later", "first3", None)
