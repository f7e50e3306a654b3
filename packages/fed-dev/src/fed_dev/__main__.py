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


def main(argv: Sequence[str] | None = None) -> int:
    parser = _Parser(prog="fed-dev", description="fed's development tools")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    demo = commands.add_parser(
        "demo", help="write and query a table on an in-process S3 endpoint (moto on loopback)"
    )
    demo.add_argument("--rows", type=_positive, default=10_000)
    demo.add_argument("--days", type=_positive, default=7)
    demo.add_argument("--plot", metavar="PNG", help="also draw files per prefix into this file")
    args = parser.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
