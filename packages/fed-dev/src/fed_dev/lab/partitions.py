"""A model of how S3 throttles requests by key range, for the throttling lab.

What S3 documents (Amazon S3 User Guide, "Best practices design patterns: optimizing
Amazon S3 performance", and the ``503 SlowDown`` error in the S3 API reference):

- an application can make at least **3,500 PUT/COPY/POST/DELETE** and **5,500 GET/HEAD**
  requests per second **per partitioned prefix**; past that, requests get ``503 Slow
  Down``;
- S3 scales by splitting a bucket's key space into more partitions when a prefix
  sees sustained high request rates; while it does, requests may get 503s, and the
  new capacity is not instant. How long it takes is not documented (AWS support and
  talks speak of tens of minutes), so here it is a parameter, ``split_after``.

The model: each bucket's key space is a sorted list of partitions (key ranges); a new
bucket has one. Each partition admits requests through two token buckets (writes and
reads) refilled at its rates, holding at most ``burst`` seconds of tokens, so over any
window it admits its rate (plus one burst) and rejects the rest. A partition whose
offered load (admitted and rejected) stays at or above ``hot_fraction`` of a rate for
``split_after`` seconds is split at the median key of the requests it saw in its last
busy second: a key boundary inside its hot range, so each half takes about half the
load. A range whose requests all name one key cannot be split (one hot object stays one
partition's worth, whatever the layout). LIST requests count as reads of their prefix.

``Limits.scaled(scale)`` multiplies the rates and the split delay by one factor: with
``Limits().scaled(0.02)`` a partition admits 70 writes and 110 reads per second and
splits after 36 s of sustained load, so a 2-core machine can drive several partitions
past their limits and see splits within a run.

Deterministic: the model reads time only from the clock it is given, and the one random
choice (which keys a busy partition remembers when it sees more than it keeps) comes
from a seeded generator. Fed the same requests at the same times, it makes the same
decisions.
"""

from __future__ import annotations

import bisect
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Final

#: Keys a partition remembers per second of load, to choose where to split.
SAMPLE_KEYS: Final = 2_048


@dataclass(frozen=True)
class Limits:
    """Per-partition limits (S3's documented rates) and the split model's parameters."""

    writes_per_second: float = 3_500.0
    reads_per_second: float = 5_500.0
    #: Seconds of sustained load before a partition splits (S3: undocumented, tens of minutes).
    split_after: float = 1_800.0
    #: Load at or above this fraction of a rate counts as sustained.
    hot_fraction: float = 0.5
    #: Seconds of tokens a partition may bank (the burst it admits above its rate).
    burst: float = 0.05

    @property
    def rates(self) -> tuple[float, float]:
        """(writes, reads) per second: the order of every per-class pair below."""
        return self.writes_per_second, self.reads_per_second

    def scaled(self, scale: float) -> Limits:
        """Rates and the split delay times ``scale`` (see the module docstring)."""
        return replace(
            self,
            writes_per_second=self.writes_per_second * scale,
            reads_per_second=self.reads_per_second * scale,
            split_after=self.split_after * scale,
        )


@dataclass
class Partition:
    """One key range of a bucket: ``[start, next partition's start)``."""

    start: str
    created: float
    refilled: float
    #: Per class, writes then reads: tokens banked, requests admitted and rejected.
    tokens: list[float]
    admitted: list[int] = field(default_factory=lambda: [0, 0])
    rejected: list[int] = field(default_factory=lambda: [0, 0])
    #: The second being counted, and the requests (writes, reads) offered in it.
    second: int = -1
    offered: list[int] = field(default_factory=lambda: [0, 0])
    #: When its sustained load began (None: not under sustained load), and the end of the
    #: last second judged hot.
    hot_since: float | None = None
    hot_until: float = 0.0
    #: Keys offered in the current second (a seeded sample once there are more).
    keys: list[str] = field(default_factory=list)
    seen: int = 0
    #: Keys of the last second whose load counted as sustained: where a split goes.
    hot_keys: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Split:
    time: float
    bucket: str
    #: The key where the new partition starts.
    key: str


