"""Errors from callbacks, collected during a pass and raised once it is done.

The core runs user callbacks (timer tasks, operation callbacks) many at a time:
one poll of the timer, one walk of a watcher list. A callback's exception must
not unwind that pass, or the tasks after it would be stranded and the lists
half-walked. So the pass catches each one and hands it to its owner's
``report_exception``. The core's own owners (:class:`~.timer.WheelTimer`,
:class:`~.purgatory.Purgatory`) append it to the pass's list; when the pass is
over and every structure is consistent again, :func:`raise_collected` raises
what was collected. The async shell overrides ``report_exception`` to hand the
error to the running loop's exception handler instead, and the pass raises
nothing.

Example: a poll runs tasks a, b, c; a and c raise ValueError("a"),
ValueError("c"). All three run; then ``poll`` raises
``ExceptionGroup("2 timer tasks of 't' failed", [ValueError("a"), ValueError("c")])``.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["collect", "raise_collected"]


def collect(exc: BaseException, collected: list[BaseException] | None) -> None:
    """The core's ``report_exception``: append ``exc`` to the pass's list, or raise
    it at once when there is no list. O(1)."""
    if collected is None:
        raise exc
    collected.append(exc)


def raise_collected(message: str, collected: Sequence[BaseException]) -> None:
    """Raise what a pass collected: the exception itself if only one, an
    :class:`ExceptionGroup` if several (a :class:`BaseExceptionGroup` if any is not
    an ``Exception``). Does nothing for an empty list. O(len(collected))."""
    if not collected:
        return
    if len(collected) == 1:
        raise collected[0]
    errors = [e for e in collected if isinstance(e, Exception)]
    if len(errors) == len(collected):
        raise ExceptionGroup(message, errors)
    raise BaseExceptionGroup(message, list(collected))
