"""``fed_spark.create_table(spark, "CREATE TABLE ... USING fed ...")``: a new table from SQL DDL.

Spark's session catalog keeps a Python data source's table as a name, a schema and its
``OPTIONS``; it passes the source neither ``TBLPROPERTIES`` nor ``LOCATION`` nor
``PARTITIONED BY``, and never calls it when the table is created. So ``spark.sql`` alone
cannot create a fed table as Hudi's Spark SQL does (``USING hudi`` relies on Hudi's own
catalog, a JVM extension). This parses the statement with Spark's own SQL parser, creates
the fed table (its record key, precombine field and type from Hudi's table properties, its
columns as its create schema, its partitioning, its location, or the warehouse's), then
registers it in the catalog as ``CREATE TABLE name USING fed OPTIONS (path ...)`` does for a
table that exists, so SQL reads and writes it from then on.
"""

from __future__ import annotations

import json
from typing import Any, Final

from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

import fedcore
from fed_spark.options import STORAGE_PREFIX
from fed_spark.session import registered
from fedcore import Table, load_table
from fedcore.exceptions import ConfigError, TableNotFoundError

#: Hudi's Spark SQL table properties and what they are in Hudi's write options.
PRIMARY_KEY: Final = "primarykey"
PRECOMBINE_FIELD: Final = "precombinefield"
TYPE: Final = "type"
_TYPES: Final = {"cow": "COPY_ON_WRITE", "mor": "MERGE_ON_READ"}


def create_table(spark: SparkSession, statement: str) -> Table:
    """Run ``CREATE TABLE [IF NOT EXISTS] name (columns) USING fed [PARTITIONED BY (columns)]
    [OPTIONS (...)] [TBLPROPERTIES (primaryKey='id', preCombineField='ts', type='cow'|'mor',
    hoodie.* keys)] [LOCATION 'path']`` as Hudi's Spark SQL runs ``USING hudi``.

    Returns:
        The fed table (created, or the one already at the location when its columns match).
    """
    ddl = _parse(spark, statement)
    settings = registered(spark)
    storage = settings.storage(ddl.storage)
    if spark.catalog.tableExists(ddl.name):
        if not ddl.if_not_exists:
            raise ConfigError("CREATE TABLE", f"table {ddl.name} already exists in the catalog")
        return load_table(ddl.catalog_location(spark), storage_options=storage)
    location = ddl.location(spark)
    schema = to_arrow_schema(ddl.columns, timezone="UTC")
    try:
        table = load_table(location, storage_options=storage)
    except TableNotFoundError:
        table = fedcore.create_table(
            location,
            name=ddl.table,
            record_key_fields=ddl.record_key_fields,
            partition_fields=ddl.partition_fields,
            precombine_field=ddl.precombine_field,
            table_type=ddl.table_type,  # type: ignore[arg-type]
            schema=schema,
            properties=ddl.hoodie,
            storage_options=storage,
        )
    else:
        found = table.schema()
        if found is not None and [(f.name, f.type) for f in found] != [(f.name, f.type) for f in schema]:
            raise ConfigError(
                "CREATE TABLE", f"{location} holds table {table.name} with other columns: {found.names}"
            )
    options = ", ".join(
        f"'{_quoted(k)}' '{_quoted(v)}'" for k, v in {"path": location, **ddl.storage_options}.items()
    )
    exists = "IF NOT EXISTS " if ddl.if_not_exists else ""
    spark.sql(f"CREATE TABLE {exists}{ddl.name} USING fed OPTIONS ({options})")
    return table


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


