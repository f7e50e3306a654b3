"""The docker/ stack, checked without a Docker engine (this machine has none): its service
configuration files are what ``fed_dev.stack`` gives the servers the e2e tests run, and the
compose file is well formed: pinned images, health checks where others wait on a service,
dependencies that exist, mounts that exist, and the job pointed at the stack's own services
with the stack's credentials."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from fed_dev import docker, pipeline, stack
from fed_dev.__main__ import parser

DOCKER = Path(__file__).resolve().parents[2] / "docker"
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}


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


def test_every_image_is_pinned_and_every_awaited_service_is_checked(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"s3", "buckets", "metastore", "catalog", "hiveserver2", "trino", "job"}
    for name, service in services.items():
        image = service["image"]
        tag = image.rpartition(":")[2]
        assert ":" in image, (name, image)
        assert tag not in {"", "latest"}, (name, image)
        for needed, condition in service.get("depends_on", {}).items():
            assert needed in services, (name, needed)
            assert condition["condition"] in CONDITIONS, (name, condition)
            if condition["condition"] == "service_healthy":
                test = services[needed]["healthcheck"]["test"]
                assert test[0] in {"CMD", "CMD-SHELL"}, (needed, test)
                assert len(test) > 1, (needed, test)
    assert services["hiveserver2"]["healthcheck"]  # what a user's queries wait on
    assert services["trino"]["healthcheck"]
    assert (
        services["metastore"]["image"]
        == services["hiveserver2"]["image"]
        == f"apache/hive:{stack.HIVE_VERSION}"
    )
    assert services["trino"]["image"] == f"trinodb/trino:{stack.TRINO_VERSION}"


def test_every_mount_and_build_input_exists(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            assert (DOCKER / source).is_dir(), (name, volume)
    build = compose["services"]["job"]["build"]
    root = (DOCKER / build["context"]).resolve()
    dockerfile = root / build["dockerfile"]
    copied = re.findall(r"^COPY (\S+) ", dockerfile.read_text(), flags=re.M)
    assert copied
    assert all((root / c).is_dir() for c in copied), copied


def test_the_services_share_one_address_book_and_one_set_of_credentials(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert services["s3"]["environment"] == {
        "MINIO_ROOT_USER": docker.S3.access_key,
        "MINIO_ROOT_PASSWORD": docker.S3.secret_key,
    }
    (make_buckets,) = services["buckets"]["command"]
    for bucket in (docker.TABLE_BUCKET, docker.STORAGE_BUCKET):
        assert f"stack/{bucket}" in make_buckets
    assert f"{docker.S3.endpoint_url} {docker.S3.access_key} {docker.S3.secret_key}" in make_buckets
    job = services["job"]
    assert job["environment"]["AWS_ACCESS_KEY_ID"] == docker.S3.access_key
    assert job["environment"]["AWS_SECRET_ACCESS_KEY"] == docker.S3.secret_key
    assert job["command"] == [
        f"--table=s3://{docker.TABLE_BUCKET}/{pipeline.DATABASE}/{pipeline.TABLE}",
        f"--storage=s3://{docker.STORAGE_BUCKET}",
        f"--metastore={docker.METASTORE_URI}",
        f"--s3-endpoint={docker.S3.endpoint_url}",
    ]
    ports = {name: s.get("ports", []) for name, s in services.items()}
    assert ports["metastore"] == [f"{p}:{p}" for p in [docker.METASTORE_URI.rpartition(":")[2]]]
    assert ports["s3"] == [f"{p}:{p}" for p in [docker.S3.endpoint_url.rpartition(":")[2]]]


def test_the_pipeline_command_parses_the_jobs_arguments(compose: dict[str, Any]) -> None:
    args = parser().parse_args(["pipeline", *compose["services"]["job"]["command"]])
    assert (args.table, args.metastore) == (
        f"s3://{docker.TABLE_BUCKET}/{pipeline.DATABASE}/{pipeline.TABLE}",
        docker.METASTORE_URI,
    )


def test_the_catalog_serves_the_jobs_table_to_trino_with_the_stacks_token(compose: dict[str, Any]) -> None:
    """fed serve's warehouse is the table bucket, where the job's table lies as
    NAMESPACE/NAME; Trino's ``fed`` catalog (generated) points at it with its token."""
    services = compose["services"]
    catalog, job = services["catalog"], services["job"]
    assert catalog["image"] == job["image"]
    assert catalog["build"] == job["build"]
    assert catalog["entrypoint"] == ["fed", "serve"]
    port = docker.CATALOG_URI.rpartition(":")[2]
    assert catalog["command"] == [
        f"--warehouse=s3://{docker.TABLE_BUCKET}",
        "--host=0.0.0.0",
        f"--port={port}",
        f"--storage-option=endpoint_url={docker.S3.endpoint_url}",
    ]
    assert catalog["ports"] == [f"{port}:{port}"]
    assert catalog["environment"] == {**job["environment"], "FED_SERVE_TOKEN": docker.CATALOG_TOKEN}
    assert docker.CATALOG_URI.split("//")[1].split(":")[0] == "catalog"
    trino = (DOCKER / "conf/trino/catalog/fed.properties").read_text()
    assert f"iceberg.rest-catalog.uri={docker.CATALOG_URI}\n" in trino
    assert f"iceberg.rest-catalog.oauth2.token={docker.CATALOG_TOKEN}\n" in trino
    assert services["trino"]["depends_on"]["catalog"] == {"condition": "service_healthy"}
    dockerfile = (DOCKER / "job" / "Dockerfile").read_text()
    assert "fedcore[iceberg,serve]" in dockerfile
