"""Spark's filters as fedcore's: what prunes partitions and skips files before planning.

Spark hands a Python data source the conjuncts of a query's WHERE clause it could express
(``EqualTo``, ``In``, ``IsNull``, ...; ORs are never pushed to Python sources). Those on
columns whose values compare in Python and Arrow exactly as in Spark (integers, strings,
dates, booleans, decimals) become fedcore filters, which prune partitions through the
metadata table and skip files and row groups by their column statistics. Every filter is
still handed back to Spark, which checks the rows itself: pruning can only drop files no
row of which could match, so no row is ever lost, and no difference between Spark's and
Arrow's comparison rules can let a wrong row through.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa
from pyspark.sql import datasource as sds

from fedcore.engine import Filter

_COMPARISONS: dict[type[sds.Filter], str] = {
    sds.EqualTo: "=",
    sds.GreaterThan: ">",
    sds.GreaterThanOrEqual: ">=",
    sds.LessThan: "<",
    sds.LessThanOrEqual: "<=",
}


def prunes(arrow_type: pa.DataType) -> bool:
    """Types whose values compare in Python and Arrow as Spark compares them. Floats (NaN is
    greater than everything in Spark, unordered in Arrow, and left out of Parquet's
    statistics) and timestamps (a session time zone) are left to Spark: nothing is pruned
    or skipped by them."""
    return bool(
        pa.types.is_integer(arrow_type)
        or pa.types.is_string(arrow_type)
        or pa.types.is_large_string(arrow_type)
        or pa.types.is_date32(arrow_type)
        or pa.types.is_boolean(arrow_type)
        or pa.types.is_decimal(arrow_type)
    )


def pruning_filters(filters: Iterable[sds.Filter], schema: pa.Schema) -> list[Filter]:
    """The pushed filters that prune partitions and skip files, as fedcore filters (the rest
    give none)."""
    return exact(filter(None, map(_translate, filters)), schema)


def exact(filters: Iterable[Filter], schema: pa.Schema) -> list[Filter]:
    """The filters on columns whose values compare as Spark compares them (see ``prunes``)."""
    return [f for f in filters if f.column in schema.names and prunes(schema.field(f.column).type)]


def _translate(spark_filter: sds.Filter) -> Filter | None:
    attribute: tuple[str, ...] = getattr(spark_filter, "attribute", ())
    if len(attribute) != 1:
        return None  # a nested field, or Not(...): nothing to prune by
    column = attribute[0]
    value: Any = getattr(spark_filter, "value", None)
    if isinstance(spark_filter, sds.IsNull):
        return Filter(column, "IS NULL", None)
    if isinstance(spark_filter, sds.IsNotNull):
        return Filter(column, "IS NOT NULL", None)
    if isinstance(spark_filter, sds.EqualNullSafe):
        return Filter(column, "IS NULL", None) if value is None else Filter(column, "=", value)
    if isinstance(spark_filter, sds.In):
        # NULL in the list never makes IN true; the other values are what can match.
        return Filter(column, "IN", [v for v in value if v is not None])
    op = _COMPARISONS.get(type(spark_filter))
    if op is None or value is None:
        return None
    return Filter(column, op, value)
