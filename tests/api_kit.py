"""What a package's public API is, checked: ``__all__`` names exactly the public
classes and functions, an ``__init__`` only re-exports, and importing it loads only
what it should (the public-API tests' tool; the application's suite links this file)."""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType


def public_names(module: ModuleType, prefix: str) -> set[str]:
    """Names bound in ``module`` that are classes or functions of the package
    ``prefix`` (``purgatory`` also matches ``purgatory_broker``)."""
    names = set()
    for name, value in vars(module).items():
        if name.startswith("_") or inspect.ismodule(value):
            continue
        origin = getattr(value, "__module__", "") or ""
        if (inspect.isclass(value) or inspect.isfunction(value)) and origin.startswith(prefix):
            names.add(name)
    return names


def check_all_is_the_public_api(name: str, prefix: str) -> None:
    module = importlib.import_module(name)
    exported = set(module.__all__)
    assert len(exported) == len(module.__all__), "duplicates in __all__"
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it does not define: {missing}"
    assert public_names(module, prefix) <= exported, public_names(module, prefix) - exported


def check_init_only_re_exports(name: str) -> None:
    path = Path(importlib.import_module(name).__file__ or "")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if isinstance(node, ast.ImportFrom | ast.Import):
            continue
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        if isinstance(node, ast.Assign | ast.AnnAssign) and [
            getattr(t, "id", "") for t in targets
        ] == ["__all__"]:
            continue
        raise AssertionError(f"{path} does more than re-export: line {node.lineno}")


def loaded_on_import(modules: Iterable[str], heavy: Iterable[str]) -> list[str]:
    """The modules of the packages ``heavy`` that a fresh interpreter has loaded once it
    imported ``modules`` (empty when the imports are as light as they promise)."""
    code = (
        f"import sys, {', '.join(modules)};"
        f"heavy = {tuple(heavy)!r};"
        "print(sorted(m for m in sys.modules"
        " if any(m == h or m.startswith(h + '.') for h in heavy)))"
    )
    out = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True
    )
    return list(ast.literal_eval(out.stdout.strip()))
