"""MkDocs hook: the configuration and CLI references, generated from the code at each build.

``reference/configuration.md`` lists every key ``fedcore.properties`` defines (runtime
settings with their type, default and bounds; table-config and storage keys), its
documentation comment, and the fedcore modules that read it. ``reference/cli.md`` is the
``fed`` command's parser, command by command. Neither is written by hand, so neither can
go stale: a key or a flag added to the code is in the next build. The changelog page is
``CHANGELOG.md`` as it is (an include would show as its marker on the repository host).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

from fedcore import properties as P
from fedcore.cli.main import _parser

_SOURCE = Path(P.__file__).parent
_OPTION_TYPES = {
    P.IntOption: "integer",
    P.FloatOption: "number",
    P.BoolOption: "boolean",
    P.ChoiceOption: "choice",
    P.ListOption: "list (comma-separated)",
    P.TextOption: "text",
}


def _comments() -> dict[str, str]:
    """Each constant's ``#:`` comment in ``fedcore/properties.py``."""
    found: dict[str, str] = {}
    pending: list[str] = []
    for line in Path(P.__file__).read_text().splitlines():
        if line.startswith("#:"):
            pending.append(line[2:].strip())
            continue
        match = re.match(r"([A-Z][A-Z0-9_]*)\s*:", line)
        if match and pending:
            found[match.group(1)] = " ".join(pending)
        pending = []
    return found


def _readers() -> dict[str, list[str]]:
    """Constant name -> the fedcore modules that use it (``P.NAME``)."""
    readers: dict[str, set[str]] = {}
    for path in sorted(_SOURCE.rglob("*.py")):
        if path.name == "properties.py":
            continue
        module = ".".join(("fedcore", *path.relative_to(_SOURCE).with_suffix("").parts))
        module = module.removesuffix(".__init__")
        for name in set(re.findall(r"\bP\.([A-Z][A-Z0-9_]*)\b", path.read_text())):
            readers.setdefault(name, set()).add(module)
    return {name: sorted(modules) for name, modules in readers.items()}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _constants() -> dict[str, str]:
    """Key -> the name of the constant that holds it."""
    return {str(value): name for name, value in vars(P).items() if name.isupper() and isinstance(value, str)}


def configuration() -> str:
    comments, readers, names = _comments(), _readers(), _constants()

    def about(key: str) -> tuple[str, str]:
        name = names.get(key, "")
        used = ", ".join(f"`{module}`" for module in readers.get(name, [])) or "recorded only"
        return _cell(comments.get(name, "")), used

    lines = [
        "# Configuration reference",
        "",
        "Generated from `fedcore.properties` at each build of these pages. Keys are Apache Hudi's",
        "wherever Hudi has one. The same keys are accepted by the Python API (`options=`), the",
        "`fed` command (`-p KEY=VALUE`) and the engine adapters; any other key is refused.",
        "",
        "## Runtime settings",
        "",
        "Given when a table is opened or written; each is parsed before a write begins.",
        "",
        "| key | type | default | notes | read by |",
        "| --- | --- | --- | --- | --- |",
    ]
    for option in P.RUNTIME_OPTIONS:
        kind = _OPTION_TYPES[type(option)]
        default: Any = getattr(option, "default", None)
        notes, used = about(str(option))
        extra = []
        if isinstance(option, P.IntOption | P.FloatOption):
            extra.append(f"at least {option.minimum}")
        if isinstance(option, P.ChoiceOption):
            extra.append("one of " + ", ".join(f"`{c}`" for c in sorted(option.choices)))
        shown = (
            "" if default is None else f"`{str(default).lower() if isinstance(default, bool) else default}`"
        )
        notes = "; ".join(filter(None, [*extra, notes]))
        lines.append(f"| `{option}` | {kind} | {shown} | {notes} | {used} |")
    lines += [
        "",
        "## Storage keys",
        "",
        "Fixed when the table is created and persisted in `hoodie.properties` with a checksum;",
        "a caller that passes other values gets `StorageStrategyMismatchError`.",
        "",
        "| key | notes | read by |",
        "| --- | --- | --- |",
    ]
    for key in P.STORAGE_KEYS:
        notes, used = about(key)
        lines.append(f"| `{key}` | {notes} | {used} |")
    lines += [
        "",
        "## Table config",
        "",
        "Keys a new table may be given (`create_table(..., properties=...)`, `fed create -p`),",
        "stored in `.hoodie/hoodie.properties` in Hudi's format.",
        "",
        "| key | notes | read by |",
        "| --- | --- | --- |",
    ]
    runtime = {str(option) for option in P.RUNTIME_OPTIONS} | set(P.STORAGE_KEYS)
    for key in sorted(P.TABLE_KEYS - runtime):
        notes, used = about(key)
        lines.append(f"| `{key}` | {notes} | {used} |")
    return "\n".join(lines) + "\n"


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = ", ".join(f"`{flag}`" for flag in action.option_strings) or f"`{action.dest}`"
        default = action.default
        hidden = default is None or default is False or default == [] or default == argparse.SUPPRESS
        shown = "" if hidden else f"`{default}`"
        rows.append(f"| {name} | {_cell(action.help or '')} | {shown} |")
    if not rows:
        return []
    return ["| argument | what it does | default |", "| --- | --- | --- |", *rows, ""]


def cli() -> str:
    parser = _parser()
    lines = [
        "# CLI reference",
        "",
        "Generated from the `fed` command's parser at each build of these pages. Every command",
        "prints one line and exits 2 on bad input or a fedcore error.",
        "",
        "```",
        parser.format_usage().strip(),
        "```",
        "",
    ]
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for name, sub in action.choices.items():
            lines += [
                f"## fed {name}",
                "",
                _cell(sub.description or ""),
                "",
                "```",
                sub.format_usage().strip(),
                "```",
                "",
            ]
            lines += _arguments(sub)
            for inner in sub._actions:
                if isinstance(inner, argparse._SubParsersAction):
                    for child, subsub in inner.choices.items():
                        lines += [f"### fed {name} {child}", "", _cell(subsub.description or ""), ""]
                        lines += _arguments(subsub)
    return "\n".join(lines) + "\n"


def undescribed() -> list[str]:
    """Configuration keys without a ``#:`` comment and ``fed`` arguments without help: the
    build fails on any (a reference row that says nothing is a reference that is not one)."""
    comments, names = _comments(), _constants()
    runtime = {str(option) for option in P.RUNTIME_OPTIONS}
    keys = [*runtime, *P.STORAGE_KEYS, *(P.TABLE_KEYS - runtime - set(P.STORAGE_KEYS))]
    missing = [f"key {key}" for key in sorted(set(keys)) if not comments.get(names.get(key, ""), "")]

    def walk(parser: argparse.ArgumentParser, command: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{command} {name}")
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                missing.append(f"argument {command} {'/'.join(action.option_strings) or action.dest}")

    walk(_parser(), "fed")
    return missing


def on_files(files: Files, config: Any) -> Files:
    missing = undescribed()
    if missing:
        raise ValueError("the references would list these without a description: " + "; ".join(missing))
    for uri, content in (("reference/configuration.md", configuration()), ("reference/cli.md", cli())):
        files.append(File.generated(config, uri, content=content))
    changelog = (Path(config["config_file_path"]).parent / "CHANGELOG.md").read_text()
    files.append(File.generated(config, "changelog.md", content=changelog))
    return files
