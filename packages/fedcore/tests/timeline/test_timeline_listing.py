"""Which folders a timeline is listed from is the table version's naming's to say: the
instants' folder, and the folder of fed's pointer files (metadata-table manifest pointers,
archival markers, the archive folder). Version 6 keeps both in ``.hoodie/``, listed once;
a naming that keeps instants in a folder of their own (Hudi 1.x: ``.hoodie/timeline/``) is
listed from both without a condition in ``Timeline.load``."""

from __future__ import annotations

from pathlib import Path

import fsspec

from fedcore.timeline import (
    ARCHIVE_FOLDER,
    ARCHIVED_MARKER_PREFIX,
    COMMIT,
    COMPLETED,
    INFLIGHT,
    MANIFEST_POINTER_PREFIX,
    Instant,
    Timeline,
)
from fedcore.timeline.layout import V6
from fedcore.timeline.naming import InstantNamingV6

T1, T2 = "20260102030405678", "20260102030405679"


class _InstantsInTimelineFolder(InstantNamingV6):
    """Version 6's names, with instants under ``.hoodie/timeline/`` as Hudi 1.x keeps them."""

    def folder(self, table_path: str) -> str:
        return f"{table_path}/.hoodie/timeline"


def _touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")


def test_version_6_lists_instants_and_pointers_from_hoodie(tmp_path: Path) -> None:
    hoodie = tmp_path / ".hoodie"
    for name in (
        f"{T1}.commit",
        f"{T2}.inflight",
        f"{MANIFEST_POINTER_PREFIX}{T1}",
        f"{ARCHIVED_MARKER_PREFIX}{T1}",
    ):
        _touch(hoodie / name)
    (hoodie / ARCHIVE_FOLDER).mkdir()
    assert V6.instants.pointer_folder(str(tmp_path)) == V6.instants.folder(str(tmp_path))
    timeline = Timeline.load(fsspec.filesystem("file"), str(tmp_path), V6.instants)
    assert timeline.instants == (Instant(T1, COMMIT, COMPLETED), Instant(T2, COMMIT, INFLIGHT))
    assert timeline.manifests == (T1,)
    assert timeline.archived_through == T1
    assert timeline.has_archive


def test_instants_in_their_own_folder_and_pointers_in_hoodie(tmp_path: Path) -> None:
    hoodie = tmp_path / ".hoodie"
    _touch(hoodie / "timeline" / f"{T2}.commit")
    _touch(hoodie / "timeline" / "history" / "manifest_1")
    # A pointer in the instants' folder, or an instant in .hoodie/, is not where this naming
    # reads it from: neither is seen.
    _touch(hoodie / "timeline" / f"{MANIFEST_POINTER_PREFIX}{T1}")
    _touch(hoodie / f"{T1}.commit")
    _touch(hoodie / f"{MANIFEST_POINTER_PREFIX}{T2}")
    timeline = Timeline.load(fsspec.filesystem("file"), str(tmp_path), _InstantsInTimelineFolder())
    assert timeline.instants == (Instant(T2, COMMIT, COMPLETED),)
    assert timeline.manifests == (T2,)
    assert timeline.archived_through is None
    assert not timeline.has_archive
