# Hive reads a fed table through its Iceberg view, reading your own writes (docs: engines.md).
# --8<-- [start:hive]
import fed_hive

fed_hive.register(
    "s3://lake/tables/trips",
    metastore="thrift://localhost:9083",
    database="lake",
    storage_options={"s3": {"profile": "lake"}},
)
hive = fed_hive.connect(
    host="localhost",
    port=10000,
    database="lake",
    metastore="thrift://localhost:9083",  # the metastore HiveServer2 uses
    tables={"trips": "s3://lake/tables/trips"},  # fed tables this connection looks after
    storage_options={"s3": {"profile": "lake"}},  # how this process reaches their storage
)
cursor = hive.cursor()
cursor.execute("SELECT country, count(*) FROM trips WHERE fare > 20 GROUP BY country")
counts = dict(cursor.fetchall())
# --8<-- [end:hive]
