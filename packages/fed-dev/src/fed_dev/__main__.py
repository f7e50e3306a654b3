"""``python -m fed_dev demo`` (or ``fed-dev demo``): fedcore's demo on an S3 server in this process."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from tqdm import tqdm

from fed_dev.demo import run_demo
from fedcore.exceptions import FedError


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def parser() -> argparse.ArgumentParser:
    """fed-dev's command line."""
    parser = _Parser(prog="fed-dev", description="fed's development tools")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    demo = commands.add_parser(
        "demo", help="write and query a table on an in-process S3 endpoint (moto on loopback)"
    )
    demo.add_argument("--rows", type=_positive, default=10_000)
    demo.add_argument("--days", type=_positive, default=7)
    demo.add_argument("--plot", metavar="PNG", help="also draw files per prefix into this file")
    docker = commands.add_parser("docker", help="write the docker/ stack's service configuration files")
    docker.add_argument("--out", default="docker", help="the stack's folder (default: %(default)s)")
    stack = commands.add_parser(
        "stack",
        help="the docker/ stack on this machine's own images: `up` starts a Docker engine if none runs, "
        "builds the images, starts the services and waits until they are healthy; `down` removes the "
        "stack's containers, network and volumes (the engine and the images stay)",
    )
    stack.add_argument("action", choices=["up", "down"])
    stack.add_argument("--folder", default="docker", help="the stack's folder (default: %(default)s)")
    job = commands.add_parser(
        "pipeline", help="the end-to-end PySpark job: write a table through fed-spark, publishing each commit"
    )
    job.add_argument("--table", required=True, help="the table path, s3://BUCKET/NAME")
    job.add_argument("--storage", required=True, help="the storage path, s3://BUCKET")
    job.add_argument("--metastore", required=True, help="thrift://HOST:PORT")
    job.add_argument("--s3-endpoint", help="the S3 server's URL (default: AWS)")
    job.add_argument("--database", default="lake", help="the metastore database (default: %(default)s)")
    job.add_argument("--again", action="store_true", help="one more upsert into the table a run wrote before")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "docker":
        from pathlib import Path

        from fed_dev.docker import write

        for path in write(Path(args.out)):
            print(path)
        return 0
    if args.command == "pipeline":
        return _pipeline(args)
    if args.command == "stack":
        return _stack(args)
    with tqdm(total=0, unit="file", desc="writing", disable=None, file=sys.stderr, leave=False) as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        try:
            result = run_demo(args.rows, args.days, plot=args.plot, progress=progress, say=tqdm.write)
        except FedError as exc:
            print(f"fed-dev: error: {exc}", file=sys.stderr)
            return 2
    print(f"\nDemo finished in {result.seconds:.1f} s")
    return 0


def _stack(args: argparse.Namespace) -> int:
    import subprocess
    from pathlib import Path

    from fed_dev import dockerd, images
    from fed_dev.compose import Stack
    from fed_dev.maven import MissingToolError

    folder = Path(args.folder)
    if not (folder / "compose.yaml").is_file():
        print(f"fed-dev: error: no compose.yaml in {folder} (give --folder)", file=sys.stderr)
        return 2
    try:
        if args.action == "down":
            if dockerd.answers():  # else there is nothing to remove (the engine stays as it is)
                Stack(folder, env_file=folder / "local.env").down()
            return 0
        dockerd.engine()
        images.build_all(say=lambda line: print(line, file=sys.stderr, flush=True))
        stack = Stack(folder, env_file=folder / "local.env")
        print("starting the stack and waiting until it is healthy", file=sys.stderr, flush=True)
        stack.up("trino", "hiveserver2")
    except (dockerd.StackError, MissingToolError, subprocess.SubprocessError, OSError) as exc:
        print(f"fed-dev: error: {exc}", file=sys.stderr)
        return 2
    print(f"the stack is up; run compose as: {' '.join(stack.command)} ...")
    return 0


def _pipeline(args: argparse.Namespace) -> int:
    import os

    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    from fed_dev import pipeline
    from fed_spark.__main__ import one_line

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Credentials and region: the AWS_* variables, as every AWS client reads them.
    options = {"s3": {"client_kwargs": {"endpoint_url": args.s3_endpoint}}} if args.s3_endpoint else None
    spark = SparkSession.builder.master("local[2]").appName("fed-pipeline").getOrCreate()
    try:

        def done(operation: str, table: object) -> None:
            print(f"{operation}: committed", flush=True)

        table, warnings = pipeline.run(
            spark,
            args.table,
            args.storage,
            args.metastore,
            storage_options=options,
            database=args.database,
            after_write=done,
            writes=pipeline.again() if args.again else None,
        )
        for warning in warnings:
            print(f"fed-dev: warning: {warning}", file=sys.stderr)
        print("\n".join(pipeline.report(spark, table)))
    except (FedError, PySparkException) as exc:  # a task's fedcore error arrives as Spark's
        print(f"fed-dev: error: {one_line(exc)}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
