"""The Iceberg view of tables Apache Hudi wrote (copy-on-write and merge-on-read, every key
generator in ``tests/data/hudi-rs``): PyIceberg reads exactly what fedcore reads (merge-on-read tables:
their read-optimized view), or the publish is refused with a typed error and nothing is
published."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.table import StaticTable

from fedcore import properties as P
from fedcore.engine import META_COLUMNS
from fedcore.exceptions import FedError
from fedcore.iceberg import current_view, publish
from fedcore.iceberg.view import QUERY_TYPE_KEY
from fedcore.table import load_table

from ..hudi.test_hudi_conformance import HUDI_WRITTEN_ZIPS, SIMPLE, ZIPS, name_of, unpack


def comparable(data: pa.Table) -> pa.Table:
    """The columns both readers give alike, rows in one order."""
    names = sorted(f.name for f in data.schema if any(test(f.type) for test in SIMPLE))
    picked = data.select(names)
    return picked.sort_by([(n, "ascending") for n in names])


@pytest.mark.parametrize("archive", ZIPS + HUDI_WRITTEN_ZIPS, ids=name_of)
def test_a_hudi_tables_view_reads_like_fedcore_or_is_refused(archive: Path, tmp_path: Path) -> None:
    path = unpack(archive, tmp_path)
    try:
        table = load_table(path)
        merge_on_read = table.config.table_type == "MERGE_ON_READ"
        expected = table.scan(query_type="read_optimized" if merge_on_read else "snapshot").to_arrow()
    except FedError:
        # A table fedcore refuses to read (test_hudi_conformance says why) is not published
        # either: the same typed error, and no view.
        with pytest.raises(FedError):
            publish(load_table(path))
        assert not list(Path(path.removeprefix("file://")).rglob("*.metadata.json"))
        return
    try:
        result = publish(table)
    except FedError:
        refused = True
    else:
        refused = False
    if refused:
        assert current_view(table).location is None, "refused, yet published"
        return
    if result.metadata_location is None:
        assert expected.num_rows == 0
        return
    view = StaticTable.from_metadata(result.metadata_location)
    assert view.metadata.properties[QUERY_TYPE_KEY] == ("read_optimized" if merge_on_read else "snapshot")
    got = view.scan().to_arrow()
    assert got.num_rows == expected.num_rows
    assert set(got.column_names) == set(expected.column_names) | set(META_COLUMNS)
    if not expected.num_rows:
        return
    meta_written = P.POPULATE_META_FIELDS.of(table.config)
    # Without meta fields Hudi's files hold the meta columns null (the file name aside), and
    # fed's reads compute them: the view shows the files' values, compared where they are set.
    unset = [n for n in META_COLUMNS if got[n].null_count == got.num_rows]
    assert not unset if meta_written else unset
    skipped = set(unset)
    shared = [n for n in comparable(expected).column_names if n in got.column_names and n not in skipped]
    assert shared, "some plain column to compare"
    assert comparable(got.select(shared)) == comparable(expected.select(shared))
