"""What the timeline, active and archived, says a table's storage holds.

The metadata table is derived from instants' metadata alone (each commit's write
stats, each replace commit's retired file groups, each clean's and rollback's
deletions). When it is lost or damaged, the same account can be read back from
the timeline: every instant that ever completed is either still on the active
timeline or in archival's files (fed's, or those of a Hudi writer of the table), content
and all. The repair tool checks that account against what storage holds
(``fedcore.services.inventory``), and ``fed verify`` uses it to tell a file the metadata table
lost from an orphan nothing references.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Literal

from fedcore.exceptions import RepairError, UnsupportedTableError
from fedcore.files.file_group import LogSlicing, file_groups
from fedcore.files.filenames import LogFileNaming, data_file_id, file_instant
from fedcore.io.filesystems import read_existing
from fedcore.services.archival import read_archive
from fedcore.timeline import CLEAN, COMPLETED, REPLACE_COMMIT, ROLLBACK, Timeline
from fedcore.timeline.archived import hudi_archive_files, read_hudi_archive
from fedcore.timeline.commit_metadata import deleted_files, rolled_back_instants

if TYPE_CHECKING:
    from fedcore.handle import TableHandle

#: What an unreferenced data file in a table's folders is (``History.judge``).
FileKind = Literal["unrecorded", "in flight", "orphan", "foreign"]


@dataclass
class History:
    """The files a table's completed instants account for, as of ``timeline``."""

    timeline: Timeline
    #: The newest completed instant (any action): the state below is the table's as of it.
    upto: str | None
    #: (partition, file name) -> size recorded by the write that made it, for every file a
    #: completed, not rolled-back write made and no completed clean deleted.
    files: dict[tuple[str, str], int] = field(default_factory=dict)
    #: (partition, file name) -> the column statistics its write recorded, where it did.
    stats: dict[tuple[str, str], str] = field(default_factory=dict)
    #: partition -> file id -> the replace commit that retired the file group.
    replaced: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Completed write instants that were not rolled back.
    written: set[str] = field(default_factory=set)
    #: Instants completed rollbacks undid (failed writes, or completed ones rolled back).
    rolled_back: set[str] = field(default_factory=set)
    #: Instants on the timeline that have not completed (a write in flight, or a failed one).
    pending: set[str] = field(default_factory=set)
    #: (partition, file name) of every file a completed clean deleted.
    cleaned: set[tuple[str, str]] = field(default_factory=set)
    #: (partition, file name) of every file a completed rollback deleted (or tried to).
    undone: set[tuple[str, str]] = field(default_factory=set)
    #: Whether the table's folders are its own (``StorageStrategy.folders_of_its_own``): if
    #: not, another table's files may share them, and ``judge`` asks more of an orphan.
    own_folders: bool = True
    #: (write instant, Avro schema) of the newest write that recorded a schema.
    schema: tuple[str, str] | None = None
    #: The instants a timeline listed after storage was (``listed_again``) holds that
    #: ``timeline`` did not: the writes begun since, whose files storage may already hold.
    later: frozenset[str] = frozenset()

    def listed_again(self, timeline: Timeline) -> None:
        """Note the timeline as listed after storage: a write puts its instant on the timeline
        before its first data file in storage, so a file storage held whose instant the first
        listing lacked is a write's in flight only if its instant is on this one."""
        first = {i.time for i in self.timeline.instants}
        self.later = frozenset(i.time for i in timeline.instants if i.time not in first)

    def judge(self, partition: str, name: str, writer: str | None) -> FileKind:
        """What a data file in the table's folders that the metadata table does not reference
        is; ``writer`` is the instant that wrote it (a base file's is in its name, a log file's in
        its blocks: ``inventory.writer_instant``; None when unknown).

        - ``unrecorded``: a completed write recorded it: the metadata table lost it.
        - ``in flight``: its write is pending, or began after the timeline was listed (it is on
          the one ``listed_again``): a writer puts its data files in storage before its
          instant completes.
        - ``orphan``: the table's own and referenced by nothing: a rolled-back write's, a failed
          task attempt's or a cleaned file whose deletion failed. Safe to delete.
        - ``foreign``: not this table's: its instant is on none of this table's timelines (the
          source's of a copied table, written since the copy), or, in a folder another table
          may share (tables created before each got a folder of its own), it is neither a
          file a rollback of the table named nor in a file group the table's writes made.
          Never deleted, never adopted.
        """
        if (partition, name) in self.files:
            return "unrecorded"
        base_instant = file_instant(name)
        instant = writer or base_instant
        if instant is None:
            return "foreign"
        if instant in self.pending or instant in self.later:
            return "in flight"
        if instant not in self.rolled_back and instant not in self.written:
            return "foreign"
        if self.own_folders:
            return "orphan"
        # A folder another table may share, whose instants may equal this table's: a rolled-back
        # write's file its rollback named, or a file of a group the table's writes made (a failed
        # task attempt's, a cleaned file storage kept).
        known = (partition, name) in self.undone or data_file_id(name) in self.file_ids
        return "orphan" if known else "foreign"

    @cached_property
    def file_ids(self) -> frozenset[str]:
        """The file groups the table's completed writes made (those cleaned away too)."""
        names = [name for _, name in self.files] + [name for _, name in self.cleaned]
        return frozenset(filter(None, map(data_file_id, names)))

    def latest_slices(
        self, log_files: LogFileNaming, slicing: LogSlicing | None = None
    ) -> set[tuple[str, str]]:
        """(partition, file name) of the files of the newest slice of every file group not
        replaced (its base file and the log files written onto it): what a snapshot read
        needs (``FileGroup.latest_slice``, every instant here having completed)."""
        names: dict[str, list[str]] = {}
        for partition, name in self.files:
            names.setdefault(partition, []).append(name)
        latest: set[tuple[str, str]] = set()
        for partition, found in names.items():
            retired = self.replaced.get(partition, {})
            for file_id, group in file_groups(found, log_files, slicing).items():
                newest = None if file_id in retired else group.latest_slice(None, lambda _: True)
                if newest is not None:
                    files = [newest.base_file] if newest.base_file else []
                    latest.update((partition, name) for name in [*files, *newest.log_files])
        return latest


