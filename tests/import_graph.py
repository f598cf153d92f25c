"""The import graph of a package, read from its source with ``ast``: the layer tests'
tool (the application's suite links this file).

Every ``import`` counts, at module level or inside a function, except those under
``if TYPE_CHECKING:`` (they never run). ``from p import m`` imports the module
``p.m`` when there is one, else ``p``.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path


def module_name(root: Path, path: Path) -> str:
    """The dotted name of the module at ``path`` in the package folder ``root``."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(tree: ast.AST, module: str, is_package: bool, modules: set[str]) -> Iterator[str]:
    """Absolute names of the modules ``module`` imports (TYPE_CHECKING skipped)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base)
                target = f"{prefix}.{node.module}" if node.module else prefix
            else:
                target = node.module or ""
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                yield submodule if submodule in modules else target
        stack.extend(ast.iter_child_nodes(node))


def graph(root: Path) -> dict[str, set[str]]:
    """Each module of the package folder ``root`` -> what it imports: the package's own
    modules by their full name, any other module as its importer wrote it."""
    package = root.name
    sources = {}
    for path in root.rglob("*.py"):
        sources[module_name(root, path)] = (path, path.name == "__init__.py")
    result: dict[str, set[str]] = {}
    for name, (path, is_package) in sources.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets = set()
        for imported in imports(tree, name, is_package, set(sources)):
            if imported.split(".")[0] == package:
                if imported in sources:
                    targets.add(imported)
            else:
                targets.add(imported)
        result[name] = targets
    return result


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles (strongly connected components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges[node]):
            if nxt == node or nxt not in edges:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def client_imports(folders: list[Path], package: str) -> Iterator[tuple[Path, str, str | None]]:
    """(file, module, name) for each import of ``package`` in the scripts under
    ``folders``; name is None for ``import module``."""
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.name.split(".")[0] == package:
                            yield path, alias.name, None
                elif (
                    isinstance(node, ast.ImportFrom)
                    and not node.level
                    and (node.module or "").split(".")[0] == package
                ):
                    for alias in node.names:
                        yield path, node.module or "", alias.name


def check_public_import(
    where: str, module: str, name: str | None, modules: set[str] | dict[str, set[str]]
) -> None:
    """``where`` imports ``module`` (and ``name`` from it) through the public API: no
    private module on the way, and ``name`` a public submodule (one of ``modules``)
    or in the module's ``__all__``."""
    private = [part for part in module.split(".") if part.startswith("_")]
    assert not private, f"{where} imports the private module {module}"
    if name is None:
        return
    if f"{module}.{name}" in modules:
        assert not name.startswith("_"), f"{where} imports the private module {module}.{name}"
        return
    exported = getattr(importlib.import_module(module), "__all__", None)
    assert exported is not None and name in exported, f"{where}: {module}.{name} is not public"
