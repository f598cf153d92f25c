"""Process-wide hooks a command-line run installs, each by an owner that puts them back.

A run of ``python -m purgatory_broker.analytics`` changes three things that
belong to the whole process, and only while it lasts:

* the SIGINT handler and ``sys.unraisablehook`` (:class:`InterruptGuard`), so
  that Ctrl-C stops the run even when it lands inside a finalizer, and a
  failure that follows a Ctrl-C is told as the interruption;
* the logging of py4j (:func:`quiet_logging`), which would print, as pages,
  what the command line tells in one line.

Each owner saves what it replaces when the run begins and restores it when
the run ends, however it ends (a return, an exception, Ctrl-C), so calling
``main()`` from a test or another program leaves the process as it found it
(the owners every command line shares are :mod:`purgatory_broker.process`).

Why the unraisable hook. Python cannot raise out of a finalizer (a weakref
callback or ``__del__``, which py4j uses to free Java objects): a
KeyboardInterrupt raised there goes to ``sys.unraisablehook``, which prints
"Exception ignored" and drops it, and the run would go on to exit 0. The
guard's hook drops only that message and has a new thread signal the main
thread again. The signal is handled once that thread gets the interpreter, by
then outside the finalizer (should it land in another one, this repeats).
Signalling from the hook itself would not do: its handler would run at once,
still inside. Other unraisable exceptions go to the hook that was there before.
"""

from __future__ import annotations

import _thread
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

from purgatory_broker.process import SavedSignals, added_handler, logger_level

if TYPE_CHECKING:
    from typing import TypeAlias

    UnraisableHook: TypeAlias = Callable[[sys.UnraisableHookArgs], Any]

__all__ = ["InterruptGuard", "quiet_logging"]


class InterruptGuard:
    """Owns SIGINT and ``sys.unraisablehook`` from ``__enter__`` to ``__exit__``.

    Ctrl-C raises KeyboardInterrupt and sets :attr:`seen`; a KeyboardInterrupt
    raised inside a finalizer is raised again outside it (module doc). On exit
    the handler and the hook that were there on entry are put back, whatever
    was installed meanwhile (pyspark's SparkContext installs its own SIGINT
    handler when it starts: a handler installed during the run belongs to the
    run). Outside the main thread, where Python allows no signal handler, the
    guard installs nothing and restores nothing. Not reentrant: one run, one guard.
    """

    __slots__ = ("_saved", "seen")

    def __init__(self) -> None:
        #: a Ctrl-C arrived while the guard was installed (a failure after it
        #: is the interruption, not a bug); never reset by the guard
        self.seen = False
        #: (SIGINT handler, unraisable hook) found on entry; None while not installed
        self._saved: tuple[SavedSignals, UnraisableHook] | None = None

    def __enter__(self) -> InterruptGuard:
        if self._saved is not None:
            raise RuntimeError("the guard is installed already: one run, one guard")
        if threading.current_thread() is threading.main_thread():
            self._saved = (SavedSignals([signal.SIGINT]), sys.unraisablehook)
            self.claim()
        return self

    def claim(self) -> None:
        """Install the guard's handler and hook again, over whatever replaced them
        since entry (pyspark's handler cancels jobs through a gateway the JVM, which
        got the same Ctrl-C, is closing, and fails noisily: the guard's only stops).
        Does nothing when the guard is not installed. O(1)."""
        if self._saved is None:
            return
        signal.signal(signal.SIGINT, self._interrupted)
        sys.unraisablehook = self._raise_again

    def __exit__(self, *exc_info: object) -> None:
        if self._saved is None:
            return
        handlers, hook = self._saved
        self._saved = None
        handlers.restore()
        sys.unraisablehook = hook

    def _interrupted(self, signum: int, frame: FrameType | None) -> None:
        self.seen = True
        raise KeyboardInterrupt

    def _raise_again(self, unraisable: sys.UnraisableHookArgs) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            # not threading.Thread: its start() waits for the thread, inside the hook
            _thread.start_new_thread(_thread.interrupt_main, (signal.SIGINT,))
        elif self._saved is not None:
            self._saved[1](unraisable)
        else:  # called after exit by someone who kept a reference
            sys.__unraisablehook__(unraisable)


#: py4j's loggers: everything they say, the command line says in one line
_PY4J = "py4j"


@contextmanager
def quiet_logging() -> Iterator[None]:
    """While the body runs: py4j's logger silenced, and a NullHandler on the root
    logger; both put back afterwards (the level py4j had, the root's handlers).

    The root logger needs a handler of its own because py4j also reports through
    the module-level ``logging.exception()``, which, on a root logger without
    handlers, first calls ``logging.basicConfig()``: a handler printing to
    stderr for the rest of the process. O(1).
    """
    py4j = logging.getLogger(_PY4J)
    with (
        logger_level(py4j, logging.CRITICAL + 1),
        added_handler(logging.getLogger(), logging.NullHandler()),
    ):
        yield
