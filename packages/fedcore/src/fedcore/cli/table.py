"""``fed`` commands that work on a table: create, write, read, files, timeline, clean, compact,
rollback."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from tqdm import tqdm

from fedcore import properties as P
from fedcore.exceptions import FedError, InvalidFilterError, InvalidRecordsError
from fedcore.files.file_slice import QUERY_TYPES
from fedcore.io.errors import storage_errors
from fedcore.io.filesystems import StorageOptions, storage_options_of
from fedcore.io.parquet import read_parquet
from fedcore.read.filters import Filter, parse_where
from fedcore.table import Table, create_table, load_table
from fedcore.write.client import OPERATIONS, WriteClient
from fedcore.write.job import UPSERT

#: The help of every command's ``--storage-option``.
STORAGE_OPTION_HELP = (
    "fsspec option for s3 roots, e.g. endpoint_url=http://127.0.0.1:9000, key=..., secret=..., "
    "profile=...; repeatable"
)
#: The help of ``--property`` where it makes a table.
PROPERTY_HELP = "a table property (the configuration reference lists them), repeatable"


def add_storage_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--storage-option", action="append", default=[], metavar="KEY=VALUE", help=STORAGE_OPTION_HELP
    )


def table_commands(commands: Any) -> None:
    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = commands.add_parser(name, help=help_text, description=help_text)
        parser.add_argument("table", help="table path (local path, file:// or s3:// URI)")
        add_storage_option(parser)
        return parser

    create = add("create", "create a table and persist its storage strategy")
    create.add_argument("--name", required=True, help="the table's name (hoodie.table.name)")
    create.add_argument("--record-key", required=True, help="record key field(s), comma separated")
    create.add_argument("--partition-by", default="", help="partition field(s), comma separated")
    create.add_argument("--precombine", help="field whose greatest value wins among duplicates")
    create.add_argument(
        "--table-type",
        choices=P.TABLE_TYPES,
        help="MERGE_ON_READ: upserts append log files (default COPY_ON_WRITE, or -p hoodie.table.type)",
    )
    create.add_argument(
        "--storage-strategy",
        default=P.DEFAULT_STORAGE_STRATEGY,
        help="where data files go: hive (under the table path), object_store (hashed prefixes under "
        "--storage-path), partition_map, an entry-point name or a class path",
    )
    create.add_argument("--storage-path", help="where data files go (object_store)")
    create.add_argument("--plain-partitions", action="store_true", help="value folders, not field=value")
    create.add_argument(
        "-p", "--property", action="append", default=[], metavar="KEY=VALUE", help=PROPERTY_HELP
    )
    create.add_argument(
        "--start-over",
        action="store_true",
        help="delete the timeline and metadata an earlier table left without its hoodie.properties",
    )
    create.set_defaults(run=_create)

    write = add("write", "write records from a Parquet or CSV file")
    write.add_argument("input", help="INPUT.parquet or INPUT.csv")
    write.add_argument(
        "--operation",
        choices=OPERATIONS,
        default=UPSERT,
        help="Hudi's write operation: upsert by record key, insert, bulk_insert (new file groups only), "
        "delete (the keys given), insert_overwrite (the partitions written), insert_overwrite_table",
    )
    write.add_argument(
        "-p",
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a write option (file sizes, cleaning, sync, ...: the configuration reference), repeatable",
    )
    write.set_defaults(run=_write)

    read = add("read", "read the table (snapshot, or --as-of an instant)")
    read.add_argument("--where", help="e.g. \"country = 'usa' AND day >= '2026-01-01'\"")
    read.add_argument("--columns", help="comma separated")
    read.add_argument("--limit", type=non_negative_int, default=20, help="rows to print (default 20)")
    read.add_argument("--as-of", help="instant time yyyyMMddHHmmssSSS")
    read.add_argument(
        "--query-type",
        choices=QUERY_TYPES,
        default="snapshot",
        help="merge-on-read tables: snapshot (log files merged, the default) or read_optimized "
        "(base files only)",
    )
    read.add_argument(
        "--output", type=_output_file, help="write all rows to FILE.parquet or FILE.csv instead"
    )
    read.set_defaults(run=_read)

    files = add("files", "list the file slices a read would use")
    files.add_argument("--where", help="list the file slices of the partitions and files these filters keep")
    files.add_argument("--as-of", help="instant time yyyyMMddHHmmssSSS: the file slices as of it")
    files.add_argument("--physical", action="store_true", help="show physical paths")
    files.set_defaults(run=_files)

    timeline = add("timeline", "list the table's instants")
    timeline.set_defaults(run=_timeline)

    cleaner = add("clean", "delete file slices older than the retained commits")
    cleaner.add_argument(
        "--retain", type=positive_int, help=f"commits to keep (default: {P.CLEANER_COMMITS_RETAINED})"
    )
    cleaner.set_defaults(run=_clean)

    compactor = add("compact", "merge-on-read: fold each file slice's log files into a new base file")
    compactor.set_defaults(run=_compact)

    undo = add("rollback", "roll back a failed write or the latest completed one")
    undo.add_argument("instant", help="the instant time (yyyyMMddHHmmssSSS) of the write to undo")
    undo.set_defaults(run=_rollback)


def parse_pairs(pairs: Sequence[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise FedError(f"{flag} {pair!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def storage_options(args: argparse.Namespace) -> StorageOptions | None:
    return storage_options_of(parse_pairs(args.storage_option, "--storage-option"))


def open_table(args: argparse.Namespace, properties: dict[str, str] | None = None) -> Table:
    """The table ``args.table``; ``properties`` (a command's ``-p``) reach everything the
    command runs, and storage keys among them must match the table's layout."""
    return load_table(args.table, options=properties, storage_options=storage_options(args))


def positive_int(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


_OUTPUT_FORMATS = (".parquet", ".csv")


def _output_file(text: str) -> str:
    if Path(text).suffix.lower() not in _OUTPUT_FORMATS:
        raise argparse.ArgumentTypeError(f"{text!r}: the output must be a .parquet or .csv file")
    return text


def _fields(text: str, flag: str) -> list[str]:
    fields = [f.strip() for f in text.split(",")]
    if not text.strip() or any(not f for f in fields):
        raise FedError(f"{flag} {text!r}: expected names separated by commas")
    return fields


def _filters(text: str | None) -> list[Filter]:
    if text is None:
        return []
    if not text.strip():
        raise InvalidFilterError("--where is empty: leave it out to read every row")
    return parse_where(text)


def _create(args: argparse.Namespace) -> int:
    properties = parse_pairs(args.property, "--property")
    properties.setdefault(P.STORAGE_STRATEGY_CLASS, args.storage_strategy)
    if args.storage_path:
        properties[P.STORAGE_PATH] = args.storage_path
    table = create_table(
        args.table,
        name=args.name,
        record_key_fields=_fields(args.record_key, "--record-key"),
        partition_fields=_fields(args.partition_by, "--partition-by") if args.partition_by else [],
        precombine_field=args.precombine,
        hive_style_partitioning=not args.plain_partitions,
        table_type=args.table_type,
        properties=properties,
        storage_options=storage_options(args),
        start_over=args.start_over,
    )
    print(f"Created table {table.name} at {table.path} ({table.strategy.display_name()} layout)")
    return 0


def _read_input(path: str) -> pa.Table:
    suffix = Path(path).suffix.lower()
    try:
        if suffix == ".parquet":
            return read_parquet(path)
        if suffix == ".csv":
            return pacsv.read_csv(path)
    except (OSError, pa.ArrowException) as exc:
        raise InvalidRecordsError(f"cannot read {path}: {exc}") from exc
    raise InvalidRecordsError(f"{path}: input must be a .parquet or .csv file")


def _write(args: argparse.Namespace) -> int:
    data = _read_input(args.input)
    table = open_table(args, parse_pairs(args.property, "--property"))
    with tqdm(total=0, unit="file", desc=args.operation, disable=None, file=sys.stderr) as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        result = WriteClient(table, progress=progress).write(data, args.operation)
    for warning in result.warnings:
        print(f"fed: warning: {warning}", file=sys.stderr)
    if not data.num_rows:
        print(f"Committed {result.instant}: an empty {args.operation} (the input has no rows)")
        return 0
    print(
        f"Committed {result.instant}: {args.operation} of {data.num_rows:,} records "
        f"({result.files_written} files written)"
    )
    return 0


def _read(args: argparse.Namespace) -> int:
    filters = _filters(args.where)
    columns = _fields(args.columns, "--columns") if args.columns is not None else None
    table = open_table(args)
    data = table.scan(filters, columns, as_of=args.as_of, query_type=args.query_type).to_arrow()
    if args.output:
        with storage_errors(args.output):
            if Path(args.output).suffix.lower() == ".csv":
                pacsv.write_csv(data, args.output)
            else:
                pq.write_table(data, args.output)
        print(f"Wrote {data.num_rows:,} rows to {args.output}")
        return 0
    print(_format_rows(data, args.limit))
    return 0


def _format_rows(data: pa.Table, limit: int) -> str:
    shown = data.slice(0, limit).to_pylist() if data.num_columns else []
    names = data.column_names
    cells = [[str(row[n]) for n in names] for row in shown]
    widths = [max([len(n), *(len(c[i]) for c in cells)]) for i, n in enumerate(names)]
    lines = ["  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    shown_note = f", first {len(shown)} shown" if len(shown) < data.num_rows else ""
    lines.append(f"({data.num_rows:,} rows{shown_note})")
    return "\n".join(lines)


def _files(args: argparse.Namespace) -> int:
    filters = _filters(args.where)
    table = open_table(args)
    slices = table.file_slices(filters, as_of=args.as_of)
    total = 0
    for s in slices:
        for path, size in s.files():
            print(f"{table.fs.to_physical(path) if args.physical else path}\t{size}")
            total += size
    print(f"({len(slices)} file slices, {total:,} bytes)", file=sys.stderr)
    return 0


def _timeline(args: argparse.Namespace) -> int:
    table = open_table(args)
    for instant in table.timeline():
        line = f"{instant.time}  {instant.action:<14} {instant.state}"
        if instant.is_completed and instant.action in ("commit", "replacecommit", "deltacommit"):
            metadata = table.commit_metadata(instant)
            line += (
                f"  {metadata.operation.lower():<17} files {len(metadata.stats):>4}"
                f"  writes {sum(s.num_writes for s in metadata.stats):>8,}"
            )
        print(line)
    return 0


def _clean(args: argparse.Namespace) -> int:
    done = open_table(args).clean(args.retain)
    if done.instant is None:
        print(f"Nothing to clean (keeping the latest {done.retained} commits)")
        return 0
    print(
        f"Cleaned at {done.instant}: {done.files_deleted} files deleted, "
        f"commits from {done.earliest_retained} kept"
    )
    return 0


def _compact(args: argparse.Namespace) -> int:
    done = open_table(args).compact()
    if done is None:
        print("Nothing to compact: no file slice has log files")
        return 0
    print(
        f"Compacted at {done.instant}: {done.log_files} log files folded into {done.file_groups} "
        f"new base files ({done.rows_written} rows, {done.bytes_written} bytes)"
    )
    return 0


def _rollback(args: argparse.Namespace) -> int:
    done = open_table(args).rollback(args.instant)
    print(f"Rolled back {args.instant} (rollback instant {done})")
    return 0
