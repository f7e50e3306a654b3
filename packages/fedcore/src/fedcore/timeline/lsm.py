"""Hudi 1.x's archived timeline, the "LSM history": the instants archival moved out.

Hudi 1.x's archival (table versions 8 and 9) moves completed instants out of
``.hoodie/timeline/`` into Parquet files under its ``history/`` folder
(``hoodie.timeline.history.path``), one row per instant (``HoodieLSMTimelineInstant``:
``instantTime``, ``completionTime``, the completed ``action``, the completed file's bytes as
``metadata`` and a plan's as ``plan``). Which files hold the current state is what a manifest
says: ``_version_`` names the latest snapshot N (absent or unreadable: the greatest
``manifest_N``), and ``manifest_N`` is JSON listing its files
(``{"files": [{"fileName": ..., "fileLen": ...}]}``); files it does not list are leftovers
of a compaction or of a write that has not reached a manifest yet, which a reader passes by,
as Hudi's does.

A data file is ``<min requested>_<max requested>_<layer>.parquet``. Each archival adds one to
layer 0 (``append_history``); once a layer holds ``COMPACTION_BATCH`` files, its oldest are
merged into one of the next layer, so a reader of the history reads a few files, not one per
archival ever made (Hudi's ``LSMTimelineWriter``).

A reader of a merge-on-read table needs the completion times of archived delta commits whose
log files are still live: a log file belongs to the slice its delta commit's completion time
falls in (``fedcore.files.file_group``).
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from fsspec import AbstractFileSystem

from fedcore.exceptions import UnsupportedTableError
from fedcore.io.atomic import create_exclusive, replace_atomic
from fedcore.io.errors import storage_errors
from fedcore.io.filesystems import remove_files
from fedcore.timeline.instant import (
    CLEAN,
    CLUSTERING,
    COMPACTION,
    COMPLETED,
    INFLIGHT,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    REQUESTED,
    Instant,
)

_MANIFEST_RE: Final = re.compile(r"manifest_(\d+)")
#: A data file's name: ``<min requested>_<max requested>_<layer>.parquet``.
HISTORY_FILE: Final = re.compile(r"(\d+)_(\d+)_(\d)\.parquet")
_VERSION_FILE: Final = "_version_"
#: Files of one layer merged into one of the next (``hoodie.timeline.compaction.batch.size``).
COMPACTION_BATCH: Final = 10
#: Manifests kept besides the latest's predecessors a compaction just made
#: (``hoodie.timeline.manifest.retained.versions``): a reader that took an older one still
#: finds its files.
RETAINED_MANIFESTS: Final = 3

#: ``HoodieLSMTimelineInstant`` as Hudi 1.0 to 1.2 define it; parquet-avro readers take the
#: file's Avro schema from the footer's ``parquet.avro.schema``.
AVRO_SCHEMA: Final = json.dumps(
    {
        "type": "record",
        "name": "HoodieLSMTimelineInstant",
        "namespace": "org.apache.hudi.avro.model",
        "fields": [
            *(
                {
                    "name": name,
                    "type": ["null", {"type": "string", "avro.java.string": "String"}],
                    "default": None,
                }
                for name in ("instantTime", "completionTime", "action")
            ),
            {"name": "metadata", "type": ["null", "bytes"], "default": None},
            {"name": "plan", "type": ["null", "bytes"], "default": None},
            {"name": "version", "type": "int", "default": 1},
        ],
    },
    separators=(",", ":"),
)
SCHEMA: Final = pa.schema(
    [
        pa.field("instantTime", pa.string()),
        pa.field("completionTime", pa.string()),
        pa.field("action", pa.string()),
        pa.field("metadata", pa.binary()),
        pa.field("plan", pa.binary()),
        pa.field("version", pa.int32(), nullable=False),
    ],
    metadata={"parquet.avro.schema": AVRO_SCHEMA, "writer.model.name": "avro"},
)
#: ``LSM_TIMELINE_INSTANT_VERSION_1``, the only version of a row there is.
ROW_VERSION: Final = 1


@dataclass(frozen=True)
class HistoryFile:
    name: str
    length: int

    @property
    def times(self) -> tuple[str, str]:
        """Its first and last instant's requested times."""
        match = HISTORY_FILE.fullmatch(self.name)
        return (match[1], match[2]) if match else ("", "")

    @property
    def layer(self) -> int:
        match = HISTORY_FILE.fullmatch(self.name)
        return int(match[3]) if match else 0


