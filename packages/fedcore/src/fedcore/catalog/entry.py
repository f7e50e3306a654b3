"""What a catalog (a Hive metastore, AWS Glue) holds for a fed table's Iceberg view, whichever
catalog it is: an Iceberg table in the catalog's own form (``table_type=ICEBERG``,
``metadata_location``), plus the fed instant it shows and the fed table it is a view of."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from fedcore import properties as P
from fedcore.exceptions import MetastoreError
from fedcore.handle import TableHandle

METADATA_LOCATION: Final = "metadata_location"
PREVIOUS_METADATA_LOCATION: Final = "previous_metadata_location"
#: The fed instant the registered version shows, and the fed table it is a view of.
INSTANT_PARAMETER: Final = "fed.instant"
TABLE_PATH_PARAMETER: Final = "fed.table.path"
#: How many times an update that lost a race is tried again (each reads the entry anew).
ATTEMPTS: Final = 5


@dataclass(frozen=True)
class Registration:
    """What the catalog holds for a table after a registration."""

    database: str
    table: str
    metadata_location: str
    changed: bool  # False: it already held this location (in this form)


def check_view(parameters: Mapping[str, str], table_path: str, name: str, where: str) -> None:
    """Refuse a catalog entry that is not the Iceberg view of ``table_path`` (another table
    of that name must never be overwritten)."""
    if (
        parameters.get("table_type", "").upper() != "ICEBERG"
        or parameters.get(TABLE_PATH_PARAMETER) != table_path
    ):
        raise MetastoreError(
            f"{name} in {where} is not the Iceberg view of {table_path}; name another table "
            "(hoodie.datasource.hive_sync.table, --table)"
        )


def view_parameters(
    metadata_location: str, held: str | None, instant: str | None, table_path: str
) -> dict[str, str]:
    """The parameters that point an entry at ``metadata_location`` (``held``: the one it replaces)."""
    parameters = {
        "table_type": "ICEBERG",
        METADATA_LOCATION: metadata_location,
        INSTANT_PARAMETER: instant or "",
        TABLE_PATH_PARAMETER: table_path,
    }
    if held is not None:
        parameters[PREVIOUS_METADATA_LOCATION] = held
    return parameters


def sync_names(table: TableHandle, options: Mapping[str, str]) -> tuple[str, str]:
    """The database and table a sync registers ``table`` as: Hudi's Hive sync keys, which its
    Glue sync reads too (default: database ``default``, the table's own name)."""
    return (
        P.HIVE_SYNC_DATABASE.of(options) or P.DEFAULT_HIVE_SYNC_DATABASE,
        P.HIVE_SYNC_TABLE.of(options) or table.name,
    )
