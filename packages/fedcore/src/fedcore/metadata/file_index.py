"""The file index plug point: which files each partition holds as of an instant."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field

from fedcore.filenames import BASE_FILE_RE


@dataclass
class PartitionFiles:
    """The data files of one partition, and the file groups a replace commit retired."""

    files: dict[str, int] = field(default_factory=dict)  # file name -> size in bytes
    replaced: dict[str, str] = field(default_factory=dict)  # file id -> replacing instant

    def latest_slices(self, as_of: str | None = None) -> dict[str, tuple[str, str]]:
        """file id -> (base instant, file name) of the newest base file of each live file group."""
        latest: dict[str, tuple[str, str]] = {}
        for name in self.files:
            match = BASE_FILE_RE.fullmatch(name)
            if match is None:
                continue
            file_id, instant = match[1], match[3]
            if file_id in self.replaced or (as_of is not None and instant > as_of):
                continue
            if file_id not in latest or instant > latest[file_id][0]:
                latest[file_id] = (instant, name)
        return latest


class FileIndex(ABC):
    """Answers "which files does partition P hold as of instant T" for readers and writers.

    ``as_of`` is an instant time; None means the latest completed state. Only
    instants that completed are ever reflected.
    """

    @abstractmethod
    def partitions(self, as_of: str | None = None) -> list[str]:
        """Every partition path holding files, sorted."""

    @abstractmethod
    def files(
        self, partitions: Iterable[str] | None = None, as_of: str | None = None
    ) -> dict[str, PartitionFiles]:
        """Files of the given partitions (all when None); partitions without files are left out."""
