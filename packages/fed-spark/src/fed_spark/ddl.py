"""``fed_spark.create_table(spark, "CREATE TABLE ... USING fed ...")``: a new table from SQL DDL.

Spark's session catalog keeps a Python data source's table as a name, a schema and its
``OPTIONS``; it passes the source neither ``TBLPROPERTIES`` nor ``LOCATION`` nor
``PARTITIONED BY``, and never calls it when the table is created. So ``spark.sql`` alone
cannot create a fed table as Hudi's Spark SQL does (``USING hudi`` relies on Hudi's own
catalog, a JVM extension). This reads the statement's clauses itself (the column list is
parsed by Spark, as a DDL schema), creates the fed table (its record key, precombine field
and type from Hudi's table properties, its columns as its create schema, its partitioning,
its location, or the warehouse's), then registers it in the catalog as
``CREATE TABLE name USING fed OPTIONS (path ...)`` does for a table that exists, so SQL
reads and writes it from then on.

Only public session calls are used (``spark.sql``, ``spark.catalog``, ``createDataFrame``):
the same code runs on a classic session and on a Spark Connect client, which has no JVM.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

import fedcore
from fed_spark.options import PRECOMBINE_FIELD as PRECOMBINE_OPTION
from fed_spark.options import (
    PRECOMBINE_PROPERTY,
    RECORD_KEY_FIELD,
    STORAGE_PREFIX,
    TABLE_TYPE_NAMES,
    TABLE_TYPE_PROPERTY,
)
from fed_spark.options import PRIMARY_KEY as PRIMARY_KEY_PROPERTY
from fed_spark.session import AnySession, registered
from fedcore import Table, load_table
from fedcore.exceptions import ConfigError, TableNotFoundError

#: Hudi's Spark SQL table properties, as the statement's parser gives them (lower case).
PRIMARY_KEY: Final = PRIMARY_KEY_PROPERTY.lower()
PRECOMBINE_FIELD: Final = PRECOMBINE_PROPERTY.lower()
TYPE: Final = TABLE_TYPE_PROPERTY.lower()
_TYPES: Final = TABLE_TYPE_NAMES
#: The session catalog's name, as a three-part table name may start with it.
_SESSION_CATALOG: Final = "spark_catalog"


def create_table(spark: AnySession, statement: str) -> Table:
    """Run ``CREATE TABLE [IF NOT EXISTS] name (columns) USING fed [PARTITIONED BY (columns)]
    [OPTIONS (...)] [TBLPROPERTIES (primaryKey='id', preCombineField='ts', type='cow'|'mor',
    hoodie.* keys)] [LOCATION 'path'] [COMMENT '...']`` as Hudi's Spark SQL runs ``USING hudi``.

    Returns:
        The fed table (created, or the one already at the location when its columns match).
    """
    ddl = _Ddl(_Statement.parse(statement))
    settings = registered(spark)
    storage = settings.storage(ddl.storage)
    if spark.catalog.tableExists(ddl.name):
        if not ddl.if_not_exists:
            raise ConfigError("CREATE TABLE", f"table {ddl.name} already exists in the catalog")
        return load_table(_catalog_location(spark, ddl), storage_options=storage)
    location = ddl.location(spark)
    try:
        table = load_table(location, storage_options=storage)
    except TableNotFoundError:
        if ddl.columns is None:
            raise ConfigError(
                "CREATE TABLE", f"there is no table at {location}: name its columns to create one"
            ) from None
        table = fedcore.create_table(
            location,
            name=ddl.table,
            record_key_fields=ddl.record_key_fields,
            partition_fields=ddl.partition_fields,
            precombine_field=ddl.precombine_field,
            table_type=ddl.table_type,  # type: ignore[arg-type]
            schema=to_arrow_schema(ddl.schema(spark), timezone="UTC"),
            properties=ddl.hoodie,
            storage_options=storage,
        )
    else:
        found = table.schema()
        if ddl.columns is not None and found is not None:
            schema = to_arrow_schema(ddl.schema(spark), timezone="UTC")
            if [(f.name, f.type) for f in found] != [(f.name, f.type) for f in schema]:
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


def _catalog_location(spark: AnySession, ddl: _Ddl) -> str:
    """Where the catalog's table of this name is: ``SHOW TABLE EXTENDED``'s Location (a
    Python source's table in the session catalog is a V2 table, whose ``DESCRIBE`` has none)."""
    scope = f" IN `{ddl.database.replace('`', '``')}`" if ddl.database else ""
    for row in spark.sql(f"SHOW TABLE EXTENDED{scope} LIKE '{_quoted(ddl.table)}'").collect():
        if str(row.tableName).lower() == ddl.table.lower():
            for line in str(row.information).splitlines():
                if line.startswith("Location: "):
                    return line.removeprefix("Location: ").strip()
    raise ConfigError("CREATE TABLE", f"table {ddl.name} in the catalog has no location")


# --- the statement -------------------------------------------------------------------------------

_TOKEN: Final = re.compile(
    r"""(?P<space>\s+|--[^\n]*|/\*.*?\*/)
      | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
      | (?P<quoted>`(?:[^`]|``)*`)
      | (?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?[A-Za-z]?)
      | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<punct>[(),.=<>:;\[\]+*-])""",
    re.VERBOSE | re.DOTALL,
)
_ESCAPES: Final = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "b": "\b", "Z": "\x1a"}


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    at: int

    @property
    def value(self) -> str:
        """A string literal unescaped, an identifier unquoted, anything else as written."""
        if self.kind == "string":
            return re.sub(
                r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), self.text[1:-1], flags=re.S
            )
        if self.kind == "quoted":
            return self.text[1:-1].replace("``", "`")
        return self.text

    def keyword(self) -> str:
        return self.text.upper() if self.kind == "word" else ""


