"""The write planner: which file groups a write's records go to, and what each is given.

One planner for every engine. ``WriteClient`` plans a whole write with it in one process;
an engine that shuffles rows itself (fed-spark's distributed upsert) asks it the same
questions piece by piece, from its driver and its tasks: the latest file slices of the
partitions touched, the record keys of a base file, where a partition's inserts go (small
file groups first, then new ones: Hudi's file sizing), and the file-group writes of rows
routed to targets. Key lookup, small-file routing and file naming live here and in the
file writer, nowhere else.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Final, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fedcore import properties as P
from fedcore.commit.file_group_writer import IO_THREADS
from fedcore.commit.file_writer import NO_ROWS, FileGroupWrite, new_groups
from fedcore.exceptions import InvalidRecordsError, UnsupportedTableError
from fedcore.files.file_group import LogSlicing
from fedcore.files.filenames import new_file_id
from fedcore.io.filesystems import open_sized, read_object
from fedcore.io.parquet import read_parquet
from fedcore.io.uris import protocol_of
from fedcore.keygen.grouping import latest_per_key, partition_rows
from fedcore.keygen.keys import check_required_columns, record_keys
from fedcore.log.blocks import BlockType, data_records, read_blocks
from fedcore.metadata.file_index import PartitionFiles
from fedcore.write.job import (
    BULK_INSERT,
    DELETE,
    INSERT_OVERWRITE_TABLE,
    REPLACING,
    UPSERT,
    WriteJob,
)

#: Base files an upsert fetches whole on an object store (at most this size each) and keeps
#: for their rewrite (at most this much in all).
_WHOLE_READ_BYTES: Final = 8 * 2**20
_KEPT_BASE_BYTES: Final = 256 * 2**20


class BaseFile(NamedTuple):
    """The newest base file of a live file group: what a rewrite of the group replaces, and
    (merge-on-read) the place of the last log file written onto its slice (0: none;
    ``FileGroup.logs_onto``)."""

    instant: str
    name: str
    size: int
    log_version: int = 0
    #: Log files whose keys the lookup reads too (``WritePlanner.keys_in_logs``).
    log_files: tuple[str, ...] = ()


class InsertTarget(NamedTuple):
    """Where some of a partition's inserts go: a small file group with room for ``rows``
    more records, or a new file group (``new``) of at most ``rows``."""

    file_id: str
    rows: int
    new: bool


class KeyIndex(NamedTuple):
    """The record keys of a partition's latest base files: ``keys``, the position in
    ``file_ids`` of the group holding each (a key in several files, inserted twice, is there
    once per file), each group's keys (a rewrite need not decode them again) and the base
    files fetched whole (object stores: one GET each, not fetched again by the rewrite)."""

    keys: pa.ChunkedArray
    owners: np.ndarray
    file_ids: list[str]
    by_file: dict[str, pa.ChunkedArray]
    whole: dict[str, bytes]


class Plan(NamedTuple):
    """A write's plan: the file groups to write, those an overwrite replaces (by partition),
    the (file id, base instant) of every version superseded, and the partitions' files as
    found."""

    groups: list[FileGroupWrite]
    replaced: dict[str, list[str]]
    supersedes: list[tuple[str, str]]
    current: dict[str, PartitionFiles]


class Prepared(NamedTuple):
    """One chunk of a write's records, ready to plan: its records, their keys where the
    operation looks them up, and the rows of each partition."""

    data: pa.Table
    keys: pa.Array | None
    by_partition: dict[str, np.ndarray]


class WritePlanner:
    """Plans the writes of one job (``WriteJob``) against the table as the job opened it.

    Pickles with its job: an engine's tasks ask it for base-file keys and file-group writes.
    """

    def __init__(self, job: WriteJob) -> None:
        self.job = job
        self.table = job.table
        options = job.table.options
        self.max_file_size = P.MAX_FILE_SIZE.of(options)
        self.small_file_limit = P.SMALL_FILE_LIMIT.of(options)
        #: Updates and deletes append log files (merge-on-read) instead of rewriting.
        self.merge_on_read = self.table.config.merge_on_read
        #: Keys are looked up in log files too: a merge-on-read table fed did not write (no
        #: fed metadata table), whose writer's index may have put inserts into log files. fed
        #: (and Hudi's default index) never does, so its keys are all in base files.
        self.keys_in_logs = self.merge_on_read and self.table.metadata_table_or_none() is None

    # --- records ---------------------------------------------------------------------------------

    def record_keys(self, rows: pa.Table) -> pa.Array:
        """The rows' record keys (Hudi's key generators), checked."""
        config = self.table.config
        return record_keys(rows, config.record_key_fields, P.key_generator(config))

    def check_ordering(self, rows: pa.Table) -> None:
        """An upsert's rows each carry an ordering (precombine) value, as Hudi requires of
        them: its combine and its payloads compare them, and a null would rank as nothing
        Hudi can reproduce. ``InvalidRecordsError`` names the field (missing, or null in a
        row); other operations do not order records."""
        field = self.table.config.precombine_field
        if self.job.operation != UPSERT or field is None:
            return
        check_required_columns(rows.column_names, (), (), field)
        nulls = rows.column(field).null_count
        if nulls:
            row = pc.index(pc.is_null(rows.column(field)), True).as_py()
            raise InvalidRecordsError(
                f"record {row} has a null value in {field!r}, the table's ordering (precombine) field: "
                f"an upsert needs one in every record ({nulls} are null)"
            )

    def tag(self, rows: pa.Table) -> tuple[pa.Array, pa.Array]:
        """Each row's partition path and record key (its key columns in the table's types);
        an upsert's ordering values checked (``check_ordering``)."""
        self.check_ordering(rows)
        rows = self.job.conform(rows, keys_only=True)  # the rest is conformed as it is written
        found = partition_rows(rows, self.table.partition_scheme)
        paths = pa.array(found.paths, pa.string()).take(pa.array(found.codes))
        return paths, self.record_keys(rows)

    def keep_latest(self, rows: pa.Table, partitions: np.ndarray, keys: pa.Array) -> np.ndarray:
        """Row indices (ascending) to keep of rows that hold one (partition, key) several
        times: the greatest precombine value wins (Hudi's combine before upsert)."""
        precombine = self.table.config.precombine_field
        column = rows.column(precombine) if precombine and precombine in rows.column_names else None
        return latest_per_key(partitions, keys, column)

    # --- file groups -----------------------------------------------------------------------------

    def latest_base_files(self, partitions: Sequence[str]) -> dict[tuple[str, str], BaseFile]:
        """(partition, file id) -> the newest base file of every live file group of
        ``partitions``, as of the timeline the job opened on (from the metadata table)."""
        assert self.job.timeline is not None, "planned where the job was opened"
        current = self.job.opened_files(sorted(partitions))
        found: dict[tuple[str, str], BaseFile] = {}
        slicing = self.log_slicing()
        for partition, files in current.items():
            slices = files.latest_base_files(self.table.layout.log_files)
            logs = files.logs_by_slice(self.table.layout.log_files, slicing) if self.merge_on_read else {}
            if self.merge_on_read and self.job.operation in (UPSERT, DELETE):
                self._check_keys_in_base_files(partition, slices, files, logs)
            for file_id, (instant, name) in slices.items():
                written = logs.get((file_id, instant), [])
                found[(partition, file_id)] = BaseFile(
                    instant,
                    name,
                    files.files[name],
                    written[-1][0] if written else 0,
                    tuple(log for _, log in written) if self.keys_in_logs else (),
                )
        return found

    def log_slicing(self) -> LogSlicing | None:
        """What places the table's log files in their slices, as of the timeline the job
        opened on (``TableHandle.log_slicing``; None: copy-on-write, or names that say it)."""
        assert self.job.timeline is not None, "planned where the job was opened"
        return self.table.log_slicing(self.job.timeline) if self.merge_on_read else None

    def group_keys(self, partition: str, base: BaseFile) -> pa.Array:
        """The record keys of a file group's latest slice: its base file's, and (where
        ``keys_in_logs``) its log files' data blocks'."""
        keys = self.read_keys(partition, base.name, base.size)[0]
        if not base.log_files:
            return keys.combine_chunks()
        return pa.chunked_array(
            [*keys.chunks, *self.log_keys(partition, base.log_files).chunks]
        ).combine_chunks()

    def found_keys(
        self, base_files: Mapping[tuple[str, str], BaseFile], wanted: Mapping[str, pa.Array]
    ) -> list[tuple[str, str, pa.Array]]:
        """(partition, file id, keys) for each of ``base_files`` holding any of the keys
        ``wanted`` in its partition: its latest slice's keys (``group_keys``) among them,
        the files read in parallel (``IO_THREADS``). Files holding none are left out."""

        def found(item: tuple[tuple[str, str], BaseFile]) -> tuple[str, str, pa.Array]:
            (partition, file_id), base = item
            keys = self.group_keys(partition, base)
            return partition, file_id, keys.filter(pc.is_in(keys, value_set=wanted[partition]))

        items = [item for item in base_files.items() if item[0][0] in wanted]
        with ThreadPoolExecutor(max(1, min(IO_THREADS, len(items)))) as pool:
            return [hit for hit in pool.map(found, items) if len(hit[2])]

    def log_keys(self, partition: str, names: Sequence[str]) -> pa.ChunkedArray:
        """The record keys in the data blocks of log files (any instant's: a key a failed
        write left there routes an update to its group, where it merges as an insert)."""
        fs = self.table.fs
        chunks = []
        for name in names:
            path = f"{partition}/{name}" if partition else name
            with fs.errors(path):
                data = read_object(fs, path)
            for block in read_blocks(data, path):
                if block.type in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA):
                    chunks.append(self.table.stored_keys(data_records(block)))
        return pa.chunked_array(chunks, pa.string())

    def insert_candidates(
        self, partition: str, base_files: Mapping[tuple[str, str], BaseFile]
    ) -> list[tuple[str, int]]:
        """(file id, base file size) of the groups of ``partition`` inserts may top up
        (``insert_targets``): all of them, or (merge-on-read) those without log files, which
        an insert rewrites whole."""
        return [
            (file_id, base.size)
            for (p, file_id), base in base_files.items()
            if p == partition and not base.log_version
        ]

    def read_keys(
        self, partition: str, name: str, size: int, *, whole: bool = False
    ) -> tuple[pa.ChunkedArray, bytes | None]:
        """A base file's record keys (as text), and the whole file when ``whole`` (one GET:
        the size is known, no HEAD)."""
        path = f"{partition}/{name}" if partition else name
        fs = self.table.fs
        columns, keys = self.table.stored_key_columns, self.table.stored_keys
        with fs.errors(path), open_sized(fs, path, size) as handle:
            if whole:
                data = handle.read()
                return pa.chunked_array([keys(read_parquet(io.BytesIO(data), columns))]), data
            return pa.chunked_array([keys(read_parquet(handle, columns))]), None

    def insert_targets(self, small: Sequence[tuple[str, int]], count: int) -> list[InsertTarget]:
        """Where ``count`` inserts into a partition go, given its file groups as (file id,
        base file size): small groups first, smallest first, up to their room (Hudi's file
        sizing: below ``hoodie.parquet.small.file.limit``, filled to
        ``hoodie.parquet.max.file.size`` at the job's record size), then new groups of at
        most ``rows_per_file``."""
        record_size = self.job.record_size
        targets: list[InsertTarget] = []
        left = count
        for file_id, size in sorted(small, key=lambda item: item[1]):
            if left <= 0:
                break
            room = max(0, (self.max_file_size - size) // record_size)
            if size >= self.small_file_limit or room == 0:
                continue
            targets.append(InsertTarget(file_id, min(room, left), new=False))
            left -= room
        per_file = self.job.rows_per_file()
        while left > 0:
            targets.append(InsertTarget(new_file_id(), min(per_file, left), new=True))
            left -= per_file
        return targets

    def routed_groups(
        self,
        partitions: np.ndarray,
        targets: np.ndarray,
        matched: np.ndarray,
        keys: pa.Array,
        base_files: Mapping[tuple[str, str], BaseFile],
    ) -> list[FileGroupWrite]:
        """The file-group writes of rows routed by an engine: row ``i`` goes to file group
        ``targets[i]`` of partition ``partitions[i]``; ``matched[i]``: its key is in that
        group's base file (an update, or a delete).

        Merge-on-read: a group given updates or deletes only appends a log file onto its
        slice; a group given inserts (one ``insert_candidates`` offered: no log files) is
        rewritten whole, its updates with it."""
        known = {partition for partition, _ in base_files}  # partitions with file groups
        order = np.lexsort((targets, partitions))
        by_partition, by_target = partitions[order], targets[order]
        bounds = np.flatnonzero((by_partition[1:] != by_partition[:-1]) | (by_target[1:] != by_target[:-1]))
        groups = []
        for rows in np.split(order, bounds + 1):
            if not len(rows):
                continue
            partition, target = str(partitions[rows[0]]), str(targets[rows[0]])
            base = base_files.get((partition, target))
            hits = rows[matched[rows]]
            group = FileGroupWrite(partition, target, new_partition=partition not in known)
            if base is not None:
                group.base, group.base_size = (base.instant, base.name), base.size
                group.removed_keys = keys.take(pa.array(hits)) if len(hits) else None
                group.log_version = self._next_log(target, base.log_version, len(hits) < len(rows))
            if self.job.operation == DELETE:
                group.deletes = len(hits)
            else:
                group.rows = np.sort(rows)
                group.updates = len(hits)
            groups.append(group)
        return groups

    # --- a whole write, in one process -------------------------------------------------------------

    def plan(self, first: Prepared) -> Plan:
        """The plan for ``first`` (a write's first chunk; a streamed bulk insert's later
        chunks only ever make new file groups)."""
        job = self.job
        operation = job.operation
        assert job.timeline is not None, "planned where the job was opened"
        current = job.opened_files(
            None if operation == INSERT_OVERWRITE_TABLE else sorted(first.by_partition)
        )
        groups: list[FileGroupWrite] = []
        replaced: dict[str, list[str]] = {}
        kept = 0
        per_file = job.rows_per_file()
        superseded: list[tuple[str, str]] = []
        overwritten = sorted(current) if operation == INSERT_OVERWRITE_TABLE else []
        if operation in REPLACING:
            overwritten = sorted(set(overwritten) | (set(first.by_partition) & set(current)))
        for partition in overwritten:
            versions = current[partition].overwritten(self.table.layout.log_files)
            if versions:
                replaced[partition] = [file_id for file_id, _ in versions]
                superseded += versions
        partitions = sorted(first.by_partition.items())
        if operation in REPLACING or operation == BULK_INSERT:
            for partition, rows in partitions:
                groups.extend(new_groups(partition, rows, per_file, partition not in current))
        else:
            # Partitions are planned on as many threads as there are cores: a partition's key
            # lookup (decoding its base files' keys, probing them with the batch's) runs in
            # Arrow, without the GIL. As many at a time as there are threads, so base files
            # fetched whole past the budget are let go a few partitions at a time, not held
            # while a slow partition is waited for.
            slicing = self.log_slicing()

            def planned(item: tuple[str, np.ndarray]) -> list[FileGroupWrite]:
                partition, rows = item
                files = current.get(partition, PartitionFiles())
                return self._plan_partition(partition, rows, first.keys, files, slicing)

            threads = max(1, min(os.cpu_count() or 1, len(partitions)))
            with ThreadPoolExecutor(threads) as pool:
                for start in range(0, len(partitions), threads):
                    for found in pool.map(planned, partitions[start : start + threads]):
                        kept = _keep_whole_within_budget(found, kept)
                        groups.extend(found)
        supersedes = [(g.file_id, g.base[0]) for g in groups if g.base is not None and g.log_version is None]
        return Plan(groups, replaced, supersedes + superseded, current)

    def _plan_partition(
        self,
        partition: str,
        rows: np.ndarray,
        keys: pa.Array | None,
        files: PartitionFiles,
        slicing: LogSlicing | None = None,
    ) -> list[FileGroupWrite]:
        """An insert's, upsert's or delete's file groups in one partition: updates and deletes
        to the group holding their key, inserts to small groups, then new ones.

        Merge-on-read, as Hudi's delta commits do: updates and deletes go to a log file
        appended onto the slice holding their key; inserts go to small groups that have no
        log files yet (rewritten, with that group's updates) or to new ones."""
        operation = self.job.operation
        slices = files.latest_base_files(self.table.layout.log_files)
        groups: dict[str, FileGroupWrite] = {}
        inserts = rows
        index: KeyIndex | None = None
        logs = files.logs_by_slice(self.table.layout.log_files, slicing) if self.merge_on_read else {}
        if keys is not None and operation in (UPSERT, DELETE):
            self._check_keys_in_base_files(partition, slices, files, logs)
            index = self._key_index(partition, slices, files, logs)
            row_keys = keys.take(rows)
            # Hash the batch's keys (the small side), probe the partition's keys with them: each
            # key found is an update (or delete) of the group holding it. A key several groups
            # hold (a table bulk-inserted twice) updates every one of them, as Hudi's index
            # tags a record with each location it finds (the batch's keys are distinct).
            present = np.flatnonzero(pc.is_in(index.keys, value_set=row_keys).to_numpy(zero_copy_only=False))
            at = pc.index_in(index.keys.take(present), value_set=row_keys).to_numpy(zero_copy_only=False)
            owner = index.owners[present]
            hit_rows = rows[at] if len(present) else rows[:0]
            hit = np.zeros(len(rows), dtype=bool)
            hit[at] = True
            inserts = rows[~hit] if operation == UPSERT else NO_ROWS
            order = np.argsort(owner, kind="stable")
            starts = np.flatnonzero(np.diff(owner[order], prepend=-1))
            split = np.split(hit_rows[order], starts[1:]) if len(starts) else []
            for start, found_rows in zip(starts, split, strict=True):
                group_rows = np.sort(found_rows)
                file_id = index.file_ids[owner[order][start]]
                base = slices[file_id]
                matched = groups[file_id] = FileGroupWrite(partition, file_id, base, files.files[base[1]])
                matched.base_keys, matched.base_bytes = index.by_file[file_id], index.whole.get(file_id)
                matched.removed_keys = keys.take(group_rows)
                if operation == UPSERT:
                    matched.rows, matched.updates = group_rows, len(group_rows)
                else:
                    matched.deletes = len(group_rows)
        given_inserts: set[str] = set()
        # Small groups are sized only when there are inserts to place (an update or delete
        # of every key has none).
        sizes = (
            [
                (file_id, files.files[name])
                for file_id, (instant, name) in slices.items()
                if (file_id, instant) not in logs
            ]
            if len(inserts)
            else []
        )
        for target in self.insert_targets(sizes, len(inserts)):
            taken, inserts = inserts[: target.rows], inserts[target.rows :]
            if target.new:
                groups[target.file_id] = FileGroupWrite(
                    partition, target.file_id, rows=taken, new_partition=not slices
                )
                continue
            group = groups.get(target.file_id)
            if group is None:
                base = slices[target.file_id]
                group = groups[target.file_id] = FileGroupWrite(
                    partition, target.file_id, base, files.files[base[1]]
                )
                if index is not None:
                    group.base_keys, group.base_bytes = (
                        index.by_file.get(target.file_id),
                        index.whole.get(target.file_id),
                    )
            group.rows = np.concatenate([group.rows, taken])
            given_inserts.add(target.file_id)
        for file_id, group in groups.items():
            if group.base is not None:
                written = logs.get((file_id, group.base[0]), [])
                last = written[-1][0] if written else 0
                group.log_version = self._next_log(file_id, last, file_id in given_inserts)
        return list(groups.values())

    def _next_log(self, file_id: str, last_log: int, inserts: bool) -> int | None:
        """How an existing file group takes its write: the version of the log file it appends,
        or None, its base file rewritten whole (copy-on-write: always).

        Merge-on-read, as Hudi's delta commits do: a group given only updates and deletes
        appends log file ``last_log + 1`` onto its slice; a group given inserts is rewritten
        whole, with its updates, which a slice with log files never is (the rewrite would
        drop them: inserts go only to small groups without log files)."""
        if self.merge_on_read and not inserts:
            return last_log + 1
        if last_log:
            raise UnsupportedTableError(
                f"inserts routed to file group {file_id}, which has log files: its "
                "rewrite would drop them (route inserts with insert_candidates)"
            )
        return None

    def _check_keys_in_base_files(
        self,
        partition: str,
        slices: dict[str, tuple[str, str]],
        files: PartitionFiles,
        logs: Mapping[tuple[str, str], object],
    ) -> None:
        """Keys are looked up in base files, which hold every key of a group fed (or Hudi
        with its default index) writes: inserts never go to log files. A group of log files
        only (written by an index that puts inserts there) would hide its keys."""
        hidden = sorted({file_id for file_id, _ in logs} - set(slices) - set(files.replaced))
        if hidden:
            raise UnsupportedTableError(
                f"table {self.table.name}: file group {hidden[0]} of partition {partition!r} has log "
                "files and no base file; fedcore cannot look its keys up (written with an index "
                "that puts inserts into log files)"
            )

    def _key_index(
        self,
        partition: str,
        slices: dict[str, tuple[str, str]],
        files: PartitionFiles,
        logs: Mapping[tuple[str, str], list[tuple[int, str]]],
    ) -> KeyIndex:
        """The keys of a partition's latest base files, read in parallel. On an object store,
        small base files are fetched whole in one GET (a ranged read of their keys would fetch
        most of them anyway); elsewhere only the keys are read."""
        file_ids = list(slices)
        names = [slices[file_id][1] for file_id in file_ids]
        sizes = [files.files[name] for name in names]
        whole = (
            bool(names)
            and protocol_of(self.table.fs.to_physical(f"{partition}/{names[0]}" if partition else names[0]))
            != "file"
            and max(sizes) <= _WHOLE_READ_BYTES
            and sum(sizes) <= _KEPT_BASE_BYTES
        )
        with ThreadPoolExecutor(IO_THREADS) as pool:
            found = list(
                pool.map(lambda name, size: self.read_keys(partition, name, size, whole=whole), names, sizes)
            )
            read = [
                [log for _, log in logs.get((file_id, slices[file_id][0]), [])] if self.keys_in_logs else []
                for file_id in file_ids
            ]
            logged = list(pool.map(lambda names: self.log_keys(partition, names), read))
        counts = [len(keys) + len(more) for (keys, _), more in zip(found, logged, strict=True)]
        owners = np.repeat(np.arange(len(found), dtype=np.int64), counts)
        keys = pa.chunked_array(
            [
                chunk
                for (keys, _), more in zip(found, logged, strict=True)
                for chunk in (*keys.chunks, *more.chunks)
            ],
            pa.string(),
        )
        by_file = {file_id: keys for file_id, (keys, _) in zip(file_ids, found, strict=True)}
        fetched = {
            file_id: data for file_id, (_, data) in zip(file_ids, found, strict=True) if data is not None
        }
        return KeyIndex(keys, owners, file_ids, by_file, fetched)


def _keep_whole_within_budget(groups: list[FileGroupWrite], kept: int) -> int:
    """Let go of the base files ``groups`` fetched whole past ``_KEPT_BASE_BYTES`` (``kept``
    bytes held already; returned with what these groups keep): a rewrite reads a file let
    go again."""
    for group in groups:
        if group.base_bytes is not None:
            if kept + len(group.base_bytes) > _KEPT_BASE_BYTES:
                group.base_bytes = None
            else:
                kept += len(group.base_bytes)
    return kept
