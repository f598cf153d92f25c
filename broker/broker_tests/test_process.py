"""The owners of process-wide state (:mod:`purgatory_broker.process`) where a command
line does not reach them: a loop without signals, a limit that cannot be raised or
need not be. The command lines' own runs are tested with them (wire/test_process_hooks.py,
analytics/test_hooks.py)."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable

import pytest
from purgatory_broker.process import SavedSignals, loop_signal_handlers, raised_open_file_limit

resource = pytest.importorskip("resource")


class _NoSignals(asyncio.SelectorEventLoop):
    """A loop that cannot take signals, as asyncio's proactor on Windows."""

    def add_signal_handler(self, sig: int, callback: Callable[..., object], *args: object) -> None:
        raise NotImplementedError


def test_a_loop_without_signals_leaves_the_handlers_alone() -> None:
    before = SavedSignals([signal.SIGINT, signal.SIGTERM])
    handlers = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    loop = _NoSignals()
    try:
        with loop_signal_handlers(loop, (signal.SIGINT, signal.SIGTERM), lambda: None):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # not the loop's: not put back
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        loop.close()
        before.restore()
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers
    assert repr(before) == "<SavedSignals SIGINT, SIGTERM>"


def test_a_limit_that_suffices_is_left_as_it_is() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with raised_open_file_limit(1, logging.getLogger("test")) as now:
        assert now == (None if soft == resource.RLIM_INFINITY else soft)
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (soft, hard)


def test_a_limit_that_cannot_be_raised_is_kept_and_said_at_debug(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    hard = before[1]
    if hard != resource.RLIM_INFINITY and hard <= 1024:
        pytest.skip(f"the hard open-file limit ({hard}) leaves no room to raise")
    setrlimit = resource.setrlimit
    setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    calls: list[tuple[int, int]] = []

    def refuse(which: int, limits: tuple[int, int]) -> None:
        calls.append(limits)
        raise ValueError("not allowed")

    caplog.set_level(logging.DEBUG, "test")
    try:
        monkeypatch.setattr(resource, "setrlimit", refuse)
        with raised_open_file_limit(2048, logging.getLogger("test")) as now:
            assert now == 1024
        monkeypatch.undo()
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (1024, hard)
    finally:
        setrlimit(resource.RLIMIT_NOFILE, before)
    assert calls == [(2048, hard)]  # tried once, nothing to put back
    assert "cannot raise RLIMIT_NOFILE to 2048" in caplog.text
