"""The process-wide hooks a run installs, each by an owner that puts back what was there.

A run changes two things that belong to the whole process, and each is installed by
a context manager that undoes it on the way out, whatever ends the block (the run's
end, an error, a cancellation):

* :func:`survivors_frozen`: a ``gc.callbacks`` hook that freezes what survives each
  collection (why: :mod:`.simulation`, "Garbage collection"). On exit the hook is
  removed, everything is unfrozen and collected once. The permanent generation is
  one list, so objects frozen before the run (a server that froze its start-up
  objects) are unfrozen too: ``gc.freeze`` has no undo for a part of it.
* :func:`signals_handled`: SIGINT and SIGTERM routed to the run's handler through
  the loop (``loop.add_signal_handler``). On exit each signal's previous handler is
  put back. asyncio's ``remove_signal_handler`` alone would leave the default
  (``SIG_DFL``, or ``default_int_handler`` for SIGINT), not what the process had,
  and it clears the signal wake-up descriptor when the loop has no handler left;
  that is put back too.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from collections.abc import Callable, Iterator, Sequence

__all__ = ["signals_handled", "survivors_frozen"]


def _freeze_after_collection(phase: str, info: dict[str, int]) -> None:
    """A ``gc.callbacks`` hook: freeze what survived each collection."""
    if phase == "stop":
        gc.freeze()


@contextlib.contextmanager
def survivors_frozen() -> Iterator[None]:
    """Freeze the survivors of every collection while the block runs; then remove the
    hook, unfreeze and collect once (see the module doc). O(1) to enter; the exit
    collects the heap once."""
    gc.callbacks.append(_freeze_after_collection)
    try:
        yield
    finally:
        gc.callbacks.remove(_freeze_after_collection)
        gc.unfreeze()
        gc.collect()


def _wakeup_fd() -> int:
    """The signal wake-up descriptor now (-1: none), left as it is. Main thread. O(1)."""
    fd = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(fd)
    return fd


@contextlib.contextmanager
def signals_handled(
    loop: asyncio.AbstractEventLoop,
    signals: Sequence[signal.Signals],
    handler: Callable[[int], object],
) -> Iterator[None]:
    """Call ``handler(signum)`` on ``loop`` for each of ``signals`` while the block
    runs; then put back the handlers and the wake-up descriptor that were there
    (see the module doc). Main thread only, as ``loop.add_signal_handler``.
    O(signals)."""
    previous = {signum: signal.getsignal(signum) for signum in signals}
    wakeup_fd = _wakeup_fd()
    try:
        for signum in signals:
            loop.add_signal_handler(signum, handler, signum)
        yield
    finally:
        for signum, before in previous.items():
            loop.remove_signal_handler(signum)
            if before is not None:  # None: set outside Python, nothing to put back
                signal.signal(signum, before)
        if wakeup_fd != -1 and _wakeup_fd() == -1:
            signal.set_wakeup_fd(wakeup_fd)
