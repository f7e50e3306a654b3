# A merge-on-read table: log files on update and delete, then compaction (docs: tables.md).
# --8<-- [start:merge_on_read]
import pyarrow as pa

from fedcore import create_table

rides = create_table(
    "lake/tables/rides",
    name="rides",
    record_key_fields=["ride_id"],
    partition_fields=["city"],
    precombine_field="ts",
    table_type="MERGE_ON_READ",
    properties={"hoodie.storage.strategy.class": "object_store", "hoodie.storage.path": "lake/storage"},
)
rides.bulk_insert(
    pa.table({"ride_id": [1, 2, 3], "city": ["sf", "sf", "nyc"], "ts": [1, 1, 1], "fare": [10.0, 20.0, 30.0]})
)  # base files
rides.upsert(pa.table({"ride_id": [2], "city": ["sf"], "ts": [2], "fare": [21.0]}))  # a log file
rides.delete(pa.table({"ride_id": [3], "city": ["nyc"]}))  # a log file with a delete block
rides.read().num_rows  # 2: a snapshot merges the log files
rides.scan(query_type="read_optimized").count()  # 3: base files only
# --8<-- [end:merge_on_read]
# --8<-- [start:compact]
done = rides.compact()  # log files folded into new base files
rides.scan(query_type="read_optimized").count()  # 2
# --8<-- [end:compact]