Files = tuple[HistoryFile, ...]


@dataclass(frozen=True)
class Snapshot:
    """The history's latest state: its manifest's number (0: none yet) and its files, oldest first."""

    version: int
    files: tuple[HistoryFile, ...]
    #: Every name the folder's listing showed.
    names: frozenset[str]

    @property
    def newest(self) -> str | None:
        """The newest archived instant's requested time (from the files' names alone)."""
        return max((f.times[1] for f in self.files), default=None)


#: What a pending state's file gives an instant's row of Hudi 1.x's archived timeline as its
#: ``plan`` (``MetadataConversionUtils``): the requested plan of a clean or a compaction; of a
#: replace commit or clustering, its inflight file where that holds anything (an insert
#: overwrite's metadata), else its requested one.
_PLAN_STATES: Final = {
    CLEAN: (REQUESTED,),
    COMPACTION: (REQUESTED,),
    LOG_COMPACTION: (REQUESTED,),
    REPLACE_COMMIT: (INFLIGHT, REQUESTED),
    CLUSTERING: (INFLIGHT, REQUESTED),
}


def history_rows(instants: list[Instant], contents: list[bytes]) -> pa.Table:
    """One row of Hudi 1.x's archived timeline per completed instant, oldest first: its
    requested and completion times, the action it completed as, its completed file's bytes
    (None: empty) and its plan's."""
    files = {(i.time, i.action, i.state): data for i, data in zip(instants, contents, strict=True)}
    completed = sorted((i for i in instants if i.state == COMPLETED), key=lambda i: i.time)
    plans = []
    for instant in completed:
        found = None
        for pending in {i.action for i in instants if i.time == instant.time and i.state != COMPLETED}:
            for state in _PLAN_STATES.get(pending, ()):
                found = files.get((instant.time, pending, state)) or None
                if found is not None:
                    break
        plans.append(found)
    return pa.table(
        {
            "instantTime": [i.time for i in completed],
            "completionTime": [i.completion_time for i in completed],
            "action": [i.action for i in completed],
            "metadata": [files[(i.time, i.action, COMPLETED)] or None for i in completed],
            "plan": plans,
            "version": [ROW_VERSION] * len(completed),
        },
        schema=SCHEMA,
    )


def history_snapshot(fs: AbstractFileSystem, folder: str, *, newest: bool = False) -> Snapshot:
    """The history's latest snapshot (no files: there is no history): the one ``_version_``
    names, as Hudi's readers take it; ``newest``: the greatest manifest's, as a writer builds
    on it (each manifest is made whole from the one before it, so the greatest holds every
    file, even when a crash or a concurrent writer left ``_version_`` behind it).

    A manifest a concurrent clean removed between the listing and its read makes it list
    again (a few times; then the storage error stands)."""
    for attempt in range(_ATTEMPTS):
        with storage_errors(folder):
            try:
                names = frozenset(
                    str(p).rsplit("/", 1)[-1] for p in fs.ls(folder, detail=False, refresh=True)
                )
            except FileNotFoundError:
                return Snapshot(0, (), frozenset())
            version = _greatest_manifest(names) if newest else _latest_version(fs, folder, names)
            if version is None:
                return Snapshot(0, (), names)
            try:
                return Snapshot(version, _manifest(fs, folder, version), names)
            except FileNotFoundError:
                if attempt == _ATTEMPTS - 1:
                    raise
    raise AssertionError("unreachable")


#: Times a reader lists the history again when a concurrent clean removed what it listed.
_ATTEMPTS: Final = 5


def _greatest_manifest(names: frozenset[str]) -> int | None:
    return max((int(m[1]) for m in map(_MANIFEST_RE.fullmatch, names) if m is not None), default=None)


def _manifest(fs: AbstractFileSystem, folder: str, version: int) -> tuple[HistoryFile, ...]:
    path = f"{folder}/manifest_{version}"
    try:
        listed = json.loads(fs.cat_file(path))["files"]
        return tuple(HistoryFile(str(entry["fileName"]), int(entry["fileLen"])) for entry in listed)
    except (ValueError, KeyError, TypeError) as exc:
        raise UnsupportedTableError(f"{path}: not a manifest of Hudi's archived timeline ({exc})") from exc


