"""The architecture, checked: the layers import only what they may, and nothing cycles.

Read from the source with ``ast``: every ``import`` counts, at module level or
inside a function, except those under ``if TYPE_CHECKING:`` (they never run).

* ``purgatory.core`` is the synchronous core: it imports the standard library and
  itself (and ``cython``, the compile-time module of Cython's pure-Python mode,
  which it does without when Cython is not installed), never an event loop
  (asyncio, trio, anyio, uvloop) nor any other part of the package;
* ``purgatory.aio`` is the async shell: the core, itself, and the event loops;
  trio only in its trio backend (asyncio users never import trio);
* every other part of the package reaches another part only through that part's
  public modules (no path component starting with ``_``), and the broker reaches
  the core only through ``purgatory`` or ``purgatory.core`` themselves;
* the broker builds on the core's public API and the trace schema only
  (``purgatory``, ``purgatory.core``, ``purgatory.tracing``), never on the
  simulation or the pipeline;
* the trace schema (``purgatory.tracing``) imports nothing of the package, so
  a reader of traces needs no broker; nor does the command-line kit
  (``purgatory.cli``), which every program may use;
* the simulation (``purgatory.sim``) is an application over public APIs:
  ``purgatory``, ``purgatory.core``, ``purgatory.broker`` (the package, not its
  modules), ``purgatory.tracing`` and ``purgatory.cli``;
* the pipeline (``purgatory.analytics``) takes from the broker only its error
  table (``purgatory.broker.errors``), never its internals;
* the examples and benchmarks import only public modules of the package, and
  from each only names in its ``__all__`` (or its public submodules);
* no import cycle among the package's modules;
* ``import purgatory.analytics`` loads no heavy library.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "purgatory"
LOOPS = {"asyncio", "trio", "anyio", "uvloop", "outcome", "sniffio"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, module: str, is_package: bool, modules: set[str]) -> Iterator[str]:
    """Absolute names of the modules ``module`` imports (TYPE_CHECKING skipped):
    ``from p import m`` imports the module ``p.m`` when there is one, else ``p``."""
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


def _graph() -> dict[str, set[str]]:
    sources = {}
    for path in ROOT.rglob("*.py"):
        sources[_module_name(path)] = (path, path.name == "__init__.py")
    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in sources.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets = set()
        for imported in _imports(tree, name, is_package, set(sources)):
            if imported.startswith("purgatory"):
                if imported in sources:
                    targets.add(imported)
            else:
                targets.add(imported)
        graph[name] = targets
    return graph


GRAPH = _graph()


def _internal(graph: dict[str, set[str]], name: str) -> set[str]:
    return {m for m in graph[name] if m.startswith("purgatory")}


def _external(graph: dict[str, set[str]], name: str) -> set[str]:
    return {m.split(".")[0] for m in graph[name] if not m.startswith("purgatory")}


def test_the_graph_sees_the_package() -> None:
    assert {"purgatory.core.timer", "purgatory.aio.reaper", "purgatory"} <= set(GRAPH)
    assert "purgatory.core.timer_list" in GRAPH["purgatory.core.timer"]


@pytest.mark.parametrize("name", sorted(m for m in GRAPH if m.startswith("purgatory.core")))
def test_the_core_imports_no_event_loop_and_nothing_outside_the_core(name: str) -> None:
    outside = {m for m in _internal(GRAPH, name) if not m.startswith("purgatory.core")}
    assert not outside, f"{name} imports {outside}"
    external = _external(GRAPH, name)
    assert not external & LOOPS, f"{name} imports {external & LOOPS}"
    # `cython` only as Cython's pure-Python mode uses it: optional, shimmed without Cython
    allowed = set(sys.stdlib_module_names) | {"cython"}
    assert external <= allowed, external - allowed


@pytest.mark.parametrize("name", sorted(m for m in GRAPH if m.startswith("purgatory.aio")))
def test_the_shell_builds_on_the_core_and_trio_stays_in_its_backend(name: str) -> None:
    allowed = ("purgatory.core", "purgatory.aio")
    outside = {m for m in _internal(GRAPH, name) if not m.startswith(allowed)}
    assert not outside, f"{name} imports {outside}"
    if name != "purgatory.aio.backends.trio_backend":
        assert not _external(GRAPH, name) & {"trio", "outcome", "anyio"}, name


def _part(name: str) -> str:
    """The part of the package a module belongs to: ``purgatory.<part>``."""
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else name


@pytest.mark.parametrize("name", sorted(GRAPH))
def test_parts_reach_each_other_only_through_public_modules(name: str) -> None:
    mine = _part(name)
    for target in _internal(GRAPH, name):
        if _part(target) == mine or name == "purgatory":
            continue
        private = [p for p in target.split(".") if p.startswith("_")]
        assert not private, f"{name} imports the private module {target}"
        if mine == "purgatory.broker" and _part(target) in {"purgatory.core", "purgatory.aio"}:
            assert target in {"purgatory.core"}, f"{name} imports {target}: use purgatory"


def _outside(name: str) -> set[str]:
    """The modules of the package, outside ``name``'s part, that ``name`` imports."""
    return {m for m in _internal(GRAPH, name) if _part(m) != _part(name)}


