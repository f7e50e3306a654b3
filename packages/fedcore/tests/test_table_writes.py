"""Writes on the table: anything that exports an Arrow stream, one result object per commit."""

from __future__ import annotations

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

from fed_dev.testing import Backend
from fedcore.exceptions import ConfigError, InvalidRecordsError
from fedcore.write.client import OPERATIONS, WriteResult

from .test_writes import make_table, rows, trips


def test_every_arrow_shaped_input_is_written(backend: Backend) -> None:
    table = make_table(backend)
    first = table.bulk_insert(trips([1, 2]))
    assert isinstance(first, WriteResult)
    assert (first.operation, first.inserted, first.files_written, first.warnings) == ("bulk_insert", 2, 1, ())
    table.upsert(trips([3]).to_batches()[0])  # a RecordBatch
    table.upsert(pa.RecordBatchReader.from_batches(trips([4]).schema, trips([4]).to_batches()))
    table.upsert(pl.from_arrow(trips([5])))  # polars: __arrow_c_stream__
    table.upsert(pd.DataFrame({"trip_id": [6], "country": ["us"], "ts": [1], "fare": [16.0]}))
    updated = table.upsert(trips([1], fare=100.0), options={"hoodie.parquet.max.file.size": "1000000"})
    assert (updated.updated, updated.inserted) == (1, 0)
    assert rows(table) == {1: ("us", 101.0)} | {i: ("us", 10.0 + i) for i in range(2, 7)}
    table.delete(pa.table({"trip_id": [2], "country": ["us"]}))
    table.insert_overwrite(trips([50], "de"))
    assert set(rows(table)) == {1, 3, 4, 5, 6, 50}
    table.insert_overwrite_table(trips([60, 61], "fr"))  # every file group replaced
    assert rows(table) == {60: ("fr", 70.0), 61: ("fr", 71.0)}
    assert set(OPERATIONS) == {
        "bulk_insert",
        "insert",
        "upsert",
        "delete",
        "insert_overwrite",
        "insert_overwrite_table",
    }


def test_input_that_is_not_records_is_refused(backend: Backend) -> None:
    table = make_table(backend)
    with pytest.raises(InvalidRecordsError, match="export an Arrow stream"):
        table.upsert([{"trip_id": 1}])
    with pytest.raises(ConfigError, match="unknown operation"):
        table.write(trips([1]), "merge")  # type: ignore[arg-type]
    assert rows(table) == {}
