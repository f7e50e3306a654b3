"""One write as a job: begun and committed in one place, its files written anywhere.

The engine-neutral write protocol. A driver opens the job (one listing of the timeline
serves recovery, the schema and the plan), begins it (the instant requested, its plan
inflight), and hands the job to tasks: it pickles small, without the timeline or the
transaction. Each task writes file groups through the federated filesystem, marker first
(``write_new``, or ``write_groups`` for planned rewrites), and returns their write stats.
The driver commits the stats it got from the tasks that succeeded: files of failed or
duplicate task attempts, named by markers but absent from the stats, are deleted first;
then the metadata-table delta, the claims, the decision and the completion, as in
``fedcore.commit.transaction``. ``WriteClient`` runs the same steps in one process.

Liveness: while tasks run, they refresh the instant's heartbeat (``beating``); an engine
whose driver process does not stay alive between beginning and committing calls
``detach`` after ``begin``. A job whose heartbeat stops for longer than Hudi's tolerance is
rolled back by the next writer, and its commit then fails with ``CommitConflictError``:
nothing of it is ever visible.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from types import TracebackType
from typing import Any, Final, Literal, TypeAlias, get_args

import pyarrow as pa

from fedcore import properties as P
from fedcore.commit.file_group_writer import IO_THREADS, write_file_groups
from fedcore.commit.file_writer import (
    FileGroupWrite,
    FileName,
    InputChunk,
    PutFile,
    file_names,
    new_groups,
    parquet_options,
    put_data_file,
    sampled_record_size,
    written_record_size,
)
from fedcore.commit.pending import wait_for_services
from fedcore.commit.transaction import (
    Heartbeat,
    Transaction,
    is_decided,
    roll_back_failed_writes,
    stat_claims,
)
from fedcore.commit.upgrade import upgrade_config
from fedcore.exceptions import (
    CommitConflictError,
    ConfigError,
    DataFileMissingError,
    FedError,
    InvalidTableConfigError,
    TimelineMovedError,
    UnsupportedTableError,
)
from fedcore.files.filenames import data_file_id
from fedcore.handle import HasHandle, TableHandle, handle_of
from fedcore.keygen.grouping import partition_rows
from fedcore.keygen.keys import check_keys, check_required_columns, virtual_key_types_error
from fedcore.keygen.partitioning import fed_makes_paths
from fedcore.log.merge import merge_rules
from fedcore.metadata.file_index import PartitionFiles
from fedcore.metadata.operations import commit_ops
from fedcore.schema.avro import to_avro_json
from fedcore.schema.evolution import conform, conform_keys, evolve
from fedcore.schema.meta import strip_meta
from fedcore.services.after_commit import run_table_services
from fedcore.steps import observers_now
from fedcore.timeline import COMMIT, DELTA_COMMIT, REPLACE_COMMIT, Instant, Timeline
from fedcore.timeline.commit_metadata import CommitMetadata, PlannedWrite, WriteStat

Operation: TypeAlias = Literal[
    "bulk_insert", "insert", "upsert", "delete", "insert_overwrite", "insert_overwrite_table"
]
BULK_INSERT: Final = "bulk_insert"
INSERT: Final = "insert"
UPSERT: Final = "upsert"
DELETE: Final = "delete"
INSERT_OVERWRITE: Final = "insert_overwrite"
#: Replace every file group of the table (Hudi's; what Spark's Overwrite save mode does).
INSERT_OVERWRITE_TABLE: Final = "insert_overwrite_table"
OPERATIONS: Final[tuple[Operation, ...]] = get_args(Operation)
REPLACING: Final = (INSERT_OVERWRITE, INSERT_OVERWRITE_TABLE)
#: Listings of the timeline a plan tries when others' archival keeps moving it (``opened_files``).
_RELISTS: Final = 3


@dataclass(frozen=True)
class WriteResult:
    """What a committed write did. ``warnings``: table services that failed after the
    commit (the write itself succeeded; they run again after the next write)."""

    instant: str
    operation: str
    files_written: int
    rows_written: int
    inserted: int
    updated: int
    deleted: int
    bytes_written: int
    warnings: tuple[str, ...] = ()

    @classmethod
    def of(cls, instant: str, metadata: CommitMetadata, warnings: Iterable[str] = ()) -> WriteResult:
        stats = metadata.stats
        return cls(
            instant=instant,
            operation=metadata.operation.lower(),
            files_written=len(stats),
            rows_written=sum(s.num_writes for s in stats),
            inserted=sum(s.num_inserts for s in stats),
            updated=sum(s.num_update_writes for s in stats),
            deleted=sum(s.num_deletes for s in stats),
            bytes_written=sum(s.total_write_bytes for s in stats),
            warnings=tuple(warnings),
        )


class WriteJob:
    """One instant of writes: ``open`` it, ``begin`` it, write, then ``commit`` or ``abort``.

    As a context manager (after ``begin``), an ordinary exception aborts the job (rolls
    its instant back) and a ``BaseException`` leaves it to the next writer's recovery.
    """

    def __init__(
        self,
        table: TableHandle,
        operation: Operation,
        timeline: Timeline,
        schema: pa.Schema | None,
        table_schema: pa.Schema | None,
        extra_metadata: Mapping[str, str] | None = None,
    ) -> None:
        if operation not in OPERATIONS:
            raise ConfigError(P.OPERATION, f"unknown operation {operation!r}; one of {', '.join(OPERATIONS)}")
        self.table = table
        self.operation = operation
        # Every other write to a merge-on-read table is a delta commit, as in Hudi (whether
        # it appends log files or, for inserts, writes base files).
        self.action = (
            REPLACE_COMMIT
            if operation in REPLACING
            else DELTA_COMMIT
            if table.config.merge_on_read
            else COMMIT
        )
        #: What rows are conformed to: the table's data schema, or (a first write) the input's.
        self.schema = schema
        #: The table's schema before this write (None: this write defines it).
        self.table_schema = table_schema
        self.timeline: Timeline | None = timeline
        #: The writes completed when the job opened: one completed since is a concurrent one.
        self.seen_writes = frozenset(i.time for i in timeline.completed(table.write_actions))
        #: Recorded in the commit's ``extraMetadata`` and its inflight plan: a streaming
        #: sink's checkpoint, a migration's source.
        self.extra_metadata = dict(extra_metadata or {})
        written = written_record_size(table, timeline)
        self.record_size = written or P.RECORD_SIZE_ESTIMATE.of(table.options)
        #: Whether the record size is still to be measured on the input (``size_records``).
        self.unsized = written is None and P.RECORD_SIZE_ESTIMATE not in table.options
        self.parquet = parquet_options(table.options, self.record_size)
        #: How rewrites merge records into stored ones (Hudi's payload): upserts and inserts
        #: (an insert drops records marked deleted); other operations write rows as they are.
        # (An upsert's ordering values are checked with its rows: ``WritePlanner.check_ordering``.)
        self.rules = merge_rules(table.name, table.config, ()) if operation in (UPSERT, INSERT) else None
        self.instant = ""
        self._transaction: Transaction | None = None
        self._found_decided = False  # a task's fence found the instant decided

    @classmethod
    def open(
        cls,
        table: HasHandle,
        operation: Operation,
        input_schema: pa.Schema | None = None,
        extra_metadata: Mapping[str, str] | None = None,
    ) -> WriteJob:
        """Recover from failed writes and learn the table's schema: one listing of the
        timeline, which the plan uses too. ``input_schema``: the rows' schema, which a first
        write makes the table's; ``extra_metadata``: kept in the commit's ``extraMetadata``."""
        table = handle_of(table)
        config = table.config
        if not config.record_key_fields:
            raise InvalidTableConfigError(
                P.RECORD_KEY_FIELDS,
                f"is missing from table {table.name}'s hoodie.properties: fedcore writes tables whose "
                "records have keys (a table written with Hudi's generated keys is read, not written)",
            )
        if input_schema is not None:  # before anything is written, and before a fill with nulls
            ordering = config.precombine_field if operation == UPSERT else None
            check_required_columns(
                input_schema.names, config.record_key_fields, config.partition_fields, ordering
            )
        upgrade_config(table)  # before anything of this write exists
        if not fed_makes_paths(table.config):
            raise UnsupportedTableError(
                f"table {table.name} makes partition paths with {P.key_generator(table.config)}; fedcore "
                "writes the paths of Hudi's simple, complex and non-partitioned key generators (the "
                "columns' values), so it reads this table and refuses to write it: write it with Apache Hudi"
            )
        timeline = table.timeline()
        timeline.check_readable(table.name, table.config.merge_on_read)
        if roll_back_failed_writes(table, timeline):
            timeline = table.timeline()
        timeline = wait_for_services(table, timeline, "the write")
        table_schema = table.schema(timeline)
        schema = table_schema
        if input_schema is not None and operation != DELETE:
            given = strip_meta(input_schema.empty_table()).schema
            # The first write's schema is its input's; later ones evolve the table's.
            fill = P.RECONCILE_SCHEMA.of(table.options) or P.SET_NULL_FOR_MISSING_COLUMNS.of(table.options)
            keys = table.config.key_columns
            schema = (
                given if table_schema is None else evolve(table_schema, given, fill_missing=fill, keys=keys)
            )
            if not P.POPULATE_META_FIELDS.of(table.config):
                error = virtual_key_types_error(schema, table.config.record_key_fields)
                if error is not None:
                    raise error
        return cls(table, operation, timeline, schema, table_schema, extra_metadata)

    def __getstate__(self) -> dict[str, Any]:
        """Tasks get the job without the timeline and the transaction (which stay with the
        process that began it)."""
        state = dict(self.__dict__)
        state["timeline"] = None
        state["_transaction"] = None
        return state

    # --- driver ------------------------------------------------------------------------------

    def begin(self) -> str:
        """Request the instant (its heartbeat starts beating); returns its time."""
        self._transaction = Transaction(self.table, self.action, observers_now())
        try:
            self.instant = self._transaction.begin()
        except BaseException as error:  # a crash at "requested": undone as if inside the job
            transaction, self._transaction = self._transaction, None
            transaction.end(error)
            raise
        return self.instant

    def inflight(self, plan: Iterable[FileGroupWrite] = ()) -> None:
        """Mark the instant inflight, with the file groups it plans to write (Hudi's workload
        profile: by partition, each group's file id, the version it rewrites, and its
        inserts, updates and deletes) and the commit's ``extraMetadata``. An engine whose
        tasks decide the file groups themselves gives none."""
        planned = (
            PlannedWrite(
                group.partition,
                group.file_id,
                group.base[0] if group.base else None,
                inserts=len(group.rows) - group.updates,
                updates=group.updates,
                deletes=group.deletes,
            )
            for group in plan
        )
        body = self.table.layout.commits.encode_inflight(self.operation, planned, self.extra_metadata)
        self._require().inflight(body)

    def detach(self) -> None:
        """Stop this process's heartbeat thread (tasks beat from here on): for engines whose
        driver-side process may be reused for other work before the commit."""
        self._require().stop_heartbeat()

    def __enter__(self) -> WriteJob:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._transaction is not None:
            self._transaction.end(error)

    def abort(self) -> None:
        """Roll the instant back now (its files, markers and metadata-table delta)."""
        self._require().abort()

    def commit(
        self,
        stats: Sequence[WriteStat],
        *,
        supersedes: Iterable[tuple[str, str]] = (),
        replaced: Mapping[str, Sequence[str]] | None = None,
        distributed: bool = False,
    ) -> WriteResult:
        """Complete the instant with the files of ``stats``.

        Args:
            stats: what each file written says (from every task that succeeded).
            supersedes: (file id, base instant) of every file-group version replaced.
            replaced: file groups a replace commit replaces, by partition. For
                ``insert_overwrite`` without it: every group of the partitions written; for
                ``insert_overwrite_table``: every group of the table.
            distributed: files may have been written by task attempts that failed or lost
                to a retry; those the markers name but ``stats`` do not are deleted first.

        Returns:
            What was committed, with the warnings of the table services that run after the
            commit point (``fedcore.services.after_commit``: compact, clean, compact the
            metadata table, archive, sync). A service never fails the write: it is committed.
        """
        transaction = self._require()
        if distributed:
            transaction.remove_unreferenced(s.path for s in stats)
        # A file written over a base file supersedes that version, whoever wrote it; a log
        # file fills its place in its slice.
        merge_on_read = self.table.config.merge_on_read
        supersedes = [*supersedes, *(claim for s in stats for claim in stat_claims(s, merge_on_read))]
        if replaced is None and self.operation in REPLACING:
            replaced, versions = self._replaced({s.partition_path for s in stats})
            supersedes.extend(versions)  # claimed: a concurrent rewrite of one of them conflicts
        replacing = {p: list(ids) for p, ids in (replaced or {}).items()}
        schema = self.schema if self.schema is not None else self.table_schema
        metadata = CommitMetadata(
            operation=self.operation.upper(),
            stats=list(stats),
            schema=to_avro_json(schema, self.table.name) if schema is not None else None,
            replaced=replacing,
            extra=self.extra_metadata,
        )
        ops = commit_ops(self.instant, metadata)
        transaction.commit(self.table.layout.commits.encode(metadata), ops, supersedes, metadata.schema)
        return WriteResult.of(self.instant, metadata, run_table_services(self.table))

    def opened_files(self, partitions: Sequence[str] | None) -> dict[str, PartitionFiles]:
        """The files of ``partitions`` (every partition: None) as of the timeline the job
        opened on: what its plan builds on.

        Another writer's archival may have moved that timeline's instants out since, their
        metadata-table deltas with them (``TimelineMovedError``). The plan then builds on the
        table as it is now, as a job opened now would: a concurrent write to the same file
        groups is still refused by the claims at commit. Refused here instead: a schema
        changed since (rows conformed to the old one would drop its columns), and, once the
        instant is requested, a file of a write newer than it in a partition planned (this
        write's files would rank below that write's)."""
        if partitions is not None and not partitions:
            return {}
        opened = self.timeline if self.timeline is not None else self.table.timeline()
        try:
            return self.table.file_index_at(opened).files(partitions)
        except TimelineMovedError:
            pass
        for _ in range(_RELISTS):  # (another archival may land between a listing and its view)
            latest = self.table.timeline()
            try:
                current = self.table.file_index_at(latest).files(partitions)
            except TimelineMovedError:
                continue
            self._check_moved_on(latest, partitions)
            return current
        raise CommitConflictError(
            f"table {self.table.name}: other writers archived its instants faster than this "
            f"{self.operation} could list them; nothing of this write is visible: retry it"
        )

    def _check_moved_on(self, latest: Timeline, partitions: Sequence[str] | None) -> None:
        """Refuse a plan on ``latest`` that no write opened on it could make (``opened_files``)."""
        if self.table.schema(latest) != self.table_schema:
            since = [
                i.time for i in latest.completed(self.table.write_actions) if i.time not in self.seen_writes
            ]
            raise CommitConflictError(
                f"table {self.table.name}: a write that completed since this {self.operation} began "
                f"(instant {since[-1] if since else latest.last_time()}) changed its schema; nothing of "
                "this write is visible: retry it, on the new schema"
            )
        if not self.instant:
            return
        # Begun: a write with a later instant that changed a planned partition (a base file, or
        # a log file, whose name carries only its slice's start) would outrank this one.
        wanted = None if partitions is None else set(partitions)
        for instant in reversed(latest.completed(self.table.write_actions)):
            if instant.time <= self.instant:
                break
            metadata = self.table.commit_metadata(instant)
            touched = {s.partition_path for s in metadata.stats} | set(metadata.replaced)
            if wanted is None or touched & wanted:
                raise CommitConflictError(
                    f"table {self.table.name}: a write that completed since this {self.operation} "
                    f"began (instant {instant.time}) changed a partition it writes; nothing of this "
                    "write is visible: retry it"
                )

    def _replaced(self, written: set[str]) -> tuple[dict[str, list[str]], list[tuple[str, str]]]:
        """The file groups an overwrite replaces (those of the partitions written, or of every
        partition for ``insert_overwrite_table``) as of the timeline the job opened on
        (``opened_files``), and the (file id, base instant) of each."""
        partitions = sorted(written) if self.operation == INSERT_OVERWRITE else None
        current = self.opened_files(partitions)
        replaced: dict[str, list[str]] = {}
        versions: list[tuple[str, str]] = []
        for partition, files in current.items():
            overwritten = files.overwritten(self.table.layout.log_files)
            if overwritten:
                replaced[partition] = [file_id for file_id, _ in overwritten]
                versions.extend(overwritten)
        return replaced, versions

    def _require(self) -> Transaction:
        if self._transaction is None:
            if not self.instant:
                raise RuntimeError("the job has not begun")
            self._transaction = Transaction.resume(self.table, self.action, self.instant)
        return self._transaction

    # --- tasks ---------------------------------------------------------------------------------

    @contextlib.contextmanager
    def beating(self) -> Iterator[None]:
        """Refresh the instant's heartbeat while a task runs; a task that finds the instant
        decided (``_decided``) removes the heartbeat its beats made again."""
        heartbeat = Heartbeat(self.table, self.instant, self.table.heartbeat_interval_ms)
        heartbeat.beat()
        heartbeat.start()
        self._found_decided = False
        try:
            yield
        finally:
            heartbeat.stop(remove=self._found_decided)

    def _decided(self) -> bool:
        """The fence of a task's file-group writer (``FileGroupWriter.write``)."""
        self._found_decided = is_decided(self.table, self.instant)
        return self._found_decided

    def write_new(self, data: pa.Table, task: int, attempt: int = 0) -> list[WriteStat]:
        """A task's rows as new file groups (bulk insert, insert, overwrites): checked,
        conformed to the job's schema, split by partition and by file size, written (marker
        first) and described. ``task`` and ``attempt`` name the files: a retried task never
        overwrites what its first attempt wrote."""
        data = self.conform(data)
        partitions = partition_rows(data, self.table.partition_scheme)
        check_keys(data, self.table.config.record_key_fields)
        self.size_records(data)
        per_file = self.rows_per_file()
        groups = [
            group
            for partition, rows in sorted(partitions.groups().items())
            for group in new_groups(partition, rows, per_file)  # a task knows no partition's files
        ]
        return self._write_rows(groups, data, None, task, attempt)

    def write_task(
        self,
        groups: Sequence[FileGroupWrite],
        data: pa.Table,
        keys: pa.Array | None,
        task: int,
        attempt: int = 0,
    ) -> list[WriteStat]:
        """An engine task's file-group writes (from ``WritePlanner``) over its rows ``data``
        (conformed to the job's schema here, unless deleting; ``keys``: their record keys
        when computed already), its heartbeat beating. ``task`` and ``attempt`` name the
        files."""
        return self._write_rows(groups, self.conform(data), keys, task, attempt)

    def _write_rows(
        self, groups: Sequence[FileGroupWrite], data: pa.Table, keys: pa.Array | None, task: int, attempt: int
    ) -> list[WriteStat]:
        source = self.encoding(data, keys)
        names = file_names(self.instant, len(groups), task=task, attempt=attempt)
        with self.beating():
            return self.write_groups(groups, source, names, self.put())

    def missing_file(self, error: DataFileMissingError) -> FedError:
        """What a data file this job planned by and found gone means: a write that completed
        since the job opened replaced the file's group (and its clean deleted the version
        read), which is a conflict (``CommitConflictError`` naming that write: retry this one);
        with no such write, the file the table still references is gone (``error``)."""
        newer = [
            i
            for i in self.table.timeline().completed(self.table.write_actions)
            if i.time not in self.seen_writes
        ]
        if not newer:
            return error
        file_id = data_file_id(str(error.filename).rpartition("/")[2])
        # The first write since this one began that rewrote or replaced the file's group.
        replacing = next((i.time for i in newer if self._touches(i, file_id)), None)
        by = (
            f"by a write that completed since it began (instant {replacing})"
            if replacing is not None
            else f"by one of the {len(newer)} writes that completed since it began ({newer[0].time} on)"
        )
        return CommitConflictError(
            f"table {self.table.name}: {error.filename} was replaced while this {self.operation} ran, "
            f"{by}, and cleaned; nothing of this write is visible: retry it"
        )

    def _touches(self, instant: Instant, file_id: str | None) -> bool:
        """Whether a completed write wrote a new base file of the file group ``file_id`` (a log
        file appended onto it replaces nothing), or replaced the group."""
        if file_id is None:
            return False
        metadata = self.table.commit_metadata(instant)
        return any(stat.file_id == file_id and not stat.is_log for stat in metadata.stats) or any(
            file_id in file_ids for file_ids in metadata.replaced.values()
        )

    def conform(self, data: pa.Table, *, keys_only: bool = False) -> pa.Table:
        """Rows in the job's schema (``records.conform``); with ``keys_only`` (and for a delete,
        whose other columns are never written) only their key and partition columns are cast,
        to the table's types (what a record's key and partition path are spelled from)."""
        if keys_only or self.operation == DELETE:
            schema = self.table_schema if self.operation == DELETE else self.schema
            return conform_keys(strip_meta(data), schema, self.table.config.key_columns)
        return conform(data, self.schema, self.table.config.key_columns)

    def encoding(self, data: pa.Table, keys: pa.Array | None) -> InputChunk:
        """What the file groups of ``data`` (conformed rows; ``keys``: their record keys, when
        computed) are encoded with."""
        return InputChunk(self.instant, data, keys, self.schema, self.parquet, self.rules)

    def size_records(self, data: pa.Table, keys: pa.Array | None = None) -> None:
        """A table no write has sized yet (no commit wrote records, no record size estimate
        set) takes its record size from ``data`` (conformed, checked rows; ``keys``: their
        record keys, when computed), measured as its files encode it, so that files and row
        groups reach ``hoodie.parquet.max.file.size`` and ``hoodie.parquet.block.size``, as
        Hudi's bulk insert rolls them at the size they reach. (The estimate's default, 1 KB,
        against rows of a few dozen bytes, would make files of a few percent of that size,
        and slower to write.)"""
        if not self.unsized or data.num_rows == 0 or self.operation == DELETE:
            return
        self.record_size = sampled_record_size(self.table, self.encoding(data, keys))
        self.parquet = parquet_options(self.table.options, self.record_size)
        self.unsized = False

    def rows_per_file(self) -> int:
        return max(1, P.MAX_FILE_SIZE.of(self.table.options) // self.record_size)

    def write_groups(
        self,
        groups: Sequence[FileGroupWrite],
        source: InputChunk,
        names: Sequence[FileName],
        put: PutFile,
        done: Callable[[WriteStat], None] | None = None,
    ) -> list[WriteStat]:
        """Write file groups in parallel (``file_group_writer.write_file_groups``): one marker
        batch naming them all, then the files; ``done(stat)`` is called as each is written."""
        # A task beside a driver that decides the outcome is fenced (see FileGroupWriter).
        fence = None if self._transaction is not None else self._decided
        return write_file_groups(
            self.table, self.instant, groups, source, names, put, IO_THREADS, done=done, fence=fence
        )

    def put(self) -> PutFile:
        """How this process puts a data file: through its transaction (its "data" step) when
        it began the job, else marker and file directly."""
        if self._transaction is not None:
            return self._transaction.write_file
        return partial(put_data_file, self.table)
