"""Layout preview: where a strategy would put a table's files, before any is written.

Users choose a layout once (changing it means migrating the table), so they want
to see its consequences first: which prefixes files land under, how many, and
whether the spread is even enough that no prefix becomes the hot one an object
store throttles. A "prefix" here is a storage location as the strategy returns
it, the folder under which the store sees a file group's requests.
"""

from __future__ import annotations

import math
import random
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fedcore.exceptions import FedError, MissingDependencyError
from fedcore.files.filenames import base_file_name
from fedcore.storage.base import StorageStrategy

#: Below this many files per prefix a chi-square test says nothing reliable.
MIN_EXPECTED_PER_PREFIX = 5


@dataclass(frozen=True)
class Placement:
    logical: str
    physical: str


@dataclass
class LayoutReport:
    strategy: StorageStrategy
    partitions: Sequence[str]
    files_per_prefix: Counter[str]
    samples: list[Placement] = field(default_factory=list)
    #: Set for an existing table: bytes per prefix, next to files per prefix.
    bytes_per_prefix: Counter[str] | None = None

    @property
    def files(self) -> int:
        return sum(self.files_per_prefix.values())

    @property
    def prefixes(self) -> int:
        return len(self.files_per_prefix)

    @property
    def mean(self) -> float:
        return self.files / self.prefixes

    @property
    def skew(self) -> float:
        """Files in the fullest prefix over the mean: 1.0 is perfectly even."""
        return max(self.files_per_prefix.values()) / self.mean

    @property
    def dispersion(self) -> float | None:
        """Chi-square statistic over its degrees of freedom: about 1.0 for a uniform random spread.

        None when there are too few files per prefix for the test to mean anything.
        """
        if self.prefixes < 2 or self.mean < MIN_EXPECTED_PER_PREFIX:
            return None
        return self._chi_square() / (self.prefixes - 1)

    @property
    def uniformity_p_value(self) -> float | None:
        """Chance of a spread at least this uneven if placement were uniform random."""
        if self.dispersion is None:
            return None
        return chi_square_upper_tail(self._chi_square(), self.prefixes - 1)

    def _chi_square(self) -> float:
        expected = self.mean
        return sum((count - expected) ** 2 / expected for count in self.files_per_prefix.values())

    def format(self) -> str:
        counts = self.files_per_prefix.values()
        title = "Storage layout preview" if self.bytes_per_prefix is None else "Storage layout of the table"
        lines = [
            f"{title}: {self.strategy.display_name()} "
            + " ".join(f"{k}={v}" for k, v in sorted(self.strategy.properties().items())),
            f"table path {self.strategy.table_path}: {self.files:,} files "
            f"in {max(len(self.partitions), 1):,} partition(s)",
            "",
            f"Where files land ({len(self.samples)} of {self.files:,}):",
        ]
        for placement in self.samples:
            lines += [f"  {placement.logical}", f"    -> {placement.physical}"]
        lines += [
            "",
            f"Prefixes used: {self.prefixes:,}",
            f"Files per prefix: min {min(counts):,}, mean {self.mean:,.2f}, max {max(counts):,}; "
            f"skew (max/mean) {self.skew:.2f}",
            self._verdict(),
        ]
        if self.bytes_per_prefix:
            sizes = self.bytes_per_prefix.values()
            mean = sum(sizes) / len(sizes)
            lines.insert(
                -1,
                f"Bytes per prefix: min {min(sizes):,}, mean {mean:,.0f}, max {max(sizes):,}; "
                f"skew (max/mean) {max(sizes) / mean:.2f}",
            )
        return "\n".join(lines)

    def _verdict(self) -> str:
        if self.prefixes == 1:
            return (
                "Spread: every file shares one prefix, so all requests meet one object-store "
                "partition's limit (S3: ~3,500 writes, ~5,500 reads per second)."
            )
        if self.dispersion is None:
            return (
                f"Spread: about {self.mean:.1f} file(s) per prefix; requests spread over the whole "
                "key space, so no prefix runs hot."
            )
        p_value = self.uniformity_p_value
        judgement = "even (consistent with uniform placement)" if p_value and p_value >= 0.001 else "uneven"
        return f"Spread: {judgement}; chi-square/df {self.dispersion:.3f} (1.0 = uniform), p = {p_value:.3g}"

    def plot(self, path: str) -> None:
        """Files per prefix as a picture: a bar per prefix, fullest first."""
        import matplotlib.pyplot as plt

        figure = self.figure()
        figure.savefig(path, dpi=110)
        plt.close(figure)

    def figure(self) -> Any:
        """The plot as a matplotlib Figure (close it with ``matplotlib.pyplot.close``)."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            from matplotlib.ticker import MaxNLocator
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise MissingDependencyError("plotting needs matplotlib: pip install 'fedcore[plot]'") from exc
        counts = sorted(self.files_per_prefix.values(), reverse=True)
        figure, axes = plt.subplots(figsize=(10, 4.5), layout="constrained")
        axes.bar(range(len(counts)), counts, width=1.0, color="#3b73b9")
        axes.axhline(self.mean, color="#d1495b", linestyle="--", label=f"mean {self.mean:,.1f}")
        # Whole-numbered ticks: with one to three prefixes matplotlib would label -0.4 ... 0.4.
        if len(counts) <= 20:
            axes.set_xticks(range(len(counts)))
        else:
            axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        axes.set_xlim(-0.5, len(counts) - 0.5)
        axes.set_xlabel(f"storage prefix (fullest first, {self.prefixes:,} in all)")
        axes.set_ylabel("files")
        axes.set_title(f"{self.strategy.display_name()} layout: {self.files:,} files, skew {self.skew:.2f}")
        axes.legend()
        return figure


def placed_layout(
    strategy: StorageStrategy,
    partitions: Sequence[str],
    files_by_partition: Mapping[str, Mapping[str, int]],
    to_physical: Callable[[str], str],
    name: str,
    samples: int = 3,
) -> LayoutReport:
    """Files and bytes per storage location of placed files (``files_by_partition``: partition
    -> file name -> size; ``to_physical``: a logical path's physical one) of table ``name``."""
    files: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    report = LayoutReport(strategy, partitions, files, bytes_per_prefix=sizes)
    for partition, partition_files in files_by_partition.items():
        for file_name, size in partition_files.items():
            logical = f"{partition}/{file_name}" if partition else file_name
            physical = to_physical(logical)
            location = physical[: -len(logical) - 1]
            files[location] += 1
            sizes[location] += size
            if len(report.samples) < samples:
                report.samples.append(Placement(logical, physical))
    if not files:
        raise FedError(f"table {name} has no data files yet")
    return report


def preview_layout(
    strategy: StorageStrategy,
    partitions: Sequence[str],
    files: int,
    *,
    seed: int = 0,
    samples: int = 5,
    instant: str = "20260101000000000",
) -> LayoutReport:
    """Place ``files`` new file groups round-robin over ``partitions`` ([] or [""]: unpartitioned)."""
    if files < 1:
        raise ValueError("a layout preview needs at least one file")
    parts = list(partitions) or [""]
    rng = random.Random(seed)
    counts: Counter[str] = Counter()
    report = LayoutReport(strategy, [p for p in parts if p], counts)
    for index in range(files):
        partition = parts[index % len(parts)]
        file_id = f"{uuid.UUID(int=rng.getrandbits(128), version=4)}-0"
        location = strategy.storage_location(partition, file_id)
        counts[location.uri] += 1
        if index < samples:
            name = base_file_name(file_id, f"{index}-1-1", instant)
            logical = f"{partition}/{name}" if partition else name
            report.samples.append(Placement(logical, location.join(logical)))
    return report


def chi_square_upper_tail(statistic: float, degrees_of_freedom: int) -> float:
    """P(X >= statistic) for X ~ chi-square(df), by the Wilson-Hilferty cube-root normal form.

    Within about 1e-3 of the exact tail for df >= 10, which is all a preview needs;
    the test suite checks uniformity with scipy's exact distribution.
    """
    k = degrees_of_freedom
    z = ((statistic / k) ** (1 / 3) - (1 - 2 / (9 * k))) / math.sqrt(2 / (9 * k))
    return 0.5 * math.erfc(z / math.sqrt(2))
