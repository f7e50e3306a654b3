# Trino reads a fed table through its Iceberg view, reading your own writes (docs: engines.md).
# --8<-- [start:trino]
import fed_trino

trino = fed_trino.connect(
    host="localhost",
    port=8080,
    schema="lake",
    metastore="thrift://localhost:9083",  # the metastore Trino's catalog uses
    tables={"trips": "s3://lake/tables/trips"},  # fed tables this connection looks after
    storage_options={"s3": {"profile": "lake"}},  # how this process reaches their storage
)
cursor = trino.cursor()
cursor.execute("SELECT country, count(*) FROM trips WHERE fare > 20 GROUP BY country")
counts = dict(cursor.fetchall())
# --8<-- [end:trino]