def require_metadata_table(table: TableHandle, doing: str) -> None:
    """Refuse to ``doing`` (repair, verify) a table without fedcore's metadata table."""
    if not table.metadata_enabled:
        raise RepairError(
            f"table {table.name} has no metadata table: its files are found by listing its folders, "
            f"so there is nothing to {doing}"
        )


def load_history(table: TableHandle, timeline: Timeline | None = None) -> History:
    """Read the account of every completed instant: the active ones' files (fetched
    together), then archival's (listed after the active timeline, so an instant archival
    moves meanwhile is found in one or the other)."""
    timeline = table.timeline() if timeline is None else timeline
    timeline.check_readable(table.name, table.config.merge_on_read)
    completed = timeline.completed()
    fs = table.fs.table_fs
    # One archival may move completed instants out meanwhile: those are read from its archive,
    # listed after these reads.
    paths = {table.layout.instants.path(table.path, i): i for i in completed}
    contents = read_existing(fs, list(paths))
    bodies: dict[str, tuple[str, bytes]] = {
        paths[path].time: (paths[path].action, data) for path, data in contents.items()
    }
    archived = read_archive(table)
    for time, action, name, content in zip(
        *(archived.column(c).to_pylist() for c in ("instant", "action", "file", "content")), strict=True
    ):
        parsed = table.layout.instants.parse(name)
        if parsed is not None and parsed.is_completed and time not in bodies:
            bodies[time] = (action, content)
    # Hudi 0.x's archive log; Hudi 1.x's archived timeline is in ``read_archive``'s.
    hudi_archived = read_hudi_archive(fs, list(hudi_archive_files(fs, table.path, None)))
    for instant in hudi_archived:  # a Hudi writer's archival (``archived_timeline``)
        if instant.body is not None and instant.time not in bodies:
            bodies[instant.time] = (instant.action, instant.body)
    lost = [i for i in completed if i.time not in bodies]
    if lost:
        raise RepairError(
            f"table {table.name}: instant {lost[0]} was listed completed, and its file is neither on "
            "the timeline nor in its archive: the timeline is damaged; restore that file"
        )
    history = History(
        timeline,
        upto=completed[-1].time if completed else None,
        pending={i.time for i in timeline.instants if i.state != COMPLETED},
        own_folders=table.strategy.folders_of_its_own,
    )
    rolled_back = history.rolled_back
    for time, (action, data) in bodies.items():
        if action == ROLLBACK:
            rolled_back.update(rolled_back_instants(data))
            for partition, names in deleted_files(data, failed_too=True).items():
                history.undone.update((partition, name) for name in names)
        elif action == CLEAN:
            for partition, names in deleted_files(data).items():
                history.cleaned.update((partition, name.rpartition("/")[2]) for name in names)
        elif action not in table.write_actions:
            raise UnsupportedTableError(
                f"table {table.name} has an archived {action} instant ({time}), which fedcore "
                "cannot account files for"
            )
    for time in sorted(bodies):
        action, data = bodies[time]
        if action not in table.write_actions or time in rolled_back:
            continue
        metadata = table.layout.commits.decode(data, f"{time}.{action}")
        history.written.add(time)
        for stat in metadata.stats:
            key = (stat.partition_path, stat.path.rpartition("/")[2])
            if key not in history.cleaned:
                history.files[key] = stat.file_size
                if stat.column_stats is not None:
                    history.stats[key] = stat.column_stats
        if action == REPLACE_COMMIT:
            for partition, file_ids in metadata.replaced.items():
                history.replaced.setdefault(partition, {}).update(dict.fromkeys(file_ids, time))
        if metadata.schema:
            history.schema = (time, metadata.schema)
    return history
