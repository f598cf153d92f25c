"""The command line's process-wide hooks: installed while a run lasts, put back after.

``main()`` sets up the root logger, raises the open-file soft limit and takes
SIGINT and SIGTERM while it runs; whether it returns (stopped by a signal or
not), fails or raises, each is what it was before once it is done. The broker
runs in this process on a loop of its own (asyncio's or uvloop); its
``serve_forever`` is replaced by one that records what the process looks like
during the run and then ends it as the case asks. Before the run, each hook is
given a state of the test's own (a bare root logger at ERROR, handlers of its
own, a soft limit of 1024), so that the run's differs from it.
"""

from __future__ import annotations

import errno
import logging
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

import pytest
from purgatory_broker.wire import KafkaWireBroker
from purgatory_broker.wire.__main__ import main, parse_args

resource = pytest.importorskip("resource")

#: the test's own soft limit on open files: below what the default cap needs (4024)
SOFT_LIMIT = 1024


class _Escape(BaseException):
    """Raised through main(): nothing catches it."""


def _root_logger() -> object:
    root = logging.getLogger()
    return (tuple(root.handlers), root.level)


def _stop_signals() -> object:
    return (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))


def _open_file_limit() -> object:
    return resource.getrlimit(resource.RLIMIT_NOFILE)


#: each hook main() changes while it runs -> what it is at a moment
_HOOKS: dict[str, Callable[[], object]] = {
    "root-logger": _root_logger,  # its handlers and level
    "stop-signals": _stop_signals,  # the handlers of SIGINT and SIGTERM
    "open-file-limit": _open_file_limit,  # RLIMIT_NOFILE (soft, hard)
}


def _own_handler(signum: int, frame: FrameType | None) -> None:
    raise AssertionError(f"signal {signum} reached the test's handler")


@contextmanager
def _state_of_the_test() -> Iterator[None]:
    """Each hook in a state of the test's own while the body runs; the suite's after."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level  # pytest's capture, among others
    sigint, sigterm = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    if limits[1] != resource.RLIM_INFINITY and limits[1] <= SOFT_LIMIT:
        pytest.skip(f"the hard open-file limit ({limits[1]}) leaves no room to raise")
    for handler in handlers:
        root.removeHandler(handler)
    root.setLevel(logging.ERROR)
    signal.signal(signal.SIGINT, _own_handler)
    signal.signal(signal.SIGTERM, _own_handler)
    resource.setrlimit(resource.RLIMIT_NOFILE, (SOFT_LIMIT, limits[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, limits)
        signal.signal(signal.SIGINT, sigint)
        signal.signal(signal.SIGTERM, sigterm)
        for handler in root.handlers[:]:  # what a failing run left
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)


#: how the replaced serve_forever ends the run -> main()'s exit status (None: it returns)
_ENDINGS: dict[str, int | None] = {
    "returns": None,  # closed from the inside
    "sigint": None,  # Ctrl-C
    "sigterm": None,
    "fails": 1,  # an OSError while serving: one line, status 1
    "raises": None,  # an exception main() does not catch
}


def _run_main(
    monkeypatch: pytest.MonkeyPatch, ending: str, loop: str, read: Callable[[], object]
) -> object:
    """Run main() ending as asked; returns what ``read`` saw while it served."""
    seen: list[object] = []
    serve_forever = KafkaWireBroker.serve_forever

    async def recording(wire: KafkaWireBroker) -> None:
        seen.append(read())
        if ending in ("sigint", "sigterm"):
            signal.raise_signal(signal.SIGINT if ending == "sigint" else signal.SIGTERM)
        else:
            await wire.close()
        if ending == "fails":
            raise OSError(errno.ENOSPC, "No space left on device")
        if ending == "raises":
            raise _Escape
        await serve_forever(wire)  # returns once the signal's handler closed it

    monkeypatch.setattr(KafkaWireBroker, "serve_forever", recording)
    argv = ["--port", "0"] + (["--uvloop"] if loop == "uvloop" else [])
    status = _ENDINGS[ending]
    if ending == "raises":
        with pytest.raises(_Escape):
            main(argv)
    elif status is None:
        main(argv)
    else:
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == status
    return seen[0]


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("ending", list(_ENDINGS))
@pytest.mark.parametrize("hook", list(_HOOKS))
def test_main_puts_back_the_hook(
    hook: str, ending: str, loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    read = _HOOKS[hook]
    with _state_of_the_test():
        before = read()
        during = _run_main(monkeypatch, ending, loop, read)
        after = read()
    assert during != before  # the run had its own
    assert after == before


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_ctrl_c_leaves_python_s_own_handlers(loop: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With Python's handlers before the run (KeyboardInterrupt for SIGINT, SIG_DFL for
    SIGTERM), as a shell starts it: asyncio.Runner takes SIGINT too while it runs,
    and puts Python's back only if its own is still there when it ends."""
    python_s = (signal.default_int_handler, signal.SIG_DFL)
    with _state_of_the_test():
        signal.signal(signal.SIGINT, python_s[0])
        signal.signal(signal.SIGTERM, python_s[1])
        during = _run_main(monkeypatch, "sigint", loop, _stop_signals)
        after = _stop_signals()
    assert during != python_s
    assert after == python_s


def test_parse_args_only_parses() -> None:
    with _state_of_the_test():
        before = _root_logger()
        command = parse_args(["--verbose"])
        assert _root_logger() == before
    assert command.verbose


@pytest.mark.parametrize("verbose", [False, True])
def test_the_run_logs_to_stderr_at_its_level(
    verbose: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the root logger prints during a run: INFO and up with -v, WARNING and up
    without, as ``time name LEVEL message``."""

    async def say(wire: KafkaWireBroker) -> None:
        for level in (logging.INFO, logging.WARNING):
            logging.getLogger("purgatory_broker.wire").log(level, "said at %d", level)
        await wire.close()

    monkeypatch.setattr(KafkaWireBroker, "serve_forever", say)
    with _state_of_the_test():
        main(["--port", "0", *(["-v"] if verbose else [])])
    err = capsys.readouterr().err
    assert " purgatory_broker.wire WARNING said at 30\n" in err
    assert (" purgatory_broker.wire INFO said at 20\n" in err) == verbose


def test_logging_set_up_by_the_caller_stands(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A program that set up logging before calling main() keeps its own: main()
    adds no handler of its own (the lines would print twice) and leaves the level."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    async def say(wire: KafkaWireBroker) -> None:
        seen.append(_root_logger())
        logging.getLogger("purgatory_broker.wire").error("said once")  # root at ERROR
        await wire.close()

    seen: list[object] = []
    monkeypatch.setattr(KafkaWireBroker, "serve_forever", say)
    with _state_of_the_test():
        logging.getLogger().addHandler(Keep())
        before = _root_logger()
        main(["--port", "0", "-v"])
        assert seen == [before] and _root_logger() == before
    assert lines == ["said once"]
    assert "said once" not in capsys.readouterr().err
