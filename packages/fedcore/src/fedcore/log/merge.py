"""Merge-on-read: which log blocks apply, and a file slice's rows merged by record key.

Block selection follows Hudi's log record scanner (table version 6; in Hudi 1.x's tables
each log file holds one delta commit's blocks, and the same rules select them): blocks are
read in log file order; reading stops at a block later than the instant read; a
data or delete block counts only if its instant completed (blocks of failed
writes stay in the logs until cleaned); a rollback command block removes the
trailing queued blocks of its target instant.

Merging follows Hudi's record payloads, vectorised with Arrow and numpy (the
only Python loops are per merge round and per block, never per record):

- log records of one key combine in log order by ``preCombine``: the newer
  record wins unless the older one has a greater ordering value (the table's
  precombine field); a record after a delete always wins; a delete wins unless it
  carries an ordering value of the same type that is smaller than the record's;
- the combined log record then updates the base record: with
  ``OverwriteWithLatestAvroPayload`` (Hudi's default) it replaces it whatever the
  ordering; with ``DefaultHoodieRecordPayload`` the base record stays if its
  ordering value is greater; a delete, or a record with ``_hoodie_is_deleted``
  true, removes it; log records with no base record are inserts.

Hudi 1.x's tables (versions 8 and 9) name a merge mode instead (``MERGE_MODES``): commit-time
ordering is the first rule with no ordering field (the latest write wins), event-time
ordering the ordering payload's, but for deletes that carry an ordering value, which are
ordered like records (``MergeRules.ordered_deletes``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fedcore import properties as P
from fedcore.exceptions import UnsupportedTableError
from fedcore.log.blocks import (
    BlockType,
    LogBlock,
    check_applicable,
    data_records,
    delete_records,
    wrapper_of,
)
from fedcore.schema.meta import RECORD_KEY

IS_DELETED: Final = "_hoodie_is_deleted"
#: Payload classes whose merge fedcore reproduces, by what decides a base record's update.
PAYLOADS: Final[dict[str, Literal["latest", "ordering"]]] = {
    P.OVERWRITE_WITH_LATEST_PAYLOAD: "latest",
    P.DEFAULT_HOODIE_PAYLOAD: "ordering",
}


def applicable_blocks(
    log_blocks: Sequence[LogBlock], read_instant: str, committed: Callable[[str], bool]
) -> list[LogBlock]:
    """The data and delete blocks that make up a file slice as of ``read_instant``."""
    queue: list[LogBlock] = []
    for block in log_blocks:
        if block.type != BlockType.CORRUPT and block.instant > read_instant:
            break
        if block.type == BlockType.CORRUPT:
            queue.append(block)
            continue
        if block.type != BlockType.COMMAND and not committed(block.instant):
            continue  # a failed or pending write's block
        check_applicable(block)
        if block.type == BlockType.COMMAND:
            while queue and (
                queue[-1].type == BlockType.CORRUPT or queue[-1].instant == block.target_instant
            ):
                queue.pop()
        else:
            queue.append(block)
    return [block for block in queue if block.type != BlockType.CORRUPT]


@dataclass(frozen=True)
class MergeRules:
    """How a table merges records of one key: by its ordering (precombine) field, and with
    which payload's rule for updating a base record (``PAYLOADS``).

    ``ordered_deletes``: Hudi 1.x's event-time ordering, where a delete that carries an
    ordering value (not Hudi's default, the int 0) is ordered like a record: a later record
    brings the key back only with an ordering value at least the delete's, and a base record
    with a greater one survives it. Hudi 0.x's payloads let a delete remove the base record
    and a later record always win over it."""

    ordering_field: str | None
    payload: Literal["latest", "ordering"]
    ordered_deletes: bool = False


def merge_rules(name: str, config: Mapping[str, str], columns: Collection[str]) -> MergeRules:
    """A table's merge rules (``columns``: its data columns, empty when not known yet), or
    ``UnsupportedTableError`` for a payload or merger fedcore cannot reproduce."""
    if config.get(P.RECORD_MERGE_MODE, "").strip():
        return _merge_mode_rules(name, config, columns)
    strategy = config.get(P.RECORD_MERGER_STRATEGY, P.DEFAULT_RECORD_MERGER_STRATEGY).strip()
    payload = config.get(P.PAYLOAD_CLASS, "").strip() or P.OVERWRITE_WITH_LATEST_PAYLOAD
    if strategy != P.DEFAULT_RECORD_MERGER_STRATEGY or payload not in PAYLOADS:
        raise UnsupportedTableError(
            f"table {name} merges records with {payload} (merger strategy {strategy}); fedcore merges "
            f"only with {' and '.join(sorted(PAYLOADS))}, so it refuses what would merge records (a "
            "snapshot read of log files, an upsert; a read-optimized query reads base files only)"
        )
    ordering = config.get(P.PRECOMBINE_FIELD) or None
    if ordering is not None and columns and ordering not in columns:
        raise UnsupportedTableError(f"table {name}'s precombine field {ordering!r} is not a column")
    return MergeRules(ordering, PAYLOADS[payload])


#: Hudi 1.x's merge modes fedcore reproduces, as the payload rule each amounts to: the latest
#: write wins whatever its ordering value, or the greatest ordering value wins (a tie goes to
#: the latest write), among log records and over the base record alike.
MERGE_MODES: Final[dict[str, Literal["latest", "ordering"]]] = {
    "COMMIT_TIME_ORDERING": "latest",
    "EVENT_TIME_ORDERING": "ordering",
}


def _merge_mode_rules(name: str, config: Mapping[str, str], columns: Collection[str]) -> MergeRules:
    """The rules of a table whose config names a merge mode (table versions 8 and 9), or
    ``UnsupportedTableError`` for what would merge records in another way than fedcore can."""
    mode = config.get(P.RECORD_MERGE_MODE, "").strip().upper()
    what = (
        "so it refuses what would merge records (a snapshot read of log files, an upsert; a "
        "read-optimized query reads base files only)"
    )
    if mode not in MERGE_MODES:
        raise UnsupportedTableError(
            f"table {name} merges records by {P.RECORD_MERGE_MODE}={mode} (a payload class or merger "
            f"of its own); fedcore merges by {' and '.join(MERGE_MODES)}, {what}"
        )
    partial = config.get(P.PARTIAL_UPDATE_MODE, "NONE").strip().upper() or "NONE"
    if partial != "NONE":
        raise UnsupportedTableError(
            f"table {name} has partial updates ({P.PARTIAL_UPDATE_MODE}={partial}): its log records "
            f"may carry some columns only, which fedcore does not merge column by column, {what}"
        )
    settings = sorted(k for k in config if k.startswith(P.MERGE_PROPERTY_PREFIX))
    if settings:
        raise UnsupportedTableError(
            f"table {name} sets {', '.join(settings)} (such as a column marking deletes), which "
            f"fedcore does not read, {what}"
        )
    if MERGE_MODES[mode] == "latest":
        return MergeRules(None, "latest")  # the ordering field takes no part
    fields = [
        f.strip() for f in (config.get(P.ORDERING_FIELDS) or config.get(P.PRECOMBINE_FIELD) or "").split(",")
    ]
    fields = [f for f in fields if f]
    if len(fields) > 1:
        raise UnsupportedTableError(
            f"table {name} orders records by {len(fields)} fields ({', '.join(fields)}); fedcore "
            f"orders by one, {what}"
        )
    ordering = fields[0] if fields else None
    if ordering is not None and columns and ordering not in columns:
        raise UnsupportedTableError(f"table {name}'s ordering field {ordering!r} is not a column")
    return MergeRules(ordering, "ordering", ordered_deletes=True)


def merge_into_base(
    stored: pa.Table, incoming: pa.Table, replaced: pa.Array | None, rules: MergeRules
) -> tuple[pa.Table, pa.Table]:
    """A copy-on-write rewrite of a file group, as Hudi's merge handle does it: the stored
    records that stay, and the incoming records written (both with ``_hoodie_record_key``).

    ``replaced``: the keys whose stored records the write updates or deletes (None: none, an
    insert). An incoming record with ``_hoodie_is_deleted`` true is never written: it deletes
    the stored record of its key, or (an insert) is dropped. With the ordering payload
    (``DefaultHoodieRecordPayload``), a stored record whose ordering value is greater than its
    update's stays, and the update (or its delete) is dropped; a tie goes to the update."""
    keep_stored = np.ones(stored.num_rows, bool)
    write = np.ones(incoming.num_rows, bool)
    if replaced is not None and stored.num_rows:
        keep_stored = ~pc.is_in(stored.column(RECORD_KEY), value_set=replaced).to_numpy(zero_copy_only=False)
        if rules.payload == "ordering" and rules.ordering_field is not None and incoming.num_rows:
            at = pc.index_in(stored.column(RECORD_KEY), value_set=incoming.column(RECORD_KEY))
            rows = np.flatnonzero(at.is_valid().to_numpy(zero_copy_only=False))
            if len(rows):
                updates = at.to_numpy(zero_copy_only=False)[rows].astype(np.int64)
                field = rules.ordering_field
                newer_stored = _greater(
                    stored.column(field).take(pa.array(rows)), incoming.column(field).take(pa.array(updates))
                )
                keep_stored[rows[newer_stored]] = True
                write[updates[newer_stored]] = False
    if IS_DELETED in incoming.column_names:
        write &= ~pc.fill_null(incoming.column(IS_DELETED), False).to_numpy(zero_copy_only=False)
    return (
        stored if keep_stored.all() else stored.filter(pa.array(keep_stored)),
        incoming if write.all() else incoming.filter(pa.array(write)),
    )


@dataclass(frozen=True)
class LogRecords:
    """The records of one applied block: a data table, or the keys a delete block removes."""

    block: LogBlock
    data: pa.Table | None
    deletes: pa.Table | None

    @classmethod
    def of(cls, block: LogBlock) -> LogRecords:
        if block.type == BlockType.DELETE:
            return cls(block, None, delete_records(block))
        return cls(block, data_records(block), None)


def merge(
    base: pa.Table | None,
    base_keys: pa.Array | None,
    logs: Sequence[LogRecords],
    log_keys: Sequence[pa.Array | None],
    rules: MergeRules,
    ordering_type: pa.DataType | None,
) -> tuple[pa.Table | None, list[tuple[LogRecords, pa.Table]]]:
    """The base rows that stay and, per data block, its rows that are the latest version.

    ``base_keys`` and ``log_keys`` (None for delete blocks, whose keys they hold) are the
    record keys of ``base`` and of each data block's rows."""
    frame = _log_frame(logs, log_keys, rules, ordering_type)
    if frame.num_rows == 0:
        return base, []
    winner, winner_keys = _combine(frame, rules.ordered_deletes)
    empty = frame.column("empty").to_numpy(zero_copy_only=False)[winner]
    deleted = frame.column("deleted").to_numpy(zero_copy_only=False)[winner]
    emit = ~empty & ~deleted
    kept_base = base
    if base is not None and base_keys is not None and base.num_rows:
        position = pc.index_in(base_keys, value_set=winner_keys)
        updated = position.is_valid().to_numpy(zero_copy_only=False)
        keep = ~updated
        if rules.payload == "ordering" and rules.ordering_field is not None and updated.any():
            rows = np.flatnonzero(updated)
            groups = position.to_numpy(zero_copy_only=False)[rows].astype(np.int64)
            base_ordering = base.column(rules.ordering_field).take(pa.array(rows))
            log_ordering = frame.column("ordering").take(pa.array(winner[groups]))
            stays = _greater(base_ordering, log_ordering)
            if not rules.ordered_deletes:
                stays &= ~empty[groups]
            keep[rows[stays]] = True
            emit[groups[stays]] = False
        kept_base = base.filter(pa.array(keep))
    chosen = winner[emit]
    blocks = frame.column("block").to_numpy(zero_copy_only=False)[chosen]
    rows = frame.column("row").to_numpy(zero_copy_only=False)[chosen]
    out = []
    for index, records in enumerate(logs):
        mine = rows[blocks == index]
        if records.data is not None and len(mine):
            out.append((records, records.data.take(pa.array(np.sort(mine)))))
    return kept_base, out


def _log_frame(
    logs: Sequence[LogRecords],
    log_keys: Sequence[pa.Array | None],
    rules: MergeRules,
    ordering_type: pa.DataType | None,
) -> pa.Table:
    """One row per log record, in log order: key, ordering value, delete flags, origin."""
    ordering_type = ordering_type or pa.null()
    parts = []
    for index, (records, keys) in enumerate(zip(logs, log_keys, strict=True)):
        if records.data is not None:
            data = records.data
            assert keys is not None
            count = data.num_rows
            ordering = (
                data.column(rules.ordering_field).combine_chunks().cast(ordering_type)
                if rules.ordering_field and rules.ordering_field in data.column_names
                else pa.nulls(count, ordering_type)
            )
            deleted = (
                pc.fill_null(data.column(IS_DELETED), False).combine_chunks()
                if IS_DELETED in data.column_names
                else pa.array(np.zeros(count, bool))
            )
            if rules.ordered_deletes and pa.types.is_int32(ordering.type) and deleted.true_count:
                # Hudi 1.x: a record deleted with the default ordering value (the int 0) is a
                # commit-time delete, which nothing ordered before it outranks.
                default = pc.and_(deleted, pc.fill_null(pc.equal(ordering, 0), False))
                ordering = pc.if_else(default, pa.nulls(count, ordering.type), ordering)
            empty = pa.array(np.zeros(count, bool))
        else:
            deletes = records.deletes
            assert deletes is not None
            count = deletes.num_rows
            keys = deletes.column("record_key").combine_chunks()
            ordering = _delete_ordering(deletes, ordering_type if rules.ordering_field else None)
            deleted = pa.array(np.zeros(count, bool))
            empty = pa.array(np.ones(count, bool))
        parts.append(
            pa.table(
                {
                    "key": pc.cast(keys, pa.string()),
                    "ordering": ordering,
                    "empty": empty,
                    "deleted": deleted,
                    "block": pa.array(np.full(count, index, np.int64)),
                    "row": pa.array(np.arange(count, dtype=np.int64)),
                }
            )
        )
    if not parts:
        return pa.table({"key": pa.array([], pa.string())})
    frame = pa.concat_tables(parts)
    if frame.column("key").null_count:
        raise UnsupportedTableError("a log record has no record key")
    return frame


def _delete_ordering(deletes: pa.Table, ordering_type: pa.DataType | None) -> pa.Array:
    """A delete's ordering value, where it has one of the ordering field's own type; null
    (the delete wins, by arrival order) where it has none, another type, or is int 0, as
    Hudi's ``processNextDeletedRecord`` decides."""
    count = deletes.num_rows
    wrapper = wrapper_of(ordering_type) if ordering_type is not None else None
    if ordering_type is None or wrapper is None:
        return pa.nulls(count, ordering_type or pa.null())
    values = deletes.column(wrapper).combine_chunks()
    if wrapper == "IntWrapper":
        values = pc.if_else(pc.equal(values, 0), pa.nulls(count, values.type), values)
    try:
        return values.cast(ordering_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.nulls(count, ordering_type)


def _combine(frame: pa.Table, ordered_deletes: bool) -> tuple[np.ndarray, pa.Array]:
    """For each key, the frame row that survives combining its log records in order (a record
    after a delete: see ``MergeRules.ordered_deletes``)."""
    order = pc.sort_indices(frame, [("key", "ascending"), ("block", "ascending"), ("row", "ascending")])
    order_np = order.to_numpy()
    keys = frame.column("key").take(order).combine_chunks()
    starts = np.ones(len(keys), bool)
    if len(keys) > 1:
        starts[1:] = pc.not_equal(keys.slice(1), keys.slice(0, len(keys) - 1)).to_numpy(zero_copy_only=False)
    group = np.cumsum(starts) - 1
    first = np.flatnonzero(starts)
    rank = np.arange(len(keys)) - first[group]
    winner = order_np[first].copy()
    ordering = frame.column("ordering").combine_chunks()
    empty = frame.column("empty").to_numpy(zero_copy_only=False)
    for step in range(1, int(rank.max()) + 1 if len(rank) else 0):  # one round per update depth
        at = np.flatnonzero(rank == step)
        new = order_np[at]
        groups = group[at]
        old = winner[groups]
        old_greater = _greater(ordering.take(pa.array(old)), ordering.take(pa.array(new)))
        wins = (
            ~old_greater if ordered_deletes else np.where(empty[new], ~old_greater, empty[old] | ~old_greater)
        )
        winner[groups[wins]] = new[wins]
    return winner, keys.take(pa.array(first))


def _greater(left: pa.Array | pa.ChunkedArray, right: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """``left > right`` per row, False where either is null (no ordering: arrival order)."""
    if pa.types.is_null(left.type) or pa.types.is_null(right.type):
        return np.zeros(len(left), bool)
    result = pc.fill_null(pc.greater(left, right), False)
    return np.asarray(result.to_numpy(zero_copy_only=False), bool)
