# A PySpark pipeline on a fed table: writes, SQL, time travel, an incremental pull (docs: spark.md).
# --8<-- [start:batch]
import os

import fed_spark
from pyspark.sql import SparkSession

spark = SparkSession.builder.master("local[2]").getOrCreate()
fed_spark.register(spark)  # storage_options={"s3": {...}} for S3, as fedcore takes them

path = os.path.abspath("lake/tables/rides")  # Spark's workers need absolute paths or URIs
hudi = {
    "hoodie.table.name": "rides",
    "hoodie.datasource.write.recordkey.field": "ride_id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.storage.strategy.class": "object_store",  # a new table's layout
    "hoodie.storage.path": os.path.abspath("lake/storage"),
}
columns = "ride_id long, city string, ts long, fare double"
rides = spark.createDataFrame([(1, "sfo", 1, 12.5), (2, "nyc", 1, 30.0), (3, "sfo", 1, 22.0)], columns)
(
    rides.write.format("fed")
    .options(**hudi)
    .option("hoodie.datasource.write.operation", "bulk_insert")
    .mode("append")
    .save(path)
)
first = spark.read.format("fed").load(path).first()["_hoodie_commit_time"]

fixed = spark.createDataFrame([(1, "sfo", 2, 25.0)], columns)
fixed.write.format("fed").mode("append").save(path)  # upsert, Hudi's default operation
gone = spark.createDataFrame([(2, "nyc")], "ride_id long, city string")
gone.write.format("fed").option("hoodie.datasource.write.operation", "delete").mode("append").save(path)

spark.sql(f"CREATE TABLE rides USING fed OPTIONS (path '{path}')")
spark.sql("INSERT INTO rides (ride_id, city, ts, fare) VALUES (4, 'nyc', 1, 9.5)")
sfo = spark.sql("SELECT ride_id, fare FROM rides WHERE city = 'sfo'")  # plans city=sfo only
then = spark.read.format("fed").option("as.of.instant", first).load(path)  # time travel
pull = {"hoodie.datasource.query.type": "incremental", "hoodie.datasource.read.begin.instanttime": first}
since = spark.read.format("fed").options(**pull).load(path)  # what the next stage consumes
# --8<-- [end:batch]
