"""The docker/ stack for real: a Docker engine (started, and installed, when none runs), the
images built on this machine (``fed_dev.images``: the public images' stand-ins), the compose
file as users run it with those images named (``docker/local.env``). The job writes the table
in its container; Trino (``iceberg`` on the metastore, ``fed`` on fed's REST catalog) and
HiveServer2 (beeline) answer the documented queries in theirs, each equal to fedcore's own read
of the table through the S3 port the stack publishes on loopback. Then: another write seen by
every engine; the metastore and the REST catalog replaced by new containers, losing nothing; a
wrong token refused and no secret logged; the job against a stopped S3 server failing in one
line; and ``down -v`` leaving nothing behind.

The tests run in file order, each on the state the one before left."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fed_dev import docker, dockerd, images, pipeline
from fed_dev.compose import Stack
from fed_dev.dockerd import StackError
from fed_dev.maven import MissingToolError
from fed_dev.process import free_port
from fedcore import Table, load_table

DOCKER = Path(__file__).resolve().parents[2] / "docker"
TABLE = "s3://lake-tables/lake/rides"
#: A Trino catalog on the REST catalog with a token that is not the catalog's.
WRONG_TOKEN = "not-the-catalog-token"
#: The compose file's published ports (each a free one here).
PORTS = ("FED_S3_PORT", "FED_METASTORE_PORT", "FED_HIVESERVER2_PORT", "FED_CATALOG_PORT", "FED_TRINO_PORT")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The stack up on the images built here, under a project of its own (``fed-test``: a
    stack of the user's, ``fed``, is left alone), its ports free ones on loopback."""
    try:
        engine = dockerd.engine()
    except StackError as exc:
        pytest.fail(str(exc), pytrace=False)
    compose: Stack | None = None
    try:
        images.build_all(say=lambda line: print(line, flush=True))
        catalogs = tmp_path_factory.mktemp("trino-catalogs")
        for path in (DOCKER / "conf" / "trino" / "catalog").iterdir():
            shutil.copy(path, catalogs / path.name)
        wrong = (catalogs / "fed.properties").read_text().replace(docker.CATALOG_TOKEN, WRONG_TOKEN)
        (catalogs / "wrongtoken.properties").write_text(wrong)
        ports = {name: str(free_port()) for name in PORTS}
        compose = Stack(
            DOCKER,
            env_file=DOCKER / "local.env",
            env={**ports, "FED_TRINO_CATALOGS": str(catalogs)},
            project="fed-test",
        )
        compose.down()  # a run cut short before
        compose.up("trino", "hiveserver2")
        yield compose
    except (StackError, MissingToolError) as exc:
        pytest.fail(str(exc), pytrace=False)
    finally:
        if compose is not None:
            compose.down()
        engine.stop()


def _table(stack: Stack) -> Table:
    """The table as fedcore reads it from this machine, through the published S3 port."""
    port = stack.variables["FED_S3_PORT"]
    s3 = docker.S3
    options = {
        "s3": {
            "key": s3.access_key,
            "secret": s3.secret_key,
            "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{port}", "region_name": s3.region},
        }
    }
    return load_table(TABLE, storage_options=options)


