"""How a table version encodes its table services' instant files: a clean's and a rollback's
metadata.

Every completed clean and rollback file is encoded through the table's ``ServiceMetadataCodec``
(``TableHandle.layout.services``, picked by ``fedcore.timeline.layout``), so a table version
whose Hudi readers need another encoding of them (Hudi writes both as Avro) is one more
implementation here, not a condition in each service. Both encodings are read back by
``fedcore.timeline.commit_metadata.action_body``.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping


class ServiceMetadataCodec(ABC):
    """The bytes of a completed clean's and rollback's instant file."""

    @abstractmethod
    def clean(
        self, *, start: str, earliest_retained: str | None, deleted: Mapping[str, Iterable[str]], took_ms: int
    ) -> bytes:
        """A clean started at instant ``start`` that deleted ``deleted`` (partition -> file
        names) in ``took_ms``, keeping the files of ``earliest_retained`` on."""

    @abstractmethod
    def rollback(
        self, *, start: str, rolled_back: str, action: str, deleted: Mapping[str, Iterable[str]], took_ms: int
    ) -> bytes:
        """A rollback started at instant ``start`` that undid ``rolled_back`` (an ``action``),
        deleting ``deleted`` (partition -> file names) in ``took_ms``."""


class JsonServiceMetadataCodec(ServiceMetadataCodec):
    """Table version 6: Hudi's ``HoodieCleanMetadata`` / ``HoodieRollbackMetadata`` field names,
    as JSON. Hudi writes them as Avro; its readers of a snapshot do not read them."""

    def clean(
        self, *, start: str, earliest_retained: str | None, deleted: Mapping[str, Iterable[str]], took_ms: int
    ) -> bytes:
        partitions = {
            partition: {
                "partitionPath": partition,
                "policy": "KEEP_LATEST_COMMITS",
                "deletePathPatterns": sorted(names),
                "successDeleteFiles": sorted(names),
                "failedDeleteFiles": [],
            }
            for partition, names in deleted.items()
        }
        body = {
            "startCleanTime": start,
            "timeTakenInMillis": took_ms,
            "totalFilesDeleted": sum(len(p["successDeleteFiles"]) for p in partitions.values()),
            "earliestCommitToRetain": earliest_retained or "",
            "partitionMetadata": partitions,
            "version": 2,
        }
        return json.dumps(body, indent=2).encode()

    def rollback(
        self, *, start: str, rolled_back: str, action: str, deleted: Mapping[str, Iterable[str]], took_ms: int
    ) -> bytes:
        partitions = {
            partition: {
                "partitionPath": partition,
                "successDeleteFiles": sorted(names),
                "failedDeleteFiles": [],
            }
            for partition, names in deleted.items()
        }
        body = {
            "startRollbackTime": start,
            "timeTakenInMillis": took_ms,
            "totalFilesDeleted": sum(len(p["successDeleteFiles"]) for p in partitions.values()),
            "commitsRollback": [rolled_back],
            "partitionMetadata": partitions,
            "instantsRollback": [{"commitTime": rolled_back, "action": action}],
            "version": 1,
        }
        return json.dumps(body, indent=2).encode()
