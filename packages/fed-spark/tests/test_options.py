"""The keys fed-spark reads are the keys its configuration reference lists: every option name
in its source is declared in ``SPARK_OPTIONS``, and the declarations import no PySpark (the
docs build runs them without Spark)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from fed_spark import options as O

SOURCE = Path(O.__file__).parent
#: What looks like a key: a dotted lower-case name (``hoodie.x.y``, ``spark.sql.z``).
KEY = re.compile(r"[a-z][A-Za-z_]*(\.[A-Za-z_]+)+")
#: Dotted strings in the source that are no option: where a SQL table's options are kept,
#: what tells sessions apart, and fedcore's module names in messages.
NOT_OPTIONS = {"fed.options", "spark.app.id", "fed_spark.register"}


def _strings(path: Path) -> set[str]:
    """The string constants of a module that are not docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    }


def test_every_key_in_the_source_is_declared() -> None:
    declared = {option.name.lower() for option in O.SPARK_OPTIONS}
    found = {
        (path.name, text)
        for path in sorted(SOURCE.glob("*.py"))
        if path.name != "demo.py"  # the demo's own session and a user's options
        for text in _strings(path)
        if KEY.fullmatch(text) and text not in NOT_OPTIONS
    }
    assert found, "no keys found: the pattern no longer matches the source"
    undeclared = sorted((name, key) for name, key in found if key.lower() not in declared)
    assert undeclared == []


def test_every_declaration_is_described_and_scoped() -> None:
    names = [option.name for option in O.SPARK_OPTIONS]
    assert len(names) == len(set(names))
    for option in O.SPARK_OPTIONS:
        assert option.description.strip(), option.name
        assert option.example.strip(), option.name
        assert option.scopes, option.name
        assert set(option.scopes) <= set(O.SCOPES), option.name


def test_the_declarations_import_no_pyspark() -> None:
    script = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('declared', {str(Path(O.__file__))!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "sys.modules['declared'] = module\n"
        "spec.loader.exec_module(module)\n"
        "assert module.SPARK_OPTIONS\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