def _value(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return None if text == "NULL" else text


def trino(stack: Stack, catalog: str, sql: str) -> list[tuple[Any, ...]]:
    """A query through the Trino CLI in the trino container; its rows."""
    return trino_all(stack, catalog, {"q": sql})["q"]


def trino_all(stack: Stack, catalog: str, queries: dict[str, str]) -> dict[str, list[tuple[Any, ...]]]:
    """Queries through one run of the Trino CLI in the trino container (each answer after a
    marker row naming it); each one's rows."""
    script = "".join(f"SELECT '{_MARK}{name}'; {sql};" for name, sql in queries.items())
    done = stack.exec(
        "trino",
        "trino",
        "--catalog",
        catalog,
        "--schema",
        "lake",
        "--output-format",
        "TSV",
        "--execute",
        script,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return _split(done.stdout.splitlines())


def beeline_all(stack: Stack, queries: dict[str, str]) -> dict[str, list[tuple[Any, ...]]]:
    """Queries through one run of beeline in the hiveserver2 container; each one's rows."""
    script = "".join(f"SELECT '{_MARK}{name}'; {sql};" for name, sql in queries.items())
    done = stack.exec(
        "hiveserver2", "beeline", "-u", "jdbc:hive2://localhost:10000/lake",
        "--outputformat=tsv2", "--showHeader=false", "--silent=true", "-e", script,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return _split(done.stdout.splitlines())


#: Begins the row that names the query whose rows follow.
_MARK = "answer-to: "


def _split(lines: list[str]) -> dict[str, list[tuple[Any, ...]]]:
    rows: dict[str, list[tuple[Any, ...]]] = {}
    current: list[tuple[Any, ...]] = []
    for line in filter(str.strip, lines):
        if line.startswith(_MARK):
            current = rows.setdefault(line[len(_MARK) :], [])
        else:
            current.append(tuple(_value(v) for v in line.split("\t")))
    return {name: pipeline.normal(found) for name, found in rows.items()}


def answers(stack: Stack) -> dict[str, dict[str, list[tuple[Any, ...]]]]:
    """Each engine's answer to each of the documented queries."""
    return {
        "trino iceberg": trino_all(stack, "iceberg", pipeline.QUERIES),
        "trino fed": trino_all(stack, "fed", pipeline.QUERIES),
        "hive": beeline_all(stack, pipeline.QUERIES),
    }


def test_the_job_writes_and_every_engine_answers_as_fedcore_reads(stack: Stack) -> None:
    done = stack.run("job")
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.findall(r"^(\w+): committed$", done.stdout, flags=re.M) == ["bulk_insert", "upsert", "delete"]
    want = pipeline.expected(_table(stack))
    assert want["full count"] == [(58,)]  # the job's three writes
    assert want["point lookup"] == []
    for engine, got in answers(stack).items():
        assert got == want, engine


def test_another_upsert_from_the_job_is_seen_by_every_engine(stack: Stack) -> None:
    before = pipeline.expected(_table(stack))
    done = stack.run("job", "--again")
    assert done.returncode == 0, done.stderr[-3000:]
    want = pipeline.expected(_table(stack))
    assert want["full count"] == [(61,)]
    assert want["pruned aggregate"] != before["pruned aggregate"]
    for engine, got in answers(stack).items():
        assert got == want, engine


def test_replacing_the_metastore_or_the_catalog_container_loses_nothing(stack: Stack) -> None:
    """Each container replaced by a new one (a restart keeps more: the old file system)."""
    want = pipeline.expected(_table(stack))
    stack.recreate("metastore")
    assert trino_all(stack, "iceberg", pipeline.QUERIES) == want
    assert beeline_all(stack, pipeline.QUERIES) == want
    stack.recreate("catalog")
    assert trino_all(stack, "fed", pipeline.QUERIES) == want


def test_a_wrong_token_is_refused_and_the_catalog_logs_no_secret(stack: Stack) -> None:
    done = stack.exec(
        "trino",
        "trino",
        "--catalog",
        "wrongtoken",
        "--schema",
        "lake",
        "--execute",
        "SELECT count(*) FROM rides",
    )
    assert done.returncode != 0
    assert re.search(r"401|[Uu]nauthori[sz]ed|[Nn]ot authorized", done.stdout + done.stderr), done.stderr[
        -2000:
    ]
    assert trino(stack, "fed", "SELECT count(*) FROM rides") == pipeline.expected(_table(stack))["full count"]
    log = stack.logs("catalog")
    assert "its bearer token is not valid" in log  # the refusal is logged, without the token
    for secret in (docker.CATALOG_TOKEN, WRONG_TOKEN, docker.S3.secret_key):
        assert secret not in log


def test_the_job_against_a_stopped_s3_server_fails_in_one_line(stack: Stack) -> None:
    stack.stop("s3")
    done = stack.run("job", "--again", deps=False, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr + done.stdout
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower() and "WARN" not in line]
    assert len(errors) == 1, errors
    assert errors[0].startswith("fed-dev: error: ")
    assert "cannot be reached" in errors[0]
    assert "committed" not in done.stdout


def test_down_leaves_nothing_behind(stack: Stack) -> None:
    stack.down()
    assert stack.leftovers() == []
