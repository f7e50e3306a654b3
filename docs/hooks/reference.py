"""The reference pages, generated from the code: ``python docs/hooks/reference.py --write``
writes them into ``docs/reference/`` (committed, so they read on the repository host as on
the site); ``--check`` (``tox -e docs``) and the MkDocs build fail when the committed pages
differ from what the code generates. As an MkDocs hook it also makes the changelog page of
``CHANGELOG.md``.

``reference/configuration.md`` lists every key ``fedcore.properties`` defines (runtime
settings with their type, default, bounds and an example; table-config and storage keys), its
documentation comment, and the fedcore modules that read it; then every key fed-spark reads
(``fed_spark.options.SPARK_OPTIONS``) and the storage options fedcore reads or sets
(``fedcore.io.filesystems.STORAGE_OPTIONS``). ``reference/cli.md`` is the
``fed`` command's parser, command by command. ``reference/api.md`` is the public Python API
of fedcore and the engine adapters, read from their sources by griffe (nothing imported, so
no engine needs installing): signatures and Google-style docstrings as Markdown.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

from fedcore import properties as P
from fedcore.cli.main import _parser
from fedcore.io import filesystems

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


#: Examples of the runtime settings that have no default to show (the others' examples are
#: made from their type: the other choice, the other boolean, the default number).
_EXAMPLES = {
    P.COLUMN_STATS_COLUMNS: "ts,fare",
    P.HIVE_SYNC_METASTORE_URIS: "thrift://metastore:9083",
    P.HIVE_SYNC_DATABASE: "lake",
    P.HIVE_SYNC_TABLE: "rides",
    P.META_SYNC_TOOLS: P.GLUE_SYNC_TOOL,
    P.AWS_GLUE_ENDPOINT: "http://localhost:5000",
    P.AWS_GLUE_REGION: "eu-west-1",
    P.AWS_ACCESS_KEY: "AKIA...",
    P.AWS_SECRET_KEY: "...",
    P.AWS_SESSION_TOKEN: "...",
}


def _example(option: Any) -> str:
    default = getattr(option, "default", None)
    if isinstance(option, P.BoolOption):
        value = str(not default).lower()
    elif isinstance(option, P.ChoiceOption):
        value = next((c for c in sorted(option.choices) if c != default), default)
    elif default is not None:
        value = str(default)
    else:
        value = _EXAMPLES[option]
    return f"`{option}={value}`"


@functools.cache
def _spark() -> Any:
    """``fed_spark.options``, run from its file: importing the package would import PySpark,
    which the docs env does not install (the module itself imports fedcore alone)."""
    path = _ROOT / "packages" / "fed-spark" / "src" / "fed_spark" / "options.py"
    spec = importlib.util.spec_from_file_location("_fed_spark_options", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # where its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


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
        "Generated from `fedcore.properties` (`python docs/hooks/reference.py --write`). Keys",
        "are Apache Hudi's wherever Hudi has one. The same keys are accepted by the Python API",
        "(`options=`), the `fed` command (`-p KEY=VALUE`) and the engine adapters; any other key",
        "is refused.",
        "",
        "## Runtime settings",
        "",
        "Given when a table is opened or written; each is parsed before a write begins.",
        "",
        "| key | type | default | notes | example | read by |",
        "| --- | --- | --- | --- | --- | --- |",
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
        lines.append(f"| `{option}` | {kind} | {shown} | {notes} | {_example(option)} | {used} |")
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
    return "\n".join([*lines, *_spark_section(), *_storage_section()]) + "\n"


def _spark_section() -> list[str]:
    spark = _spark()
    lines = [
        "",
        "## fed-spark options",
        "",
        "Generated from `fed_spark.options.SPARK_OPTIONS`: every key fed-spark reads. Where a key",
        "applies: **read** `spark.read.format(\"fed\").option(...)`, a SQL table's or view's",
        "`OPTIONS` (`fed_spark.read` takes `as_of`, `query_type` as arguments); **write**",
        '`df.write.format("fed").option(...)`, `fed_spark.write(df, path, options)`, SQL `INSERT`;',
        '**readStream** / **writeStream** `format("fed")`; **create_table**',
        "`fed_spark.create_table`'s `OPTIONS` and `TBLPROPERTIES`; **register**",
        "`fed_spark.register`'s arguments; **Spark conf** the session's configuration. Option names",
        "are case-insensitive, as Spark passes them; a read or a streaming read refuses any other",
        "key, and a write any key but `hoodie.*` ones fedcore reads. See [Spark](../spark.md).",
        "",
        "| key | applies to | type | default | notes | example |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for option in spark.SPARK_OPTIONS:
        lines.append(_row(option, ", ".join(option.scopes), option.kind))
    return lines


def _row(option: Any, *about: str) -> str:
    """A fed-spark or storage option's row: its name, ``about`` it, default, notes, example."""
    default = "" if option.default is None else f"`{_cell(option.default)}`"
    cells = [f"`{option.name}`", *about, default, _cell(option.description), f"`{_cell(option.example)}`"]
    return "| " + " | ".join(cells) + " |"


