"""The two builds of the core: compiled (Cython) and pure Python, chosen at import.

The README's test command runs the whole suite twice: once as installed (the
compiled core, ``PURGATORY_EXPECT_COMPILED=1`` makes these tests insist on it)
and once with ``PURGATORY_NO_EXTENSIONS=1`` (the pure core). The tests here
check what tells the builds apart and what must not.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

import pytest
from setuptools import Distribution, Extension

import purgatory
from purgatory import DelayedOperation, DelayedOperationPurgatory, SystemTimer, TimerTask
from purgatory.core import build
from purgatory.testing import ManualClock

from ..repo_kit import ROOT, needs
from .portability_kit import (
    check_cythonize_writes_outside_the_tree,
    run_pure,
    run_setup,
    run_setup_told_pure,
)

EXPECT_COMPILED = os.environ.get("PURGATORY_EXPECT_COMPILED", "") not in ("", "0")
#: the tests that run the build script (the sdist has it; a copy of tests/ does not)
needs_setup = needs("setup.py", "cython_build.py")


def test_the_flag_says_which_build_is_loaded() -> None:
    assert purgatory.compiled is build.COMPILED
    loaded = {m.__name__: m.__file__ or "" for m in build._CORE}
    compiled = {name for name, path in loaded.items() if path.endswith(tuple(EXTENSION_SUFFIXES))}
    assert set(build.COMPILED_MODULES) == compiled
    assert (len(compiled) == len(loaded)) == build.COMPILED
    if build.NO_EXTENSIONS:
        assert not compiled, "PURGATORY_NO_EXTENSIONS set, yet compiled modules loaded"
    if EXPECT_COMPILED:
        assert build.COMPILED, f"expected the compiled core; loaded {loaded}"


def test_reprs_say_the_build() -> None:
    word = "compiled" if purgatory.compiled else "pure"
    assert f"build={word}" in repr(SystemTimer("t", clock=ManualClock()))
    assert f"build={word}" in repr(DelayedOperationPurgatory("p", reaper_enabled=False))


def test_the_environment_variable_forces_the_pure_build() -> None:
    code = (
        "import purgatory, purgatory.core.build as b;"
        "print(purgatory.compiled, sorted({m.__file__.rsplit('.', 1)[-1] for m in b._CORE}))"
    )
    assert run_pure(code).split() == ["False", "['py']"]


class Slotted(TimerTask):
    __slots__ = ("ran",)

    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.ran = 0

    def run(self) -> None:
        self.ran += 1


class Plain(TimerTask):
    def run(self) -> None:
        self.ran = getattr(self, "ran", 0) + 1


class SlottedOp(DelayedOperation[str]):
    """Completes once its slot holds an answer, with that answer as the outcome."""

    __slots__ = ("answer",)

    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.answer: str | None = None

    def try_complete(self) -> bool:
        return self.answer is not None and self.force_complete()

    def on_complete(self) -> str:
        assert self.answer is not None
        return self.answer


class PlainOp(DelayedOperation[str]):
    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> str:
        self.note = "completed"  # a __dict__ of its own
        return "plain"

    def on_expiration(self) -> None:
        self.timed_out = True


@pytest.mark.parametrize("cls", [Slotted, Plain])
def test_python_subclasses_of_timer_task_run_on_either_build(cls: type[TimerTask]) -> None:
    clock = ManualClock()
    timer = SystemTimer("t", clock=clock)
    task = cls(5)
    timer.add(task)
    assert task.is_scheduled and len(timer) == 1
    clock.advance(5)
    assert timer.poll() == 0  # never early: the tick after the deadline (test_never_early)
    clock.advance(1)
    assert timer.poll() == 1
    assert task.ran == 1  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        Slotted(1).other = 1  # type: ignore[attr-defined]


def test_python_subclasses_of_delayed_operation_complete_and_expire() -> None:
    clock = ManualClock()
    p = DelayedOperationPurgatory[DelayedOperation[str]](
        "p", timer=SystemTimer("t", clock=clock), reaper_enabled=False
    )
    slotted, plain = SlottedOp(10), PlainOp(10)
    p.try_complete_else_watch(slotted, ["k"])
    p.try_complete_else_watch(plain, ["k"])
    slotted.answer = "slotted"
    assert p.check_and_complete("k") == 1 and slotted.result() == "slotted"
    clock.advance(11)  # never early: the tick after the deadline
    p.timer.poll()
    assert plain.result() == "plain" and plain.timed_out and plain.note == "completed"
    assert plain.expired and not slotted.expired
    p._check_invariants()


def _setup_script(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    return run_setup(monkeypatch, ROOT / "setup.py")


@needs_setup
def test_the_build_makes_no_extensions_when_told_not_to(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_setup_told_pure(monkeypatch, capsys, ROOT / "setup.py", "building the pure-Python package")


@needs_setup
def test_a_module_that_does_not_compile_fails_the_build_naming_the_switch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What a machine without a working C compiler gets: a failed install whose one
    message says how to ask for the pure build, never a pure build that looks compiled."""
    monkeypatch.setenv("PURGATORY_NO_EXTENSIONS", "1")  # no cythonize: only the class is needed
    script = _setup_script(monkeypatch)
    (tmp_path / "broken.c").write_text("this is not C;\n")
    monkeypatch.chdir(tmp_path)
    dist = Distribution({"ext_modules": [Extension("broken", ["broken.c"])]})
    command = script["StrictBuildExt"](dist)
    command.inplace = True
    command.ensure_finalized()
    with pytest.raises(SystemExit) as failed:
        command.run()  # compiles broken.c and fails
    message = str(failed.value)
    assert message.startswith("purgatory: could not compile broken")
    assert "PURGATORY_NO_EXTENSIONS=1" in message and "\n" not in message
    assert not list(tmp_path.glob("broken*.so"))


@needs_setup
def test_a_build_without_cython_fails_unless_the_pure_build_is_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PURGATORY_NO_EXTENSIONS", raising=False)
    monkeypatch.setitem(sys.modules, "Cython.Build", None)  # import fails
    with pytest.raises(SystemExit, match=r"Cython is not installed.*PURGATORY_NO_EXTENSIONS=1"):
        _setup_script(monkeypatch)


@needs_setup
def test_cython_writes_its_c_outside_the_source_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    """cythonize is asked to write every generated file under build/cython/."""
    check_cythonize_writes_outside_the_tree(monkeypatch, ROOT / "setup.py")
