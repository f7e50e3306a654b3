# Streaming: bronze and silver tables fed by exactly-once micro-batches (docs: spark.md).
# --8<-- [start:streaming]
import os

import fed_spark
from pyspark.sql import SparkSession

spark = SparkSession.builder.master("local[2]").getOrCreate()
fed_spark.register(spark)

lake = os.path.abspath("lake")
os.makedirs(f"{lake}/landing", exist_ok=True)
with open(f"{lake}/landing/rides-1.json", "w") as landed:  # what an upstream job drops
    landed.write('{"ride_id": 1, "city": "sfo", "ts": 1, "fare": 12.5}\n')
    landed.write('{"ride_id": 2, "city": "nyc", "ts": 1, "fare": -1.0}\n')
    landed.write('{"ride_id": 1, "city": "sfo", "ts": 2, "fare": 14.0}\n')
keys = {
    "hoodie.datasource.write.recordkey.field": "ride_id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
}

# Bronze: each micro-batch of new files is one upsert, committed exactly once.
landing = spark.readStream.schema("ride_id long, city string, ts long, fare double").json(f"{lake}/landing")
bronze = (
    landing.writeStream.format("fed")
    .options(**keys)
    .option("hoodie.datasource.write.table.type", "MERGE_ON_READ")
    .option("checkpointLocation", f"{lake}/checkpoints/bronze")
    .trigger(availableNow=True)
    .start(f"{lake}/tables/bronze")
)
bronze.awaitTermination()

# Silver: what each bronze commit wrote (the latest version of each record), cleaned.
changes = spark.readStream.format("fed").load(f"{lake}/tables/bronze")
meta = [c for c in changes.columns if c.startswith("_hoodie_")]
silver = (
    changes.where("fare > 0")
    .drop(*meta)
    .writeStream.format("fed")
    .options(**keys)
    .option("checkpointLocation", f"{lake}/checkpoints/silver")
    .trigger(availableNow=True)
    .start(f"{lake}/tables/silver")
)
silver.awaitTermination()
# --8<-- [end:streaming]
