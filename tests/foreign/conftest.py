"""The tables every foreign-reader test reads (see ``layouts``)."""

from __future__ import annotations

import pytest
from foreign.layouts import LAYOUTS, Written, as_before_federated_types, fedcore_reads, write_sample

from fedcore.table import load_table


@pytest.fixture(scope="session")
def layout_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Written]:
    """Every layout's table, and ``legacy``: an object-store table as it was before federated
    types (readers that list the table path read it empty; see ``as_before_federated_types``)."""
    root = tmp_path_factory.mktemp("layouts")
    tables = {
        name: fedcore_reads(write_sample(f"file://{root}/{name}", name, root / "storage")) for name in LAYOUTS
    }
    legacy = write_sample(f"file://{root}/legacy", "object_store", root / "storage")
    as_before_federated_types(legacy)
    tables["legacy"] = fedcore_reads(load_table(legacy.path))
    return tables
