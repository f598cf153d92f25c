"""The two builds of the application's compiled modules: compiled (Cython) and pure.

``broker/setup.py`` compiles the modules a broker request runs through and the
simulated clients (``cython_build.py``, the library's strict build, whose own
tests are the library's). The README's test command runs the suite twice: as
installed (``PURGATORY_EXPECT_COMPILED=1`` makes these tests insist on the
compiled modules) and with ``PURGATORY_NO_EXTENSIONS=1`` (the pure ones).
"""

from __future__ import annotations

import importlib
import os
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

import pytest

from purgatory.core import build

from .portability_kit import (
    check_cythonize_writes_outside_the_tree,
    run_pure,
    run_setup,
    run_setup_told_pure,
)

EXPECT_COMPILED = os.environ.get("PURGATORY_EXPECT_COMPILED", "") not in ("", "0")
SETUP = Path(__file__).resolve().parents[1] / "setup.py"


def _setup_script(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    return run_setup(monkeypatch, SETUP)


def test_the_compiled_modules_load_in_the_library_s_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """They load compiled exactly when the library's core does (one switch,
    PURGATORY_NO_EXTENSIONS, covers both distributions)."""
    monkeypatch.setenv("PURGATORY_NO_EXTENSIONS", "1")  # no cythonize: only the list
    names = _setup_script(monkeypatch)["COMPILED_MODULES"]
    assert names and all(name.startswith("purgatory_broker.") for name in names)
    loaded = {name: importlib.import_module(name).__file__ or "" for name in names}
    compiled = {name for name, path in loaded.items() if path.endswith(tuple(EXTENSION_SUFFIXES))}
    if build.NO_EXTENSIONS:
        assert not compiled, f"PURGATORY_NO_EXTENSIONS set, yet compiled: {sorted(compiled)}"
    if EXPECT_COMPILED:
        assert compiled == set(names), f"expected compiled modules; loaded {loaded}"


def test_the_environment_variable_forces_the_pure_build() -> None:
    code = (
        "import purgatory_broker.broker.storage.records as r, purgatory_broker.sim.clients as c;"
        "print(r.__file__.rsplit('.', 1)[-1], c.__file__.rsplit('.', 1)[-1])"
    )
    assert run_pure(code).split() == ["py", "py"]


def test_the_pure_build_runs_where_cython_is_not_installed() -> None:
    """The modules that ask ``cython.compiled`` or type their locals with
    ``@cython.locals`` take the package's stand-in when Cython cannot be imported (a
    user's pure install has no Cython): a produce on the pure build answers."""
    code = (
        "import sys; sys.modules['cython'] = None\n"  # import cython raises ImportError
        "import asyncio, tempfile\n"
        "from purgatory import TopicPartition\n"
        "from purgatory_broker.broker import Broker, build_batch\n"
        "import purgatory_broker.broker.delayed as d\n"
        "tp = TopicPartition('t', 0)\n"
        "async def main():\n"
        "    async with Broker(tempfile.mkdtemp()) as broker:\n"
        "        broker.create_partition(tp, min_insync_replicas=1)\n"
        "        op = broker.produce({tp: build_batch([b'x'])}, acks=-1, timeout_ms=1000)\n"
        "        print(d.cython.__name__.rsplit('.', 1)[-1], d.__file__.rsplit('.', 1)[-1],"
        " op.result()[tp])\n"
        "asyncio.run(main())\n"
    )
    assert run_pure(code).split() == [
        "_cython_shim",
        "py",
        "ProducePartitionResponse(error_code=0,",
        "base_offset=0)",
    ]


def test_the_build_makes_no_extensions_when_told_not_to(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    says = "purgatory-broker: PURGATORY_NO_EXTENSIONS set"
    script = run_setup_told_pure(monkeypatch, capsys, SETUP, says)
    assert script["captured"]["cmdclass"]["build_ext"] is script["StrictBuildExt"]


def test_cython_compiles_every_listed_module_outside_the_source_tree(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    check_cythonize_writes_outside_the_tree(monkeypatch, SETUP)
