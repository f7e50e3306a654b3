"""Apache Hudi's archived timeline: the instants Hudi's own archival moved off the active timeline.

Hudi's writers keep their active timeline short as fed's do, but into log files of their own
under ``.hoodie/archived/`` (``.commits_.archive.<n>_<write token>``): Avro data blocks of
``HoodieArchivedMetaEntry`` records, one per state of each instant, the instant's metadata a
nested record (``hoodieCommitMetadata``, ``hoodieCleanMetadata``, ...). Hudi's readers count
an instant older than the active timeline's first as committed, so what an archived write
made is still part of the table. fed's metadata table holds it once it took the instant in
(a delta, or a compaction's manifest); an instant a Hudi writer made and archived before fed
saw it is read back from here (``metadata.table``, and the repair tool's account of the
table, ``history``). fed's own archival writes Parquet files beside Hudi's (``archival``),
which Hudi's archived-timeline reader passes by, as this module passes fed's.

Each completed instant's metadata comes back as JSON with the field names of Hudi's
active-timeline files (Hudi's Avro records and its JSON share them), so the code that takes
an active instant in takes an archived one in the same way.

Tables of versions 8 and 9 have Hudi 1.x's archived timeline as well (``fedcore.timeline.lsm``,
where fed's archival of such tables writes too): its rows hold each instant's completed file
as it was, which the table version's codec reads as it reads an active one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

import pyarrow.parquet as pq
from fsspec import AbstractFileSystem

from fedcore import properties as P
from fedcore.exceptions import CorruptLogFileError, MetadataTableError, UnsupportedLogBlockError
from fedcore.io.errors import storage_errors
from fedcore.io.filesystems import read_objects
from fedcore.log.blocks import BlockType, avro_records, read_blocks
from fedcore.timeline import (
    ARCHIVE_FOLDER,
    CLEAN,
    COMMIT,
    DELTA_COMMIT,
    REPLACE_COMMIT,
    ROLLBACK,
    InstantNaming,
)
from fedcore.timeline.lsm import HISTORY_FILE, history_snapshot

#: Hudi's archive log files: ``.commits_.archive.<version>_<write token>``.
HUDI_ARCHIVE_PREFIX: Final = ".commits_.archive."
#: The field of ``HoodieArchivedMetaEntry`` that holds a completed instant's metadata.
_BODY_FIELDS: Final = {
    COMMIT: "hoodieCommitMetadata",
    DELTA_COMMIT: "hoodieCommitMetadata",
    REPLACE_COMMIT: "hoodieReplaceCommitMetadata",
    CLEAN: "hoodieCleanMetadata",
    ROLLBACK: "hoodieRollbackMetadata",
}


def archive_folder(table_path: str) -> str:
    return f"{table_path}/{P.HOODIE_FOLDER}/{ARCHIVE_FOLDER}"


@dataclass(frozen=True)
class ArchivedInstant:
    """A completed instant in Hudi's archived timeline."""

    time: str
    action: str
    #: Its metadata as JSON, in the shape of its completed timeline file, or from Hudi 1.x's
    #: archived timeline that file's bytes (None for an action whose metadata fed does not
    #: read, such as a savepoint).
    body: bytes | None


def hudi_archive_files(
    fs: AbstractFileSystem, table_path: str, naming: InstantNaming | None
) -> dict[str, int]:
    """Hudi's archive log files in the table's archive folder, and given the table's
    ``naming``, the files of Hudi 1.x's archived timeline's latest snapshot where the table
    version has one (None: a caller that reads that history itself): path -> size (none:
    empty)."""
    history = naming.history_folder(table_path) if naming is not None else None
    found = (
        {f"{history}/{f.name}": f.length for f in history_snapshot(fs, history).files}
        if history is not None
        else {}
    )
    folder = archive_folder(table_path)
    try:
        with storage_errors(folder):
            entries = fs.ls(folder, detail=True, refresh=True)
    except FileNotFoundError:
        return found
    return found | {
        str(entry["name"]): int(entry["size"])
        for entry in entries
        if entry.get("type") == "file"
        and str(entry["name"]).rsplit("/", 1)[-1].startswith(HUDI_ARCHIVE_PREFIX)
        and not str(entry["name"]).endswith(".crc")
    }


def read_hudi_archive(fs: AbstractFileSystem, paths: list[str]) -> list[ArchivedInstant]:
    """The completed instants Hudi's archive log files ``paths`` hold, oldest first (one
    entry per instant, should a retried archival have written it twice)."""
    found: dict[str, ArchivedInstant] = {}
    history = sorted(p for p in paths if HISTORY_FILE.fullmatch(p.rsplit("/", 1)[-1]))
    for path in history:
        with storage_errors(path, data=True), fs.open(path, "rb") as handle:
            rows = pq.read_table(handle, columns=["instantTime", "action", "metadata"])
        for time, action, body in zip(*(rows.column(c).to_pylist() for c in rows.column_names), strict=True):
            if time and action in _BODY_FIELDS and body is not None:
                found[time] = ArchivedInstant(time, action, body)
    paths = sorted(p for p in paths if p not in history)
    for path, data in zip(paths, read_objects(fs, paths), strict=True):
        try:
            blocks = read_blocks(data, path)
            for block in blocks:
                if block.type != BlockType.AVRO_DATA:
                    continue  # a corrupt block (a crashed append): Hudi's reader skips it too
                for entry in avro_records(block):
                    instant = _completed(entry)
                    if instant is not None:
                        found[instant.time] = instant
        except (CorruptLogFileError, UnsupportedLogBlockError, ValueError, TypeError) as exc:
            raise MetadataTableError(
                f"Apache Hudi's archived timeline file {path} cannot be read: {exc}"
            ) from exc
    return [found[time] for time in sorted(found)]


def _completed(entry: dict[str, Any]) -> ArchivedInstant | None:
    time, action = entry.get("commitTime"), entry.get("actionType")
    if not time or not action or entry.get("actionState") not in (None, "COMPLETED"):
        return None
    field = _BODY_FIELDS.get(str(action))
    body = entry.get(field) if field else None
    return ArchivedInstant(
        str(time), str(action), None if body is None else json.dumps(body, default=str).encode()
    )