@dataclass
class _Statement:
    """The clauses of a ``CREATE TABLE``, read as Spark's grammar has them (the clauses
    after ``USING`` in any order, each at most once)."""

    name: list[str]
    if_not_exists: bool
    columns: str | None
    provider: str | None
    options: dict[str, str]
    properties: dict[str, str]
    partitioning: list[list[_Token]]
    location: str | None

    @classmethod
    def parse(cls, source: str) -> _Statement:
        return _Reader(_tokens(source), source).statement()


def _tokens(source: str) -> list[_Token]:
    """The statement's tokens, without spaces, comments and a closing ``;``."""
    out, at = [], 0
    while at < len(source):
        match = _TOKEN.match(source, at)
        if match is None:
            raise ConfigError("statement", f"cannot be read at {source[at : at + 20]!r}")
        if match.lastgroup != "space":
            out.append(_Token(match.lastgroup or "", match.group(), at))
        at = match.end()
    return out[:-1] if out and out[-1].text == ";" else out


class _Reader:
    def __init__(self, tokens: list[_Token], source: str) -> None:
        self.tokens = tokens
        self.source = source
        self.at = 0

    def peek(self, ahead: int = 0) -> _Token | None:
        index = self.at + ahead
        return self.tokens[index] if index < len(self.tokens) else None

    def next(self, what: str) -> _Token:
        token = self.peek()
        if token is None:
            raise ConfigError("statement", f"ends where {what} was expected")
        self.at += 1
        return token

    def take(self, *words: str) -> bool:
        """Consume ``words`` (keywords or punctuation) when they come next."""
        for offset, word in enumerate(words):
            token = self.peek(offset)
            if token is None or (token.keyword() or token.text) != word:
                return False
        self.at += len(words)
        return True

    def expect(self, *words: str) -> None:
        if not self.take(*words):
            token = self.peek()
            if token is None:
                raise ConfigError("statement", f"ends where {' '.join(words)} was expected")
            raise ConfigError("statement", f"expected {' '.join(words)} where it says {token.text!r}")

    def identifier(self) -> str:
        token = self.next("a name")
        if token.kind not in ("word", "quoted"):
            raise ConfigError("statement", f"expected a name where it says {token.text!r}")
        return token.value

    def dotted(self) -> list[str]:
        parts = [self.identifier()]
        while self.take("."):
            parts.append(self.identifier())
        return parts

    def group(self) -> list[_Token]:
        """The tokens between ``(`` and its ``)``."""
        self.expect("(")
        start, depth = self.at, 1
        while depth:
            token = self.next("')'")
            depth += {"(": 1, ")": -1}.get(token.text, 0)
        return self.tokens[start : self.at - 1]

    def text_of(self, tokens: list[_Token]) -> str:
        if not tokens:
            return ""
        last = tokens[-1]
        return self.source[tokens[0].at : last.at + len(last.text)]

    def properties(self, clause: str) -> dict[str, str]:
        """``(key [=] value, ...)``: keys lower-cased, as Spark's catalog compares them."""
        self.expect("(")
        out: dict[str, str] = {}
        while not self.take(")"):
            token = self.peek()
            if token is not None and token.kind == "string":
                key = self.next("a key").value
            else:
                key = ".".join(self.dotted())
            self.take("=")
            value = self.next(f"the value of {key}")
            if value.kind not in ("string", "number", "word") or value.text in "(),":
                raise ConfigError(clause, f"{key} has no value")
            out[key.lower()] = value.value
            if not self.take(","):
                self.expect(")")
                break
        return out

    def statement(self) -> _Statement:
        created = self.take("CREATE") and not self.take("OR", "REPLACE")
        external = created and self.take("EXTERNAL")
        if not created or not self.take("TABLE"):
            what = " ".join(t.text for t in self.tokens[:3])
            raise ConfigError(
                "statement",
                f"begins {what!r}, not CREATE TABLE ... USING fed (for CREATE TABLE AS SELECT, create the "
                "table, then INSERT INTO it)",
            )
        if_not_exists = self.take("IF", "NOT", "EXISTS")
        name = self.dotted()
        columns = None
        if (self.peek() or _Token("", "", 0)).text == "(":
            columns = self.text_of(self.group())
        provider = None
        options: dict[str, str] = {}
        properties: dict[str, str] = {}
        partitioning: list[list[_Token]] = []
        location = None
        seen: set[str] = set()
        while self.peek() is not None:
            token = self.next("a clause")
            clause = token.keyword()
            if clause == "PARTITIONED":
                self.expect("BY")
            if clause in seen:
                raise ConfigError(clause, "is given twice")
            seen.add(clause)
            if clause == "USING":
                provider = ".".join(self.dotted())
            elif clause == "OPTIONS":
                options = self.properties(clause)
            elif clause == "TBLPROPERTIES":
                properties = self.properties(clause)
            elif clause == "PARTITIONED":
                partitioning = _split(self.group())
            elif clause in ("LOCATION", "COMMENT"):
                literal = self.next(f"{clause}'s string")
                if literal.kind != "string":
                    raise ConfigError(clause, f"takes a string, not {literal.text!r}")
                location = literal.value if clause == "LOCATION" else location
            elif clause == "AS":
                raise ConfigError(
                    "statement",
                    "is CREATE TABLE AS SELECT, not CREATE TABLE ... USING fed (create the table, then "
                    "INSERT INTO it)",
                )
            else:
                raise ConfigError(
                    token.text,
                    "is not a clause fed_spark.create_table reads (it would be ignored): USING, OPTIONS, "
                    "PARTITIONED BY, LOCATION, COMMENT, TBLPROPERTIES",
                )
        if external and location is None and "path" not in options:
            raise ConfigError("CREATE EXTERNAL TABLE", "needs a LOCATION (as in Spark)")
        return _Statement(name, if_not_exists, columns, provider, options, properties, partitioning, location)


