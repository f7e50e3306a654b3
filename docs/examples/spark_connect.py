# fed-spark from a Spark Connect client: tables on S3, a cluster's tasks write (docs: spark.md).
# --8<-- [start:connect]
import fed_spark
from pyspark.sql import SparkSession

# With SPARK_REMOTE=sc://HOST:15002 in the environment this is a Spark Connect client. S3
# credentials (and AWS_ENDPOINT_URL, for a store other than AWS) come from each process's
# environment: this one, the Connect server's, and its executors' (spark.executorEnv.*).
spark = SparkSession.builder.getOrCreate()
fed_spark.register(spark)

path = "s3://lake-tables/rides"  # URIs: the cluster's processes open them, not only this one
hudi = {
    "hoodie.table.name": "rides",
    "hoodie.datasource.write.recordkey.field": "ride_id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.storage.strategy.class": "object_store",
    "hoodie.storage.path": "s3://lake-storage",
}
columns = "ride_id long, city string, ts long, fare double"
rides = spark.createDataFrame([(1, "sfo", 1, 12.5), (2, "nyc", 1, 30.0), (3, "sfo", 1, 22.0)], columns)
rides.write.format("fed").options(**hudi).option("hoodie.datasource.write.operation", "bulk_insert").mode(
    "append"
).save(path)

# The distributed upsert: this process begins and commits the instant (and keeps its
# heartbeat); the cluster's tasks tag, route and rewrite the rows.
changes = spark.createDataFrame([(1, "sfo", 2, 25.0), (4, "nyc", 1, 9.5)], columns)
result = fed_spark.write(changes, path)
gone = spark.createDataFrame([(2, "nyc")], "ride_id long, city string")
fed_spark.write(gone, path, {"hoodie.datasource.write.operation": "delete"})

sfo = spark.read.format("fed").load(path).where("city = 'sfo'")  # pruned to city=sfo
# --8<-- [end:connect]