class PartitionModel:
    """Admits or rejects each request by the partition its key falls in (thread-safe)."""

    def __init__(self, limits: Limits, clock: Callable[[], float], seed: int = 0) -> None:
        self.limits = limits
        self._clock = clock
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._buckets: dict[str, list[Partition]] = {}
        self._starts: dict[str, list[str]] = {}
        self.splits: list[Split] = []

    def admit(self, bucket: str, key: str, write: bool) -> bool:
        """Whether S3 would serve this request now (False: ``503 SlowDown``)."""
        with self._lock:
            now = self._clock()
            partition = self._partition(bucket, key, now)
            self._count(bucket, partition, key, write, now)
            self._refill(partition, now)
            kind = 0 if write else 1
            if partition.tokens[kind] >= 1.0:
                partition.tokens[kind] -= 1.0
                partition.admitted[kind] += 1
                return True
            partition.rejected[kind] += 1
            return False

    def partitions(self, bucket: str) -> list[Partition]:
        """The bucket's partitions, in key order (a new bucket has one)."""
        with self._lock:
            return list(self._buckets.get(bucket, []))

    def buckets(self) -> list[str]:
        with self._lock:
            return list(self._buckets)

    def partition_count(self) -> int:
        with self._lock:
            return sum(len(parts) for parts in self._buckets.values())

    def limit(self, bucket: str, write: bool) -> float:
        """The bucket's physical limit now: partitions times the per-partition rate."""
        rate = self.limits.rates[0 if write else 1]
        with self._lock:
            return len(self._buckets.get(bucket, [])) * rate

    # --- inside the lock --------------------------------------------------------------

    def _partition(self, bucket: str, key: str, now: float) -> Partition:
        parts = self._buckets.get(bucket)
        if parts is None:
            parts = self._buckets[bucket] = [self._new("", now)]
            self._starts[bucket] = [""]
        return parts[bisect.bisect_right(self._starts[bucket], key) - 1]

    def _new(self, start: str, now: float) -> Partition:
        return Partition(start, now, now, [rate * self.limits.burst for rate in self.limits.rates])

    def _refill(self, partition: Partition, now: float) -> None:
        elapsed = max(0.0, now - partition.refilled)
        partition.refilled = now
        for kind, rate in enumerate(self.limits.rates):
            cap = max(1.0, rate * self.limits.burst)
            partition.tokens[kind] = min(cap, partition.tokens[kind] + elapsed * rate)

    def _count(self, bucket: str, partition: Partition, key: str, write: bool, now: float) -> None:
        """Count the offered load per second; at each new second, judge the one before."""
        second = int(now)
        if second != partition.second:
            self._judge(bucket, partition, now)
            partition.second = second
            partition.offered = [0, 0]
            partition.keys = []
            partition.seen = 0
        partition.offered[0 if write else 1] += 1
        partition.seen += 1
        if len(partition.keys) < SAMPLE_KEYS:
            partition.keys.append(key)
        else:  # reservoir sampling: every key of the second is as likely to be kept
            slot = self._random.randrange(partition.seen)
            if slot < SAMPLE_KEYS:
                partition.keys[slot] = key

    def _judge(self, bucket: str, partition: Partition, now: float) -> None:
        """Judge the second just counted: hot or not; split once hot for ``split_after``."""
        if partition.second < 0:
            return
        limits = self.limits
        hot = any(
            offered >= limits.hot_fraction * rate
            for offered, rate in zip(partition.offered, limits.rates, strict=True)
        )
        if not hot:
            partition.hot_since = None
            return
        if partition.hot_since is not None and partition.second > partition.hot_until:
            partition.hot_since = None  # seconds without a request came in between
        partition.hot_keys = partition.keys
        partition.hot_until = partition.second + 1
        if partition.hot_since is None:
            partition.hot_since = float(partition.second)
        if partition.hot_until - partition.hot_since >= limits.split_after:
            self._split(bucket, partition, now)

    def _split(self, bucket: str, partition: Partition, now: float) -> None:
        keys = sorted(partition.hot_keys)
        if not keys or keys[0] == keys[-1]:
            return  # one hot key: no boundary inside the range spreads its load
        boundary = keys[len(keys) // 2]
        if boundary == keys[0]:  # most requests name the lowest key: split just above it
            boundary = keys[bisect.bisect_right(keys, keys[0])]
        starts = self._starts[bucket]
        index = bisect.bisect_right(starts, partition.start) - 1
        self._buckets[bucket].insert(index + 1, self._new(boundary, now))
        starts.insert(index + 1, boundary)
        partition.hot_since = None
        self.splits.append(Split(now, bucket, boundary))
