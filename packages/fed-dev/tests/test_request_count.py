"""The loopback S3 server's request count: what benchmarks report as a request's cost."""

from __future__ import annotations

import threading
import time

from fed_dev.servers import LoopbackS3, RequestCount


def test_requests_answered_at_once_count_their_serving_time_once() -> None:
    count = RequestCount()
    count.serving()
    time.sleep(0.05)
    count.serving()  # a second request while the first is being answered
    time.sleep(0.05)
    count.served()
    time.sleep(0.05)
    count.served()
    idle = time.perf_counter()
    time.sleep(0.05)  # nothing being answered: not serving time
    assert time.perf_counter() - idle >= 0.05
    assert 0.15 <= count.serving_seconds < 0.2  # the union of both, not their sum (0.25)
    count.reset()
    assert count.serving_seconds == 0.0


def test_a_loopback_server_counts_what_it_answered_and_its_serving_time(s3_server: LoopbackS3) -> None:
    client = s3_server.client()
    bucket = s3_server.create_bucket("counted").removeprefix("s3://")
    s3_server.requests.reset()
    threads = [
        threading.Thread(target=client.put_object, kwargs={"Bucket": bucket, "Key": f"k{i}", "Body": b"x"})
        for i in range(4)
    ]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client.list_objects_v2(Bucket=bucket)
    elapsed = time.perf_counter() - start
    assert s3_server.requests.by_method == {"PUT": 4, "LIST": 1}
    assert 0.0 < s3_server.requests.serving_seconds <= elapsed
