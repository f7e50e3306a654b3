"""Table services a writer runs after each commit: compact a merge-on-read table's log files
(when asked to, inline), clean, compact the metadata table, archive.

The commit is complete and visible before any of them starts; they keep the
next reads and commits as cheap as this one (fewer old slices, fewer deltas to
apply, a short timeline to list). Each can be switched off by an option, as in
Hudi, and run later on its own.

They never turn a committed write into a failed one. Each is idempotent and
safe to race with another writer's services (exclusive creates pick one winner,
deletions tolerate files already gone); one that loses a race to another writer (a
compaction that another write's log file or another compaction got ahead of: a
``CommitConflictError``; a clean whose listing another writer's archival moved on from: a
``TimelineMovedError``) backs off quietly, and whatever else goes wrong in one is
returned as a warning, logged, and the next write runs the services again. A
scheduler that trusts exit codes must see success for a write that committed, or
it would retry an insert and duplicate its rows.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from fedcore import properties as P
from fedcore.commit.pending import pending_services
from fedcore.exceptions import CommitConflictError, MissingDependencyError, TimelineMovedError
from fedcore.metadata.folding import compact_metadata
from fedcore.metadata.table import MetadataTable
from fedcore.services.archival import archive
from fedcore.services.cleaning import clean
from fedcore.services.compaction import compact as compact_table
from fedcore.services.compaction import delta_commits_since_compaction

if TYPE_CHECKING:
    from fedcore.handle import TableHandle
    from fedcore.timeline import Timeline

log = logging.getLogger("fedcore.services.after_commit")


def run_table_services(table: TableHandle) -> list[str]:
    """After a commit, with the table's options (a writer's over the table's); the
    warnings of services that failed, empty when all went well.

    The services share one listing of the timeline, listed again only when a clean
    added to it: ``.hoodie/`` is the one prefix every reader and writer of the table
    lists, the one an object store would throttle first."""
    options = table.options
    warnings: list[str] = []
    state: dict[str, Timeline] = {}

    def service(name: str, run: Callable[[], object]) -> None:
        try:
            run()
        except (CommitConflictError, TimelineMovedError) as exc:  # lost a race to another writer
            log.info(
                "%s: %s after the commit backed off (it runs again after the next write): %s",
                table.path,
                name,
                exc,
            )
        except Exception as exc:  # the write committed: a service failure must not undo that
            message = f"{name} after the commit failed and will run again after the next write: {exc}"
            log.warning("%s: %s", table.path, message)
            warnings.append(message)

    def load() -> None:
        state["timeline"] = table.timeline()

    def run_table_compaction() -> None:
        wanted = P.COMPACT_INLINE_MAX_DELTA_COMMITS.of(options)
        due = delta_commits_since_compaction(state["timeline"]) >= wanted
        if due and compact_table(table, timeline=state["timeline"]) is not None:
            state["timeline"] = table.timeline()

    def run_clean() -> None:
        retained = P.CLEANER_COMMITS_RETAINED.of(options)
        # The writer rolled back failed writes before it began.
        if clean(table, retained, recover=False, timeline=state["timeline"]).instant is not None:
            state["timeline"] = table.timeline()

    def run_metadata_compaction() -> None:
        index = table.file_index_at(state["timeline"])
        limit = P.METADATA_COMPACT_DELTAS.of(options)
        if isinstance(index, MetadataTable) and index.deltas_since_compaction() >= limit:
            compact_metadata(index)

    service("listing the timeline", load)
    if "timeline" not in state:
        return warnings
    # Beside another writer's pending compaction (or a clustering) neither runs: that one folds
    # these log files, and a clean would need the slices it reads. After the next write.
    looked: list[bool] = []  # whether any is pending, once looked (a failure to look: neither runs)
    service(
        "looking for pending table services",
        lambda: looked.append(bool(pending_services(table, state["timeline"]))),
    )
    idle = looked == [False]
    if table.config.merge_on_read and P.COMPACT_INLINE.of(options) and idle:
        service("compaction", run_table_compaction)
    if P.CLEAN_AUTOMATIC.of(options) and idle:
        service("clean", run_clean)
    service("metadata-table compaction", run_metadata_compaction)
    if P.ARCHIVE_AUTOMATIC.of(options):
        service("archival", lambda: archive(table, options, timeline=state["timeline"]))
    for tool in P.sync_tools(options):
        catalog = "the Hive metastore" if tool == P.HIVE_SYNC_TOOL else "AWS Glue"
        service(f"publishing to {catalog}", functools.partial(_meta_sync, table, tool))
    return warnings


def _meta_sync(table: TableHandle, tool: str) -> None:
    """Hudi's meta sync with ``tool``, fed's way (``fedcore.catalog.meta_sync``)."""
    try:  # PyIceberg is an extra: a table that syncs nowhere needs none of it
        from fedcore.catalog.glue import GlueTarget
        from fedcore.catalog.meta_sync import SyncTarget, sync
    except ImportError as exc:
        raise MissingDependencyError(
            f"syncing a table's Iceberg view needs fedcore[iceberg]: pip install 'fedcore[iceberg]' ({exc})"
        ) from exc
    target = (SyncTarget if tool == P.HIVE_SYNC_TOOL else GlueTarget).of(table, table.options)
    if target is not None:
        sync(table, target)