def read_history(
    fs: AbstractFileSystem,
    folder: str,
    columns: Sequence[str] | None = None,
    *,
    covering: str | None = None,
    snapshot: Snapshot | None = None,
) -> pa.Table:
    """The rows of the history's latest snapshot (``columns`` of them), in requested-time
    order; ``covering``: only of the files whose names say they may hold that instant. A file
    a concurrent clean removed makes it take the snapshot again (not a given ``snapshot``)."""
    wanted = list(SCHEMA.names if columns is None else columns)
    parts: list[pa.Table] = []
    for attempt in range(_ATTEMPTS):
        taken = history_snapshot(fs, folder) if snapshot is None else snapshot
        try:
            parts = _read_files(fs, folder, taken, wanted, covering)
            break
        except FileNotFoundError:
            if snapshot is not None or attempt == _ATTEMPTS - 1:
                raise
    if not parts:
        return pa.schema([SCHEMA.field(c) for c in wanted]).empty_table()
    rows = pa.concat_tables(parts)
    if "instantTime" not in wanted:
        return rows
    return rows.take(pc.sort_indices(rows, [("instantTime", "ascending")]))


def _read_files(
    fs: AbstractFileSystem, folder: str, snapshot: Snapshot, wanted: list[str], covering: str | None
) -> list[pa.Table]:
    """The ``wanted`` columns of the snapshot's files; FileNotFoundError for one gone."""
    parts = []
    for entry in snapshot.files:
        first, last = entry.times
        if covering is not None and not first <= covering <= last:
            continue
        path = f"{folder}/{entry.name}"
        with storage_errors(path, data=True), fs.open(path, "rb") as handle:
            parts.append(pq.read_table(handle, columns=wanted).replace_schema_metadata(None))
    return parts


def archived_completion_times(fs: AbstractFileSystem, history_folder: str) -> dict[str, str]:
    """Requested time -> completion time of every instant the history's latest snapshot holds
    (an instant archived without one completed at its requested time, as Hudi reads it); empty
    when there is no history."""
    rows = read_history(fs, history_folder, ["instantTime", "completionTime"])
    completed = pc.coalesce(rows.column("completionTime"), rows.column("instantTime"))
    return {
        str(time): str(completion)
        for time, completion in zip(
            rows.column("instantTime").to_pylist(), completed.to_pylist(), strict=True
        )
        if time
    }


def append_history(fs: AbstractFileSystem, folder: str, rows: pa.Table) -> None:
    """Add ``rows`` (``SCHEMA``; requested-time order) to the history: a layer-0 file, then a
    manifest listing it, then ``_version_`` naming that manifest; then layers that reached
    ``COMPACTION_BATCH`` files are compacted and manifests no longer needed removed.

    Safe to run again after a crash at any point (archival does, before it deletes anything):
    rows the history holds already are not added twice. Two archivals at once each make a
    manifest of their own numbered after the one they read (an exclusive create; the loser
    reads again), so neither's file is lost; removal takes only files that a removed manifest
    listed, never one no manifest has listed yet."""
    times = rows.column("instantTime").to_pylist()
    if not times:
        return
    snapshot = history_snapshot(fs, folder, newest=True)
    held = set(read_history(fs, folder, ["instantTime"], snapshot=snapshot).column("instantTime").to_pylist())
    if held.issuperset(times):
        _point_at(fs, folder)
        return
    if held:
        rows = rows.filter(pc.invert(pc.is_in(rows.column("instantTime"), pa.array(sorted(held)))))
        times = rows.column("instantTime").to_pylist()
    written = _write_file(fs, folder, f"{times[0]}_{times[-1]}_0.parquet", rows)
    snapshot = _publish(fs, folder, lambda files: files if written in files else _ordered((*files, written)))
    compactions = 0
    for layer in range(10):
        while True:
            batch = [f for f in snapshot.files if f.layer == layer][:COMPACTION_BATCH]
            if len(batch) < COMPACTION_BATCH:
                break
            merged = read_history(
                fs, folder, snapshot=Snapshot(snapshot.version, tuple(batch), snapshot.names)
            )
            name = f"{batch[0].times[0]}_{batch[-1].times[1]}_{layer + 1}.parquet"
            done = _write_file(fs, folder, name, merged)
            gone = set(batch)

            def compacted(files: Files, gone: set[HistoryFile] = gone, done: HistoryFile = done) -> Files:
                if not gone.issubset(files):  # another archival compacted them first
                    return files
                return _ordered((*(f for f in files if f not in gone), done))

            snapshot = _publish(fs, folder, compacted)
            compactions += 1
    _clean(fs, folder, snapshot, RETAINED_MANIFESTS + compactions)


