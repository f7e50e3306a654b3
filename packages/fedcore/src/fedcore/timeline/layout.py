"""What a table version decides about a table's files, and the one place it is decided.

A Hudi table version fixes how instant files are named and listed, how commit metadata (and a
write's inflight plan) is encoded, how a clean's and a rollback's metadata is encoded and how
log files are named. Each is one interface (``InstantNaming``, ``CommitCodec``,
``ServiceMetadataCodec``, ``LogFileNaming``); a ``TableLayout`` holds a version's
implementations, and ``layout_for`` is the only check of ``hoodie.table.version`` in fedcore: a
table is opened only if its version has a layout (``TableHandle`` keeps it as ``layout``), so
supporting a new version is adding its implementations and an entry in ``_LAYOUTS``, with no
caller changed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from fedcore.exceptions import UnsupportedTableVersionError
from fedcore.files.filenames import LogFileNaming, LogFileNamingV6, LogFileNamingV8
from fedcore.timeline.avro_commit_codec import AvroCommitCodec
from fedcore.timeline.avro_service_codec import AvroServiceMetadataCodec
from fedcore.timeline.commit_codec import CommitCodec, JsonCommitCodec
from fedcore.timeline.naming import InstantNaming, InstantNamingV6, InstantNamingV8
from fedcore.timeline.service_codec import ServiceMetadataCodec


@dataclass(frozen=True)
class TableLayout:
    """One table version's names and encodings; ``timeline_layout``: Hudi's timeline layout
    version (2: the timeline in ``.hoodie/timeline/``, completion times). fedcore reads and
    writes both table types of every version it has a layout for."""

    version: int
    instants: InstantNaming
    commits: CommitCodec
    services: ServiceMetadataCodec
    log_files: LogFileNaming
    timeline_layout: int = 1


#: Table version 6 (Apache Hudi 0.14 and 0.15, timeline layout 1).
V6: Final = TableLayout(
    6, InstantNamingV6(), JsonCommitCodec(), AvroServiceMetadataCodec(), LogFileNamingV6()
)
#: Table versions 8 (Hudi 1.0) and 9 (Hudi 1.1 and later; its differences are configuration
#: keys, not file names or encodings), timeline layout 2. Log files are named as in version 6,
#: with the writing delta commit's time where version 6 has the slice's base instant, each
#: delta commit writing files of its own (version 1).
V8: Final = TableLayout(
    8,
    InstantNamingV8(),
    AvroCommitCodec(),
    AvroServiceMetadataCodec(),
    LogFileNamingV8(),
    timeline_layout=2,
)
V9: Final = replace(V8, version=9)
_LAYOUTS: Final = {layout.version: layout for layout in (V6, V8, V9)}


def layout_for(version: int, table_name: str = "") -> TableLayout:
    """The layout of a table of ``version``; ``UnsupportedTableVersionError`` for a version
    fedcore has none for (reading it by another version's names would miss or misread files)."""
    layout = _LAYOUTS.get(version)
    if layout is None:
        known = ", ".join(str(v) for v in sorted(_LAYOUTS))
        raise UnsupportedTableVersionError(
            f"table {table_name} has table version {version}; fedcore reads and writes versions {known}"
        )
    return layout
