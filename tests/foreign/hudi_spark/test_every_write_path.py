"""Every write path leaves what Apache Hudi's readers need: tables written through fedcore's
``WriteClient`` (into new and existing partitions), fed-spark's ``fed_spark.write`` (upsert,
insert, delete), ``format("fed")`` and streaming sink, compaction and ``fed migrate``, each
read by Hudi 0.15 and 1.0.2 exactly as fedcore reads them: every row, every partition (a
partition without Hudi's partition metadata file is one Hudi's readers never list). The same
paths write tables of version 9 too (names ending ``_v9``), read by Hudi 1.2.0."""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from foreign.hudi_spark.bundles import HUDI_VERSIONS, run_hudi
from foreign.layouts import COUNTRY, Written, fedcore_reads

from fedcore import properties as P
from fedcore.services.migrate import migrate
from fedcore.table import create_table, load_table

WRITER = Path(__file__).with_name("write_with_fed_spark.py")
#: The shapes of files fedcore writes: Hudi's meta columns filled (the default), none of them
#: (virtual keys), the partition columns left out of files, both.
SHAPES = {
    "": {},
    "virtual_keys_": {str(P.POPULATE_META_FIELDS): "false"},
    "dropped_partition_columns_": {str(P.DROP_PARTITION_COLUMNS): "true"},
    "virtual_keys_dropped_partition_columns_": {
        str(P.POPULATE_META_FIELDS): "false",
        str(P.DROP_PARTITION_COLUMNS): "true",
    },
}


def trips(ids: list[int], countries: list[str], ts: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "country": [countries[n % len(countries)] for n in range(len(ids))],
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "fare": [float(i) + ts / 10 for i in ids],
        }
    )


def write_client_tables(root: Path) -> dict[str, Written]:
    """fedcore's own paths: partitions a later upsert and insert add to a table; a compacted
    merge-on-read table; each in every shape of files; a migration into the Hive layout."""
    out: dict[str, Written] = {}
    cases = [(shape, table_type, "6") for shape, table_type in itertools.product(SHAPES, P.TABLE_TYPES)]
    cases += [("", table_type, "9") for table_type in P.TABLE_TYPES]
    for shape, table_type, version in cases:
        if "virtual" in shape and table_type == P.TABLE_TYPE_MOR:
            continue  # refused at create: Hudi's merge-on-read readers merge by meta fields
        name = f"client_{shape}{table_type.lower()}" + ("" if version == "6" else f"_v{version}")
        table = create_table(
            f"file://{root}/{name}",
            name=name,
            record_key_fields=["id"],
            partition_fields=["country"],
            precombine_field="ts",
            table_type=table_type,
            properties={**SHAPES[shape], P.WRITE_TABLE_VERSION: version},
        )
        table.upsert(trips(list(range(10)), [COUNTRY, "bra"], 1))
        table.upsert(trips([0, 1, 40, 41], [COUNTRY, "bra", "ind", "ind"], 2))
        table.insert(trips([50, 51], ["chn"], 3))
        table.delete(trips([2, 41], [COUNTRY, "ind"], 4).select(["id", "country"]))
        if table.config.merge_on_read:
            table.compact()
            table.upsert(trips([3, 60], ["bra", "deu"], 5))  # a log file onto a compacted slice
        out[name] = fedcore_reads(table)
    source = create_table(
        f"file://{root}/to_migrate",
        name="to_migrate",
        record_key_fields=["id"],
        partition_fields=["country"],
        precombine_field="ts",
        properties={P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: f"file://{root}/storage"},
    )
    source.bulk_insert(trips(list(range(12)), [COUNTRY, "bra", "ind"], 1))
    source.upsert(trips([0, 1], [COUNTRY, "bra"], 2))
    migrate(source.path, f"file://{root}/migrated", storage={P.STORAGE_STRATEGY_CLASS: "hive"})
    out["migrated"] = fedcore_reads(load_table(f"file://{root}/migrated"))
    migrate(
        source.path,
        f"file://{root}/migrated_v9",
        storage={P.STORAGE_STRATEGY_CLASS: "hive"},
        properties={P.WRITE_TABLE_VERSION: "9"},
    )
    out["migrated_v9"] = fedcore_reads(load_table(f"file://{root}/migrated_v9"))
    return out


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory, fed_spark_python: str) -> dict[str, Written]:
    root = tmp_path_factory.mktemp("paths")
    done = subprocess.run(
        [fed_spark_python, str(WRITER), str(root / "spark")], capture_output=True, text=True, timeout=1200
    )
    if done.returncode != 0:
        pytest.fail(f"the fed-spark writes failed:\n{done.stderr[-4000:]}")
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    written = {
        name: Written(t["path"], [tuple(r) for r in t["rows"]], t["pruned"]) for name, t in found.items()
    }
    written.update(write_client_tables(root))
    return written


@pytest.mark.parametrize("version", [*HUDI_VERSIONS, "1.2.0"])
def test_hudi_reads_every_write_paths_table_as_fedcore_does(tables: dict[str, Written], version: str) -> None:
    """Hudi 0.15 and 1.0.2 read the tables of version 6, Hudi 1.2.0 those of version 9."""
    reads: dict[str, Any] = {}
    mine = {name: t for name, t in tables.items() if name.endswith("_v9") == (version == "1.2.0")}
    for name, table in mine.items():
        reads[name] = {"path": table.path, "query_type": "snapshot", "columns": ["id", "country", "fare"]}
        reads[name]["where"] = f"country = '{COUNTRY}'"
    answers = run_hudi(version, {"reads": reads})["reads"]
    assert len(answers) == len(mine) >= (7 if version == "1.2.0" else 13)
    for name, table in mine.items():
        got = answers[name]
        assert "error" not in got, (name, got)
        assert got["rows"] == [list(r) for r in table.rows], name
        assert got["count"] == table.pruned, name
        # New partitions in every table: a missing partition metadata file would hide one.
        assert len({r[1] for r in table.rows}) >= 3, name
