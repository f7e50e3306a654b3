"""``fed upgrade --table-version 8|9``: a table of version 6 moved to Hudi 1.x's table version 8
or 9, as Apache Hudi's upgrade moves it (``SevenToEightUpgradeHandler``,
``EightToNineUpgradeHandler``), or a table of version 8 to 9.

6 -> 8: every instant file of ``.hoodie/`` goes to ``.hoodie/timeline/``; a completed instant is
named by its completion time, which version 6 never recorded: Hudi takes the completed file's
modification time, and so does fed (later than the instant's own time, whatever the clocks).
Commit metadata is re-encoded as Avro; clean and rollback metadata older fed releases wrote as
JSON too; the rest is copied as it is. The configuration gets version 8's keys, the merge mode
taken from the payload class as Hudi takes it: for a copy-on-write table version 6's default
payload (the latest write wins) is ``COMMIT_TIME_ORDERING``; a merge-on-read table with a
precombine field is ``EVENT_TIME_ORDERING`` whatever its payload (Hudi's choice: from then on
a write with an older ordering value no longer replaces a record). 8 -> 9 changes keys only:
the ordering field is named anew, the payload class becomes
``hoodie.table.legacy.payload.class``.

A merge-on-read table is compacted first, as Hudi's upgrade compacts it (``Table.upgrade``
runs the compaction, a service above this module): its slices then start with base files
alone. The version-6 log files of older slices stay where they are: named after their
slice's base instant, they are placed in that slice by version 8's rule too (the slice with
the greatest start not after that instant's completion), in the order their versions give.

What fed archived of the table (``.hoodie/archived/``) is added to Hudi 1.x's archived
timeline (``.hoodie/timeline/history/``), as Hudi's upgrade converts its own archive log, so
Hudi 1.x's readers see those instants too.

Crash safety: the new timeline is written in full before ``hoodie.properties`` switches (in
one write), and the old instant files go only after it: a reader sees one whole timeline, the
old or the new, and running the upgrade again finishes what a crash left. A write running on
the old version is refused before the upgrade starts (pending instants), and one that began
meanwhile is rolled back (or, if it had decided to commit, moved over) after the switch.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Final

from fedcore import properties as P
from fedcore.commit.transaction import roll_back_failed_writes, roll_back_pending
from fedcore.commit.upgrade import upgrade_config
from fedcore.exceptions import InstantConflictError, UnsupportedTableVersionError
from fedcore.handle.config import TableConfig, upgraded_merge_mode
from fedcore.io.errors import storage_errors
from fedcore.io.filesystems import read_object, remove_files
from fedcore.io.parquet import read_parquet
from fedcore.timeline import (
    CLEAN,
    COMMIT,
    COMPLETED,
    DELTA_COMMIT,
    INFLIGHT,
    REPLACE_COMMIT,
    ROLLBACK,
    Instant,
    instant_time,
    parse_instant_time,
)
from fedcore.timeline.archived import archive_folder
from fedcore.timeline.commit_metadata import action_body, deleted_files, rolled_back_actions
from fedcore.timeline.layout import TableLayout, layout_for
from fedcore.timeline.lsm import append_history, history_rows
from fedcore.timeline.retention import ARCHIVE_PREFIX

if TYPE_CHECKING:
    from fedcore.handle import TableHandle

#: The versions ``upgrade_table_version`` moves a table to.
TARGETS: Final = (8, 9)
_AVRO_MAGIC: Final = b"Obj\x01"
_WRITES: Final = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT})


def upgrade_table_version(
    table: TableHandle, target: int, compact: Callable[[], object] | None = None
) -> dict[str, tuple[str, str]]:
    """Move ``table`` to table version ``target`` (8 or 9); the keys changed, each with its old
    and new value (empty: it was at ``target`` already). ``UnsupportedTableVersionError`` for a
    downgrade or a version fedcore does not write;
    ``InstantConflictError`` while an instant is pending (a write, or a table service).

    ``compact``: folds every slice's log files of a merge-on-read table (the compaction service,
    which sits above this module); run once the upgrade is known to go ahead, before the move."""
    changed = upgrade_config(table)
    config = table.config
    if config.version == target:
        return changed
    if target not in TARGETS or config.version > target or config.version not in (6, 8):
        raise UnsupportedTableVersionError(
            f"table {table.name} has table version {config.version}: fed upgrades version 6 to 8 or 9, "
            f"and 8 to 9, never down (asked: {target})"
        )
    roll_back_failed_writes(table)
    _refuse_pending(table)
    if config.merge_on_read and compact is not None:
        compact()
        _refuse_pending(table)  # a write that began while it ran
    old_layout, new_layout = table.layout, layout_for(target, table.name)
    moved = _moved_instants(table, old_layout, new_layout) if old_layout.timeline_layout == 1 else []
    if old_layout.timeline_layout == 1:
        _convert_archive(table, old_layout, new_layout)
    upgraded = TableConfig({k: v for k, v in config.items() if k not in _dropped(target)})
    upgraded = upgraded.with_properties(_version_keys(config, target))
    upgraded.save_replacing(table.fs.table_fs, table.path)
    for key in sorted(set(config) | set(upgraded)):
        if config.get(key) != upgraded.get(key):
            changed[key] = (config.get(key, ""), upgraded.get(key, ""))
    table.config = upgraded
    table.forget_file_index()
    if moved:
        remove_files(table.fs.table_fs, moved)
        _settle_late_writers(table, old_layout, new_layout)
    return changed


def _refuse_pending(table: TableHandle) -> None:
    pending = table.timeline().pending()
    if pending:
        raise InstantConflictError(
            f"table {table.name} has pending instants ({', '.join(map(str, pending))}): upgrade it when "
            "no write or table service runs"
        )


def _moved_instants(table: TableHandle, old: TableLayout, new: TableLayout) -> list[str]:
    """Write the files of every completed instant of the version-6 timeline into the new one;
    the old paths."""
    fs = table.fs.table_fs
    folder = old.instants.folder(table.path)
    with storage_errors(folder):
        fs.makedirs(f"{new.instants.folder(table.path)}/{P.DEFAULT_HISTORY_FOLDER}", exist_ok=True)
        entries = {str(e["name"]).rsplit("/", 1)[-1]: e for e in fs.ls(folder, detail=True, refresh=True)}
    instants = {name: old.instants.parse(name) for name in entries}
    # Only completed instants' files: a pending one is a write that began after the check for
    # them, which ``_settle_late_writers`` resolves once the switch is made.
    done = {i.time for i in instants.values() if i is not None and i.is_completed}
    moved = []
    for name, instant in instants.items():
        if instant is not None and instant.time in done:
            _move(table, f"{folder}/{name}", instant, old, new, _entry_time(entries[name]))
            moved.append(f"{folder}/{name}")
    return moved


def _convert_archive(table: TableHandle, old: TableLayout, new: TableLayout) -> None:
    """Add what fed archived of the version-6 table to Hudi 1.x's archived timeline, as Hudi's
    upgrade converts its own archive log: completed instants' metadata re-encoded as the
    active ones are, each completed at its requested time (version 6 recorded no other), a
    clean's or compaction's plan as it was. fed's archive files stay (Hudi's upgrade leaves
    its log too); an upgrade run again after a crash adds no instant twice."""
    fs = table.fs.table_fs
    history = new.instants.history_folder(table.path)
    folder = archive_folder(table.path)
    try:
        with storage_errors(folder):
            names = sorted(str(n) for n in fs.ls(folder, detail=False, refresh=True))
    except FileNotFoundError:
        return
    names = [n for n in names if n.rsplit("/", 1)[-1].startswith(ARCHIVE_PREFIX)]
    if history is None or not names:
        return
    instants: list[Instant] = []
    contents: list[bytes] = []
    for name in names:
        archived = read_parquet(read_object(fs, name))
        for file, content in zip(
            archived.column("file").to_pylist(), archived.column("content").to_pylist(), strict=True
        ):
            instant = old.instants.parse(file)
            if instant is None:
                continue
            if instant.is_completed:
                instant = Instant(instant.time, instant.action, COMPLETED, completion_time=instant.time)
            content = _reencoded(instant, content, old, new)  # an inflight plan too, as Hudi's upgrade
            instants.append(instant)
            contents.append(content)
    append_history(fs, history, history_rows(instants, contents))


def _move(
    table: TableHandle, path: str, instant: Instant, old: TableLayout, new: TableLayout, modified: datetime
) -> None:
    """Write one instant file of the old timeline into the new one, re-encoded."""
    fs = table.fs.table_fs
    if instant.is_completed:
        completion = _completion_time(modified, instant, table.config.timeline_zone)
        instant = Instant(instant.time, instant.action, COMPLETED, completion_time=completion)
    data = _reencoded(instant, read_object(fs, path), old, new)
    target = new.instants.path(table.path, instant)
    with storage_errors(target):
        fs.pipe_file(target, data)


def _entry_time(entry: dict[str, Any]) -> datetime:
    """When a listed file was last written (local files and S3 name it differently)."""
    modified = entry.get("mtime") or entry.get("LastModified") or entry.get("created")
    if isinstance(modified, (int, float)):
        return datetime.fromtimestamp(modified, timezone.utc)
    if isinstance(modified, datetime):
        return modified if modified.tzinfo else modified.replace(tzinfo=timezone.utc)
    return datetime.now(timezone.utc)


def _modified(fs: Any, path: str) -> datetime:
    with storage_errors(path):
        return _entry_time(fs.info(path))


def _completion_time(modified: datetime, instant: Instant, zone: Any) -> str:
    """A completed version-6 instant's completion time: its file's modification time (Hudi's
    choice), but after the instant's own time."""
    earliest = parse_instant_time(instant.time, zone) + timedelta(milliseconds=1)
    return instant_time(max(modified, earliest), zone)


