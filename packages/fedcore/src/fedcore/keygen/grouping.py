"""Rows grouped by what they belong to: each row's partition, and the one record a batch keeps
per key, computed over whole arrays (one sort, no loop over rows)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fedcore.keygen.keys import check_columns
from fedcore.keygen.partitioning import PartitionScheme, value_texts


@dataclass(frozen=True)
class PartitionedRows:
    """Which partition each row goes to: ``paths[codes[row]]``."""

    codes: np.ndarray  # integers, one per row
    paths: list[str]

    def groups(self) -> dict[str, np.ndarray]:
        """The rows of each partition that has any, ascending (int64)."""
        if not self.paths:  # no rows at all
            return {}
        # Arrow's stable sort of small integers counts them (a pass, no comparisons).
        order = pc.sort_indices(pa.array(self.codes)).to_numpy().view(np.int64)
        counts = _counts(self.codes, len(self.paths))
        parts = np.split(order, np.cumsum(counts)[:-1])
        return {path: rows for path, rows in zip(self.paths, parts, strict=True) if len(rows)}

    def take(self, rows: np.ndarray) -> PartitionedRows:
        return PartitionedRows(self.codes[rows], self.paths)


#: Codes counted a slice at a time (``_counts``).
_COUNT_SLICE: Final = 1 << 20


def _counts(codes: np.ndarray, distinct: int) -> np.ndarray:
    """How many of ``codes`` are each of ``0..distinct-1``. ``np.bincount`` widens its input
    to int64 first: for millions of rows that copy is fresh memory (glibc maps blocks past
    32 MB anew on every call), which the kernel zeroes page by page: 180 ms for 10,000,000
    codes against 12 ms a slice at a time, each slice's copy reused."""
    counts = np.zeros(distinct, np.int64)
    for start in range(0, len(codes), _COUNT_SLICE):
        counts += np.bincount(codes[start : start + _COUNT_SLICE], minlength=distinct)
    return counts


def partition_rows(data: pa.Table, scheme: PartitionScheme) -> PartitionedRows:
    """Each row's partition path, computed once per distinct partition (with Hudi's escaping
    and the checks of ``PartitionScheme.path_of``), never once per row."""
    if not scheme.fields:
        return PartitionedRows(np.zeros(data.num_rows, np.int64), [""])
    check_columns(data, scheme.fields, "partition")
    encoded = [pc.dictionary_encode(pc.fill_null(value_texts(data.column(f)), "")) for f in scheme.fields]
    texts = [e.dictionary.to_pylist() for e in encoded]
    indices = [e.indices.to_numpy(zero_copy_only=False) for e in encoded]  # no nulls: no copy
    if len(encoded) == 1:
        codes, combos = indices[0], [[text] for text in texts[0]]
    else:
        combined = indices[0].astype(np.int64)
        for values, more in zip(texts[1:], indices[1:], strict=True):
            if int(combined.max(initial=0)) >= 2**62 // max(1, len(values)):
                combined = np.unique(combined, return_inverse=True)[1].reshape(-1)  # dense again
            combined = combined * len(values) + more
        _, first, codes = np.unique(combined, return_index=True, return_inverse=True)
        combos = [[texts[f][indices[f][row]] for f in range(len(encoded))] for row in first]
    found = [scheme.path_of_texts(combo) for combo in combos]
    if not found:
        return PartitionedRows(np.zeros(0, np.int64), [])
    paths = sorted(set(found))
    position = {path: index for index, path in enumerate(paths)}
    remap = np.array([position[path] for path in found], np.int64)
    codes = codes.reshape(-1)
    if len(paths) == len(found) and (remap == np.arange(len(remap))).all():
        return PartitionedRows(codes, paths)  # met in order already: no pass over the rows
    return PartitionedRows(remap[codes], paths)


def latest_per_key(partitions: np.ndarray, keys: pa.Array, precombine: pa.ChunkedArray | None) -> np.ndarray:
    """Row indices (ascending) to keep when a batch holds one (partition, key) several times:
    the greatest precombine value wins, a null the least, the later row on a tie (Hudi's
    default combine before upsert). One sort of the batch, no loop over rows."""
    rows = np.arange(len(keys), dtype=np.int64)
    columns = {"partition": partitions, "key": keys}
    if precombine is not None:
        columns["has_precombine"] = pc.is_valid(precombine)  # a null ranks below any value
        columns["precombine"] = precombine
    columns["row"] = rows
    ranked = pa.table(columns).sort_by([(name, "ascending") for name in columns])
    if ranked.num_rows < 2:
        return rows
    part, key = ranked.column("partition"), ranked.column("key")
    same_as_next = pc.and_(
        pc.equal(part.slice(0, len(part) - 1), part.slice(1)),
        pc.equal(key.slice(0, len(key) - 1), key.slice(1)),
    )
    last = np.append(~same_as_next.to_numpy(), True)
    return np.sort(ranked.column("row").to_numpy()[last])
