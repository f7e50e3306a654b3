"""``python -m fed_spark demo``: the Spark pipeline demo (see ``fed_spark.demo``)."""

from __future__ import annotations

import argparse
import sys

from pyspark.errors import PySparkException

from fedcore.exceptions import FedError


def one_line(error: BaseException) -> str:
    """An error as one line: for a Spark error raised by fed's Python code, fedcore's own
    message (Spark puts the Python traceback before it), else the first line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    ours = [line for line in lines if line.startswith("fedcore.exceptions.")]
    return ours[-1].split(": ", 1)[-1] if ours else (lines[0] if lines else type(error).__name__)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fed_spark", description="fed-spark commands")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="a PySpark pipeline on a local Spark and an in-process S3")
    demo.add_argument("--rows", type=int, default=20_000)
    demo.add_argument("--days", type=int, default=7)
    demo.add_argument("--plot", metavar="PNG", help="also draw the layout")
    args = parser.parse_args(argv)
    try:
        from fed_spark.demo import run_demo

        result = run_demo(args.rows, args.days, args.plot)
    except (FedError, PySparkException) as exc:
        print(f"fed-spark: error: {one_line(exc)}", file=sys.stderr)
        return 2
    print(f"\nDone in {result.seconds:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
