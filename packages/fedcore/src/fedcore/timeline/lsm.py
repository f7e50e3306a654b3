"""Hudi 1.x's archived timeline, the "LSM history": when each archived instant completed.

Hudi 1.x's archival (table versions 8 and 9) moves completed instants out of
``.hoodie/timeline/`` into Parquet files under its ``history/`` folder
(``hoodie.timeline.history.path``), one row per instant (``HoodieLSMTimelineInstant``:
``instantTime``, ``completionTime``, ``action``, the instant's files' bytes). Which files hold
the current state is what a manifest says: ``_version_`` names the latest snapshot N (absent
or unreadable: the greatest ``manifest_N``), and ``manifest_N`` is JSON listing its files
(``{"files": [{"fileName": ..., "fileLen": ...}]}``); files it does not list are compaction
leftovers, which a reader passes by, as Hudi's does.

A reader of a merge-on-read table needs the completion times of archived delta commits whose
log files are still live: a log file belongs to the slice its delta commit's completion time
falls in (``fedcore.files.file_group``).
"""

from __future__ import annotations

import json
import re
from typing import Final

import pyarrow.parquet as pq
from fsspec import AbstractFileSystem

from fedcore.exceptions import UnsupportedTableError
from fedcore.io.errors import storage_errors

#: Where the history lives in the timeline folder, Hudi's default (``hoodie.timeline.history.path``).
DEFAULT_HISTORY_FOLDER: Final = "history"
_MANIFEST_RE: Final = re.compile(r"manifest_(\d+)")
_VERSION_FILE: Final = "_version_"


def archived_completion_times(fs: AbstractFileSystem, history_folder: str) -> dict[str, str]:
    """Requested time -> completion time of every instant the history's latest snapshot holds
    (an instant archived without one completed at its requested time, as Hudi reads it); empty
    when there is no history."""
    with storage_errors(history_folder):
        try:
            names = {str(p).rsplit("/", 1)[-1] for p in fs.ls(history_folder, detail=False, refresh=True)}
        except FileNotFoundError:
            return {}
        version = _latest_version(fs, history_folder, names)
        if version is None:
            return {}
        manifest_path = f"{history_folder}/manifest_{version}"
        try:
            listed = json.loads(fs.cat_file(manifest_path))["files"]
            files = [str(entry["fileName"]) for entry in listed]
        except (ValueError, KeyError, TypeError) as exc:
            raise UnsupportedTableError(
                f"{manifest_path}: not a manifest of Hudi's archived timeline ({exc})"
            ) from exc
        found: dict[str, str] = {}
        for name in files:
            path = f"{history_folder}/{name}"
            with storage_errors(path, data=True), fs.open(path, "rb") as handle:
                rows = pq.read_table(handle, columns=["instantTime", "completionTime"])
            requested = rows.column("instantTime").to_pylist()
            completed = rows.column("completionTime").to_pylist()
            for time, completion in zip(requested, completed, strict=True):
                if time:
                    found[str(time)] = str(completion or time)
        return found


def _latest_version(fs: AbstractFileSystem, folder: str, names: set[str]) -> int | None:
    """The latest snapshot's number: ``_version_``'s, else the greatest manifest's."""
    if _VERSION_FILE in names:
        text = bytes(fs.cat_file(f"{folder}/{_VERSION_FILE}")).decode("utf-8", "replace").strip()
        if text.isdigit() and f"manifest_{int(text)}" in names:
            return int(text)
    numbers = [int(m[1]) for m in map(_MANIFEST_RE.fullmatch, names) if m is not None]
    return max(numbers, default=None)


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
