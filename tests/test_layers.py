"""The library's architecture, checked: the layers import only what they may, the
library never imports the application, and nothing cycles.

Read from the source with ``ast`` (:mod:`tests.import_graph`): every ``import``
counts, at module level or inside a function, except those under
``if TYPE_CHECKING:`` (they never run).

* ``purgatory.core`` is the synchronous core: it imports the standard library and
  itself (and ``cython``, the compile-time module of Cython's pure-Python mode,
  which it does without when Cython is not installed), never an event loop
  (asyncio, trio, anyio, uvloop) nor any other part of the package;
* ``purgatory.aio`` is the async shell: the core, itself, and the event loops;
  trio only in its trio backend (asyncio users never import trio);
* every other part of the package reaches another part only through that part's
  public modules (no path component starting with ``_``);
* nothing of the library (the package, its tests, examples and benchmarks) imports
  the application, ``purgatory_broker`` (the distribution ``purgatory-broker``,
  in ``broker/``, whose own tests check its layers);
* the examples and benchmarks import only public modules of the package, and
  from each only names in its ``__all__`` (or its public submodules);
* no import cycle among the package's modules.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import purgatory

from .import_graph import check_public_import, client_imports, cycles, graph
from .repo_kit import ROOT, needs

#: the package as imported: the source tree's, or the installed one (every wheel carries
#: the .py files, so a copy of tests/ beside a wheel checks the same code)
PACKAGE = Path(purgatory.__file__).resolve().parent
LOOPS = {"asyncio", "trio", "anyio", "uvloop", "outcome", "sniffio"}
#: the application: the library never imports it
APPLICATION = "purgatory_broker"

GRAPH = graph(PACKAGE)


def _internal(name: str) -> set[str]:
    return {m for m in GRAPH[name] if m.split(".")[0] == "purgatory"}


def _external(name: str) -> set[str]:
    return {m.split(".")[0] for m in GRAPH[name] if m.split(".")[0] != "purgatory"}


def test_the_graph_sees_the_package() -> None:
    assert {"purgatory.core.timer", "purgatory.aio.reaper", "purgatory"} <= set(GRAPH)
    assert "purgatory.core.timer_list" in GRAPH["purgatory.core.timer"]


@pytest.mark.parametrize("name", sorted(m for m in GRAPH if m.startswith("purgatory.core")))
def test_the_core_imports_no_event_loop_and_nothing_outside_the_core(name: str) -> None:
    outside = {m for m in _internal(name) if not m.startswith("purgatory.core")}
    assert not outside, f"{name} imports {outside}"
    external = _external(name)
    assert not external & LOOPS, f"{name} imports {external & LOOPS}"
    # `cython` only as Cython's pure-Python mode uses it: optional, shimmed without Cython
    allowed = set(sys.stdlib_module_names) | {"cython"}
    assert external <= allowed, external - allowed


@pytest.mark.parametrize("name", sorted(m for m in GRAPH if m.startswith("purgatory.aio")))
def test_the_shell_builds_on_the_core_and_trio_stays_in_its_backend(name: str) -> None:
    allowed = ("purgatory.core", "purgatory.aio")
    outside = {m for m in _internal(name) if not m.startswith(allowed)}
    assert not outside, f"{name} imports {outside}"
    if name != "purgatory.aio.backends.trio_backend":
        assert not _external(name) & {"trio", "outcome", "anyio"}, name


def _part(name: str) -> str:
    """The part of the package a module belongs to: ``purgatory.<part>``."""
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else name


@pytest.mark.parametrize("name", sorted(GRAPH))
def test_parts_reach_each_other_only_through_public_modules(name: str) -> None:
    mine = _part(name)
    for target in _internal(name):
        if _part(target) == mine or name == "purgatory":
            continue
        private = [p for p in target.split(".") if p.startswith("_")]
        assert not private, f"{name} imports the private module {target}"


def _library_files() -> list[Path]:
    folders = [PACKAGE, *(ROOT / name for name in ("tests", "examples", "benchmarks", "docs"))]
    return [path for folder in folders if folder.is_dir() for path in folder.rglob("*.py")]


def test_the_library_never_imports_the_application() -> None:
    """Not the package, not its tests, examples or benchmarks (a word in a string or a
    comment is no import)."""
    found = []
    for path in _library_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] == APPLICATION]
    assert not found, found
    assert not any(APPLICATION in m for targets in GRAPH.values() for m in targets)


CLIENT_IMPORTS = sorted(
    set(
        client_imports(
            [
                ROOT / "examples",
                ROOT / "benchmarks",
                ROOT / "docs" / "examples",
            ],
            "purgatory",
        )
    ),
    key=str,
)


@needs("examples", "benchmarks", "docs/examples")
def test_the_examples_and_benchmarks_are_seen() -> None:
    modules = {module for _, module, _ in CLIENT_IMPORTS}
    assert {"purgatory", "purgatory.core", "purgatory.contrib.prometheus"} <= modules
    assert any(
        path.parent.name == "examples" and path.parent.parent.name == "docs"
        for path, _, _ in CLIENT_IMPORTS
    )  # the docs' examples too


@pytest.mark.parametrize(
    ("path", "module", "name"),
    CLIENT_IMPORTS,
    ids=[f"{p.name}:{m}.{n}" for p, m, n in CLIENT_IMPORTS],
)
def test_examples_and_benchmarks_use_public_apis_only(
    path: Path, module: str, name: str | None
) -> None:
    check_public_import(path.name, module, name, GRAPH)


def test_no_import_cycles() -> None:
    edges = {name: _internal(name) for name in GRAPH}
    assert not cycles(edges)
