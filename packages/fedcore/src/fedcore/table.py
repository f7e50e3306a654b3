"""A table handle: its config, its storage strategy and its federated filesystem.

The strategy is fixed when the table is created and persisted in its config;
every later open rebuilds it from there. A caller that passes storage keys on
open (a writer's options, a CLI flag) is checked against the persisted ones,
because the same table read through two strategies would look for its files in
two different places.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property

from fedcore import properties as P
from fedcore.exceptions import StorageStrategyMismatchError
from fedcore.io.federated import FederatedFileSystem
from fedcore.io.filesystems import StorageOptions, filesystem_for
from fedcore.io.uris import normalize_uri
from fedcore.storage.base import StorageStrategy
from fedcore.storage.loader import load_storage_strategy, strategy_spec
from fedcore.table_config import TableConfig


class Table:
    def __init__(
        self,
        path: str,
        config: TableConfig,
        strategy: StorageStrategy,
        storage_options: StorageOptions | None = None,
    ) -> None:
        self.path = normalize_uri(path)
        self.config = config
        self.strategy = strategy
        self.storage_options = storage_options

    @property
    def name(self) -> str:
        return self.config.name

    @cached_property
    def fs(self) -> FederatedFileSystem:
        """Every file of the table, addressed by logical path."""
        return FederatedFileSystem(self.path, self.strategy, self.storage_options)

    def __repr__(self) -> str:
        return f"Table({self.path!r}, name={self.name!r}, strategy={self.strategy!r})"


def create_table(
    path: str,
    *,
    name: str,
    record_key_fields: Sequence[str],
    partition_fields: Sequence[str] = (),
    precombine_field: str | None = None,
    hive_style_partitioning: bool = True,
    database: str | None = None,
    properties: Mapping[str, str] | None = None,
    storage_options: StorageOptions | None = None,
) -> Table:
    """Create a table and persist its storage strategy; fails if a table is already there."""
    table_path = normalize_uri(path)
    requested = {str(k): str(v) for k, v in (properties or {}).items()}
    strategy = load_storage_strategy(table_path, {**requested, P.TABLE_NAME: name})
    other = {
        k: v for k, v in requested.items() if k not in P.STORAGE_KEYS and k not in strategy.accepted_keys
    }
    config = TableConfig.create(
        name=name,
        record_key_fields=record_key_fields,
        partition_fields=partition_fields,
        precombine_field=precombine_field,
        hive_style_partitioning=hive_style_partitioning,
        database=database,
        properties={**other, **persisted_storage_properties(strategy, requested)},
    )
    config.save_new(filesystem_for(table_path, storage_options), table_path)
    return Table(table_path, config, strategy, storage_options)


def load_table(
    path: str,
    *,
    properties: Mapping[str, str] | None = None,
    storage_options: StorageOptions | None = None,
) -> Table:
    """Open an existing table; storage keys in ``properties`` must match the persisted ones."""
    table_path = normalize_uri(path)
    config = TableConfig.load(filesystem_for(table_path, storage_options), table_path)
    strategy = load_storage_strategy(table_path, config)
    check_storage_properties(strategy, config, properties or {})
    return Table(table_path, config, strategy, storage_options)


def persisted_storage_properties(strategy: StorageStrategy, requested: Mapping[str, str]) -> dict[str, str]:
    """The storage keys written to a new table's config: the strategy's name and its settings."""
    spec = requested.get(P.STORAGE_STRATEGY_CLASS) or P.DEFAULT_STORAGE_STRATEGY
    return {P.STORAGE_STRATEGY_CLASS: strategy_spec(type(strategy), spec), **strategy.properties()}


def check_storage_properties(
    strategy: StorageStrategy, config: Mapping[str, str], requested: Mapping[str, str]
) -> None:
    """Raise StorageStrategyMismatchError if ``requested`` describes another layout than the table's."""
    storage_keys = set(P.STORAGE_KEYS) | strategy.accepted_keys
    asked = {str(k): str(v) for k, v in requested.items() if k in storage_keys}
    if not asked:
        return
    if P.STORAGE_STRATEGY_CLASS in asked:
        # A full description of a layout: compare it as given, not blended with the table's.
        base = {k: v for k, v in config.items() if k not in storage_keys}
    else:
        base = dict(config)
    wanted = load_storage_strategy(strategy.table_path, {**base, **asked})
    if wanted != strategy:
        raise StorageStrategyMismatchError(
            f"the table at {strategy.table_path} was created with storage "
            f"{persisted_storage_properties(strategy, config)}, but "
            f"{persisted_storage_properties(wanted, asked)} was asked for; a table changes storage "
            "strategy only by migration (re-bootstrapping it into a new table)"
        )
