"""Markers: what an instant is about to write, named before it is written.

A rollback must find every file a dead writer may have left, without listing data folders
(they are spread over the strategy's prefixes) and without the commit metadata (a failed
write has none). So each write task names its files under ``.hoodie/.temp/<instant>/``
before it writes any, in Hudi's own marker lines (``<partition>/<file>.marker.<TYPE>``),
and each file-group claim a commit takes is recorded there too. Written, read and removed
here alone.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from typing import Final

from fedcore import properties as P
from fedcore.handle import TableHandle
from fedcore.io.errors import storage_errors
from fedcore.io.filesystems import read_objects, remove_tree

#: A marker batch: ``<marker folder>/MARKERS-<token>``, one line per file a task is about to
#: write (``<partition>/<file>.marker.<CREATE|MERGE|APPEND>``, the lines of Hudi's own batched
#: markers).
MARKER_BATCH_PREFIX: Final = "MARKERS-"
#: Claims a commit takes, one empty object each, so a rollback knows which to release.
_CLAIMS: Final = ".claims/"
_MARKER: Final = ".marker."


def marker_folder(table: TableHandle, instant: str) -> str:
    """Where ``instant``'s markers are: Hudi's ``.hoodie/.temp/<instant>``."""
    return f"{table.path}/{P.HOODIE_FOLDER}/.temp/{instant}"


def marker_token(first: str) -> str:
    """A batch token: the task's first file token and a random suffix (retries never collide)."""
    return f"{first}-{uuid.uuid4().hex[:12]}"


def mark_files(table: TableHandle, instant: str, entries: Sequence[tuple[str, str]], token: str) -> None:
    """Markers first: one object naming every file (relative path, kind) a task is about to
    write, before it writes any, so a rollback can always find what was written.

    One request however many files the task writes: the marker folder sits under the table
    path's ``.hoodie/``, one key range per instant, above every range a store has split off
    so far (a new instant is like a new Hive date), so a marker per file made every data
    file cost a request on that one hot prefix, whatever the layout (the throttling lab).
    ``token`` names the batch; it must be unique per task attempt."""
    if not entries:
        return
    batch = f"{marker_folder(table, instant)}/{MARKER_BATCH_PREFIX}{token}"
    body = "".join(f"{path}{_MARKER}{kind}\n" for path, kind in entries).encode()
    with storage_errors(batch):
        table.fs.table_fs.pipe_file(batch, body)


def unmark_files(table: TableHandle, instant: str, token: str) -> None:
    """Drop one marker batch of ``instant`` (its files deleted by the task that wrote them)."""
    batch = f"{marker_folder(table, instant)}/{MARKER_BATCH_PREFIX}{token}"
    with contextlib.suppress(FileNotFoundError), storage_errors(batch):
        table.fs.table_fs.rm_file(batch)


def mark_claim(table: TableHandle, instant: str, name: str) -> None:
    """Record the claim ``name`` among ``instant``'s markers, before it is taken."""
    marker = f"{marker_folder(table, instant)}/{_CLAIMS}{name}"
    with storage_errors(marker):
        table.fs.table_fs.pipe_file(marker, b"")


def marked(table: TableHandle, instant: str) -> tuple[list[str], list[str]]:
    """What the markers of ``instant`` name: the data files written (logical paths) and the
    claims taken (names); nothing when its marker folder is gone."""
    fs = table.fs.table_fs
    folder = marker_folder(table, instant)
    prefix = fs._strip_protocol(folder).rstrip("/") + "/"
    try:
        with storage_errors(folder):
            markers = fs.find(folder, detail=False)
    except FileNotFoundError:
        return [], []  # never written, or another process finished rolling it back
    files: list[str] = []
    claims: list[str] = []
    batches: list[str] = []
    for marker in markers:
        relative = str(marker)[len(prefix) :]
        if relative.startswith(_CLAIMS):
            claims.append(relative[len(_CLAIMS) :])
        elif relative.startswith(MARKER_BATCH_PREFIX):
            batches.append(str(marker))
        else:  # a marker per file, as fedcore wrote them before batches (and Hudi's direct ones)
            files.append(relative.rsplit(_MARKER, 1)[0])
    for body in read_objects(fs, batches):
        files.extend(line.rsplit(_MARKER, 1)[0] for line in body.decode().splitlines() if line)
    return sorted(set(files)), claims


def remove_markers(table: TableHandle, instant: str) -> None:
    """Drop ``instant``'s markers: it completed, or its files are rolled back."""
    folder = marker_folder(table, instant)
    remove_tree(table.fs.table_fs, folder)  # none: nothing was written
