"""Table services a writer runs after each commit: clean, compact the metadata table, archive.

The commit is complete and visible before any of them starts; they keep the
next reads and commits as cheap as this one (fewer old slices, fewer deltas to
apply, a short timeline to list). Each can be switched off by an option, as in
Hudi, and run later on its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from fedcore import properties as P
from fedcore.archival import archive
from fedcore.cleaning import clean
from fedcore.metadata.table import MetadataTable

if TYPE_CHECKING:
    from fedcore.table import Table


def run_table_services(table: Table, options: Mapping[str, str] | None = None) -> None:
    """After a commit (``options``: the writer's, over the table's).

    The services share one listing of the timeline, listed again only when a clean
    added to it: ``.hoodie/`` is the one prefix every reader and writer of the table
    lists, the one an object store would throttle first."""
    options = table.options if options is None else options
    timeline = table.timeline()
    if P.property_as_bool(options, P.CLEAN_AUTOMATIC):
        retained = P.property_as_int(options, P.CLEANER_COMMITS_RETAINED, P.DEFAULT_CLEANER_COMMITS_RETAINED)
        # The writer rolled back failed writes before it began.
        if clean(table, retained, recover=False, timeline=timeline) is not None:
            timeline = table.timeline()
    index = table.file_index_at(timeline)
    limit = P.property_as_int(options, P.METADATA_COMPACT_DELTAS, P.DEFAULT_METADATA_COMPACT_DELTAS)
    if isinstance(index, MetadataTable) and index.deltas_since_compaction() >= limit:
        index.compact()
    if P.property_as_bool(options, P.ARCHIVE_AUTOMATIC):
        archive(table, options, timeline=timeline)