def _split(tokens: list[_Token]) -> list[list[_Token]]:
    """A parenthesised list's items (commas inside nested parentheses kept)."""
    items: list[list[_Token]] = [[]]
    depth = 0
    for token in tokens:
        depth += {"(": 1, ")": -1}.get(token.text, 0)
        if token.text == "," and depth == 0:
            items.append([])
        else:
            items[-1].append(token)
    return [item for item in items if item]


class _Ddl:
    """What a ``CREATE TABLE ... USING fed`` statement says, checked."""

    def __init__(self, statement: _Statement) -> None:
        if (statement.provider or "").lower() != "fed":
            raise ConfigError("CREATE TABLE", "fed_spark.create_table creates tables USING fed")
        parts = statement.name
        if len(parts) == 3 and parts[0].lower() == _SESSION_CATALOG:
            parts = parts[1:]
        if len(parts) > 2:
            raise ConfigError("CREATE TABLE", f"{'.'.join(parts)}: fed tables live in the session catalog")
        self.table = parts[-1]
        self.name = ".".join(f"`{p.replace('`', '``')}`" for p in parts)
        self.database = parts[-2] if len(parts) > 1 else None
        self.if_not_exists = statement.if_not_exists
        self.columns = statement.columns
        self.partition_fields: list[str] = []
        for item in statement.partitioning:
            if len(item) != 1 or item[0].kind not in ("word", "quoted"):
                described = " ".join(t.text for t in item)
                raise ConfigError("PARTITIONED BY", f"{described}: fed partitions by column values only")
            self.partition_fields.append(item[0].value)
        given = dict(statement.properties) | dict(statement.options)
        # As Spark's parser does: OPTIONS (path ...) is the LOCATION, and not both.
        path = statement.options.get("path")
        given.pop("path", None)
        if path is not None and statement.location is not None:
            raise ConfigError("LOCATION", "and OPTIONS (path ...) both name a location: give one")
        self.storage_options = {k: v for k, v in given.items() if k.startswith(STORAGE_PREFIX)}
        self.storage = {k[len(STORAGE_PREFIX) :]: v for k, v in self.storage_options.items()}
        keys = given.pop(PRIMARY_KEY, None) or given.pop(RECORD_KEY_FIELD, None)
        if not keys:
            raise ConfigError(
                "TBLPROPERTIES", "primaryKey is needed (the record key columns, comma separated)"
            )
        self.record_key_fields = [k.strip() for k in keys.split(",") if k.strip()]
        self.precombine_field = given.pop(PRECOMBINE_FIELD, None) or given.pop(PRECOMBINE_OPTION, None)
        kind = given.pop(TYPE, next(iter(_TYPES))).strip().lower()
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
        self._location = statement.location if path is None else path

    def schema(self, spark: AnySession) -> StructType:
        """The column list, parsed by Spark as a DDL schema (``id BIGINT NOT NULL COMMENT '...'``)."""
        try:
            return spark.createDataFrame([], self.columns or "").schema
        except (ParseException, AnalysisException) as error:  # its first line says where
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ConfigError("CREATE TABLE", f"the columns ({self.columns}) do not parse: {first}") from None

    def location(self, spark: AnySession) -> str:
        """LOCATION, or where the session catalog puts a managed table of this name (its
        database's location, then the name in lower case, as Spark's catalog does)."""
        if self._location is not None:
            return self._location
        database = self.database or spark.catalog.currentDatabase()
        if not spark.catalog.databaseExists(database):
            raise ConfigError("CREATE TABLE", f"there is no database {database!r} in the catalog")
        base = str(spark.catalog.getDatabase(database).locationUri)
        return f"{base.rstrip('/')}/{self.table.lower()}"