def _reencoded(instant: Instant, data: bytes, old: TableLayout, new: TableLayout) -> bytes:
    """An instant file's bytes in the new version's encoding."""
    if not data.strip() or data.startswith(_AVRO_MAGIC):
        return data  # a requested file, or Hudi's (or fed's) Avro already
    if instant.action in _WRITES:
        metadata = old.commits.decode(data, str(instant))
        if instant.state == COMPLETED:
            return new.commits.encode(metadata)
        if instant.state == INFLIGHT:
            return new.commits.encode_inflight(metadata.operation, (), metadata.extra)
        return data
    if instant.state == COMPLETED and instant.action == CLEAN:
        body = action_body(data)
        return new.services.clean(
            start=str(body.get("startCleanTime") or instant.time),
            earliest_retained=str(body.get("earliestCommitToRetain") or "") or None,
            deleted=deleted_files(data),
            took_ms=int(body.get("timeTakenInMillis") or 0),
        )
    if instant.state == COMPLETED and instant.action == ROLLBACK:
        body = action_body(data)
        (undone, action), *_ = rolled_back_actions(data).items() or [("", "")]
        return new.services.rollback(
            start=str(body.get("startRollbackTime") or instant.time),
            rolled_back=undone,
            action=action,
            deleted=deleted_files(data),
            took_ms=int(body.get("timeTakenInMillis") or 0),
        )
    return data


