"""Hudi's record keys, computed on whole Arrow columns: checked, spelled as Hudi's key
generators spell them, and read back from stored rows."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from fedcore import properties as P
from fedcore.exceptions import InvalidRecordsError, UnsupportedTableError
from fedcore.keygen.partitioning import value_texts
from fedcore.schema.meta import RECORD_KEY


def check_columns(data: pa.Table, fields: Sequence[str], what: str) -> None:
    missing = [f for f in fields if f not in data.column_names]
    if missing:
        raise InvalidRecordsError(
            f"the input has no {what} column {', '.join(map(repr, missing))}: add it to the input"
        )


def check_required_columns(
    names: Collection[str], record_key: Sequence[str], partition: Sequence[str], ordering: str | None = None
) -> None:
    """``InvalidRecordsError`` naming the first column missing from ``names`` (a write's input)
    of those that say which record a row is: a record key field, a partition field, or
    ``ordering`` (an upsert's ordering, precombine, field); the message says to add it.

    Refused whatever ``hoodie.datasource.write.reconcile.schema`` and
    ``hoodie.write.set.null.for.missing.columns`` say (they fill other missing columns with
    nulls): a null key is no key; a null partition value is Hudi's
    ``__HIVE_DEFAULT_PARTITION__``, another partition, where an upsert would insert a second
    copy of every stored key it updates; an upsert ranks the records of a key by their
    ordering values. Apache Hudi refuses a missing key field, and an upsert's missing
    ordering field; a missing partition field its key generators write to the default
    partition, which is the duplicate this refuses."""
    given = set(names)
    wanted = [(f, "a record key field of the table", _ADD_KEY) for f in record_key]
    wanted += [(f, "a partition field of the table", _ADD_PARTITION) for f in partition]
    if ordering:
        wanted.append((ordering, "the table's ordering (precombine) field", _ADD_ORDERING))
    for field, role, action in wanted:
        if field not in given:
            raise InvalidRecordsError(f"the input has no column {field!r}, {role}: {action}")


#: What a write whose input lacks a column of ``check_required_columns`` is told to do.
_ADD_KEY: Final = "add it (each record's key is spelled from it; it is never written as null)"
_ADD_PARTITION: Final = (
    "add it (each record's partition path is spelled from it; it is never written as null)"
)
_ADD_ORDERING: Final = (
    "add it, with a value in every record (an upsert keeps each key's record with the greatest)"
)


def check_keys(data: pa.Table, key_fields: Sequence[str]) -> None:
    """``InvalidRecordsError`` naming the first row whose record key has a null or empty
    value, or a complex key's value that would make two keys one (``check_complex_key_values``)."""
    _check_present(data, key_fields)
    if len(key_fields) > 1:
        check_complex_key_values(key_fields, [value_texts(data.column(f)) for f in key_fields])


def _check_present(data: pa.Table, key_fields: Sequence[str]) -> None:
    """``InvalidRecordsError`` naming the first row whose record key has a null or empty value."""
    check_columns(data, key_fields, "record key")
    missing = None
    for field in key_fields:
        column = data.column(field)
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        bad = pc.is_null(column)
        kind = column.type
        if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
            bad = pc.or_kleene(bad, pc.equal(column, ""))
        missing = bad if missing is None else pc.or_kleene(missing, bad)
    if missing is not None and pc.any(missing).as_py():
        row = pc.index(missing, True).as_py()
        raise InvalidRecordsError(f"record {row} has a null or empty record key ({', '.join(key_fields)})")


def record_keys(data: pa.Table, key_fields: Sequence[str], key_generator: str) -> pa.Array:
    """Hudi's record keys, one string per row: the value for one simple key field,
    ``f1:v1,f2:v2`` otherwise (values spelled by ``value_text``), computed over whole columns."""
    _check_present(data, key_fields)
    texts = [value_texts(data.column(f)) for f in key_fields]
    if len(key_fields) == 1 and key_generator != P.COMPLEX_KEY_GENERATOR:
        return texts[0]
    if len(key_fields) > 1:
        check_complex_key_values(key_fields, texts)
    return _complex_keys(key_fields, texts)


#: What a value of a complex key may not hold or be: the separator of its parts (Hudi's key
#: ``f1:v1,f2:v2`` is read back by splitting at commas), and the placeholders Hudi writes for
#: a null or empty part.
KEY_PART_SEPARATOR: Final = ","
KEY_PART_PLACEHOLDERS: Final = ("__null__", "__empty__")


def check_complex_key_values(key_fields: Sequence[str], texts: Sequence[pa.Array]) -> None:
    """``InvalidRecordsError`` naming the field and value of a complex key part that would
    make two records' keys one string: Hudi joins the parts as ``f1:v1,f2:v2`` without
    escaping, so ``('x,b:y', 'z')`` and ``('x', 'y,b:z')`` both become ``a:x,b:y,b:z``, and
    an upsert of one would replace the other. With no comma in any value, the parts split
    back one way only."""
    for field, text in zip(key_fields, texts, strict=True):
        bad = pc.or_(
            pc.match_substring(text, KEY_PART_SEPARATOR), pc.is_in(text, pa.array(KEY_PART_PLACEHOLDERS))
        )
        if pc.any(bad).as_py():
            value = text.filter(pc.fill_null(bad, False))[0].as_py()
            raise InvalidRecordsError(
                f"record key field {field!r} has the value {value!r}: a part of a complex record key "
                f"({', '.join(key_fields)}) may not contain {KEY_PART_SEPARATOR!r} or be one of "
                f"{', '.join(KEY_PART_PLACEHOLDERS)}, or two records' keys could be the same string"
            )


def _complex_keys(key_fields: Sequence[str], texts: Sequence[Any]) -> pa.Array:
    """Hudi's complex keys, ``f1:v1,f2:v2``, from each field's values as text."""
    parts: list[Any] = []
    for index, (field, text) in enumerate(zip(key_fields, texts, strict=True)):
        parts.extend([("," if index else "") + f"{field}:", text])
    joined = pc.binary_join_element_wise(*parts, "")
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def record_key_array(data: pa.Table, key_fields: Sequence[str], complex_keys: bool) -> pa.Array:
    """Hudi's record keys of stored rows, computed over whole columns (virtual keys: tables
    written without meta columns): the value for a simple key, ``f1:v1,f2:v2`` for a complex
    one, where a null value is ``__null__`` and an empty one ``__empty__``.

    Raises ``UnsupportedTableError`` for a key column whose text Arrow does not spell as
    Java does (floating point, timestamps): such a key could not be matched exactly."""
    texts = []
    for field in key_fields:
        column = data.column(field)
        kind = column.type
        if not _spelled_by_cast(kind):
            raise UnsupportedTableError(
                f"record key field {field!r} is {kind}: fedcore cannot spell its values as Hudi's "
                "key generator does, so it cannot compute this table's record keys"
            )
        texts.append(pc.cast(column, pa.string()))
    if complex_keys:
        spelled = [pc.if_else(pc.equal(t, ""), "__empty__", pc.fill_null(t, "__null__")) for t in texts]
        return _complex_keys(key_fields, spelled)
    joined = texts[0]
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def stored_keys(data: pa.Table, key_fields: Sequence[str], key_generator: str, meta_fields: bool) -> pa.Array:
    """The record keys of stored rows (as text): their ``_hoodie_record_key``, or for a table
    written without meta fields (virtual keys, ``meta_fields`` False), computed from the key
    fields as Hudi's key generators spell them (``record_key_array``)."""
    if meta_fields:
        keys = data.column(RECORD_KEY)
        keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
        return keys if pa.types.is_string(keys.type) else keys.cast(pa.string())
    complex_keys = len(key_fields) > 1 or key_generator.strip() == P.COMPLEX_KEY_GENERATOR
    return record_key_array(data, key_fields, complex_keys)


def _spelled_by_cast(kind: pa.DataType) -> bool:
    """Whether Arrow's cast to text spells values of ``kind`` as Java's ``toString`` does (not
    floating point, timestamps or nested values)."""
    return not (pa.types.is_floating(kind) or pa.types.is_timestamp(kind) or pa.types.is_nested(kind))


def stored_key_columns(key_fields: Sequence[str], meta_fields: bool) -> list[str]:
    """The columns ``stored_keys`` reads: the meta column, or (virtual keys) the key fields."""
    return [RECORD_KEY] if meta_fields else list(key_fields)


def virtual_key_types_error(schema: pa.Schema, key_fields: Sequence[str]) -> UnsupportedTableError | None:
    """Why a table written without meta fields (virtual keys) could not spell the keys of rows
    in ``schema`` as Hudi's key generators do (None: it can): every read and upsert computes
    them, so a key fedcore cannot spell exactly is refused before it is written."""
    for field in key_fields:
        if field not in schema.names:
            continue
        kind = schema.field(field).type
        if not _spelled_by_cast(kind):
            return UnsupportedTableError(
                f"record key field {field!r} is {kind}: a table without meta fields "
                f"({P.POPULATE_META_FIELDS}=false) computes its keys from their values, and fedcore "
                "cannot spell such values as Hudi's key generators do; give the key as text or integers, "
                f"or keep meta fields for this table ({P.POPULATE_META_FIELDS}=true, fixed when a table is "
                "created)"
            )
    return None
