"""Iceberg data-file entries for fed's base files, from fed's own metadata: the partition
values its partition paths hold, the sizes and the column statistics the metadata table
(or a commit's write stats) recorded; a file's footer only where no statistics were taken."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from pyiceberg.conversions import to_bytes
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import BooleanType, DateType, IntegerType, LongType, PrimitiveType, StringType
from pyiceberg.utils.datetime import date_to_days, datetime_to_micros

from fedcore.exceptions import InvalidFilterError, UnsupportedTableError
from fedcore.io.parquet import read_file_stats
from fedcore.keygen.partitioning import PartitionScheme
from fedcore.read.filters import typed

#: Types whose Parquet statistics are exact Iceberg bounds. Floating point is left out (NaN is
#: outside Parquet's min/max but readers would need a NaN count to know), and so are types
#: fed's statistics do not keep exactly (timestamps, binary, decimals).
_BOUNDED = (BooleanType, IntegerType, LongType, StringType, DateType)
#: Iceberg's first partition field id.
_FIRST_PARTITION_FIELD_ID = 1000


def partition_spec(scheme: PartitionScheme, schema: Schema) -> PartitionSpec:
    """Identity partitions on the partition fields where the partition paths hold their values
    (and the files hold the columns); otherwise unpartitioned (readers then prune by bounds)."""
    names = {f.name for f in schema.fields}
    if not scheme.fields or not scheme.encodes_values or not set(scheme.fields) <= names:
        return UNPARTITIONED_PARTITION_SPEC
    return PartitionSpec(
        *(
            PartitionField(
                source_id=schema.find_field(name).field_id,
                field_id=_FIRST_PARTITION_FIELD_ID + i,
                transform=IdentityTransform(),
                name=name,
            )
            for i, name in enumerate(scheme.fields)
        ),
        spec_id=0,
    )


class DataFiles:
    """Makes the data-file entries of one table schema and partition spec."""

    def __init__(
        self, scheme: PartitionScheme, schema: Schema, spec: PartitionSpec, types: Mapping[str, pa.DataType]
    ) -> None:
        self._scheme = scheme
        self._schema = schema
        self._spec = spec
        self._types = types
        self._primitive = {f.name: f for f in schema.fields if isinstance(f.field_type, PrimitiveType)}

    def entry(
        self, uri: str, partition: str, size: int, rows: int, stats: Mapping[str, list[Any]]
    ) -> DataFile:
        """The data file at physical ``uri`` in fed partition ``partition``: ``rows`` records,
        ``stats`` its columns' ``[least, greatest, nulls]`` (``io.parquet.file_stats``)."""
        lower: dict[int, bytes] = {}
        upper: dict[int, bytes] = {}
        nulls: dict[int, int] = {}
        values: dict[int, int] = {}
        for name, (low, high, null_count) in stats.items():
            field = self._primitive.get(name)
            if field is None:
                continue
            nulls[field.field_id] = int(null_count)
            values[field.field_id] = rows
            if isinstance(field.field_type, _BOUNDED) and low is not None and high is not None:
                kind = self._types[name]
                lower[field.field_id] = to_bytes(field.field_type, _internal(typed(low, kind, name)))
                upper[field.field_id] = to_bytes(field.field_type, _internal(typed(high, kind, name)))
        return DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=uri,
            file_format=FileFormat.PARQUET,
            partition=self._partition(partition, rows, stats),
            record_count=rows,
            file_size_in_bytes=size,
            value_counts=values,
            null_value_counts=nulls,
            lower_bounds=lower,
            upper_bounds=upper,
        )

    def _partition(self, partition: str, rows: int, stats: Mapping[str, list[Any]]) -> Record:
        if not self._spec.fields:
            return Record()
        texts = self._scheme.values_of(partition)
        if texts is None:
            raise UnsupportedTableError(f"partition path {partition!r} does not hold its partition values")
        out = []
        for field in self._spec.fields:
            name = field.name
            kind = self._types[name]
            try:
                value = self._value(name, kind, texts[name], rows, stats.get(name))
            except InvalidFilterError as exc:
                raise UnsupportedTableError(
                    f"partition {partition!r}: {texts[name]!r} is no {kind} value of {name!r}, so "
                    "the Iceberg view cannot state it"
                ) from exc
            out.append(_internal(value))
        return Record(*out)

    def _value(
        self, name: str, kind: pa.DataType, text: str | None, rows: int, stats: list[Any] | None
    ) -> Any:
        """The one value of partition column ``name`` in a file, checked against the file's
        statistics where it has them: Iceberg readers take identity partition values from the
        manifest instead of the file, so a wrong value would be a silently wrong row."""
        if text is None:
            # Hudi's default partition holds the rows whose value was null or empty: the
            # statistics say which (a file holding both has no single partition value).
            if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
                return None
            if stats is not None and int(stats[2]) == rows:
                return None
            if stats is not None and int(stats[2]) == 0 and stats[0] == "" and stats[1] == "":
                return ""
            raise UnsupportedTableError(
                f"a file of {name!r}'s default partition holds empty or null values the Iceberg view "
                "cannot tell apart (an identity partition has one value per file)"
            )
        value = typed(text, kind, name)
        pinned = stats is not None and stats[0] is not None and stats[0] == stats[1]
        if pinned and stats is not None and typed(stats[0], kind, name) != value:
            raise UnsupportedTableError(
                f"a file of partition {name}={text!r} holds {name}={stats[0]!r}: the partition "
                "path does not state its rows' value, so the Iceberg view cannot"
            )
        return value


def _internal(value: Any) -> Any:
    """A Python value as Iceberg's manifests hold it (days for dates, microseconds for times)."""
    if isinstance(value, dt.datetime):
        return datetime_to_micros(value)
    if isinstance(value, dt.date):
        return date_to_days(value)
    return value


def parse_stats(text: str | None) -> tuple[int, Mapping[str, list[Any]]] | None:
    """A base file's recorded statistics as (rows, columns), or None where none were recorded."""
    return None if text is None else read_file_stats(text)
