"""Hudi's meta columns: the five columns every base file starts with, so Hudi readers (and
hudi-rs) recognise a fedcore file, and an update finds the records it replaces by
``_hoodie_record_key`` alone."""

from __future__ import annotations

from typing import Final

import pyarrow as pa

COMMIT_TIME: Final = "_hoodie_commit_time"
COMMIT_SEQNO: Final = "_hoodie_commit_seqno"
RECORD_KEY: Final = "_hoodie_record_key"
PARTITION_PATH: Final = "_hoodie_partition_path"
FILE_NAME: Final = "_hoodie_file_name"
META_COLUMNS: Final = (COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME)


def with_meta_fields(schema: pa.Schema) -> pa.Schema:
    """A data schema with Hudi's five meta columns (strings) first, as base files hold them."""
    return pa.schema([pa.field(name, pa.string()) for name in META_COLUMNS] + list(schema))


def strip_meta(data: pa.Table) -> pa.Table:
    return data.drop_columns([c for c in META_COLUMNS if c in data.column_names])
