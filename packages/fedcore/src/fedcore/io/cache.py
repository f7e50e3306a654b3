"""A cache bounded by the weight of what it holds and by its number of entries, dropping the
least recently used first.

A long-lived table handle (a Spark driver, a service planning query after query) keeps what
it read of the table: commit metadata, the metadata table's manifests, shard footers and row
groups, deltas. All of it is immutable in storage, so an entry never goes stale, and one
dropped is read again when next needed; what must not happen is that the handle's memory grows
with the table or its history. So each such cache is bounded by weight (bytes, as its user
estimates them) and entries, and an entry heavier than the whole bound is not kept at all.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    """A least-recently-used cache of at most ``max_weight`` (None: unbounded) and
    ``max_entries`` (None: unbounded). Safe to share between threads (a handle's lookups run
    on the threads of its operations)."""

    def __init__(self, max_weight: int | None = None, max_entries: int | None = None) -> None:
        self.max_weight = max_weight
        self.max_entries = max_entries
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled with what it holds, without its lock (a handle goes to Spark's workers)."""
        with self._lock:
            return {
                "max_weight": self.max_weight,
                "max_entries": self.max_entries,
                "entries": list(self._entries.items()),
            }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.max_weight = state["max_weight"]
        self.max_entries = state["max_entries"]
        self._entries = OrderedDict(state["entries"])
        self._weight = sum(weight for _, weight in self._entries.values())
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value of ``key`` (now the most recently used), or None."""
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
            return found[0]

    def put(self, key: K, value: V, weight: int = 0) -> bool:
        """Keep ``value`` under ``key``, dropping the least recently used entries to stay
        within the bounds; False (nothing kept) when ``weight`` alone is over ``max_weight``."""
        with self._lock:
            self._drop(key)
            if self.max_weight is not None and weight > self.max_weight:
                return False
            self._entries[key] = (value, weight)
            self._weight += weight
            while (self.max_weight is not None and self._weight > self.max_weight) or (
                self.max_entries is not None and len(self._entries) > self.max_entries
            ):
                _, (_, dropped) = self._entries.popitem(last=False)
                self._weight -= dropped
            return True

    def pop(self, key: K) -> None:
        with self._lock:
            self._drop(key)

    def drop_where(self, doomed: Callable[[K], bool]) -> int:
        """Drop the entries whose keys ``doomed`` picks; how many went."""
        with self._lock:
            keys = [key for key in self._entries if doomed(key)]
            for key in keys:
                self._drop(key)
            return len(keys)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._weight = 0

    def _drop(self, key: K) -> None:
        found = self._entries.pop(key, None)
        if found is not None:
            self._weight -= found[1]

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[K]:
        return iter(self.keys())

    def keys(self) -> list[K]:
        """The keys, least recently used first."""
        with self._lock:
            return list(self._entries)

    @property
    def weight(self) -> int:
        """The weight of what is kept now."""
        return self._weight
