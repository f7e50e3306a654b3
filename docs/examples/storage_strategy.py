# A table in the object-store layout on S3 (docs: storage.md). ``storage_options`` says how
# to reach the store; the tests point it at a loopback S3 server.
import os

storage_options = {"s3": {"endpoint_url": os.environ.get("FED_S3_ENDPOINT", "http://127.0.0.1:5000")}}
# --8<-- [start:object_store]
from fedcore import create_table

table = create_table(
    "s3://lake-tables/trips",
    name="trips",
    record_key_fields=["trip_id"],
    partition_fields=["country"],
    properties={"hoodie.storage.strategy.class": "object_store", "hoodie.storage.path": "s3://lake-storage"},
    storage_options=storage_options,  # e.g. {"s3": {"profile": "lake"}}
)
table.fs.to_physical("country=usa/9b1f0a4c-5d7e-4e2a-8f3b-1c2d3e4f5a6b-0_0-1-1_20260101000000000.parquet")
# 's3://lake-storage/<8 hex>/trips-<table id>/country=usa/9b1f0a4c-...parquet'
# --8<-- [end:object_store]
