"""Properties every layout must keep, checked over generated names (hypothesis)."""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from fedcore import properties as P
from fedcore.files.filenames import base_file_name, log_file_name
from fedcore.storage import load_storage_strategy
from fedcore.storage.federated import FederatedFileSystem

TABLE = "s3://lake-tables/trips"

LAYOUTS = {
    "hive": {},
    "object_store": {P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: "s3://lake-storage"},
    "object_store_xxh64_partitioned_input": {
        P.STORAGE_STRATEGY_CLASS: "object_store",
        P.STORAGE_PATH: "s3://lake-storage",
        P.STORAGE_HASH_FUNCTION: "xxh64",
        P.STORAGE_HASH_INPUT: "partition_and_file_id",
    },
    "object_store_bounded": {
        P.STORAGE_STRATEGY_CLASS: "object_store",
        P.STORAGE_PATH: "gs://other-cloud/lake",
        P.STORAGE_PREFIX_COUNT: "37",
    },
    "partition_map": {
        P.STORAGE_STRATEGY_CLASS: "partition_map",
        P.STORAGE_PARTITION_LOCATIONS: json.dumps({"k0=a": "s3://bucket-a", "k0=b": "s3://bucket-b/deep"}),
        P.STORAGE_PATH: "s3://bucket-default",
    },
}

ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

# Built from parts rather than drawn from regexes: filtered regex draws are slow.
file_ids = st.one_of(
    st.uuids().map(lambda u: f"{u}-0"),
    st.tuples(st.sampled_from(ALNUM), st.text(ALNUM + "-", max_size=40)).map("".join),
)
instants = st.integers(10**16, 10**17 - 1).map(str)
write_tokens = st.tuples(*[st.integers(0, 9999)] * 3).map(lambda t: "-".join(map(str, t)))
segments = st.tuples(st.integers(0, 9), st.text(ALNUM + "_.%+-", min_size=1, max_size=10)).map(
    lambda kv: f"k{kv[0]}={kv[1]}"
)
partitions = st.lists(segments, max_size=3).map("/".join)


@st.composite
def data_file_names(draw: st.DrawFn) -> str:
    file_id, instant, token = draw(file_ids), draw(instants), draw(write_tokens)
    if draw(st.booleans()):
        return base_file_name(file_id, token, instant, draw(st.sampled_from(["parquet", "orc", "hfile"])))
    return log_file_name(file_id, instant, draw(st.integers(1, 999)), token)


def federated(layout: str) -> FederatedFileSystem:
    strategy = load_storage_strategy(TABLE, {P.TABLE_NAME: "trips", **LAYOUTS[layout]})
    return FederatedFileSystem(TABLE, strategy)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@settings(max_examples=300, deadline=None)
@given(names=st.lists(st.tuples(partitions, data_file_names()), min_size=1, max_size=20, unique=True))
def test_conversion_is_a_bijection_over_valid_file_names(layout: str, names: list[tuple[str, str]]) -> None:
    fs = federated(layout)
    logical = [f"{partition}/{name}" if partition else name for partition, name in names]
    physical = [fs.to_physical(path) for path in logical]
    assert [fs.to_logical(path) for path in physical] == logical
    assert len(set(physical)) == len(set(logical))


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@settings(max_examples=200, deadline=None)
@given(
    partition=partitions,
    file_id=file_ids,
    instant=instants,
    tokens=st.lists(write_tokens, min_size=2, max_size=2),
    version=st.integers(1, 50),
)
def test_base_and_log_files_of_a_file_id_share_a_prefix(
    layout: str, partition: str, file_id: str, instant: str, tokens: list[str], version: int
) -> None:
    fs = federated(layout)
    folder = f"{partition}/" if partition else ""
    base = fs.to_physical(folder + base_file_name(file_id, tokens[0], instant))
    log = fs.to_physical(folder + log_file_name(file_id, instant, version, tokens[1]))
    assert base.rpartition("/")[0] == log.rpartition("/")[0]


def random_file_ids(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"{uuid.UUID(int=rng.getrandbits(128), version=4)}-0" for _ in range(count)]


def prefix_of(fs: FederatedFileSystem, file_id: str) -> str:
    return fs.strategy.storage_location("p=1", file_id).uri.split("/")[3]


@pytest.mark.parametrize(
    ("extra", "buckets", "bucket_of"),
    [
        # Unbounded hashes: the store splits its key space by leading characters.
        ({}, 256, lambda prefix: int(prefix[:2], 16)),
        ({P.STORAGE_HASH_FUNCTION: "xxh64"}, 256, lambda prefix: int(prefix[:2], 16)),
        ({P.STORAGE_PREFIX_COUNT: "256"}, 256, lambda prefix: int(prefix, 16)),
        ({P.STORAGE_PREFIX_COUNT: "1000"}, 1000, lambda prefix: int(prefix, 16)),
    ],
)
def test_prefix_distribution_of_100k_file_ids_is_uniform(extra, buckets, bucket_of) -> None:  # type: ignore[no-untyped-def]
    strategy = load_storage_strategy(TABLE, {P.TABLE_NAME: "trips", **LAYOUTS["object_store"], **extra})
    fs = FederatedFileSystem(TABLE, strategy)
    counts = Counter(bucket_of(prefix_of(fs, file_id)) for file_id in random_file_ids(100_000, seed=7))
    observed = [counts.get(bucket, 0) for bucket in range(buckets)]
    assert sum(observed) == 100_000
    result = chisquare(observed)
    assert result.pvalue > 0.001, f"chi-square {result.statistic:.1f} on {buckets - 1} df"


@settings(max_examples=200, deadline=None)
@given(count=st.integers(1, 5000), ids=st.lists(file_ids, min_size=1, max_size=50))
def test_bounded_prefix_option_never_yields_more_than_n_prefixes(count: int, ids: list[str]) -> None:
    strategy = load_storage_strategy(
        TABLE, {P.TABLE_NAME: "trips", **LAYOUTS["object_store"], P.STORAGE_PREFIX_COUNT: str(count)}
    )
    width = len(format(count - 1, "x"))
    for file_id in ids:
        prefix = strategy.storage_location("p=1", file_id).uri.split("/")[3]
        assert len(prefix) == width
        assert 0 <= int(prefix, 16) < count


@pytest.mark.parametrize("count", [1, 7, 64, 300])
def test_many_files_fill_at_most_n_prefixes(count: int) -> None:
    strategy = load_storage_strategy(
        TABLE, {P.TABLE_NAME: "trips", **LAYOUTS["object_store"], P.STORAGE_PREFIX_COUNT: str(count)}
    )
    prefixes = {strategy.storage_location("p=1", f).uri for f in random_file_ids(20_000, seed=count)}
    assert len(prefixes) == count  # 20,000 files fill every one of N <= 300 prefixes, never more