class _Ddl:
    """What a ``CREATE TABLE ... USING fed`` statement says, checked."""

    def __init__(self, plan: Any) -> None:
        spec = plan.tableSpec()
        provider = spec.provider()
        if not provider.isDefined() or str(provider.get()).lower() != "fed":
            raise ConfigError("CREATE TABLE", "fed_spark.create_table creates tables USING fed")
        parts = [str(p) for p in _items(plan.name().nameParts())]
        self.table = parts[-1]
        self.name = ".".join(f"`{p}`" for p in parts)
        self.database = parts[-2] if len(parts) > 1 else None
        self.if_not_exists = bool(plan.ignoreIfExists())
        self.columns = StructType.fromJson(
            {
                "type": "struct",
                "fields": [
                    {
                        "name": c.name(),
                        "type": json.loads(c.dataType().json()),
                        "nullable": c.nullable(),
                        "metadata": {},
                    }
                    for c in _items(plan.columns())
                ],
            }
        )
        self.partition_fields: list[str] = []
        for transform in _items(plan.partitioning()):
            if transform.getClass().getSimpleName() != "IdentityTransform":
                raise ConfigError(
                    "PARTITIONED BY", f"{transform.describe()}: fed partitions by column values only"
                )
            self.partition_fields.append(str(transform.references()[0].fieldNames()[0]))
        given = {str(k).lower(): str(v) for k, v in _pairs(spec.properties())}
        given |= {str(k).lower(): str(v) for k, v in _options(spec)}
        self.storage_options = {k: v for k, v in given.items() if k.startswith(STORAGE_PREFIX)}
        self.storage = {k[len(STORAGE_PREFIX) :]: v for k, v in self.storage_options.items()}
        keys = given.pop(PRIMARY_KEY, None) or given.pop("hoodie.datasource.write.recordkey.field", None)
        if not keys:
            raise ConfigError(
                "TBLPROPERTIES", "primaryKey is needed (the record key columns, comma separated)"
            )
        self.record_key_fields = [k.strip() for k in keys.split(",") if k.strip()]
        self.precombine_field = given.pop(PRECOMBINE_FIELD, None) or given.pop(
            "hoodie.datasource.write.precombine.field", None
        )
        kind = given.pop(TYPE, "cow").strip().lower()
        if kind not in _TYPES:
            raise ConfigError("TBLPROPERTIES", f"type={kind!r} is not cow or mor")
        self.table_type = _TYPES[kind]
        unknown = sorted(k for k in given if not k.startswith(("hoodie.", STORAGE_PREFIX)))
        if unknown:
            raise ConfigError(
                unknown[0],
                "is not a table property fed reads (it would be ignored): primaryKey, preCombineField, "
                "type, hoodie.* keys, and fed.storage.* options",
            )
        self.hoodie = {k: v for k, v in given.items() if k.startswith("hoodie.")}
        located = spec.location()
        self._location = str(located.get()) if located.isDefined() else None

    def location(self, spark: SparkSession) -> str:
        """LOCATION, or where the session catalog puts a managed table of this name."""
        if self._location is not None:
            return self._location
        catalog, identifier = self._catalog(spark)
        return str(catalog.defaultTablePath(identifier).toString())

    def catalog_location(self, spark: SparkSession) -> str:
        """Where the catalog's table of this name is."""
        catalog, identifier = self._catalog(spark)
        return str(catalog.getTableMetadata(identifier).location().toString())

    def _catalog(self, spark: SparkSession) -> tuple[Any, Any]:
        jvm = spark._jvm
        catalog = spark._jsparkSession.sessionState().catalog()
        database = jvm.scala.Option.apply(self.database)
        return catalog, jvm.org.apache.spark.sql.catalyst.TableIdentifier(self.table, database)


def _parse(spark: SparkSession, statement: str) -> _Ddl:
    parser = spark._jsparkSession.sessionState().sqlParser()
    plan = parser.parsePlan(statement)
    kind = plan.getClass().getSimpleName()
    if kind != "CreateTable":
        raise ConfigError(
            "statement",
            f"is a {kind}, not CREATE TABLE ... USING fed (for CREATE TABLE AS SELECT, create the "
            "table, then INSERT INTO it)",
        )
    return _Ddl(plan)


def _items(seq: Any) -> list[Any]:
    """A Scala Seq's elements."""
    return [seq.apply(i) for i in range(seq.size())]


def _pairs(scala_map: Any) -> list[tuple[Any, Any]]:
    """A Scala Map's entries."""
    entries = scala_map.toSeq()
    return [(entry._1(), entry._2()) for entry in _items(entries)]


def _options(spec: Any) -> list[tuple[str, str]]:
    """``OPTIONS (...)``: each value a literal."""
    listed = spec.optionExpression().options()
    return [(str(pair._1()), str(pair._2().value())) for pair in _items(listed)]
