"""The one place where the synchronous core asks about the running event loop.

The core (buckets, wheel, timer bookkeeping, watcher lists) never awaits. It only
needs two facts from the event loop, and both are answered here:

* which loop, if any, is running on this thread (for the default clock), and
* where an exception raised by a callback should go.

Callbacks run by the core (timer tasks, operation callbacks) must never unwind the
core's own bookkeeping, so their exceptions are caught and *reported*: to the
running loop's exception handler (``loop.call_exception_handler``) when a loop is
running on this thread, otherwise collected by the caller and re-raised once its
bookkeeping is consistent again (see :func:`raise_collected`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

#: Returns the running loop of this thread or ``None``; a C function, cheap.
running_loop = asyncio._get_running_loop


def report_exception(
    message: str, exc: BaseException, collected: list[BaseException] | None, **context: Any
) -> None:
    """Send ``exc`` to the running loop's exception handler, or append it to ``collected``.

    With no running loop and no ``collected`` list, the exception is raised.
    """
    loop = running_loop()
    if loop is not None:
        loop.call_exception_handler({"message": message, "exception": exc, **context})
    elif collected is not None:
        collected.append(exc)
    else:
        raise exc


def raise_collected(message: str, collected: Sequence[BaseException]) -> None:
    """Raise what :func:`report_exception` collected: the exception itself if only one,
    an :class:`ExceptionGroup` if several. Does nothing for an empty list."""
    if not collected:
        return
    if len(collected) == 1:
        raise collected[0]
    errors = [e for e in collected if isinstance(e, Exception)]
    if len(errors) == len(collected):
        raise ExceptionGroup(message, errors)
    raise BaseExceptionGroup(message, list(collected))
