"""The throttling lab's model and proxy enforce S3's limits as documented, and fedcore
loses nothing while throttled."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from fsspec import AbstractFileSystem

from fed_dev.lab.partitions import SAMPLE_KEYS, Limits, PartitionModel
from fed_dev.lab.proxy import ThrottlingProxy
from fed_dev.servers import ACCESS_KEY, REGION, SECRET_KEY, LoopbackS3, SeaweedS3
from fed_dev.testing import rows, trips
from fedcore import properties as P
from fedcore.io.atomic import create_exclusive
from fedcore.io.filesystems import S3_RETRIES, S3_RETRY_MODE, S3_TRIES, filesystem_for
from fedcore.table import Table, create_table, load_table
from fedcore.write.client import WriteClient


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def offer(
    model: PartitionModel, clock: Clock, seconds: float, per_second: int, keys: list[str], write: bool = True
) -> int:
    """Offer requests evenly for ``seconds``, cycling over ``keys``; how many were admitted."""
    admitted = 0
    step = 1.0 / per_second
    for n in range(int(seconds * per_second)):
        admitted += model.admit("b", keys[n % len(keys)], write)
        clock.now += step
    return admitted


LIMITS = Limits(writes_per_second=100, reads_per_second=150, split_after=10, hot_fraction=0.5)


@pytest.mark.parametrize("write", [True, False])
def test_a_partition_admits_its_rate_within_a_few_percent(write: bool) -> None:
    clock = Clock()
    model = PartitionModel(LIMITS, clock)
    rate = LIMITS.writes_per_second if write else LIMITS.reads_per_second
    admitted = offer(model, clock, 8, int(3 * rate), [f"k{i}" for i in range(7)], write)
    assert abs(admitted - 8 * rate) <= 0.03 * 8 * rate
    # Below the limit, everything is admitted.
    clock.now += 1
    assert offer(model, clock, 3, int(0.9 * rate), ["x"], write) == int(3 * int(0.9 * rate))


def test_writes_and_reads_have_separate_limits() -> None:
    clock = Clock()
    model = PartitionModel(LIMITS, clock)
    writes = reads = 0
    for n in range(2_000):  # 500 writes and 500 reads per second, for 2 s
        writes += model.admit("b", f"k{n % 5}", True)
        reads += model.admit("b", f"k{n % 5}", False)
        clock.now += 0.002
    assert abs(writes - 400) <= 12  # 2 s x 100/s (the burst is 5 requests)
    assert abs(reads - 600) <= 18


def test_a_hot_partition_splits_at_its_median_key_after_the_delay() -> None:
    clock = Clock()
    model = PartitionModel(LIMITS, clock)
    keys = [f"data/{h:02x}/file" for h in range(64)]
    offer(model, clock, 9.5, 256, keys)  # each second: every key four times
    assert model.splits == []  # hot for 9 s: not yet
    offer(model, clock, 2, 256, keys)
    assert [s.key for s in model.splits] == ["data/20/file"]  # the median of 00..3f
    assert 10.0 <= model.splits[0].time <= 11.0
    assert [p.start for p in model.partitions("b")] == ["", "data/20/file"]
    assert model.limit("b", write=True) == 200
    # Each half now admits its own 100/s: 180 offered per second (alternating halves), all admitted.
    alternating = [key for pair in zip(keys[:32], keys[32:], strict=True) for key in pair]
    admitted = offer(model, clock, 5, 180, alternating)
    assert admitted >= 0.97 * 5 * 180


def test_load_below_the_hot_fraction_never_splits() -> None:
    clock = Clock()
    model = PartitionModel(LIMITS, clock)
    offer(model, clock, 40, 40, [f"k{i}" for i in range(50)])  # 40/s < 0.5 x 100/s
    assert model.splits == []


def test_one_hot_key_cannot_be_split() -> None:
    clock = Clock()
    model = PartitionModel(LIMITS, clock)
    offer(model, clock, 40, 300, [".hoodie/hoodie.properties"], write=False)
    assert model.splits == []
    assert len(model.partitions("b")) == 1


def test_a_new_date_lands_in_the_upper_partition_until_it_splits_again() -> None:
    """The Hive pattern: load moves to a key range past every boundary made so far."""
    clock = Clock()
    model = PartitionModel(LIMITS, clock)
    day1 = [f"t/date=2026-01-01/f{i:03d}" for i in range(100)]
    offer(model, clock, 12, 300, day1)
    assert len(model.splits) == 1
    day2 = [f"t/date=2026-01-02/f{i:03d}" for i in range(100)]
    admitted = offer(model, clock, 5, 300, day2)
    assert abs(admitted - 5 * 100) <= 0.05 * 500  # one partition's rate: the new date is in one
    offer(model, clock, 10, 300, day2)
    assert len(model.splits) == 2
    assert model.splits[1].key.startswith("t/date=2026-01-02/")


def test_the_model_is_deterministic_given_a_seed() -> None:
    def run(seed: int) -> tuple[list[str], int]:
        clock = Clock()
        model = PartitionModel(LIMITS, clock, seed=seed)
        keys = [f"p/{i:05d}" for i in range(SAMPLE_KEYS * 3)]  # more than a second's sample keeps
        admitted = offer(model, clock, 12, SAMPLE_KEYS * 3, keys)
        return [s.key for s in model.splits], admitted

    assert run(7) == run(7)
    assert run(7)[0]  # it split


@pytest.fixture
def throttled(s3_server: LoopbackS3) -> Iterator[ThrottlingProxy]:
    limits = Limits(writes_per_second=25, reads_per_second=40, split_after=1e9, burst=0.2)  # 5 requests
    model = PartitionModel(limits, time.monotonic)
    with ThrottlingProxy(s3_server.endpoint_url, model) as proxy:
        yield proxy


def test_the_proxy_answers_the_excess_with_s3s_slow_down(
    throttled: ThrottlingProxy, s3_server: LoopbackS3
) -> None:
    bucket = s3_server.create_bucket("throttled").removeprefix("s3://")
    client = boto3.client(
        "s3",
        endpoint_url=throttled.endpoint_url,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
        config=Config(retries={"mode": "standard", "total_max_attempts": 1}),  # no retries
    )
    stored, refused, answers = [], [], set()
    for n in range(120):
        try:
            client.put_object(Bucket=bucket, Key=f"k/{n}", Body=b"x")
            stored.append(f"k/{n}")
        except ClientError as error:
            answers.add(
                (error.response["ResponseMetadata"]["HTTPStatusCode"], error.response["Error"]["Code"])
            )
            refused.append(f"k/{n}")
    assert answers == {(503, "SlowDown")}
    assert refused
    assert stored
    direct = s3_server.client()
    listed = {o["Key"] for o in direct.list_objects_v2(Bucket=bucket).get("Contents", [])}
    assert listed == set(stored)  # what was refused never reached the server
    assert throttled.stats.total("write", admitted=False) == len(refused)


def through(proxy: ThrottlingProxy, server: LoopbackS3) -> dict[str, dict[str, object]]:
    """Storage options that reach ``server`` through ``proxy``."""
    client = {"endpoint_url": proxy.endpoint_url, "region_name": REGION}
    return {"s3": {**server.storage_options()["s3"], "client_kwargs": client}}


def trips_table(path: str, properties: dict[str, str], options: dict[str, dict[str, object]]) -> Table:
    """A trips table (keyed by trip_id, partitioned by country) reached with ``options``."""
    name = path.rsplit("/", 1)[-1]
    return create_table(
        path,
        name=name,
        record_key_fields=["trip_id"],
        partition_fields=["country"],
        properties=properties,
        storage_options=options,
    )


def test_fedcore_loses_nothing_while_throttled_hard(
    throttled: ThrottlingProxy, s3_server: LoopbackS3
) -> None:
    tables, storage = s3_server.create_bucket("tables"), s3_server.create_bucket("storage")
    options = through(throttled, s3_server)
    properties = {P.STORAGE_STRATEGY_CLASS: "object_store", P.STORAGE_PATH: storage}
    table = trips_table(f"{tables}/trips", properties, options)
    expected: dict[int, tuple[str, float]] = {}
    countries = ["us", "de", "fr", "nl", "it", "es"]
    for n in range(4):
        ids = list(range(n * 30, n * 30 + 30))
        result = WriteClient(table).upsert(trips(ids, [countries[i % 6] for i in ids], fare=float(n)))
        assert result.warnings == ()
        expected.update({i: (countries[i % 6], float(n) + i) for i in ids})
    assert throttled.stats.total(admitted=False) > 0, "the run was throttled"
    assert rows(load_table(table.path, storage_options=options)) == expected


def test_s3_filesystems_retry_per_request_and_keep_trying(s3_server: LoopbackS3) -> None:
    """botocore's standard mode (no client-wide rate limiter), inside s3fs's longer tries;
    a caller's own retry settings win."""
    # A new instance: botocore rewrites the retries it was given once a client is built.
    fresh = {"s3": {**s3_server.storage_options()["s3"], "skip_instance_cache": True}}
    fs = filesystem_for("s3://any-bucket", fresh)
    assert fs.config_kwargs["retries"] == {"mode": S3_RETRY_MODE, "max_attempts": S3_RETRIES}
    assert S3_RETRY_MODE == "standard"
    assert fs.retries == S3_TRIES > 5  # s3fs's default: 5
    own = {"s3": {**fresh["s3"], "config_kwargs": {"retries": {"mode": "adaptive"}}}}
    assert filesystem_for("s3://any-bucket", own).config_kwargs["retries"] == {"mode": "adaptive"}


