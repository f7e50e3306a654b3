"""Apache Hudi 0.15's time travel on a table-version-6 table fedcore writes and cleans.

Hudi's time-travel check reads the last clean's metadata (``earliestCommitToRetain``) as Avro
and refuses an instant before it; metadata it cannot decode refuses every instant ("Cleaner
cleaned up the timestamp of interest"). fedcore writes Hudi's Avro, so Hudi answers time travel
to the writes the cleaner kept as fedcore does, and both refuse the ones before.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pyarrow as pa
from foreign.hudi_spark.bundles import check_time_travel, run_hudi

from fedcore import properties as P
from fedcore.table import create_table

COLUMNS = [
    "_hoodie_commit_time",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "id",
    "country",
    "ts",
    "fare",
]


def test_hudi_015_time_travel_on_a_table_fedcore_cleaned(tmp_path: Path) -> None:
    path = f"file://{tmp_path / 'trips'}"
    table = create_table(
        path,
        name="trips",
        record_key_fields=["id"],
        partition_fields=["country"],
        precombine_field="ts",
        properties={str(P.CLEANER_COMMITS_RETAINED): "2"},
    )
    for step in range(6):
        ids = [1, 2, 10 + step]
        table.upsert(
            pa.table(
                {
                    "id": pa.array(ids, pa.int64()),
                    "country": ["us", "de", "us"],
                    "ts": pa.array([step] * 3, pa.int64()),
                    "fare": [float(step * 100 + i) for i in ids],
                }
            )
        )
    writes = [w.time for w in table.timeline().completed(table.handle.write_actions)]
    assert table.timeline().completed(["clean"]), "the cleaner ran"
    answered = check_time_travel(partial(run_hudi, "0.15.0"), table, path, writes, COLUMNS)
    assert 2 <= answered < len(writes), "the writes the cleaner kept are answered, the others refused"
