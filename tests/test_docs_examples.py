"""The docs' examples run as written and do what their comments say.

Each example is a code block of a page with a title (```` ```python title="tables.py" ````,
``fed_dev.docs``), and each test here runs a block chosen by its title, so moving or adding
an example never changes what another test runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fed_dev.docs import blocks
from fed_dev.servers import LoopbackS3
from fedcore.io.filesystems import options_for

ROOT = Path(__file__).resolve().parent.parent
Run = Callable[..., dict[str, Any]]
Section = Callable[[str], str]

#: Every titled block of the pages, and the tests that run it (the engine suites run theirs).
RUN_BY = {
    "tables.py": "test_tables",
    "iceberg_view.py": "test_iceberg_view",
    "engine_api.py": "test_engine_api",
    "storage_strategy.py": "test_storage_strategy",
    "storage_options.py": "test_storage_options",
    "merge_on_read.py": "test_merge_on_read",
    "compact.py": "test_merge_on_read",
    "spark_batch.py": "packages/fed-spark/tests/test_docs_examples.py (tox -e spark)",
    "spark_streaming.py": "packages/fed-spark/tests/test_docs_examples.py (tox -e spark)",
    "spark_connect.py": "packages/fed-spark/tests/test_pipeline.py (tox -e spark)",
    "trino.py": "packages/fed-trino-client/tests/test_docs_example_trino.py (tox -e trino)",
    "hive.py": "packages/fed-hive-client/tests/test_docs_example_hive.py (tox -e hive)",
}


def test_every_block_is_run_and_compiles() -> None:
    """Every titled block of the pages is one a test runs (a new one needs its test), and is
    Python: the Spark, Trino and Hive blocks compile here too, where their engines are absent
    (``python -m fed_dev.docs``, in ``tox -e lint``, lints and formats them all)."""
    found = blocks()
    assert set(found) == set(RUN_BY)
    for block in found.values():
        compile(block.code, block.where, "exec")
    assert not [p for p in ROOT.joinpath("docs").rglob("*.md") if "--8<--" in p.read_text()], (
        "the pages include nothing: GitHub would show the include line"
    )


def test_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, docs_example: Run) -> None:
    monkeypatch.chdir(tmp_path)
    names = docs_example("tables.py")
    assert sorted(names["scan"].to_arrow().to_pylist(), key=lambda r: r["trip_id"]) == [
        {"trip_id": 1, "fare": 25.0},
        {"trip_id": 3, "fare": 22.0},
    ]
    assert names["old"].count() == 3
    assert names["first"].inserted == 3
    assert {s.partition_path for s in names["scan"].plan_files()} == {"country=usa", "country=bra"}
    changes = names["table"].changes(names["first"].instant).to_arrow()
    assert sorted(changes.column("trip_id").to_pylist()) == [1]
    off_table = [p for p in (tmp_path / "lake" / "tables").rglob("*.parquet") if ".hoodie" not in p.parts]
    assert off_table == [], "data files stay off the table path"
    assert list((tmp_path / "lake" / "storage").rglob("*.parquet"))


def test_iceberg_view(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, docs_example: Run) -> None:
    monkeypatch.chdir(tmp_path)
    docs_example("tables.py")  # the table the view is published of
    names = docs_example("iceberg_view.py")
    usa = names["usa"].select(["trip_id", "fare"]).sort_by("trip_id").to_pylist()
    fed = names["table"].read(filters=[("country", "=", "usa")], columns=["trip_id", "fare"])
    assert usa == fed.sort_by("trip_id").to_pylist()
    assert usa, "the example's table has trips in the usa"
    assert names["result"].snapshots == 1


def test_engine_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, docs_example: Run) -> None:
    monkeypatch.chdir(tmp_path)
    docs_example("tables.py")  # the table the engine example writes to
    names = docs_example("engine_api.py")
    assert names["result"].inserted == 2
    assert names["result"].files_written == 2
    read = sorted(r["trip_id"] for piece in names["pieces"] for r in piece.to_pylist())
    assert read == [1, 3, 5], "fares above 20: trips 1 (25.0), 3 (22.0) and the new 5 (41.0)"
    assert all(piece.schema.names == ["trip_id"] for piece in names["pieces"])


def test_storage_strategy(s3_server: LoopbackS3, docs_example: Run) -> None:
    client = s3_server.client()
    for bucket in ("lake-tables", "lake-storage"):
        client.create_bucket(Bucket=bucket)
    names = docs_example("storage_strategy.py", {"storage_options": s3_server.storage_options()})
    physical = names["table"].fs.to_physical(
        "country=usa/9b1f0a4c-5d7e-4e2a-8f3b-1c2d3e4f5a6b-0_0-1-1_20260101000000000.parquet"
    )
    folder = f"trips-{names['table'].config['hoodie.fed.table.id']}"  # the table's own folder
    assert re.fullmatch(rf"s3://lake-storage/[0-9a-f]{{8}}/{folder}/country=usa/9b1f0a4c-[^/]*", physical)


def test_storage_options(docs_section: Section) -> None:
    options = eval(docs_section("storage_options.py"))
    merged = options_for("s3://lake-eu/trips", options)
    assert merged["profile"] == "lake"
    assert merged["s3_additional_kwargs"]["SSEKMSKeyId"] == "key-eu"
    assert "s3_additional_kwargs" not in options_for("s3://lake-us/trips", options)


def test_merge_on_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, docs_example: Run) -> None:
    monkeypatch.chdir(tmp_path)
    names = docs_example("merge_on_read.py")  # up to the compaction, as its comments say
    rides = names["rides"]
    assert rides.read().num_rows == 2
    assert rides.scan(query_type="read_optimized").count() == 3
    docs_example("compact.py", names)
    assert names["done"].log_files == 2
    assert rides.read(columns=["ride_id", "fare"]).sort_by("ride_id").to_pylist() == [
        {"ride_id": 1, "fare": 10.0},
        {"ride_id": 2, "fare": 21.0},
    ]
    assert rides.scan(query_type="read_optimized").count() == 2
    assert not [s for s in rides.file_slices() if s.log_files]
    assert [i.action for i in rides.timeline()][-1] == "commit"


def python_block(readme: Path) -> str:
    """The one Python example of a README (GitHub and package indexes show READMEs as they
    are, so they cannot include the example files)."""
    (block,) = re.findall(r"^```python\n(.*?)^```$", readme.read_text(), flags=re.S | re.M)
    return block


@pytest.mark.parametrize("readme", ["README.md", "packages/fedcore/README.md"])
def test_readme_example(readme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    names: dict[str, Any] = {}
    exec(compile(python_block(ROOT / readme), readme, "exec"), names)
    written = names["table"].read(columns=["trip_id", "fare"]).to_pylist()
    assert sorted(written, key=lambda r: r["trip_id"]) == [
        {"trip_id": 1, "fare": 12.5},
        {"trip_id": 2, "fare": 30.0},
    ]
    assert not [p for p in (tmp_path / "lake" / "tables").rglob("*.parquet") if ".hoodie" not in p.parts]