def test_concurrent_writers_on_one_hot_prefix_all_commit(
    throttled: ThrottlingProxy, s3_server: LoopbackS3
) -> None:
    """Three writers put 120 one-row files on one 25-writes/s partition at once: dozens to
    hundreds of 503s, every one retried (per request, not by slowing the whole client); nothing
    fails and every row reads back."""
    bucket = s3_server.create_bucket("hot")
    options = through(throttled, s3_server)
    # A file per row; the Hive layout: one prefix.
    table = trips_table(f"{bucket}/events", {P.MAX_FILE_SIZE: "1"}, options)
    errors: list[BaseException] = []

    def write(first: int) -> None:
        ids = list(range(first, first + 40))
        try:
            WriteClient(load_table(table.path, storage_options=options)).write(
                trips(ids, ["us"] * len(ids)), "bulk_insert"
            )
        except BaseException as exc:  # reported below
            errors.append(exc)

    writers = [threading.Thread(target=write, args=(n * 40,)) for n in range(3)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    assert errors == []
    assert throttled.stats.total("write", admitted=False) > 20  # dozens of 503s, most runs hundreds
    back = load_table(table.path, storage_options=s3_server.storage_options()).read(columns=["trip_id"])
    assert sorted(back.column("trip_id").to_pylist()) == list(range(120))


def test_an_exclusive_create_on_seaweedfs_is_exclusive() -> None:
    """SeaweedFS answers a failed If-None-Match with a 412 that names no condition (AWS's and
    moto's name it); fedcore's exclusive create must still read it as "exists"."""
    with SeaweedS3() as server:
        bucket = server.create_bucket("exclusive")
        fs = filesystem_for(bucket, server.storage_options())
        create_exclusive(fs, f"{bucket}/a", b"first")
        with pytest.raises(FileExistsError):
            create_exclusive(fs, f"{bucket}/a", b"second")
        assert fs.cat_file(f"{bucket}/a") == b"first"
        check_owned_create(fs, bucket)


def check_owned_create(fs: AbstractFileSystem, bucket: str) -> None:
    """An owned path already holding exactly the bytes being written is the caller's own
    earlier attempt (a request that landed but whose response was lost, then retried)."""
    fs.pipe_file(f"{bucket}/owned", b"commit body")  # the attempt whose response was lost
    create_exclusive(fs, f"{bucket}/owned", b"commit body", owned=True)
    for other in (b"rollback", b"commit bod", b"commit body!"):  # someone else's: a conflict
        with pytest.raises(FileExistsError):
            create_exclusive(fs, f"{bucket}/owned", other, owned=True)
    with pytest.raises(FileExistsError):  # unowned paths never count identical bytes as theirs
        create_exclusive(fs, f"{bucket}/owned", b"commit body")
    assert fs.cat_file(f"{bucket}/owned") == b"commit body"


def test_an_owned_create_reads_its_own_landed_attempt_as_done(s3_server: LoopbackS3, tmp_path: Path) -> None:
    bucket = s3_server.create_bucket("owned")
    check_owned_create(filesystem_for(bucket, s3_server.storage_options()), bucket)
    check_owned_create(filesystem_for(str(tmp_path)), str(tmp_path))
