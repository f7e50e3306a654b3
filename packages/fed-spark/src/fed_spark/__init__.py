"""fed-spark: federated tables in PySpark.

``fed_spark.register(spark)`` adds the ``fed`` data source to a session:
``spark.read.format("fed").load(TABLE_PATH)``, ``CREATE TABLE t USING fed OPTIONS (path '...')``
and temporary views read tables through their metadata table, partitions pruned by the
query's filters before any file is planned; ``df.write.format("fed")`` and SQL ``INSERT``
write them with Hudi's options, in Spark tasks on fedcore's write protocol;
``writeStream`` / ``readStream.format("fed")`` stream into and out of them;
``fed_spark.create_table(spark, "CREATE TABLE ... USING fed ...")`` creates one from SQL DDL.
"""

from fed_spark.dataframe import read, write
from fed_spark.ddl import create_table
from fed_spark.options import AS_OF_INSTANT, QUERY_TYPE, ReadOptions, WriteOptions
from fed_spark.session import register
from fed_spark.source import FedDataSource

__version__ = "0.1.0"

__all__ = [
    "AS_OF_INSTANT",
    "QUERY_TYPE",
    "FedDataSource",
    "ReadOptions",
    "WriteOptions",
    "create_table",
    "read",
    "register",
    "write",
]
