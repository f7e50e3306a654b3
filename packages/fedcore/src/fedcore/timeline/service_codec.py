"""How a table version encodes its table services' instant files: a clean's and a rollback's
metadata.

Every completed clean and rollback file is encoded through the table's ``ServiceMetadataCodec``
(``TableHandle.layout.services``, picked by ``fedcore.timeline.layout``), so a table version
whose Hudi needs another encoding of them is one more implementation, not a condition in each
service. Every version's Hudi so far writes both as Avro (``avro_service_codec``); fed's
earlier JSON and the Avro are read back by ``fedcore.timeline.commit_metadata.action_body``.
"""

from __future__ import annotations

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
