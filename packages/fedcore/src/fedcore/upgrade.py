"""Bringing an existing table's config up to what this fedcore writes, data untouched.

One change so far: a table whose data is not under its table path, created before fed
stored the table type of such tables as federated (``properties.FEDERATED_TABLE_TYPE_PREFIX``),
gets it. Readers that list the table path (Apache Hudi's own, hudi-rs) then refuse the
table instead of returning it empty. Every write does this before it begins (``WriteJob.open``);
``fed upgrade TABLE`` does it by hand.
"""

from __future__ import annotations

from fedcore import properties as P
from fedcore.handle import TableHandle


def upgrade_config(table: TableHandle) -> dict[str, tuple[str, str]]:
    """Persist what the table's config lacks and update ``table.config``; returns the keys
    changed, each with its old and new value (empty: the config was up to date).

    ``hoodie.properties`` is replaced in one write (a reader sees the old file or the new one,
    whole); two writers upgrading at once write the same keys."""
    config = table.config
    if table.strategy.data_under_table_path or config.federated:
        return {}
    upgraded = config.marked_federated()
    upgraded.save_replacing(table.fs.table_fs, table.path)
    table.config = upgraded
    return {P.TABLE_TYPE: (config.get(P.TABLE_TYPE, ""), upgraded[P.TABLE_TYPE])}
