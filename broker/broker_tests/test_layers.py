"""The application's architecture, checked: it builds on the library's public API
only, its parts import only what they may, and nothing cycles.

Read from the source with ``ast`` (:mod:`broker_tests.import_graph`, the library
suite's tool): every ``import`` counts, at module level or inside a function,
except those under ``if TYPE_CHECKING:`` (they never run).

* the application reaches the library (``purgatory``) only through its public
  modules, and from each only names in its ``__all__`` (or public submodules):
  the package, its examples and its benchmarks;
* the broker (``purgatory_broker.broker``) reaches the library only through
  ``purgatory`` and ``purgatory.core`` themselves;
* every part of the package reaches another part only through that part's public
  modules (no path component starting with ``_``);
* the broker builds on the library and the trace schema only
  (``purgatory_broker.tracing``), never on the simulation, the wire broker or
  the pipeline;
* the trace schema imports nothing of the package, so a reader of traces needs no
  broker; nor do the command-line kit (``purgatory_broker.cli``) and the owners of
  process-wide state (``purgatory_broker.process``);
* the simulation (``purgatory_broker.sim``) is an application over public APIs:
  the broker (the package, not its modules), the trace schema and the kit;
* the pipeline (``purgatory_broker.analytics``) takes from the broker only its
  error table (``purgatory_broker.broker.errors``), never its internals;
* no import cycle among the package's modules;
* ``import purgatory_broker.analytics`` loads no heavy library.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from .api_kit import loaded_on_import
from .import_graph import check_public_import, client_imports, cycles, graph

TOP = Path(__file__).resolve().parents[1]
ROOT = TOP / "purgatory_broker"
PACKAGE = "purgatory_broker"
LIBRARY = "purgatory"
#: what a benchmark measures from the inside, by name: the wire broker's codec
MEASURED_INTERNALS = {("codec_bench.py", "purgatory_broker.wire._codec")}

GRAPH = graph(ROOT)


def _top(name: str) -> str:
    return name.split(".", maxsplit=1)[0]


def _internal(name: str) -> set[str]:
    return {m for m in GRAPH[name] if _top(m) == PACKAGE}


def _library(name: str) -> set[str]:
    return {m for m in GRAPH[name] if _top(m) == LIBRARY}


def _part(name: str) -> str:
    """The part of the package a module belongs to: ``purgatory_broker.<part>``."""
    return ".".join(name.split(".")[:2])


def _outside(name: str) -> set[str]:
    """The modules of the package, outside ``name``'s part, that ``name`` imports."""
    return {m for m in _internal(name) if _part(m) != _part(name)}


def test_the_graph_sees_the_package() -> None:
    assert {"purgatory_broker.broker.broker", "purgatory_broker.sim", "purgatory_broker.wire"} <= (
        set(GRAPH)
    )
    assert "purgatory" in GRAPH["purgatory_broker.broker.broker"]


def _library_imports() -> list[tuple[str, str, str | None]]:
    """(where, module, name) for each import of the library by the application."""
    found: list[tuple[str, str, str | None]] = []
    for name in sorted(GRAPH):
        found += [(name, module, None) for module in _library(name)]
    folders = [ROOT, TOP / "examples", TOP / "benchmarks"]
    found += [(p.name, m, n) for p, m, n in client_imports(folders, LIBRARY)]
    return found


CLIENT_IMPORTS = sorted(
    set(client_imports([TOP / "examples", TOP / "benchmarks"], PACKAGE)), key=str
)
#: what must go through a public API: the application's imports of the library, and the
#: examples' and benchmarks' of the package
PUBLIC_IMPORTS = sorted(
    set(_library_imports() + [(p.name, m, n) for p, m, n in CLIENT_IMPORTS]), key=str
)
#: the library's modules (its public submodules are among them), as installed
LIBRARY_MODULES = set(graph(Path(importlib.import_module(LIBRARY).__file__ or "").parent))


@pytest.mark.parametrize(
    ("where", "module", "name"),
    PUBLIC_IMPORTS,
    ids=[f"{w}:{m}.{n}" for w, m, n in PUBLIC_IMPORTS],
)
def test_imports_use_public_apis_only(where: str, module: str, name: str | None) -> None:
    """The application reaches the library, and the examples and benchmarks the package,
    through public modules and names only (but for what a benchmark measures)."""
    if (where, f"{module}.{name}") in MEASURED_INTERNALS:
        return
    check_public_import(where, module, name, LIBRARY_MODULES if _top(module) == LIBRARY else GRAPH)


@pytest.mark.parametrize("name", sorted(m for m in GRAPH if _part(m) == "purgatory_broker.broker"))
def test_the_broker_reaches_the_library_through_its_front_modules(name: str) -> None:
    assert _library(name) <= {"purgatory", "purgatory.core"}, f"{name}: use purgatory"


@pytest.mark.parametrize("name", sorted(GRAPH))
def test_parts_reach_each_other_only_through_public_modules(name: str) -> None:
    for target in _outside(name):
        if name == PACKAGE:
            continue
        private = [p for p in target.split(".")[1:] if p.startswith("_")]
        assert not private, f"{name} imports the private module {target}"


@pytest.mark.parametrize("name", sorted(m for m in GRAPH if _part(m) == "purgatory_broker.broker"))
def test_the_broker_builds_on_the_library_and_the_trace_schema(name: str) -> None:
    allowed = {"purgatory_broker.tracing"}
    assert _outside(name) <= allowed, f"{name} imports {_outside(name) - allowed}"


def test_the_trace_schema_and_the_command_line_kits_import_nothing_of_the_package() -> None:
    assert _internal("purgatory_broker.tracing") == set()
    assert _internal("purgatory_broker.cli") == set()
    assert _internal("purgatory_broker.process") == set()


@pytest.mark.parametrize("name", sorted(m for m in GRAPH if _part(m) == "purgatory_broker.sim"))
def test_the_simulation_is_an_application_over_public_apis(name: str) -> None:
    allowed = {"purgatory_broker.broker", "purgatory_broker.tracing", "purgatory_broker.cli"}
    assert _outside(name) <= allowed, f"{name} imports {_outside(name) - allowed}"


@pytest.mark.parametrize(
    "name", sorted(m for m in GRAPH if _part(m) == "purgatory_broker.analytics")
)
def test_the_pipeline_takes_only_the_error_table_from_the_broker(name: str) -> None:
    broker = {m for m in _outside(name) if _part(m) == "purgatory_broker.broker"}
    assert broker <= {"purgatory_broker.broker.errors"}, f"{name} imports {broker}"


def test_the_examples_and_benchmarks_are_seen() -> None:
    modules = {module for _, module, _ in CLIENT_IMPORTS}
    assert {"purgatory_broker.broker", "purgatory_broker.sim"} <= modules


def test_no_import_cycles() -> None:
    edges = {name: _internal(name) for name in GRAPH}
    assert not cycles(edges)


def test_importing_analytics_loads_no_heavy_library() -> None:
    """pandas, pyarrow, numpy and pyspark (and the broker) load when a job needs
    them, not when the package is imported."""
    heavy = ["pandas", "pyarrow", "numpy", "pyspark", "py4j", "purgatory_broker.broker"]
    assert loaded_on_import(["purgatory_broker.analytics"], heavy) == []
