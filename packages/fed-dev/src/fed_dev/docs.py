"""The docs' code examples, by name: each is a fenced block of a page with a title
(```` ```python title="tables.py" ````), which MkDocs Material shows above the code and GitHub
leaves out, so the page reads the same in both and includes nothing. Tests run a block by its
title, never by its position; ``python -m fed_dev.docs`` lints and format-checks every block
with ruff, as ruff checks the repository's files (Markdown is not ruff's to read).
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

#: The docs folder of this checkout.
DOCS = Path(__file__).resolve().parents[4] / "docs"

_BLOCK = re.compile(r'^```python title="(?P<title>[^"]+)"\n(?P<code>.*?)^```$', flags=re.S | re.M)

#: Rules a docs example may break: it is shown as a reader runs it in a session, so values
#: left on a line show what it returns (B018), each block imports what it uses (E402, I001),
#: long literals stay whole (E501), and a block goes on with the names the page's block
#: before it made (F821: the tests run them in that order).
ALLOWED = ("B018", "E402", "E501", "I001", "F821")


@dataclass(frozen=True)
class Block:
    """A titled code block of a docs page."""

    page: Path
    title: str
    code: str

    @property
    def where(self) -> str:
        """``docs/PAGE.md:TITLE``, the name a traceback or a lint message gives the block."""
        return f"{self.page.relative_to(DOCS.parent)}:{self.title}"


def blocks(docs: Path = DOCS) -> dict[str, Block]:
    """Every titled Python block of the docs' pages, by title; a title is used once."""
    found: dict[str, Block] = {}
    for page in sorted(docs.rglob("*.md")):
        for match in _BLOCK.finditer(page.read_text()):
            block = Block(page, match["title"], match["code"])
            if block.title in found:
                raise ValueError(f"{block.where} and {found[block.title].where} share a title")
            found[block.title] = block
    return found


def block(title: str) -> Block:
    """The docs' block titled ``title``."""
    found = blocks()
    if title not in found:
        raise KeyError(f"no docs page has a block titled {title!r}")
    return found[title]


def lint(docs: Path = DOCS) -> list[str]:
    """ruff's findings on every block (lint, then format): empty when all are clean."""
    problems = []
    for found in blocks(docs).values():
        name = found.where if found.where.endswith(".py") else f"{found.where}.py"  # ruff reads the suffix
        for command in (
            ["check", "--ignore", ",".join(ALLOWED), "--output-format", "concise"],
            ["format", "--diff"],
        ):
            run = subprocess.run(
                [sys.executable, "-m", "ruff", *command, "--stdin-filename", name, "-"],
                input=found.code,
                capture_output=True,
                text=True,
                cwd=DOCS.parent,
            )
            if run.returncode:
                problems.append(f"{name}: ruff {command[0]}:\n{run.stdout}{run.stderr}")
    return problems


if __name__ == "__main__":
    found = lint()
    print("\n".join(found) or f"{len(blocks())} docs code blocks clean")
    sys.exit(1 if found else 0)