def _storage_section() -> list[str]:
    lines = [
        "",
        "## Storage options",
        "",
        "`storage_options={...}` of `fedcore.load_table` / `create_table`, `fed_spark.register`:",
        'a dict per protocol (`"s3"`: every S3 root) or URI prefix',
        '(`"s3://lake-eu"`: that bucket only); for a root, the protocol\'s options apply first,',
        "then each matching prefix's, shortest first (dict values such as `client_kwargs` merge one",
        "level deep). The `fed` command's `--storage-option KEY=VALUE` and Spark's",
        "`fed.storage.KEY` give S3's flat: "
        + ", ".join(f"`{key}`" for key in filesystems.CLIENT_KEYS)
        + " go to `client_kwargs`, any other key",
        "to s3fs as it is. Keys other than these go to the protocol's fsspec filesystem as they are",
        "(S3: s3fs's `key`, `secret`, `token`, `anon`, `s3_additional_kwargs`, ...); a key it",
        "does not take is not refused (s3fs accepts any). Never written to the table. See",
        "[Storage](../storage.md).",
        "",
        "| key | protocol | default | notes | example |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += [_row(option, option.protocol) for option in filesystems.STORAGE_OPTIONS]
    return lines


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
    # argparse wraps usage lines to the terminal's width: the committed page must not depend on
    # the terminal it was generated in
    os.environ["COLUMNS"] = "100"
    parser = _parser()
    lines = [
        "# CLI reference",
        "",
        "Generated from the `fed` command's parser (`python docs/hooks/reference.py --write`).",
        "Every command prints one line and exits 2 on bad input or a fedcore error.",
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
    """Configuration keys without a ``#:`` comment, fed-spark and storage options without a
    description or an example, and ``fed`` arguments without help: the build fails on any (a
    reference row that says nothing is a reference that is not one)."""
    comments, names = _comments(), _constants()
    runtime = {str(option) for option in P.RUNTIME_OPTIONS}
    keys = [*runtime, *P.STORAGE_KEYS, *(P.TABLE_KEYS - runtime - set(P.STORAGE_KEYS))]
    missing = [f"key {key}" for key in sorted(set(keys)) if not comments.get(names.get(key, ""), "")]
    missing += [
        f"fed-spark option {option.name}"
        for option in _spark().SPARK_OPTIONS
        if not option.description.strip() or not option.example.strip() or not option.scopes
    ]
    missing += [
        f"storage option {option.name}"
        for option in filesystems.STORAGE_OPTIONS
        if not option.description.strip() or not option.example.strip()
    ]

    def walk(parser: argparse.ArgumentParser, command: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{command} {name}")
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                missing.append(f"argument {command} {'/'.join(action.option_strings) or action.dest}")

    walk(_parser(), "fed")
    return missing


#: The sources the API reference is read from (griffe reads them; nothing is imported).
_ROOT = Path(__file__).resolve().parents[2]
_SOURCES = [
    _ROOT / "packages" / name / "src"
    for name in ("fedcore", "fed-spark", "fed-trino-client", "fed-hive-client")
]

#: The API reference's sections: (heading, what they hold, objects). An object is documented
#: whole (a module: its docstring and each name it exports), or, with a member list, those
#: members of a class only.
_API: list[tuple[str, str, list[tuple[str, list[str] | None]]]] = [
    (
        "Tables",
        "",
        [
            ("fedcore.table.load_table", None),
            ("fedcore.table.create_table", None),
            (
                "fedcore.table.Table",
                [
                    *("handle", "path", "name", "config", "strategy", "options", "fs", "schema", "timeline"),
                    *("commit_metadata", "with_options", "scan", "changes", "read", "read_batches"),
                    *(
                        "file_slices",
                        "write",
                        "upsert",
                        "insert",
                        "bulk_insert",
                        "delete",
                        "insert_overwrite",
                    ),
                    *("insert_overwrite_table", "compact", "clean", "archive", "repair", "verify"),
                ],
            ),
        ],
    ),
    ("Scans", "", [("fedcore.read.scan.DataScan", None)]),
    ("Writes", "", [("fedcore.write.client.WriteClient", None), ("fedcore.write.client.WriteResult", None)]),
    (
        "Storage strategies",
        "A custom strategy subclasses `StorageStrategy` ([Storage](../storage.md)).",
        [("fedcore.storage.base.StorageStrategy", None), ("fedcore.storage.base.StorageLocation", None)],
    ),
    ("The Iceberg view", "", [("fedcore.iceberg", None)]),
    ("The engine API", "", [("fedcore.engine", None)]),
    (
        "Engine adapters",
        "[Spark](../spark.md), [Trino and Hive](../engines.md).",
        [("fed_spark", None), ("fed_trino", None), ("fed_hive", None)],
    ),
    ("Errors", "", [("fedcore.exceptions", None)]),
]

_LISTED = {  # docstring sections rendered as a list of names, each with its type and text
    "parameters": "Parameters",
    "other_parameters": "Other parameters",
    "attributes": "Attributes",
    "raises": "Raises",
    "warns": "Warns",
    "returns": "Returns",
    "yields": "Yields",
    "receives": "Receives",
}


def _signature(function: Any, name: str) -> str:
    """``name(a: int, *, b: str = "x") -> T``, one parameter a line when it is long."""
    parts: list[str] = []
    star = False
    params = [p for p in function.parameters if p.name not in ("self", "cls")]
    for index, param in enumerate(params):
        kind = param.kind.value
        if kind == "keyword-only" and not star:
            parts.append("*")
            star = True
        text = {"variadic positional": "*", "variadic keyword": "**"}.get(kind, "") + param.name
        star = star or kind == "variadic positional"
        if param.annotation is not None:
            text += f": {param.annotation}"
        if param.default is not None and not kind.startswith("variadic"):
            text += f" = {param.default}" if param.annotation is not None else f"={param.default}"
        parts.append(text)
        following = params[index + 1].kind.value if index + 1 < len(params) else None
        if kind == "positional-only" and following != "positional-only":
            parts.append("/")
    returns = getattr(function, "returns", None)
    tail = f" -> {returns}" if returns is not None and function.is_function else ""
    flat = f"{name}({', '.join(parts)}){tail}"
    if len(flat) <= 90:
        return flat
    return f"{name}(\n" + "".join(f"    {part},\n" for part in parts) + f"){tail}"


def _docstring(obj: Any) -> list[str]:
    """The object's docstring as Markdown: text as written, Google-style sections as lists."""
    if obj.docstring is None:
        return []
    lines: list[str] = []
    for section in obj.docstring.parsed:
        kind = section.kind.value
        if kind == "text":
            lines += [section.value, ""]
        elif kind in _LISTED:
            lines += [f"**{section.title or _LISTED[kind]}**", ""]
            for item in section.value:
                name = getattr(item, "name", "") or ""
                annotation = getattr(item, "annotation", None)
                head = " ".join(
                    filter(None, [f"`{name}`" if name else "", f"(`{annotation}`)" if annotation else ""])
                )
                text = " ".join(item.description.split("\n"))
                lines.append(f"- {head}: {text}" if head else f"- {text}")
            lines.append("")
        elif kind == "examples":
            lines += [f"**{section.title or 'Examples'}**", ""]
            for part, text in section.value:
                lines += [text, ""] if part.value == "text" else ["```pycon", text, "```", ""]
        elif kind == "admonition":
            title = section.title or section.value.kind.capitalize()
            lines += [f"**{title}.** {section.value.description}", ""]
        else:
            lines += [f"**{section.title or kind.capitalize()}**", "", str(section.value), ""]
    return lines


def _code(text: str) -> list[str]:
    return ["```python", text, "```", ""]


def _member(obj: Any, owner: str, level: int) -> list[str]:
    """One member of a class: a method's signature, or an attribute's or property's type."""
    title = f"{'#' * level} `{owner}.{obj.name}`"
    if obj.is_function and "property" not in obj.labels:
        return [title, "", *_code(_signature(obj, obj.name)), *_docstring(obj)]
    kind = obj.returns if obj.is_function else obj.annotation
    shown = obj.name + (f": {kind}" if kind is not None else "")
    prop = obj.is_function or "property" in obj.labels
    if obj.is_attribute and obj.value is not None and not prop and "instance-attribute" not in obj.labels:
        shown += f" = {obj.value}"
    label = "property" if prop else "attribute"
    return [title, "", *_code(f"{shown}  # {label}"), *_docstring(obj)]


def _public(obj: Any) -> list[Any]:
    """A class's own public members, in source order (inherited ones are their class's)."""
    found = []
    for name, member in obj.members.items():
        if name.startswith("_") or member.is_alias:
            continue
        if member.is_attribute and member.docstring is None and member.annotation is None:
            continue
        found.append(member)
    return sorted(found, key=lambda member: member.lineno or 0)


def _class(obj: Any, path: str, members: list[str] | None, level: int) -> list[str]:
    """A class: its constructor's signature, its bases, its docstring, then its members."""
    if any(param.name not in ("self", "cls") for param in obj.parameters):
        shown = _signature(obj, obj.name)
    else:
        shown = f"class {obj.name}"
    lines = [f"{'#' * level} `{path}`", "", *_code(shown)]
    if obj.bases:
        lines += ["Bases: " + ", ".join(f"`{base}`" for base in obj.bases), ""]
    lines += _docstring(obj)
    chosen = [obj.members[name] for name in members] if members is not None else _public(obj)
    for member in chosen:
        lines += _member(member.final_target if member.is_alias else member, obj.name, level + 1)
    return lines


def _object(obj: Any, path: str, members: list[str] | None, level: int) -> list[str]:
    obj = obj.final_target if obj.is_alias else obj
    if obj.is_class:
        return _class(obj, path, members, level)
    if obj.is_function:
        return [f"{'#' * level} `{path}`", "", *_code(_signature(obj, obj.name)), *_docstring(obj)]
    if obj.is_attribute:
        shown = obj.name + (f": {obj.annotation}" if obj.annotation is not None else "")
        shown += f" = {obj.value}" if obj.value is not None else ""
        return [f"{'#' * level} `{path}`", "", *_code(shown), *_docstring(obj)]
    lines = [f"{'#' * level} `{path}`", "", *_docstring(obj)]  # a module: what it exports
    if obj.exports is not None:
        names = [str(name) for name in obj.exports]
    else:  # no __all__: what the module defines, in source order
        own = [member for member in obj.members.values() if not member.is_alias]
        names = [member.name for member in sorted(own, key=lambda member: member.lineno or 0)]
    for name in names:
        member = obj.members[name]
        if not name.startswith("_") and not member.is_module:
            lines += _object(member, f"{path}.{name}", None, level + 1)
    return lines


def api() -> str:
    import griffe  # the docs env's: the other references need only fedcore

    loader = griffe.GriffeLoader(search_paths=[str(s) for s in _SOURCES], docstring_parser="google")
    for package in ("fedcore", "fed_spark", "fed_trino", "fed_hive"):
        loader.load(package)
    loader.resolve_aliases(implicit=False, external=False)
    found = loader.modules_collection
    lines = [
        "# Python API",
        "",
        "What a user of `fedcore` holds: tables, their scans and writes, the write client, the",
        "storage strategies, the Iceberg view and the errors; what engine adapters build on (the",
        "engine API), and the adapters' own. Generated from the docstrings",
        "(`python docs/hooks/reference.py --write`).",
        "",
    ]
    for heading, about, objects in _API:
        lines += [f"## {heading}", ""] + ([about, ""] if about else [])
        for path, members in objects:
            lines += _object(found[path], path, members, 3)
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).rstrip("\n") + "\n"


#: Where the generated references are committed, by their page.
_PAGES = {"reference/configuration.md": configuration, "reference/cli.md": cli, "reference/api.md": api}
_DOCS = _ROOT / "docs"
REGENERATE = "python docs/hooks/reference.py --write"


def stale() -> list[str]:
    """The committed reference pages that differ from what the code generates."""
    return [
        page
        for page, make in _PAGES.items()
        if not (_DOCS / page).is_file() or (_DOCS / page).read_text() != make()
    ]


def check() -> None:
    """Fails on a key or argument without a description, or on a stale committed page."""
    missing = undescribed()
    if missing:
        raise ValueError("the references would list these without a description: " + "; ".join(missing))
    behind = stale()
    if behind:
        raise ValueError(f"{', '.join(behind)} differ from the code: run `{REGENERATE}` and commit them")


def on_files(files: Files, config: Any) -> Files:
    check()
    changelog = (_ROOT / "CHANGELOG.md").read_text()  # shown as it is, on the repository host too
    files.append(File.generated(config, "changelog.md", content=changelog))
    return files


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        missing = undescribed()
        if missing:
            sys.exit("the references would list these without a description: " + "; ".join(missing))
        for page, make in _PAGES.items():
            (_DOCS / page).write_text(make())
    elif sys.argv[1:] == ["--check"]:
        try:
            check()
        except ValueError as error:
            sys.exit(str(error))
    else:
        sys.exit(f"usage: {REGENERATE} | --check")
