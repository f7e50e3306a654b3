"""The tables every foreign-reader test reads (see ``layouts``)."""

from __future__ import annotations

import pytest
from foreign.layouts import LAYOUTS, Written, as_before_federated_types, fedcore_reads, write_sample

from fedcore import properties as P
from fedcore.table import load_table


@pytest.fixture(scope="session")
def layout_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Written]:
    """Every layout's table; ``hive_mor``, a Hive-layout merge-on-read table (its updates and
    deletes in log files; ``hive_mor_avro`` the same with Avro data blocks); and ``legacy``,
    an object-store table as it was before federated types (readers that list the table
    path read it empty; see ``as_before_federated_types``)."""
    root = tmp_path_factory.mktemp("layouts")
    tables = {
        name: fedcore_reads(write_sample(f"file://{root}/{name}", name, root / "storage")) for name in LAYOUTS
    }
    mor = write_sample(f"file://{root}/hive_mor", "hive", root / "storage", "MERGE_ON_READ")
    tables["hive_mor"] = fedcore_reads(mor)
    avro = {P.LOG_DATA_BLOCK_FORMAT: "avro"}
    mor_avro = write_sample(f"file://{root}/hive_mor_avro", "hive", root / "storage", "MERGE_ON_READ", avro)
    tables["hive_mor_avro"] = fedcore_reads(mor_avro)
    legacy = write_sample(f"file://{root}/legacy", "object_store", root / "storage")
    as_before_federated_types(legacy)
    tables["legacy"] = fedcore_reads(load_table(legacy.path))
    return tables
