"""Apache Hudi's Spark reader (0.15 and 1.0) reads a Hive-layout fed table exactly and refuses
every other layout, instead of returning it empty."""

from __future__ import annotations

import pytest
from foreign.hudi_spark.bundles import HUDI_VERSIONS, read_with_hudi
from foreign.layouts import COUNTRY, FEDERATED, Written

#: What Hudi's reader says of a federated table: the table type it cannot parse.
REFUSAL = (
    "java.lang.IllegalArgumentException: "
    "No enum constant org.apache.hudi.common.model.HoodieTableType.FEDERATED_COPY_ON_WRITE"
)

Answers = dict[str, dict[str, object]]


@pytest.fixture(scope="module", params=HUDI_VERSIONS)
def answers(request: pytest.FixtureRequest, layout_tables: dict[str, Written]) -> Answers:
    tables: dict[str, str | list[str]] = {name: t.path for name, t in layout_tables.items()}
    for name in ("hive_mor", "hive_mor_avro"):
        tables[f"{name}_read_optimized"] = [layout_tables[name].path, "read_optimized"]
    return read_with_hudi(request.param, tables, COUNTRY)


def test_a_hive_layout_table_is_read_exactly(answers: Answers, layout_tables: dict[str, Written]) -> None:
    written = layout_tables["hive"]
    assert answers["hive"] == {"rows": [list(row) for row in written.rows], "pruned": written.pruned}
    assert 0 < written.pruned < len(written.rows)


@pytest.mark.parametrize("name", ["hive_mor", "hive_mor_avro"])
def test_a_hive_layout_merge_on_read_table_is_read_exactly(
    answers: Answers, layout_tables: dict[str, Written], name: str
) -> None:
    """Log files fed appended (Parquet or Avro data blocks, delete blocks, a deleted key
    written again, a compaction and a delta commit after it): Hudi's snapshot query merges
    them as fedcore does, its read-optimized query reads the base files alone, as fedcore's
    does."""
    written = layout_tables[name]
    assert answers[name] == {"rows": [list(row) for row in written.rows], "pruned": written.pruned}
    assert written.read_optimized is not None
    assert written.read_optimized != written.rows
    optimized = answers[f"{name}_read_optimized"]
    assert optimized["rows"] == [list(row) for row in written.read_optimized]


@pytest.mark.parametrize("layout", FEDERATED)
def test_a_federated_table_is_refused(answers: Answers, layout: str) -> None:
    assert answers[layout] == {"error": REFUSAL}


def test_a_table_from_before_federated_types_is_read_empty(answers: Answers) -> None:
    """Why fed stores federated types (and upgrades older tables on their next write or with
    ``fed upgrade``): without one, Hudi lists the table path, finds no data file, and returns
    an empty table with no error."""
    assert answers["legacy"] == {"rows": [], "pruned": 0}
