"""Process-wide state a command line changes while it runs, each change owned by an
object that puts back what was there.

A run changes things that belong to the whole process: a logger's handlers and
level (:func:`added_handler`, :func:`logger_level`, and :func:`basic_logging`,
``logging.basicConfig`` for one run), signal handlers (:class:`SavedSignals`,
:func:`loop_signal_handlers`), the soft limit on open files
(:func:`raised_open_file_limit`). Each owner saves what it replaces when the run
begins and restores it when the run ends, however it ends (a return, an
exception, a signal), so that a ``main()`` called from a test or another program
leaves the process as it found it. The model is trio's KeyboardInterrupt
protection (``trio/_core/_ki.py``): the handler is installed by an object that
owns it and takes it back out.

Why asyncio's own clean-up is not enough: ``loop.remove_signal_handler`` (which
``loop.close`` calls for every handler left) installs Python's default handler
(KeyboardInterrupt for SIGINT, SIG_DFL for the others), not the one that was
there before the loop took the signal.

Standard library only; imports nothing of the package.
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

if sys.platform != "win32":
    import resource

if TYPE_CHECKING:
    import asyncio
    from typing import TypeAlias

    #: what ``signal.getsignal`` returns: a callable, SIG_DFL or SIG_IGN, or None
    #: for a handler not installed from Python
    SignalHandler: TypeAlias = Callable[[int, FrameType | None], Any] | int | None

__all__ = [
    "SavedSignals",
    "added_handler",
    "basic_logging",
    "logger_level",
    "loop_signal_handlers",
    "raised_open_file_limit",
]


class SavedSignals:
    """The handlers of some signals as they were when it was made; :meth:`restore`
    puts them back. Reading works in any thread; restoring, as any change of a
    handler, in the main thread only (Python's rule)."""

    __slots__ = ("_handlers",)

    def __init__(self, signals: Iterable[int]) -> None:
        #: signal number -> its handler when saved; never changes
        self._handlers: dict[int, SignalHandler] = {s: signal.getsignal(s) for s in signals}

    def restore(self) -> None:
        """Install each saved handler again, over whatever replaced it. O(signals)."""
        for signum, handler in self._handlers.items():
            # None: installed from outside Python, which cannot be put back; SIG_DFL is nearest
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)

    def __repr__(self) -> str:
        names = ", ".join(signal.Signals(s).name for s in self._handlers)
        return f"<SavedSignals {names}>"


@contextmanager
def loop_signal_handlers(
    loop: asyncio.AbstractEventLoop, signals: Sequence[int], callback: Callable[[], object]
) -> Iterator[None]:
    """While the body runs, each of ``signals`` calls ``callback`` in ``loop``
    (``loop.add_signal_handler``); afterwards each has the handler it had before
    (module doc: asyncio alone would leave Python's default). A loop without
    signal support (NotImplementedError, as on Windows) installs nothing.
    Must run on ``loop``'s thread, the main one. O(signals)."""
    saved = SavedSignals(signals)
    installed: list[int] = []
    try:
        for signum in signals:
            try:
                loop.add_signal_handler(signum, callback)
            except NotImplementedError:  # no signals on this loop: Python's handlers stay
                break
            installed.append(signum)
        yield
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
        if installed:
            saved.restore()


@contextmanager
def logger_level(logger: logging.Logger, level: int) -> Iterator[None]:
    """While the body runs, ``logger`` has ``level``; afterwards the level it had. O(1)."""
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)


@contextmanager
def added_handler(logger: logging.Logger, handler: logging.Handler) -> Iterator[None]:
    """While the body runs, ``handler`` is one of ``logger``'s handlers; afterwards it
    is removed and closed. O(handlers)."""
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        handler.close()


@contextmanager
def basic_logging(level: int, fmt: str) -> Iterator[None]:
    """``logging.basicConfig(level=level, format=fmt)`` for the body only: a
    handler printing to stderr on the root logger, and the root's level, both put
    back afterwards.

    As basicConfig does, it changes nothing when the root logger has handlers
    already: whoever runs the body configured logging, and that stands. O(1).
    """
    root = logging.getLogger()
    if root.handlers:
        yield
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(fmt))
    with logger_level(root, level), added_handler(root, handler):
        yield


@contextmanager
def raised_open_file_limit(wanted: int, logger: logging.Logger) -> Iterator[int | None]:
    """While the body runs, the process's soft limit on open files (RLIMIT_NOFILE)
    is raised to ``wanted``, or as far toward it as the hard limit allows;
    afterwards it is put back to what it was. Yields the soft limit in force,
    None for none (unlimited, or not a Unix). A limit that cannot be raised is
    kept, said at DEBUG on ``logger``. O(1).
    """
    if sys.platform == "win32":  # no such limit
        yield None
        return
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    soft = _raise_soft_limit(before, wanted, logger)
    try:
        yield None if soft == resource.RLIM_INFINITY else soft
    finally:
        if soft != before[0]:
            resource.setrlimit(resource.RLIMIT_NOFILE, before)


def _raise_soft_limit(limits: tuple[int, int], wanted: int, logger: logging.Logger) -> int:
    """The soft limit after raising it from ``limits`` (soft, hard) toward ``wanted``."""
    soft, hard = limits
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft == resource.RLIM_INFINITY or target <= soft:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as exc:
        logger.debug("cannot raise RLIMIT_NOFILE to %d: %s", target, exc)
        return soft
    return target
