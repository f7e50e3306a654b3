"""Bringing an existing table up to what this fedcore writes, data untouched.

Four changes so far, each recorded in ``hoodie.properties``:

- A table whose data is not under its table path gets an identity if it has none (a table
  created before fed drew one), and a table moved to another path records its new one
  (``fedcore.handle.identity``); a copy of another table is refused here, before any write
  or cleanup through it begins. Its files stay where they are: only a table created since
  gets a folder of its own under the storage locations.
- A table whose data is not under its table path, created before fed stored the table
  type of such tables as federated (``properties.FEDERATED_TABLE_TYPE_PREFIX``), gets it.
  Readers that list the table path (Apache Hudi's own, hudi-rs) then refuse the table
  instead of returning it empty.
- The metadata table moves out of ``.hoodie/metadata/fed-files/`` (layout 1) into
  ``.hoodie/.fed/metadata/`` (layout 2, ``properties.METADATA_LAYOUT``): Hudi's writers
  own ``.hoodie/metadata/`` and delete it whole when they drop or rebuild their own
  metadata table.
- Apache Hudi's own metadata table, which a Hudi writer of the same table may have built, is
  dropped as Hudi drops it: first from the config (``properties.HUDI_METADATA_PARTITIONS``,
  so Hudi's readers list the table instead), then its folder. fed's writes do not maintain
  it, and Hudi's readers would otherwise take its stale file list for the table's. A Hudi
  writer with it enabled builds it afresh from the files on its next write.

Every write does this before it begins (``WriteJob.open``); ``fed upgrade TABLE`` does
it by hand.

Moving the metadata table is safe beside writers that still use the old folder (a
process that loaded the config before the switch): its files never change once written,
so they are copied (shards, then deltas, then manifests, so a copied manifest never
names a shard not yet there) and only then is the config switched, in one write. A
delta such a writer puts in the old folder after the copy is read from there (and an
instant with no delta at all is caught up from its commit metadata: see
``fedcore.metadata.table``); a manifest it makes there is not seen, and lookups start
from the newest one in the new folder instead. The old folder is left in place: a reader
that loaded the config before the switch may still be reading it, and Hudi deleting it
harms nothing once the table has moved.
"""

from __future__ import annotations

from fedcore import properties as P
from fedcore.handle import TableHandle
from fedcore.handle.identity import check_not_a_copy, recorded_identity
from fedcore.io.errors import storage_errors
from fedcore.io.filesystems import remove_tree
from fedcore.metadata.format import FOLDER, LEGACY_FOLDER

#: The metadata table's subfolders, in the order they are copied.
_COPY_ORDER = ("base", "deltas", "manifests")


def upgrade_config(table: TableHandle) -> dict[str, tuple[str, str]]:
    """Persist what the table's config lacks and update ``table.config``; returns the keys
    changed, each with its old and new value (empty: the table was up to date).

    Works from ``hoodie.properties`` as stored now, not the config the handle loaded: another
    writer (a Hudi job, another fed process) may have changed it since, and what it wrote
    must neither be missed (Hudi's metadata table, built since, is dropped) nor written over
    with the handle's older copy. A change the handle cannot write on with (record keys,
    partitioning, table type, storage keys, a table version fed does not write) is refused.
    ``hoodie.properties`` is replaced in one write (a reader sees the old file or the new
    one, whole); two writers upgrading at once write the same keys, but for the id a table
    made before ids gets: each draws one, and the last written stays (nothing was named
    after the other)."""
    config = upgraded = table.take_stored_config()
    check_not_a_copy(table.path, config, table.strategy, table.storage_options)
    changed: dict[str, tuple[str, str]] = {}
    identity = recorded_identity(table.path, config, table.strategy)
    if identity:
        upgraded = upgraded.with_properties(identity)
        changed.update((key, (config.get(key, ""), value)) for key, value in identity.items())
    if not (table.strategy.data_under_table_path or config.federated):
        upgraded = upgraded.marked_federated()
        changed[P.TABLE_TYPE] = (config.get(P.TABLE_TYPE, ""), upgraded[P.TABLE_TYPE])
    if config.metadata_layout < P.CURRENT_METADATA_LAYOUT:
        if config.metadata_enabled:
            copy_metadata_table(table)
        upgraded = upgraded.with_metadata_layout(P.CURRENT_METADATA_LAYOUT)
        changed[P.METADATA_LAYOUT] = (str(config.metadata_layout), upgraded[P.METADATA_LAYOUT])
    hudi_metadata = {
        key: config[key]
        for key in (P.HUDI_METADATA_PARTITIONS, P.HUDI_METADATA_PARTITIONS_INFLIGHT)
        if config.get(key, "").strip()
    }
    if hudi_metadata:
        upgraded = upgraded.without(hudi_metadata)
        changed.update((key, (value, "")) for key, value in hudi_metadata.items())
    if not changed:
        return {}
    upgraded.save_replacing(table.fs.table_fs, table.path)
    table.config = upgraded
    table.forget_file_index()
    if hudi_metadata:
        _drop_hudi_metadata_table(table)
    return changed


def _drop_hudi_metadata_table(table: TableHandle) -> None:
    """Delete what Hudi keeps in ``.hoodie/metadata/``; a layout-1 metadata table of fed's
    in there stays, for readers that loaded the config before the move."""
    fs = table.fs.table_fs
    folder = fs._strip_protocol(f"{table.path}/{P.HUDI_METADATA_FOLDER}")
    kept = fs._strip_protocol(f"{table.path}/{LEGACY_FOLDER}")
    with storage_errors(folder):
        fs.invalidate_cache(folder)
        if not fs.exists(folder):
            return
        entries = [entry.rstrip("/") for entry in fs.ls(folder, detail=False, refresh=True)]
        if kept not in entries:
            remove_tree(fs, folder)  # as Hudi drops it: the folder and all in it
            return
        for entry in entries:
            if entry != kept:
                remove_tree(fs, entry)


def copy_metadata_table(table: TableHandle) -> int:
    """Copy the layout-1 metadata table's files into the layout-2 folder (what is there
    already is kept: the same immutable file, copied by a racing upgrade); returns the count
    copied."""
    fs = table.fs.table_fs
    # Listings name objects without the URL's scheme: compare in those terms.
    old = fs._strip_protocol(f"{table.path}/{LEGACY_FOLDER}")
    new = fs._strip_protocol(f"{table.path}/{FOLDER}")
    with storage_errors(old):
        fs.invalidate_cache(old)
        found = sorted(fs.find(old))
        fs.invalidate_cache(new)
        present = set(fs.find(new))
    copied = 0
    for subfolder in _COPY_ORDER:
        sources = [path for path in found if path.startswith(f"{old}/{subfolder}/")]
        pairs = [(path, new + path[len(old) :]) for path in sources if new + path[len(old) :] not in present]
        if not pairs:
            continue
        with storage_errors(new):
            fs.makedirs(f"{new}/{subfolder}", exist_ok=True)
            fs.copy([src for src, _ in pairs], [dst for _, dst in pairs])
        copied += len(pairs)
    return copied
