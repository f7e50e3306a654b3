# A table: create, write, read, time travel, incremental pull (docs: tables.md).
# --8<-- [start:tables]
import pyarrow as pa

from fedcore import create_table, load_table

table = create_table(  # the same with s3:// URIs (and storage_options) on an object store
    "lake/tables/trips",
    name="trips",
    record_key_fields=["trip_id"],
    partition_fields=["country"],
    precombine_field="ts",
    properties={"hoodie.storage.strategy.class": "object_store", "hoodie.storage.path": "lake/storage"},
)
first = table.bulk_insert(
    pa.table(
        {  # anything exporting Arrow: pyarrow, polars, pandas
            "trip_id": [1, 2, 3],
            "country": ["usa", "bra", "usa"],
            "ts": [1, 1, 1],
            "fare": [12.5, 30.0, 22.0],
        }
    )
)  # a WriteResult: instant, rows and files written, warnings
table.upsert(pa.table({"trip_id": [1], "country": ["usa"], "ts": [2], "fare": [25.0]}))
table.delete(pa.table({"trip_id": [2], "country": ["bra"]}))

scan = table.scan([("country", "IN", ["usa", "bra"]), ("fare", ">", 20)], ["trip_id", "fare"])
scan.to_arrow()  # also to_arrow_batch_reader(), count(), to_pandas(), to_polars(), to_duckdb()
scan.plan_files()  # for engines: the latest committed slice of each file group, pruned
old = load_table("lake/tables/trips").scan(as_of=first.instant)  # time travel
old.count()  # 3
table.changes(first.instant).to_arrow()  # incremental: records written since, latest versions
# --8<-- [end:tables]
