"""The package's import graph: no module imports, through any chain, a module that
imports it back, and no subpackage through any chain of subpackages either."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "bpestore"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(path: Path, known: set[str]) -> set[str]:
    """The package's modules that a module imports (inside functions too; not under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            names = [module] + [f"{module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module_name(path):
                found.add(name)
    return found


def graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    known = {module_name(p) for p in paths}
    return {module_name(p): runtime_imports(p, known) for p in paths}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in edges.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def room(module: str) -> str:
    """A module's place in the package: its subpackage, or itself at the top."""
    return ".".join(module.split(".")[:2])


def test_no_module_is_in_an_import_cycle():
    edges = {m: {o for o in targets if not m.startswith(o + ".") or o == m} for m, targets in graph().items()}
    # A package's __init__ re-exports its modules: those edges run down, not round.
    found = cycles(edges)
    assert not found, found


def test_no_subpackage_is_in_an_import_cycle():
    rooms: dict[str, set[str]] = {}
    for module, targets in graph().items():
        rooms.setdefault(room(module), set()).update(room(t) for t in targets if room(t) != room(module))
    rooms.pop("bpestore", None)  # the package's __init__ is the facade over everything
    for targets in rooms.values():
        targets.discard("bpestore")
    found = cycles(rooms)
    assert not found, found


def test_the_cycle_check_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
