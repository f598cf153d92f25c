"""Every local a ``.pxd`` types is a local of the ``.py`` function it types.

A compiled module's C types live in the ``.pxd`` beside it: ``@cython.locals(n=...)``
above a ``cpdef``/``cdef`` declaration names locals of the ``.py`` function of the same
name, by hand. Cython accepts a name the function no longer has without a word, so a
rename or a removal in the ``.py`` leaves the declaration behind, typing nothing. This
test reads both (the ``.pxd`` as text, the ``.py`` with :mod:`ast`) and fails on such a
name, or on a declaration whose function is gone. It reads the repository, so it is
skipped where the tests run without the source tree (against an installed wheel).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..repo_kit import ROOT, needs

#: the folders whose .pxd files type a .py beside them: the library's and the application's
PACKAGES = (ROOT / "purgatory", ROOT / "broker" / "purgatory_broker")

_CLASS = re.compile(r"cdef class (\w+)")
_FUNCTION = re.compile(r"(?:cpdef|cdef)\s[^(]*?(\w+)\s*\(")


@dataclass(frozen=True)
class Declared:
    """One ``@cython.locals(...)`` of a ``.pxd``: the function it types and its names."""

    pxd: Path
    line: int
    cls: str | None  # the ``cdef class`` it is declared in; None: a module function
    function: str
    names: tuple[str, ...]

    def __str__(self) -> str:
        where = f"{self.cls}.{self.function}" if self.cls else self.function
        return f"{self.pxd.relative_to(ROOT)}:{self.line} {where}"


def _locals_names(call: str) -> tuple[str, ...]:
    """The keyword names of ``cython.locals(a=..., b=...)``, read as a Python call."""
    parsed = ast.parse(call.strip()[1:], mode="eval").body  # drop the "@"
    assert isinstance(parsed, ast.Call), call
    return tuple(k.arg for k in parsed.keywords if k.arg is not None)


def declarations(pxd: Path) -> list[Declared]:
    """Each ``@cython.locals`` of ``pxd`` with the declaration below it. O(lines)."""
    found: list[Declared] = []
    cls: str | None = None
    lines = pxd.read_text().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line and not line[0].isspace():
            match = _CLASS.match(line)
            cls = match.group(1) if match else None
        if not line.strip().startswith("@cython.locals("):
            i += 1
            continue
        start = i
        call = line
        while call.count("(") > call.count(")"):  # a declaration over several lines
            i += 1
            call += lines[i]
        i += 1
        while not lines[i].strip():
            i += 1
        function = _FUNCTION.match(lines[i].strip())
        assert function, f"{pxd}:{i + 1}: no cpdef/cdef declaration after @cython.locals"
        owner = cls if line[0].isspace() else None
        found.append(Declared(pxd, start + 1, owner, function.group(1), _locals_names(call)))
    return found


def _function(tree: ast.Module, cls: str | None, name: str) -> ast.FunctionDef | None:
    """The function ``name`` of ``tree`` (a method of class ``cls`` if given), looked for
    in the module's body and the blocks in it (``if``, ``try``), not in other functions."""
    body: list[ast.stmt] = list(tree.body)
    if cls is not None:
        classes = [n for n in _flatten(body) if isinstance(n, ast.ClassDef) and n.name == cls]
        if not classes:
            return None
        body = list(classes[0].body)
    for node in _flatten(body):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _flatten(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of ``body`` and of the ``if``/``try`` blocks in it."""
    out: list[ast.stmt] = []
    for node in body:
        out.append(node)
        if isinstance(node, ast.If | ast.Try):
            blocks = [node.body, node.orelse]
            if isinstance(node, ast.Try):
                blocks += [node.finalbody, *(h.body for h in node.handlers)]
            for block in blocks:
                out.extend(_flatten(block))
    return out


def assigned(function: ast.FunctionDef) -> set[str]:
    """The names that are locals of ``function``: its arguments and every name it binds
    (assignment, loop, ``with``, ``except``, import), not those of nested functions. A
    comprehension's loop variable counts: Cython gives it the type declared for the name
    (``cancel_for_key``'s ``op``)."""
    args = function.args
    names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    todo: list[ast.AST] = list(function.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            if not isinstance(node, ast.Lambda):
                names.add(node.name)
            continue  # a scope of its own
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        todo.extend(ast.iter_child_nodes(node))
    return names


def _all_declarations() -> list[Declared]:
    pxds = sorted(p for package in PACKAGES if package.is_dir() for p in package.rglob("*.pxd"))
    return [d for pxd in pxds for d in declarations(pxd)]


DECLARED = _all_declarations()


@needs("purgatory/core/purgatory.pxd")
def test_the_source_tree_has_declarations() -> None:
    """The parser finds what it checks (or the tree is not here: skipped)."""
    pxds = {d.pxd.name for d in DECLARED}
    assert {"purgatory.pxd", "operation.pxd", "timer.pxd"} <= pxds, pxds


@pytest.mark.parametrize("declared", DECLARED, ids=str)
def test_every_declared_local_is_a_local_of_the_function(declared: Declared) -> None:
    source = declared.pxd.with_suffix(".py")
    assert source.is_file(), f"{declared}: no {source.name} beside the .pxd"
    function = _function(ast.parse(source.read_text()), declared.cls, declared.function)
    assert function is not None, f"{declared}: {source.name} has no such function"
    missing = [n for n in declared.names if n not in assigned(function)]
    assert not missing, f"{declared} declares locals the function does not have: {missing}"
