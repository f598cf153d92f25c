"""Errors from callbacks, collected during a pass and raised once it is done.

The core runs user callbacks (timer tasks, operation callbacks) many at a time:
one poll of the timer, one walk of a watcher list. A callback's exception must
not unwind that pass, or the tasks after it would be stranded and the lists
half-walked. So the pass catches each one and hands it to its owner's
``report_exception``. The core's own owners (:class:`~.timer.WheelTimer`,
:class:`~.purgatory.Purgatory`) share one rule, :func:`collect_exception`: append it
to the pass's list; when the pass is over and every structure is consistent again,
:func:`raise_collected` raises what was collected. The async shell's owners share
one rule of their own (``purgatory.aio.backends.report_to_running_library``): hand
the error to the running loop's exception handler, and the pass raises nothing.

Example: a poll runs tasks a, b, c; a and c raise ValueError("a"),
ValueError("c"). All three run; then ``poll`` raises
``ExceptionGroup("2 timer tasks of 't' failed", [ValueError("a"), ValueError("c")])``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["collect_exception", "raise_collected"]


def collect_exception(
    owner: object,
    message: str,
    exc: BaseException,
    collected: list[BaseException] | None,
    **context: Any,
) -> None:
    """``report_exception(message, exc, collected, **context)``, the core's rule, a
    method of the timer and the purgatory (``report_exception = collect_exception``):
    where a callback's exception goes during a pass. Appended to ``collected``, the
    pass's list (raised when the pass is done); raised at once when there is no list.
    ``message`` and ``context`` are for the async shell's rule, which reports them. O(1).
    """
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
