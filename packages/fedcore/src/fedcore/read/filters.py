"""Read filters: ``(column, op, value)`` triples joined by AND, as hudi-rs takes them.

Filters on partition columns prune partitions before any data file is opened
(their values come from partition paths, typed by the table schema); every filter
skips the row groups whose statistics prove no row matches (``stats_may_match``), and
is applied to the rows read. ``parse_where`` turns the CLI's
``country = 'usa' AND day >= '2026-01-01' AND kind IN ('a', 'b')`` into triples.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fedcore.exceptions import InvalidFilterError
from fedcore.io.parquet import ColumnStats, row_group_stats

OPERATORS: Final = ("=", "!=", "<", "<=", ">", ">=", "IN", "IS NULL", "IS NOT NULL")
#: Operators that take no value.
UNARY: Final = ("IS NULL", "IS NOT NULL")
_COMPARE: Final[dict[str, Callable[[Any, Any], Any]]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_TOKEN = re.compile(
    r"\s*(?:(?P<string>'(?:[^']|'')*')|(?P<number>-?\d+(?:\.\d+)?)|(?P<op><=|>=|!=|<>|=|<|>)"
    r"|(?P<punct>[(),])|(?P<word>[A-Za-z_][A-Za-z0-9_.]*))"
)


@dataclass(frozen=True)
class Filter:
    column: str
    op: str
    value: Any  # a list for IN

    @classmethod
    def of(cls, spec: Filter | Sequence[Any]) -> Filter:
        if isinstance(spec, Filter):
            return spec
        if len(spec) == 2 and " ".join(str(spec[1]).upper().split()) in UNARY:
            spec = (spec[0], spec[1], None)
        if len(spec) != 3:
            raise InvalidFilterError(f"a filter is (column, op, value), got {spec!r}")
        column, op, value = spec
        op = " ".join(str(op).upper().split()).replace("<>", "!=").replace("==", "=")
        if op not in OPERATORS:
            raise InvalidFilterError(f"operator {op!r} is not one of {', '.join(OPERATORS)}")
        if op == "IN":
            if isinstance(value, str) or not isinstance(value, Iterable):
                raise InvalidFilterError(f"IN needs a list of values, got {value!r}")
            return cls(str(column), op, list(value))
        if op in UNARY and value is not None:
            raise InvalidFilterError(f"{op} takes no value, got {value!r}")
        if op not in UNARY and value is None:
            raise InvalidFilterError(f"{column} {op} NULL is never true in SQL; use IS NULL or IS NOT NULL")
        return cls(str(column), op, value)


#: A filter as callers spell it: a ``Filter`` or a ``(column, op, value)`` triple.
FilterSpec = Filter | Sequence[Any]


def parse_where(text: str) -> list[Filter]:
    """Parse ``a = 'x' AND b IN (1, 2) AND c >= 3 AND d IS NULL``; OR is not supported."""
    tokens = _tokens(text)
    filters: list[Filter] = []
    position = 0

    def expect(kind: str) -> tuple[str, str]:
        nonlocal position
        if position >= len(tokens) or tokens[position][0] != kind:
            found = tokens[position][1] if position < len(tokens) else "end of input"
            raise InvalidFilterError(f"in {text!r}: expected {kind}, found {found!r}")
        position += 1
        return tokens[position - 1]

    while True:
        column = expect("word")[1]
        if position < len(tokens) and tokens[position] == ("word", "IS"):
            words = [t[1] for t in tokens[position + 1 : position + 3]]
            if words[:1] == ["NULL"]:
                filters.append(Filter.of((column, "IS NULL")))
                position += 2
            elif words == ["NOT", "NULL"]:
                filters.append(Filter.of((column, "IS NOT NULL")))
                position += 3
            else:
                raise InvalidFilterError(f"in {text!r}: expected NULL or NOT NULL after IS")
        elif position < len(tokens) and tokens[position] == ("word", "IN"):
            position += 1
            expect("(")
            values = [_literal(tokens[position], text)]
            position += 1
            while position < len(tokens) and tokens[position][0] == ",":
                position += 1
                values.append(_literal(tokens[position] if position < len(tokens) else ("end", ""), text))
                position += 1
            expect(")")
            filters.append(Filter.of((column, "IN", values)))
        else:
            op = expect("op")[1]
            if position >= len(tokens):
                raise InvalidFilterError(f"in {text!r}: a value is missing after {op}")
            filters.append(Filter.of((column, op, _literal(tokens[position], text))))
            position += 1
        if position == len(tokens):
            return filters
        if tokens[position] != ("word", "AND"):
            raise InvalidFilterError(f"in {text!r}: expected AND, found {tokens[position][1]!r}")
        position += 1


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens, position = [], 0
    text = text.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise InvalidFilterError(f"cannot parse {text!r} at {text[position:]!r}")
        kind = match.lastgroup or ""
        value = match.group(kind)
        if kind == "punct":
            kind = value
        elif kind == "word" and value.upper() in ("AND", "IN", "OR", "NOT", "IS", "NULL"):
            value = value.upper()
            if value == "OR":
                raise InvalidFilterError("OR is not supported in filters; use AND and IN")
        tokens.append((kind, value))
        position = match.end()
    if not tokens:
        raise InvalidFilterError("the filter is empty")
    return tokens


def _literal(token: tuple[str, str], text: str) -> Any:
    kind, value = token
    if kind == "string":
        return value[1:-1].replace("''", "'")
    if kind == "number":
        return float(value) if "." in value else int(value)
    if kind == "word" and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if kind == "word" and value == "NULL":
        raise InvalidFilterError(f"in {text!r}: comparing with NULL is never true; use IS NULL")
    if kind == "word":
        raise InvalidFilterError(
            f"in {text!r}: {value!r} is not a value: quote a string ('{value}'); a filter compares a "
            "column with a value, not with another column"
        )
    raise InvalidFilterError(
        f"in {text!r}: expected a value (a number, a 'quoted string', true or false), found {value!r}"
    )


def typed(value: Any, arrow_type: pa.DataType, column: str) -> Any:
    """A literal (or partition value text) as a Python value of the column's type."""
    if value is None:
        return None
    try:
        if pa.types.is_date(arrow_type):
            return value if isinstance(value, date) else date.fromisoformat(str(value))
        return pa.scalar(value).cast(arrow_type).as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError, TypeError, OverflowError) as exc:
        raise InvalidFilterError(f"{value!r} is not a valid {arrow_type} value for {column!r}") from exc


