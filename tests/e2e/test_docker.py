"""The docker/ stack's files (tests/docker runs the stack itself): its service configuration
files are what ``fed_dev.stack`` gives the servers the e2e tests run, and its images default to
pinned public ones, with the ones built here named in ``local.env``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from fed_dev import docker, images, stack

DOCKER = Path(__file__).resolve().parents[2] / "docker"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    return loaded


def test_the_service_files_are_what_the_tested_settings_generate() -> None:
    generated = docker.files()
    on_disk = {str(p.relative_to(DOCKER)): p.read_text() for p in (DOCKER / "conf").rglob("*") if p.is_file()}
    assert on_disk == generated, "run `python -m fed_dev docker` after changing fed_dev/stack.py"


def test_the_stack_differs_from_the_tested_hiveserver2_only_by_the_stand_in_catalog() -> None:
    tested = stack.hiveserver2_site(
        metastore_uri="thrift://x:1", host="h", port=1, scratch="/s", s3=docker.S3
    )
    shipped = (DOCKER / "conf/hiveserver2/hive-site.xml").read_text()
    names = set(re.findall(r"<name>([^<]+)</name>", shipped))
    assert set(tested) - names == {stack.ICEBERG_CATALOG_KEY}
    assert names <= set(tested)


def test_every_image_defaults_to_a_pinned_public_image_and_local_env_names_the_built_ones(
    compose: dict[str, Any],
) -> None:
    """The stack runs for real on the images built here (tests/docker); users run it on the
    public images, which are the defaults: each pinned to a version."""
    used = {}
    for name, service in compose["services"].items():
        named = [service["image"], *service.get("build", {}).get("args", {}).values()]
        for image in named:
            variable, default = re.fullmatch(r"\$\{(\w+):-([^}]+)\}", image).groups()  # type: ignore[union-attr]
            tag = default.rpartition(":")[2]
            assert ":" in default, (name, image)
            assert tag not in {"", "latest"}, (name, image)
            assert used.setdefault(variable, default) == default, (name, image)
    local = dict(
        line.split("=", 1)
        for line in (DOCKER / "local.env").read_text().splitlines()
        if line and line[0] != "#"
    )
    assert local == images.VARIABLES
    assert set(local) == set(used)
    assert used["FED_HIVE_IMAGE"] == f"apache/hive:{stack.HIVE_VERSION}"
    assert used["FED_TRINO_IMAGE"] == f"trinodb/trino:{stack.TRINO_VERSION}"
    assert used["FED_S3_IMAGE"].startswith(f"chrislusf/seaweedfs:{images.SEAWEEDFS_VERSION}")
