"""Finding and building the storage strategy a table config names.

``hoodie.storage.strategy.class`` holds a built-in short name, the name of an
entry point in the ``fedcore.storage_strategies`` group (how other packages ship
strategies), or a class path (``package.module.Class`` or ``package.module:Class``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib.metadata import entry_points

from fedcore import properties as P
from fedcore.exceptions import FedError, InvalidStorageConfigError, UnknownStorageStrategyError
from fedcore.storage.base import StorageStrategy
from fedcore.storage.hive import HiveStorageStrategy
from fedcore.storage.object_store import ObjectStoreStorageStrategy
from fedcore.storage.partition_map import PartitionMapStorageStrategy

BUILTIN_STRATEGIES: Mapping[str, type[StorageStrategy]] = {
    cls.name: cls for cls in (HiveStorageStrategy, ObjectStoreStorageStrategy, PartitionMapStorageStrategy)
}


def strategy_class(spec: str) -> type[StorageStrategy]:
    key = P.STORAGE_STRATEGY_CLASS
    spec = spec.strip()
    if not spec:
        raise UnknownStorageStrategyError(key, "must not be empty")
    found: object = BUILTIN_STRATEGIES.get(spec) or _from_entry_point(spec) or _from_class_path(spec)
    if found is None:
        raise UnknownStorageStrategyError(
            key,
            f"{spec!r} is not a built-in strategy ({', '.join(BUILTIN_STRATEGIES)}), "
            f"an entry point in {P.STORAGE_STRATEGY_ENTRY_POINT_GROUP!r}, or an importable class",
        )
    if not (isinstance(found, type) and issubclass(found, StorageStrategy)):
        raise InvalidStorageConfigError(key, f"{spec!r} is not a subclass of fedcore StorageStrategy")
    return found


def strategy_spec(cls: type[StorageStrategy], requested: str) -> str:
    """What to persist for a strategy: its short name when it has one, else what the user gave."""
    if cls.name and BUILTIN_STRATEGIES.get(cls.name) is cls:
        return cls.name
    return requested.strip()


def named_strategy_class(properties: Mapping[str, str]) -> type[StorageStrategy]:
    """The class of the strategy the properties name (``hive`` when they name none)."""
    spec = properties.get(P.STORAGE_STRATEGY_CLASS)
    # given but empty is an error, never the default
    return strategy_class(P.DEFAULT_STORAGE_STRATEGY if spec is None else spec)


def load_storage_strategy(table_path: str, properties: Mapping[str, str]) -> StorageStrategy:
    """Build the strategy the properties name (``hive`` when they name none)."""
    cls = named_strategy_class(properties)
    spec = properties.get(P.STORAGE_STRATEGY_CLASS, P.DEFAULT_STORAGE_STRATEGY)
    try:
        return cls(table_path, properties)
    except FedError:
        raise
    except Exception as exc:  # a third-party constructor failing must still name the key
        raise InvalidStorageConfigError(
            P.STORAGE_STRATEGY_CLASS, f"{spec!r} could not be constructed: {exc}"
        ) from exc


def _from_entry_point(name: str) -> object | None:
    for entry_point in entry_points(group=P.STORAGE_STRATEGY_ENTRY_POINT_GROUP):
        if entry_point.name == name:
            try:
                loaded: object = entry_point.load()
                return loaded
            except Exception as exc:
                raise UnknownStorageStrategyError(
                    P.STORAGE_STRATEGY_CLASS, f"entry point {name!r} failed to load: {exc}"
                ) from exc
    return None


def _from_class_path(spec: str) -> object | None:
    module_name, sep, attribute = spec.partition(":") if ":" in spec else spec.rpartition(".")
    if not sep or not module_name or not attribute:
        return None
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    obj: object = module
    for part in attribute.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj
