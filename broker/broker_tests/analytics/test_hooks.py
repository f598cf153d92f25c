"""The process-wide hooks of the command line: installed while a run lasts, put back after.

``main()`` changes the SIGINT handler, ``sys.unraisablehook`` and the logging
of py4j and the root logger while a command runs; whether it returns, raises
or is interrupted, each is what it was before once it is done. The commands
run here are ``synthetic`` (no JVM), whose writer is replaced by one that
records what the process looks like during the run and then ends it as the
case asks.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from purgatory_broker.analytics import synthetic
from purgatory_broker.analytics.__main__ import main
from purgatory_broker.analytics._hooks import InterruptGuard, quiet_logging
from purgatory_broker.cli import program_name

from broker_tests.cli_kit import run_cli


class _Escape(BaseException):
    """Raised through main(): nothing catches it."""


def _sigint() -> object:
    return signal.getsignal(signal.SIGINT)


def _unraisable() -> object:
    return sys.unraisablehook


def _root_logger() -> object:
    root = logging.getLogger()
    return (tuple(root.handlers), root.level, logging.getLogger("py4j").level)


#: each hook main() changes while a command runs -> what it is at a moment
_HOOKS: dict[str, Callable[[], object]] = {
    "sigint-handler": _sigint,
    "unraisable-hook": _unraisable,
    "root-logger": _root_logger,  # its handlers and level, and py4j's level
}


def _run_main(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ending: str, read: Callable[[], object]
) -> object:
    """Run ``synthetic`` ending as asked; returns what ``read`` saw during the run."""
    seen: list[object] = []
    real = synthetic.write_synthetic_trace

    def writer(*args: Any, **kwargs: Any) -> list[Path]:
        seen.append(read())
        if ending == "raises":
            raise _Escape
        if ending == "interrupted":
            signal.raise_signal(signal.SIGINT)
        if ending == "fails":
            raise RuntimeError("the disk is on fire")
        return real(*args, **kwargs)

    monkeypatch.setattr(synthetic, "write_synthetic_trace", writer)
    argv = ["synthetic", str(tmp_path / "t"), "--rows", "5"]
    if ending == "raises":
        with pytest.raises(_Escape):
            main(argv)
    else:
        assert main(argv) == {"returns": 0, "interrupted": 130, "fails": 1}[ending]
    return seen[0]


@pytest.mark.parametrize("ending", ["returns", "raises", "interrupted", "fails"])
@pytest.mark.parametrize("hook", list(_HOOKS))
def test_main_puts_back_the_hook(
    hook: str, ending: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read = _HOOKS[hook]
    before = read()
    during = _run_main(tmp_path, monkeypatch, ending, read)
    assert during != before  # the run had its own
    assert read() == before


def test_a_failure_after_ctrl_c_is_the_interruption_of_that_run_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failure that follows a Ctrl-C (Spark's gateway closing, say) is told as
    the interruption; the next run starts without that memory (a class
    attribute kept it for the rest of the process once)."""

    def interrupted_then_failed(*args: Any, **kwargs: Any) -> list[Path]:
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            raise RuntimeError("gateway closed") from None
        return []

    def failed(*args: Any, **kwargs: Any) -> list[Path]:
        raise RuntimeError("the disk is on fire")

    argv = ["synthetic", str(tmp_path / "t"), "--rows", "5"]
    monkeypatch.setattr(synthetic, "write_synthetic_trace", interrupted_then_failed)
    prog = program_name("purgatory_broker.analytics")  # this process: pytest's name
    assert main(argv) == 130
    assert capsys.readouterr().err == f"{prog}: error: interrupted\n"
    monkeypatch.setattr(synthetic, "write_synthetic_trace", failed)
    assert main(argv) == 1
    assert capsys.readouterr().err == f"{prog}: error: failed: the disk is on fire\n"


def test_ctrl_c_inside_a_finalizer_still_stops(capsys: pytest.CaptureFixture[str]) -> None:
    """A Ctrl-C that lands while a weakref callback runs (py4j frees Java objects
    from them) is raised again outside it, instead of printed and lost."""

    class Freed:
        pass

    def finalizer(_: object) -> None:
        signal.raise_signal(signal.SIGINT)  # the handler runs here, inside the callback

    before = (_sigint(), _unraisable())
    interrupted = False
    with InterruptGuard() as guard:
        obj = Freed()
        ref = weakref.ref(obj, finalizer)
        try:
            del obj
            deadline = time.monotonic() + 10  # a bound against a hang, not a timing claim
            while time.monotonic() < deadline:
                time.sleep(0.001)
        except KeyboardInterrupt:
            interrupted = True
    assert ref() is None
    assert interrupted and guard.seen
    assert "Exception ignored" not in capsys.readouterr().err
    assert (_sigint(), _unraisable()) == before


def test_other_unraisable_exceptions_go_to_the_hook_that_was_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    got: list[BaseException | None] = []
    record: Callable[[sys.UnraisableHookArgs], None] = lambda u: got.append(u.exc_value)  # noqa: E731
    monkeypatch.setattr(sys, "unraisablehook", record)

    class Freed:
        pass

    def finalizer(_: object) -> None:
        raise ValueError("lost in a finalizer")

    with InterruptGuard():
        obj = Freed()
        ref = weakref.ref(obj, finalizer)
        del obj
    assert ref() is None
    assert [type(e) for e in got] == [ValueError]
    assert sys.unraisablehook is record


def test_a_guard_outside_the_main_thread_changes_nothing() -> None:
    """Python allows signal handlers in the main thread only: elsewhere the guard
    neither installs nor restores (main() may run in a worker thread)."""
    seen: list[object] = []

    def run() -> None:
        with InterruptGuard() as guard:
            seen.extend([_sigint(), _unraisable()])
            guard.claim()
            seen.extend([_sigint(), _unraisable()])

    before = (_sigint(), _unraisable())
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [*before, *before]


def test_a_guard_is_installed_once() -> None:
    before = (_sigint(), _unraisable())
    with InterruptGuard() as guard, pytest.raises(RuntimeError, match="installed already"):
        guard.__enter__()
    assert (_sigint(), _unraisable()) == before


def test_quiet_logging_silences_py4j_and_puts_back_what_it_changed() -> None:
    py4j = logging.getLogger("py4j.clientserver")
    before = _root_logger()
    with quiet_logging():
        assert not py4j.isEnabledFor(logging.CRITICAL)
        assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger().handlers)
    assert _root_logger() == before


_STARTS_SPARK = """\
import logging, signal, sys
from purgatory_broker.analytics.__main__ import main

def state():
    root = logging.getLogger()
    py4j = logging.getLogger("py4j").level
    return signal.getsignal(signal.SIGINT), sys.unraisablehook, root.handlers[:], root.level, py4j

before = state()
status = main(["report", sys.argv[1], "--out", sys.argv[2], "--quiet", "--master", "local[1]"])
from pyspark import SparkContext
print(status, SparkContext._active_spark_context is not None, state() == before)
"""


@pytest.mark.system  # Java: main() starts its own Spark session, in a child process
def test_a_run_that_starts_spark_puts_back_what_pyspark_replaced(tmp_path: Path) -> None:
    """pyspark's SparkContext installs its own SIGINT handler when it starts, in
    the middle of the run: the process still ends the run with its own."""
    synthetic.write_synthetic_trace(tmp_path / "trace", 50)
    result = run_cli(
        ["-c", _STARTS_SPARK, str(tmp_path / "trace"), str(tmp_path / "out")], timeout_s=180
    )
    assert result.stdout.splitlines()[-1] == "0 True True", result.stderr
