"""The troubleshooting, tuning and limits pages name only what the code has.

A user searches for an error's message and sets the keys a page names, so the pages must
not drift from the code: every error class they name is one of ``fedcore.exceptions``,
every message excerpt on the troubleshooting page is text the code raises, every
``hoodie.*``/``fed.*``/``spark.*`` key is one fed reads, and every ``fed`` command and flag
exists. Excerpts are matched against the string literals of ``packages/*/src`` (an
f-string's literal parts, adjacent literals joined, as Python joins them), so a message
split over source lines is still found, and ``...`` in an excerpt stands for a value.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

import fedcore.exceptions
from fedcore.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
TROUBLESHOOTING = DOCS / "troubleshooting.md"
PAGES = [TROUBLESHOOTING, DOCS / "tuning.md", DOCS / "limits.md"]

CODE_SPAN = re.compile(r"`([^`]+)`")
ERROR_CLASS = re.compile(r"\b[A-Z]\w*(?:Error|Warning)\w*")
KEY = re.compile(r"(?<![\w.])(?:hoodie|fed|spark)\.[A-Za-z0-9_.]*[A-Za-z0-9_]")
MESSAGE = "**Message**:"
#: Keys given as a prefix the code reads any key under (fsspec options, key-generator settings).
KEY_PREFIXES = ("fed.storage.", "hoodie.keygen.")


def _literals(paths: list[Path]) -> list[str]:
    """Every string literal of ``paths``; an f-string's literal parts one by one."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.append(node.value)
    return found


@cache
def source_literals() -> tuple[str, ...]:
    return tuple(_literals(sorted(ROOT.glob("packages/*/src/**/*.py"))))


@cache
def known_keys() -> frozenset[str]:
    """The keys fedcore's properties and fed-spark's options and session settings name."""
    paths = [ROOT / "packages/fedcore/src/fedcore/properties.py"]
    paths += sorted(ROOT.glob("packages/fed-spark/src/fed_spark/*.py"))
    keys = set()
    for text in _literals(paths):
        keys.update(KEY.findall(text))
    return frozenset(keys)


def code_spans(page: Path) -> list[str]:
    """The page's code spans, a span wrapped over lines joined into one line."""
    return [" ".join(span.split()) for span in CODE_SPAN.findall(page.read_text())]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_error_class_named_exists(page: Path) -> None:
    named = {name for span in code_spans(page) for name in ERROR_CLASS.findall(span)}
    unknown = sorted(name for name in named if not isinstance(getattr(fedcore.exceptions, name, None), type))
    assert not unknown, f"{page.name} names error classes fedcore.exceptions does not have: {unknown}"


def test_every_entry_is_headed_by_its_error_class() -> None:
    """An entry's heading begins with the class a user catches (or says it is no error class)."""
    headings = [line for line in TROUBLESHOOTING.read_text().splitlines() if line.startswith("### ")]
    classes = [CODE_SPAN.match(line.removeprefix("### ")) for line in headings]
    unknown = [
        line
        for line, found in zip(headings, classes, strict=True)
        if found is not None and not isinstance(getattr(fedcore.exceptions, found[1], None), type)
    ]
    assert not unknown, f"headings naming no class of fedcore.exceptions: {unknown}"
    assert sum(found is None for found in classes) <= 1, "only the usage errors have no class"


def excerpts() -> list[str]:
    lines = [line for line in TROUBLESHOOTING.read_text().splitlines() if line.startswith(MESSAGE)]
    return [span for line in lines for span in CODE_SPAN.findall(line)]


def test_every_entry_quotes_its_message() -> None:
    entries = TROUBLESHOOTING.read_text().split("\n### ")[1:]
    assert len(entries) > 40
    without = [entry.splitlines()[0] for entry in entries if f"\n{MESSAGE}" not in entry]
    assert not without, f"entries without a {MESSAGE} line: {without}"


@pytest.mark.parametrize("excerpt", excerpts())
def test_every_message_excerpt_is_raised_by_the_code(excerpt: str) -> None:
    """Each run of literal text between placeholders (``...`` or ``{value}``) is in one literal."""
    parts = [part.strip() for part in re.split(r"\.\.\.|\{[^}]*\}", excerpt)]
    parts = [part for part in parts if len(part) >= 4]
    assert parts, f"{excerpt!r} quotes nothing"
    missing = [part for part in parts if not any(part in text for text in source_literals())]
    assert not missing, f"not in the source of packages/*/src: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_key_named_is_read_by_fed(page: Path) -> None:
    named = {key for span in code_spans(page) for key in KEY.findall(span)}
    assert named, page.name
    unknown = sorted(k for k in named if k not in known_keys() and not k.startswith(KEY_PREFIXES))
    assert not unknown, f"{page.name} names keys fed does not read: {unknown}"


def commands() -> set[tuple[str, str]]:
    """(command, flag) for every ``--flag`` of a ``fed COMMAND ...`` the pages show."""
    found = set()
    for page in PAGES:
        for span in code_spans(page):
            words = span.split()
            if len(words) > 1 and words[0] == "fed" and words[1].islower():  # not fed COMMAND
                found.add((words[1], ""))
                found.update((words[1], word.split("=")[0]) for word in words[2:] if word.startswith("-"))
    return found


@pytest.mark.parametrize(("command", "flag"), sorted(commands()))
def test_every_command_and_flag_shown_exists(
    command: str, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0, f"fed {command} is not a command"
    assert not flag or re.search(rf"(?<![\w-]){re.escape(flag)}\b", capsys.readouterr().out), (
        f"fed {command} has no {flag}"
    )