def may_match(values: Mapping[str, Any] | None, filters: Iterable[Filter]) -> bool:
    """Whether a partition with these typed values may hold rows that satisfy every filter.

    A partition is pruned only when its path proves no row can match. Unknown values
    (``values`` None: the path does not encode them) and Hudi's default partition (a
    column's value None: the rows hold null or the empty string) are never pruned: the
    filters are applied to the rows' own values as well, exactly as SQL would."""
    if values is None:
        return True
    for f in filters:
        actual = values.get(f.column)
        if actual is None:
            continue
        if f.op == "IS NULL":
            ok = False
        elif f.op == "IS NOT NULL":
            ok = True
        elif f.op == "IN":
            ok = actual in f.value
        else:
            ok = _COMPARE[f.op](actual, f.value)
        if not ok:
            return False
    return True


def stats_may_match(stats: Mapping[str, ColumnStats], filters: Iterable[Filter]) -> bool:
    """Whether rows with these statistics may hold a row that satisfies every filter.

    False only when the statistics prove that no row can: the rows are then skipped unread.
    Anything the statistics do not settle (a column without them, values of another type,
    NaN, which float statistics leave out) keeps the rows; the filters are applied to the
    rows read, so a kept row that does not match is dropped there."""
    return all(_column_may_match(stats[f.column], f) for f in filters if f.column in stats)


def matching_row_groups(metadata: pq.FileMetaData, filters: Sequence[Filter]) -> list[int]:
    """The row groups of a Parquet file (its footer) that may hold a row matching ``filters``."""
    tested = {f.column for f in filters}
    return [
        group
        for group in range(metadata.num_row_groups)
        if stats_may_match(row_group_stats(metadata, group, tested), filters)
    ]


def _column_may_match(stats: ColumnStats, f: Filter) -> bool:
    all_null = stats.nulls is not None and stats.nulls == stats.rows
    if f.op == "IS NULL":
        return stats.nulls is None or stats.nulls > 0
    if f.op == "IS NOT NULL":
        return not all_null
    if all_null:
        return False  # a comparison with null is never true
    low, high = stats.low, stats.high
    values = f.value if f.op == "IN" else [f.value]
    if low is None or high is None or any(_unordered(v) for v in (low, high, *values)):
        return True
    try:
        if f.op == "!=":  # NaN != x holds, and float statistics leave NaN out
            return isinstance(low, float) or not low == high == f.value
        if f.op in ("=", "IN"):
            return any(low <= v <= high for v in values)
        return bool(_COMPARE[f.op](low, f.value) or _COMPARE[f.op](high, f.value))
    except TypeError:  # values the statistics' type does not order against
        return True


def _unordered(value: Any) -> bool:
    """NaN (ordered against nothing) or a value Python cannot order at all."""
    return value != value or isinstance(value, (dict, list))


def filter_rows(data: pa.Table, filters: Sequence[Filter]) -> pa.Table:
    """The rows of ``data`` that satisfy every filter (SQL's rules: a comparison with null is
    not true, so such a row is dropped).

    Evaluated by compute kernels on the calling thread, as the reads that call it run on
    threads of their own (a pyarrow expression would plan an Acero query per file on
    Arrow's pool); the expression stays the fallback where a kernel refuses the types."""
    if not filters or not data.num_rows:
        return data
    try:
        mask: Any = None
        for f in filters:
            column = data.column(f.column)
            if f.op == "IS NULL":
                part = pc.is_null(column)
            elif f.op == "IS NOT NULL":
                part = pc.is_valid(column)
            elif f.op == "IN":
                part = pc.is_in(column, value_set=pa.array(f.value))
            else:
                part = _KERNELS[f.op](column, f.value)
            mask = part if mask is None else pc.and_kleene(mask, part)
        return data.filter(mask)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError):
        return data.filter(row_expression(filters))


_KERNELS: Final[dict[str, Callable[[Any, Any], Any]]] = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


def row_expression(filters: Sequence[Filter]) -> pc.Expression | None:
    """The filters as a pyarrow expression, for rows."""
    expression: pc.Expression | None = None
    for f in filters:
        field = pc.field(f.column)
        if f.op == "IS NULL":
            part = field.is_null()
        elif f.op == "IS NOT NULL":
            part = field.is_valid()
        elif f.op == "IN":
            part = field.isin(f.value)
        else:
            part = _COMPARE[f.op](field, f.value)
        expression = part if expression is None else expression & part
    return expression