@pytest.mark.parametrize("name", sorted(m for m in GRAPH if _part(m) == "purgatory.broker"))
def test_the_broker_builds_on_the_core_api_and_the_trace_schema(name: str) -> None:
    allowed = {"purgatory", "purgatory.core", "purgatory.tracing"}
    assert _outside(name) <= allowed, f"{name} imports {_outside(name) - allowed}"


def test_the_trace_schema_imports_nothing_of_the_package() -> None:
    assert _internal(GRAPH, "purgatory.tracing") == set()


def test_the_command_line_kit_imports_nothing_of_the_package() -> None:
    assert _internal(GRAPH, "purgatory.cli") == set()


@pytest.mark.parametrize("name", sorted(m for m in GRAPH if _part(m) == "purgatory.sim"))
def test_the_simulation_is_an_application_over_public_apis(name: str) -> None:
    allowed = {
        "purgatory",
        "purgatory.core",
        "purgatory.broker",
        "purgatory.tracing",
        "purgatory.cli",
    }
    assert _outside(name) <= allowed, f"{name} imports {_outside(name) - allowed}"


@pytest.mark.parametrize("name", sorted(m for m in GRAPH if _part(m) == "purgatory.analytics"))
def test_the_pipeline_takes_only_the_error_table_from_the_broker(name: str) -> None:
    broker = {m for m in _outside(name) if _part(m) == "purgatory.broker"}
    assert broker <= {"purgatory.broker.errors"}, f"{name} imports {broker}"


def _names_from(
    path: Path, module: str, names: list[ast.alias]
) -> Iterator[tuple[Path, str, str | None]]:
    if module.split(".", maxsplit=1)[0] == "purgatory":
        for alias in names:
            yield path, module, alias.name


def _client_imports() -> Iterator[tuple[Path, str, str | None]]:
    """(file, module, name) for each ``purgatory`` import in examples/ and benchmarks/;
    name is None for ``import module``."""
    for folder in ("examples", "benchmarks"):
        for path in sorted((ROOT.parent / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.name.split(".")[0] == "purgatory":
                            yield path, alias.name, None
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    yield from _names_from(path, node.module, node.names)


CLIENT_IMPORTS = sorted(set(_client_imports()), key=str)


def test_the_examples_and_benchmarks_are_seen() -> None:
    modules = {module for _, module, _ in CLIENT_IMPORTS}
    assert {"purgatory", "purgatory.broker", "purgatory.sim"} <= modules


@pytest.mark.parametrize(
    ("path", "module", "name"),
    CLIENT_IMPORTS,
    ids=[f"{p.name}:{m}.{n}" for p, m, n in CLIENT_IMPORTS],
)
def test_examples_and_benchmarks_use_public_apis_only(
    path: Path, module: str, name: str | None
) -> None:
    private = [part for part in module.split(".") if part.startswith("_")]
    assert not private, f"{path.name} imports the private module {module}"
    if name is None:
        return
    imported = importlib.import_module(module)
    submodule = f"{module}.{name}"
    if submodule in GRAPH:
        assert not name.startswith("_"), f"{path.name} imports the private module {submodule}"
        return
    exported = getattr(imported, "__all__", None)
    assert exported is not None and name in exported, f"{path.name}: {module}.{name} is not public"


def test_no_import_cycles() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(_internal(GRAPH, node)):
            if nxt == node:
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
                cycles.append(sorted(component))

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    assert not cycles, cycles


def test_importing_analytics_loads_no_heavy_library() -> None:
    """pandas, pyarrow, numpy and pyspark (and the broker) load when a job needs
    them, not when the package is imported."""
    import subprocess

    code = (
        "import sys, purgatory.analytics;"
        "heavy = {'pandas', 'pyarrow', 'numpy', 'pyspark', 'py4j', 'purgatory.broker'};"
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
