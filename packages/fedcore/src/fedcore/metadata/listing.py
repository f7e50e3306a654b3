"""The file index of a Hive-layout table without a metadata table: listing plus the timeline.

Only for tables whose data lives under the table path (Hudi tables written
without a metadata table, such as Hudi's own test tables). A listed
file counts only if the instant in its name completed (on the active timeline, or before it
starts: archived), and a file group counts
only if no completed replace commit retired it: the same rules as Hudi's own
file-system view. Object-store layouts never get here: listing cannot find
their files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from fsspec import AbstractFileSystem

from fedcore import properties as P
from fedcore.files.filenames import BASE_FILE_RE
from fedcore.io.filesystems import read_object
from fedcore.metadata.file_index import FileIndex, PartitionFiles
from fedcore.timeline import MERGE_ON_READ_WRITE_ACTIONS, REPLACE_COMMIT, Timeline
from fedcore.timeline.layout import TableLayout


class ListingFileIndex(FileIndex):
    def __init__(
        self,
        fs: AbstractFileSystem,
        table_path: str,
        load_timeline: Callable[[], Timeline],
        layout: TableLayout,
    ) -> None:
        self.fs = fs
        self.layout = layout
        self.table_path = table_path
        self._root = fs._strip_protocol(table_path).rstrip("/")
        self._load_timeline = load_timeline

    def partitions(self, as_of: str | None = None) -> list[str]:
        found = []
        for path in self.fs.find(self.table_path, detail=False):
            relative = str(path)[len(self._root) + 1 :]
            if relative.startswith(P.HOODIE_FOLDER + "/"):
                continue
            folder, _, name = relative.rpartition("/")
            if name == P.PARTITION_METADATA_FILE:
                found.append(folder)
        return sorted(found)

    def files(
        self, partitions: Iterable[str] | None = None, as_of: str | None = None
    ) -> dict[str, PartitionFiles]:
        timeline = self._load_timeline()
        written = {i.time for i in timeline.completed(MERGE_ON_READ_WRITE_ACTIONS, as_of=as_of)}
        # A base file written before the active timeline's first completed write counts too:
        # archival moved its instant out (Hudi's file-system view counts it so, as "before the
        # timeline starts"), unless that instant is still pending.
        first = min((i.time for i in timeline.completed(MERGE_ON_READ_WRITE_ACTIONS)), default="")
        pending = {i.time for i in timeline.pending()}

        def committed(instant: str) -> bool:
            if instant in written:
                return True
            return instant < first and instant not in pending and (as_of is None or instant <= as_of)

        replaced: dict[str, dict[str, str]] = {}
        for instant in timeline.completed([REPLACE_COMMIT], as_of=as_of):
            path = self.layout.instants.path(self.table_path, instant)
            metadata = self.layout.commits.decode(read_object(self.fs, path), path)
            for partition, file_ids in metadata.replaced.items():
                for file_id in file_ids:
                    replaced.setdefault(partition, {})[file_id] = instant.time
        out: dict[str, PartitionFiles] = {}
        for partition in self.partitions(as_of) if partitions is None else partitions:
            folder = f"{self.table_path}/{partition}" if partition else self.table_path
            files = PartitionFiles(replaced=replaced.get(partition, {}))
            try:
                entries = self.fs.ls(folder, detail=True, refresh=True)
            except FileNotFoundError:
                continue
            for entry in entries:
                name = str(entry["name"]).rsplit("/", 1)[-1]
                if entry.get("type") != "file":
                    continue
                if name.startswith("."):
                    # Log files (merge-on-read): every one is listed; which of their blocks
                    # apply is decided per block, by instant, when the slice is read.
                    if self.layout.log_files.parse(name) is not None:
                        files.files[name] = int(entry.get("size") or 0)
                    continue
                match = BASE_FILE_RE.fullmatch(name)
                if match is not None and committed(match[3]):
                    files.files[name] = int(entry.get("size") or 0)
            if files.files:
                out[partition] = files
        return out
