"""Pending table services, as their requested instants say: which pending instant is one.

A compaction (``<t>.compaction.requested``: Hudi's Avro ``HoodieCompactionPlan``), a log
compaction (``<t>.logcompaction.requested``, the same plan) or a clustering (a
``<t>.replacecommit.requested`` holding Hudi's ``HoodieRequestedReplaceMetadata`` whose
operation is ``CLUSTER``) reads file slices it then replaces: a writer must not change them
under it, and a clean must keep them, whoever scheduled it (``fedcore.commit.pending``). Any
other pending ``replacecommit`` (an insert overwrite) is a write, not a service.
"""

from __future__ import annotations

import io
from typing import Any, Final

import fastavro

from fedcore.timeline import COMPACTION, REPLACE_COMMIT

#: Hudi's log compaction: log blocks of a slice merged into one new log file.
LOG_COMPACTION: Final = "logcompaction"
#: The actions of table services that read file groups they then replace.
SERVICE_ACTIONS: Final = frozenset({COMPACTION, LOG_COMPACTION, REPLACE_COMMIT})
#: ``HoodieRequestedReplaceMetadata.operationType`` of a clustering.
CLUSTER: Final = "CLUSTER"


def read_plan(data: bytes) -> list[dict[str, Any]]:
    """The operations of a compaction plan (Hudi's or fed's): one per file slice."""
    records = _records(data)
    return list(records[0].get("operations") or []) if records else []


def service_kind(action: str, requested: bytes) -> str | None:
    """What a pending instant is, as its action and requested content say: "compaction", "log
    compaction" or "clustering"; None for a write."""
    if action == COMPACTION:
        return "compaction"
    if action == LOG_COMPACTION:
        return "log compaction"
    if action == REPLACE_COMMIT:
        records = _records(requested)
        if records and records[0].get("operationType") == CLUSTER:
            return "clustering"
    return None


def _records(data: bytes) -> list[dict[str, Any]]:
    """The records of an Avro container (none for an empty file or one that is not Avro: a
    write's requested file is empty)."""
    if not data.startswith(b"Obj\x01"):
        return []
    try:
        return [r for r in fastavro.reader(io.BytesIO(data)) if isinstance(r, dict)]
    except (ValueError, EOFError, KeyError, IndexError, TypeError, UnicodeDecodeError):
        return []