def _dropped(target: int) -> set[str]:
    """Version 6's keys the target version renamed or dropped."""
    dropped = {P.RECORD_MERGER_STRATEGY}
    if target == 9:
        dropped |= {P.PRECOMBINE_FIELD, P.PAYLOAD_CLASS, P.RECORD_MERGE_STRATEGY_ID}
    return dropped


def _version_keys(config: TableConfig, target: int) -> dict[str, str]:
    """The keys version ``target`` records, from a version-6 or 8 config, as Hudi's upgrade
    writes them (``SevenToEightUpgradeHandler.upgradeMergeMode``: a merge-on-read table with
    a precombine field orders by event time, whatever its payload)."""
    payload = config.get(P.PAYLOAD_CLASS, "").strip() or P.OVERWRITE_WITH_LATEST_PAYLOAD
    mode = config.get(P.RECORD_MERGE_MODE, "").strip() or upgraded_merge_mode(
        payload, config.merge_on_read, config.precombine_field
    )
    keys = {
        P.TABLE_VERSION: str(target),
        P.TABLE_INITIAL_VERSION: config.get(P.TABLE_INITIAL_VERSION, str(config.version)),
        P.TIMELINE_LAYOUT_VERSION: "2",
        P.TIMELINE_PATH: P.DEFAULT_TIMELINE_FOLDER,
        P.RECORD_MERGE_MODE: mode,
    }
    generator = P.key_generator(config)
    if generator in P.KEY_GENERATOR_TYPE_OF:
        keys[P.KEY_GENERATOR_TYPE] = P.KEY_GENERATOR_TYPE_OF[generator]
    if target == 8:
        keys[P.PAYLOAD_CLASS], keys[P.RECORD_MERGE_STRATEGY_ID] = P.MERGE_MODE_KEYS_V8[mode]
    else:
        keys[P.LEGACY_PAYLOAD_CLASS] = payload
        if config.precombine_field:
            keys[P.ORDERING_FIELDS] = config.precombine_field
    return keys


def _settle_late_writers(table: TableHandle, old: TableLayout, new: TableLayout) -> None:
    """A write that began on version 6 after the pending check and before the switch left its
    files in ``.hoodie/``, where the new timeline is never read: roll it back (its writer then
    fails with a conflict), or, if it had decided to commit, roll it forward into the new
    timeline; a completed one its writer finished there is moved over."""
    fs = table.fs.table_fs
    folder = old.instants.folder(table.path)
    late = _listed(fs, folder, old)
    if not late:
        return
    pending = {i.time: i for _, i in late if not i.is_completed}
    done = {i.time for _, i in late if i.is_completed}
    for time, instant in pending.items():
        if time not in done:
            roll_back_pending(table, instant)
    completed = {i.time for i in table.timeline().completed()}
    stray = []
    for path, instant in _listed(fs, folder, old):
        if instant.is_completed and instant.time not in completed:
            _move(table, path, instant, old, new, _modified(fs, path))
        stray.append(path)
    remove_files(fs, stray)


def _listed(fs: Any, folder: str, layout: TableLayout) -> list[tuple[str, Instant]]:
    """The instant files ``folder`` lists now under ``layout``'s names, with their instants."""
    with storage_errors(folder):
        names = [str(n).rsplit("/", 1)[-1] for n in fs.ls(folder, detail=False, refresh=True)]
    found = [(f"{folder}/{n}", layout.instants.parse(n)) for n in names]
    return [(path, instant) for path, instant in found if instant is not None]