def _write_file(fs: AbstractFileSystem, folder: str, name: str, rows: pa.Table) -> HistoryFile:
    """Write a history file; one already there under its name is a crashed or concurrent
    archival's of the same instants, and the same rows: it is kept."""
    sink = io.BytesIO()
    # GZIP, as Hudi writes them (``hoodie.parquet.compression.codec``).
    pq.write_table(rows.cast(SCHEMA), sink, compression="gzip")
    data = sink.getvalue()
    path = f"{folder}/{name}"
    with contextlib.suppress(FileExistsError):
        create_exclusive(fs, path, data)
        return HistoryFile(name, len(data))
    with storage_errors(path):
        return HistoryFile(name, int(fs.info(path)["size"]))


def _ordered(files: Files) -> Files:
    return tuple(sorted(files, key=lambda f: (f.times, f.layer)))


def _publish(fs: AbstractFileSystem, folder: str, change: Callable[[Files], Files]) -> Snapshot:
    """Write the manifest after the latest with ``change(files)`` as its files, then point
    ``_version_`` at it; an archival that made that number first makes this one read again."""
    for attempt in range(100):
        snapshot = history_snapshot(fs, folder, newest=True)
        files = change(snapshot.files)
        if files == snapshot.files:
            return snapshot
        version = snapshot.version + 1
        body = json.dumps({"files": [{"fileName": f.name, "fileLen": f.length} for f in files]}, indent=2)
        try:
            create_exclusive(fs, f"{folder}/manifest_{version}", body.encode())
        except FileExistsError:
            time.sleep(random.uniform(0, 0.01 * min(attempt + 1, 20)))  # another archival's: after it
            continue
        published = Snapshot(version, files, snapshot.names | {f"manifest_{version}"})
        _point_at(fs, folder)
        return published
    raise UnsupportedTableError(f"{folder}: could not add a manifest to the archived timeline")


def _point_at(fs: AbstractFileSystem, folder: str) -> None:
    """``_version_`` := the greatest manifest. Listed again after each write: another
    archival may have published a greater one and pointed at it before this write, which must
    then not leave ``_version_`` behind it."""
    written = None
    for _ in range(100):
        with storage_errors(folder):
            names = frozenset(str(p).rsplit("/", 1)[-1] for p in fs.ls(folder, detail=False, refresh=True))
            greatest = _greatest_manifest(names)
            if greatest is None or greatest == written:
                return
            replace_atomic(fs, f"{folder}/{_VERSION_FILE}", str(greatest).encode())
        written = greatest


def _clean(fs: AbstractFileSystem, folder: str, snapshot: Snapshot, keep: int) -> None:
    """Remove the manifests before the ``keep`` latest, and the files only they listed."""
    oldest_kept = snapshot.version - keep + 1
    doomed = sorted(
        int(m[1]) for m in map(_MANIFEST_RE.fullmatch, snapshot.names) if m and int(m[1]) < oldest_kept
    )
    if not doomed:
        return
    try:
        kept_files = {
            f.name for n in range(oldest_kept, snapshot.version + 1) for f in _manifest(fs, folder, n)
        }
        listed = {f.name for n in doomed for f in _manifest(fs, folder, n)}
    except FileNotFoundError:
        return  # another archival cleaned meanwhile: the next clean takes what is left
    remove_files(fs, [f"{folder}/{name}" for name in sorted(listed - kept_files)])
    remove_files(fs, [f"{folder}/manifest_{n}" for n in doomed])


def _latest_version(fs: AbstractFileSystem, folder: str, names: frozenset[str]) -> int | None:
    """The latest snapshot's number: ``_version_``'s, else the greatest manifest's."""
    if _VERSION_FILE in names:
        text = bytes(fs.cat_file(f"{folder}/{_VERSION_FILE}")).decode("utf-8", "replace").strip()
        if text.isdigit() and f"manifest_{int(text)}" in names:
            return int(text)
    return _greatest_manifest(names)


class ArchivedCompletionTimes:
    """``archived_completion_times`` of one history folder, read on the first lookup and kept:
    a plan's completion-time lookup of archived instants (it pickles, as the plans an engine
    hands its tasks do)."""

    def __init__(self, fs: AbstractFileSystem, history_folder: str) -> None:
        self.fs = fs
        self.history_folder = history_folder
        self._found: dict[str, str] | None = None

    def __call__(self, instant: str) -> str | None:
        if self._found is None:
            self._found = archived_completion_times(self.fs, self.history_folder)
        return self._found.get(instant)
