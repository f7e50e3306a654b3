"""An instant's metadata as metadata-table ops: the one derivation every writer of a delta
shares, so a file fedcore commits, compacts, cleans or rolls back is recorded the same way as
catch-up (``fedcore.metadata.catch_up``) reads it back from another writer's timeline.

- a commit (a write, a compaction, a replace commit): every file its write stats name is
  added, with its size and column statistics; every file group it replaced is retired at the
  commit's time;
- the rollback of a completed commit: the inverse, each added file removed (its size kept)
  and each retired group brought back;
- a clean or a rollback's deleted files: each file removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fedcore.metadata.format import ADD, REMOVE, REPLACE, UNREPLACE, Op
from fedcore.timeline.commit_metadata import CommitMetadata


def commit_ops(instant: str, metadata: CommitMetadata) -> list[Op]:
    """The ops of commit ``instant``: its files added, then the file groups it replaced."""
    ops = [
        Op(s.partition_path, s.path.rpartition("/")[2], s.file_size, ADD, s.column_stats)
        for s in metadata.stats
    ]
    ops.extend(
        Op(partition, file_id, int(instant), REPLACE)
        for partition, file_ids in metadata.replaced.items()
        for file_id in file_ids
    )
    return ops


def undo_ops(instant: str, metadata: CommitMetadata) -> list[Op]:
    """The ops of rolling back commit ``instant``: each of ``commit_ops`` undone, in order (an
    added file removed with the size it was added with; a retired group brought back)."""
    return [
        op._replace(op=REMOVE, stats=None) if op.op == ADD else op._replace(size=0, op=UNREPLACE)
        for op in commit_ops(instant, metadata)
    ]


def removal_ops(
    deleted: Mapping[str, Iterable[str]], sizes: Mapping[str, Mapping[str, int]] | None = None
) -> list[Op]:
    """The ops of files deleted, by partition; ``sizes`` (partition -> name -> bytes) where the
    deleter knows them (a clean does), else 0 (a rollback's metadata names files only)."""
    known = sizes or {}
    return [
        Op(partition, name, known.get(partition, {}).get(name, 0), REMOVE)
        for partition, names in deleted.items()
        for name in names
    ]
