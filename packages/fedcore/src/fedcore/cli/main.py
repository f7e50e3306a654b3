"""The ``fed`` command line.

Errors fedcore raises on purpose print as one line and exit 2; anything else is a
bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import date, timedelta
from typing import NoReturn

from fedcore import __version__
from fedcore import properties as P
from fedcore.cli.maintenance import maintenance_commands
from fedcore.cli.table import (
    add_storage_option,
    non_negative_int,
    open_table,
    parse_pairs,
    positive_int,
    table_commands,
)
from fedcore.exceptions import FedError
from fedcore.storage.layout import preview_layout
from fedcore.storage.loader import load_storage_strategy, named_strategy_class
from fedcore.table import table_layout

EXIT_ERROR = 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except FedError as exc:
        print(f"fed: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


class _Parser(argparse.ArgumentParser):
    """Bad flags, like every other error, are one line on stderr and exit 2 (no usage dump:
    ``fed COMMAND --help`` shows it)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fed", description="Federated storage layout for Hudi-style lakehouse tables.")
    parser.add_argument("--version", action="version", version=f"fed {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    layout = commands.add_parser(
        "layout",
        help="show where a storage strategy puts a table's files",
        description="Preview a storage strategy: where generated files would land, how many "
        "prefixes they use and how evenly they spread.",
    )
    layout.add_argument("table", nargs="?", help="an existing table: show where its files are")
    layout.add_argument(
        "--preview",
        action="store_true",
        help="place generated file ids instead of reading a table",
    )
    layout.add_argument("--table-path", default="s3://lake-tables/trips", help="logical table path")
    layout.add_argument("--table-name", default="trips", help="table name the preview places files for")
    layout.add_argument(
        "--storage-strategy",
        default=P.STORAGE_STRATEGY_OBJECT_STORE,
        help="hive, object_store, partition_map, an entry-point name or a class path",
    )
    layout.add_argument("--storage-path", help="storage path for object_store (default s3://lake-storage)")
    layout.add_argument(
        "-p",
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"any table property, e.g. {P.STORAGE_PREFIX_COUNT}=256 or {P.STORAGE_HASH_FUNCTION}=xxh64",
    )
    layout.add_argument("--files", type=positive_int, default=10_000, help="file groups to place")
    group = layout.add_mutually_exclusive_group()
    group.add_argument(
        "--partitions",
        type=non_negative_int,
        default=10,
        help="generate this many day=YYYY-MM-DD partitions (0: non-partitioned)",
    )
    group.add_argument(
        "--partition",
        action="append",
        dest="partition_paths",
        metavar="PATH",
        help="a partition path to place files in (repeatable), e.g. country=us",
    )
    layout.add_argument("--seed", type=int, default=0, help="seed for the generated file ids")
    layout.add_argument("--samples", type=non_negative_int, default=5, help="placements to print")
    layout.add_argument("--plot", metavar="PNG", help="also draw files per prefix into this file")
    add_storage_option(layout)
    layout.set_defaults(run=_run_layout)
    table_commands(commands)
    maintenance_commands(commands)
    return parser


def _run_layout(args: argparse.Namespace) -> int:
    if args.preview == bool(args.table):
        raise FedError("give either a TABLE or --preview")
    if args.preview:
        return _run_layout_preview(args)
    report = table_layout(open_table(args))
    print(report.format())
    if args.plot:
        report.plot(args.plot)
        print(f"Plot written to {args.plot}")
    return 0


def _run_layout_preview(args: argparse.Namespace) -> int:
    properties = parse_pairs(args.property, "--property")
    properties[P.TABLE_NAME] = args.table_name
    properties.setdefault(P.STORAGE_STRATEGY_CLASS, args.storage_strategy)
    if args.storage_path:
        properties[P.STORAGE_PATH] = args.storage_path
    elif properties[P.STORAGE_STRATEGY_CLASS] == P.STORAGE_STRATEGY_OBJECT_STORE:
        properties.setdefault(P.STORAGE_PATH, "s3://lake-storage")
    if P.STORAGE_TABLE_FOLDER in named_strategy_class(properties).accepted_keys:
        # A new table's folder holds its id, drawn when it is created: shown as a placeholder.
        properties[P.STORAGE_TABLE_FOLDER] = f"{args.table_name}-<table id>"
    strategy = load_storage_strategy(args.table_path, properties)
    partitions = args.partition_paths or [
        f"day={date(2026, 1, 1) + timedelta(days=i)}" for i in range(args.partitions)
    ]
    report = preview_layout(strategy, partitions, args.files, seed=args.seed, samples=args.samples)
    print(report.format())
    if args.plot:
        report.plot(args.plot)
        print(f"Plot written to {args.plot}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
