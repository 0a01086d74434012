"""The package's layout: sizes within the limits, SQL text only in the store, the
encoder independent of ingestion."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "bpestore"
MAX_CLASS, MAX_MODULE, MAX_FUNCTION = 400, 600, 80
# SQL text: a statement's keywords, in capitals as bpestore writes them (not prose such as "Create the database").
SQL = re.compile(r"\b(SELECT\b.+\bFROM|INSERT INTO|UPDATE \w+ SET|DELETE FROM|CREATE (TEMPORARY |UNIQUE )?(TABLE|INDEX)"
                 r"|DROP TABLE|ALTER TABLE|PRAGMA)\b", re.DOTALL)


def modules() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(encoding="utf-8"))) for path in sorted(PACKAGE.rglob("*.py"))]


def sizes() -> list[tuple[str, str, int]]:
    """(kind, name, lines) of every module, class and function of the package."""
    found = []
    for path, tree in modules():
        name = str(path.relative_to(PACKAGE.parent))
        found.append(("module", name, len(path.read_text(encoding="utf-8").splitlines())))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                found.append(("class", f"{name}:{node.name}", node.end_lineno - node.lineno + 1))  # type: ignore[operator]
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append(("function", f"{name}:{node.name}", node.end_lineno - node.lineno + 1))  # type: ignore[operator]
    return found


def too_long(encoder: bool) -> list[str]:
    """What is over its limit, in the encoder's modules or in the others."""
    limits = {"module": MAX_MODULE, "class": MAX_CLASS, "function": MAX_FUNCTION}
    return [f"{kind} {name}: {lines} lines (at most {limits[kind]})" for kind, name, lines in sizes()
            if lines > limits[kind] and name.startswith("bpestore/encoder") == encoder]


def test_no_module_class_or_function_is_too_long():
    found = too_long(encoder=False)
    assert not found, "\n".join(found)


def test_no_module_class_or_function_of_the_encoder_is_too_long():
    found = too_long(encoder=True)
    assert not found, "\n".join(found)


def test_the_size_check_measures_what_it_claims():
    measured = {name: lines for kind, name, lines in sizes() if kind == "class"}
    store = PACKAGE / "store" / "store.py"
    tree = ast.parse(store.read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Store")
    assert measured["bpestore/store/store.py:Store"] == node.end_lineno - node.lineno + 1 > 100


def test_only_the_store_writes_sql():
    inside, outside = [], []
    for path, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value):
                found = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.value[:60]!r}"
                (inside if path.is_relative_to(PACKAGE / "store") else outside).append(found)
    assert not outside, "\n".join(outside)
    assert len(inside) > 10  # the check finds the store's own statements


def imported_modules(tree: ast.Module, package: str) -> set[str]:
    """The modules a module imports, absolute (relative imports resolved against ``package``)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            prefix = ".".join(base[:len(base) - node.level + 1]) if node.level else ""
            module = ".".join(part for part in (prefix, node.module or "") if part)
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def test_the_encoder_imports_nothing_from_ingest():
    encoder = [path for path in PACKAGE.glob("encoder*") if path.suffix == ".py"]
    encoder += list((PACKAGE / "encoder").rglob("*.py")) if (PACKAGE / "encoder").is_dir() else []
    assert encoder
    uses = {str(path.relative_to(PACKAGE.parent)): sorted(m for m in imported_modules(
        ast.parse(path.read_text(encoding="utf-8")), "bpestore") if m.startswith("bpestore.ingest"))
        for path in encoder}
    assert not any(uses.values()), uses
