"""``fed`` commands that look after a table's files: repair, verify and migrate; its
config: upgrade; and its registration for other engines: sync.

Each goes over every file of a table (repair and verify list every prefix under its
storage roots; migrate copies or rewrites each file), so each shows a progress bar
and reports files per second. ``verify`` exits 1 when the table fails the check
(a referenced file is missing, the metadata table is damaged), 0 when it passes,
and 2, like every command, on an error.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import os
import re
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from tqdm import tqdm

from fedcore import properties as P
from fedcore.cli.table import (
    PROPERTY_HELP,
    add_storage_option,
    open_table,
    parse_pairs,
    positive_int,
    storage_options,
)
from fedcore.exceptions import FedError, MissingDependencyError
from fedcore.io.filesystems import storage_options_of
from fedcore.services.migrate import migrate
from fedcore.table import load_table

#: ``fed verify``'s exit status when the table fails the check.
EXIT_FAILED = 1

_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def maintenance_commands(commands: Any) -> None:
    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = commands.add_parser(name, help=help_text, description=help_text)
        parser.add_argument("table", help="table path (local path, file:// or s3:// URI)")
        add_storage_option(parser)
        return parser

    repair = add("repair", "rebuild the metadata table from storage and the timeline")
    repair.add_argument("--dry-run", action="store_true", help="report what would be written; write nothing")
    repair.add_argument(
        "--allow-missing",
        action="store_true",
        help="rebuild even when files holding the newest version of their file group are missing "
        "(they stay recorded: reads that need them fail)",
    )
    repair.set_defaults(run=_repair)

    verify = add(
        "verify",
        "compare the metadata table with storage: missing files, orphans (exit 0: the table passes; "
        "1: it fails the check; 2: it could not be checked)",
    )
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    verify.add_argument(
        "--deep",
        action="store_true",
        help="also read every referenced file and check it against what was recorded of it (a "
        "base file's footer, rows and column statistics; a log file's blocks): finds truncated, "
        "zeroed and swapped files, at one read per file",
    )
    verify.add_argument(
        "--delete-orphans", action="store_true", help="delete orphans older than --older-than"
    )
    verify.add_argument(
        "--older-than",
        type=duration,
        metavar="DURATION",
        help="grace period for --delete-orphans, e.g. 7d, 12h, 30m (required with it)",
    )
    verify.set_defaults(run=_verify)

    upgrade = add(
        "upgrade",
        "bring the table's config up to what this fed writes (every write does it too); no data "
        "file is touched",
    )
    upgrade.add_argument(
        "--table-version",
        type=int,
        choices=(8, 9),
        help="also move the table to Hudi 1.x's table version 8 or 9 (from 6, or 8 to 9), as Apache "
        "Hudi's upgrade does (a merge-on-read table compacted first); run it when no write runs on the table",
    )
    upgrade.set_defaults(run=_upgrade)

    hive_sync = add(
        "sync",
        "publish the table's Iceberg view and register it in a Hive metastore or AWS Glue (Trino, "
        "Hive, Spark, Athena and PyIceberg's catalogs read it from there)",
    )
    catalog = hive_sync.add_mutually_exclusive_group(required=True)
    catalog.add_argument("--metastore", metavar="thrift://HOST:PORT", help="the Hive metastore")
    catalog.add_argument(
        "--glue",
        action="store_true",
        help="AWS Glue (credentials from the environment, as boto3 finds them: AWS_ACCESS_KEY_ID, "
        "a profile, an instance role)",
    )
    hive_sync.add_argument("--glue-region", help="Glue's region (default: boto3's, AWS_REGION)")
    hive_sync.add_argument("--glue-endpoint", metavar="URL", help="Glue's endpoint (default: the region's)")
    hive_sync.add_argument("--database", default=P.DEFAULT_HIVE_SYNC_DATABASE, help="default: %(default)s")
    hive_sync.add_argument(
        "--table", dest="table_name", help="the metastore's table name (default: the table's)"
    )
    hive_sync.add_argument(
        "--hive",
        action="store_true",
        help="register in Iceberg's Hive-engine form (storage handler, SerDe), so Hive reads it too; "
        "later syncs keep that form (a Hive metastore only)",
    )
    hive_sync.set_defaults(run=_sync)

    serve = commands.add_parser(
        "serve",
        help="serve tables' Iceberg views as a read-only Iceberg REST catalog",
        description="Serve the given tables, and those in a warehouse folder, to engines that "
        "speak the Iceberg REST catalog protocol (Trino, Spark, PyIceberg): each load shows the "
        "table's latest commit, "
        "published first when the table has moved on. Listens on 127.0.0.1 unless --host says "
        "otherwise, and beyond the loopback only with a token or a credential.",
    )
    serve.add_argument(
        "--table",
        dest="tables",
        action="append",
        default=[],
        metavar="NAMESPACE.NAME=TABLE_URI",
        help="a table to serve (repeatable)",
    )
    serve.add_argument(
        "--warehouse",
        metavar="URI",
        help="serve every table at URI/NAMESPACE/NAME (a namespace folder x.db is served as x); "
        "tables made there later are found when an engine lists or loads them",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    serve.add_argument("--port", type=positive_int, default=8181, help="default: %(default)s")
    serve.add_argument(
        "--token",
        default=os.environ.get("FED_SERVE_TOKEN"),
        help="the bearer token every request must carry (default: $FED_SERVE_TOKEN)",
    )
    serve.add_argument(
        "--credential",
        action="append",
        default=[c for c in [os.environ.get("FED_SERVE_CREDENTIAL")] if c],
        metavar="CLIENT_ID:SECRET",
        help="a client credential the OAuth2 token endpoint exchanges for a token (repeatable; "
        "default: $FED_SERVE_CREDENTIAL)",
    )
    add_storage_option(serve)
    serve.set_defaults(run=_serve)

    move = commands.add_parser(
        "migrate",
        help="copy a table onto another storage layout (a new table; the source is only read)",
        description="Re-bootstrap SOURCE (a fedcore or Hudi table, or a Hive-layout Parquet dataset) "
        "into a new table at TARGET with the given storage strategy: files that need no change are "
        "copied (server-side on S3), the rest rewritten; the target gets one instant and a new "
        "metadata table. Run it again to finish an interrupted migration.",
    )
    move.add_argument("source", help="table path or Parquet dataset folder")
    move.add_argument("target", help="the new table's path")
    move.add_argument(
        "--storage-strategy", required=True, help="hive, object_store, partition_map or a class"
    )
    move.add_argument("--storage-path", help="where data files go (object_store)")
    move.add_argument("--name", help="the new table's name (default: the source's)")
    move.add_argument(
        "-p", "--property", action="append", default=[], metavar="KEY=VALUE", help=PROPERTY_HELP
    )
    move.add_argument("--record-key", help="a plain Parquet dataset's record key field(s), comma separated")
    move.add_argument("--partition-by", help="a plain dataset's partition fields (default: its key= folders)")
    move.add_argument("--precombine", help="a plain dataset's ordering field")
    move.add_argument(
        "--storage-option", action="append", default=[], metavar="KEY=VALUE", help="fsspec option for s3 URIs"
    )
    move.add_argument(
        "--source-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="fsspec option for the source (default: --storage-option)",
    )
    move.set_defaults(run=_migrate)


def duration(text: str) -> timedelta:
    match = re.fullmatch(r"\s*(\d+)\s*([smhdw])\s*", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 7d, 12h, 30m, 90s or 2w")
    return timedelta(**{_UNITS[match[2]]: int(match[1])})


@contextmanager
def _listing_bar() -> Iterator[Callable[[int], None]]:
    with tqdm(unit=" files", desc="listing storage", disable=None, file=sys.stderr, leave=False) as bar:
        yield bar.update


def _repair(args: argparse.Namespace) -> int:
    table = open_table(args)
    with _listing_bar() as progress:
        report = table.repair(dry_run=args.dry_run, allow_missing=args.allow_missing, progress=progress)
    print(report.format())
    return 0


def _verify(args: argparse.Namespace) -> int:
    if args.delete_orphans != (args.older_than is not None):
        raise FedError("--delete-orphans and --older-than DURATION go together")
    table = open_table(args)
    with _listing_bar() as progress:
        report = table.verify(deep=args.deep, progress=progress)
    if args.delete_orphans:
        table.delete_orphans(report, args.older_than)
    print(json.dumps(report.to_json(), indent=2) if args.json else report.format())
    return 0 if report.ok else EXIT_FAILED


def _upgrade(args: argparse.Namespace) -> int:
    table = open_table(args)
    changed = table.upgrade(args.table_version)
    if not changed:
        print(f"table {table.name} is up to date")
    for key, (old, new) in changed.items():
        print(f"table {table.name}: {key} {old} -> {new}")
    return 0


def _sync(args: argparse.Namespace) -> int:
    try:  # PyIceberg is an extra
        from fedcore.catalog.glue import GlueTarget
        from fedcore.catalog.meta_sync import SyncTarget, sync
    except ImportError as exc:
        raise MissingDependencyError(
            f"fed sync needs fedcore[iceberg]: pip install 'fedcore[iceberg]' ({exc})"
        ) from exc
    if not args.glue and (args.glue_region or args.glue_endpoint):
        raise FedError("--glue-region and --glue-endpoint go with --glue")
    if args.glue and args.hive:
        raise FedError("--hive is Iceberg's Hive-engine form in a Hive metastore: it goes with --metastore")
    table = open_table(args)
    name = args.table_name or table.name
    target: SyncTarget | GlueTarget
    if args.glue:
        target = GlueTarget(args.database, name, region=args.glue_region, endpoint_url=args.glue_endpoint)
    else:
        target = SyncTarget((args.metastore,), args.database, name, hive=args.hive)
    result = sync(table, target)
    state = "registered" if result.registered else "already registered"
    print(
        f"table {table.name}: instant {result.instant} {state} as {result.database}.{result.table} "
        f"in {result.metastore} ({result.metadata_location})"
    )
    return 0


def _serve(args: argparse.Namespace) -> int:
    try:  # the server stack is an extra
        import uvicorn

        from fedcore.catalog.rest import LOG, Access, ServedTable, Warehouse, catalog_app, parse_served
    except ImportError as exc:
        raise MissingDependencyError(
            f"fed serve needs fedcore[serve]: pip install 'fedcore[serve]' ({exc})"
        ) from exc
    credentials: dict[str, str] = {}
    for given in args.credential:
        client, sep, secret = given.partition(":")
        if not sep or not client or not secret:
            raise FedError("--credential: expected CLIENT_ID:SECRET (the value given is not repeated here)")
        credentials[client] = secret
    access = Access(token=args.token or None, credentials=credentials or None)
    if not access.required and not _loopback(args.host):
        raise FedError(f"--host {args.host}: listening beyond the loopback needs --token or --credential")
    if not args.tables and not args.warehouse:
        raise FedError(
            "fed serve: give --table NAMESPACE.NAME=TABLE_URI (repeatable), --warehouse URI, or both"
        )
    options = storage_options(args)
    served = []
    for spec in args.tables:
        namespace, name, uri = parse_served(spec)
        served.append(ServedTable(namespace, name, load_table(uri, storage_options=options)))
    warehouse = None if args.warehouse is None else Warehouse(args.warehouse, options)
    app = catalog_app(served, access, warehouse)
    _check_bindable(args.host, args.port)
    where = "" if warehouse is None else f" and the warehouse {args.warehouse}"
    print(
        f"fed serve: {len(served)} table(s){where} at http://{args.host}:{args.port} (Ctrl-C stops)",
        flush=True,
    )
    # Refusals (fedcore.catalog.rest's warnings) on stderr, one line each.
    if not LOG.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("fed serve: %(message)s"))
        LOG.addHandler(handler)
        LOG.propagate = False
    uvicorn.run(
        app, host=args.host, port=args.port, log_level="warning", timeout_keep_alive=5, limit_concurrency=64
    )
    return 0


def _check_bindable(host: str, port: int) -> None:
    """Refuse an address this process cannot listen on (taken, or not this machine's) in one
    line, before the server starts."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        raise FedError(f"fed serve: cannot listen on {host}:{port}: {exc.strerror or exc}") from exc


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _migrate(args: argparse.Namespace) -> int:
    storage = {P.STORAGE_STRATEGY_CLASS: args.storage_strategy}
    if args.storage_path:
        storage[P.STORAGE_PATH] = args.storage_path
    target_options = storage_options(args)
    source_options = (
        storage_options_of(parse_pairs(args.source_option, "--source-option"))
        if args.source_option
        else target_options
    )
    with tqdm(total=0, unit=" files", desc="migrating", disable=None, file=sys.stderr, leave=False) as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        report = migrate(
            args.source,
            args.target,
            storage=storage,
            name=args.name,
            properties=parse_pairs(args.property, "--property"),
            record_key_fields=_fields(args.record_key),
            partition_fields=_fields(args.partition_by),
            precombine_field=args.precombine,
            source_options=source_options,
            target_options=target_options,
            progress=progress,
        )
    print(report.format())
    return 0


def _fields(text: str | None) -> list[str] | None:
    return [f.strip() for f in text.split(",") if f.strip()] if text else None
