"""The one place where the synchronous core asks about the running event loop.

The core (buckets, wheel, timer bookkeeping, watcher lists) never awaits. It only
needs two facts from the event loop, and both are answered here:

* which loop, if any, is running on this thread (for the default clock), and
* where an exception raised by a callback should go.

Two async libraries are supported, found in this order (the order keeps the
asyncio path as cheap as it was before trio was supported):

1. **asyncio** (and uvloop, and anyio on asyncio): ``asyncio._get_running_loop()``,
   one C call that returns the running loop or ``None``;
2. **trio** (and anyio on trio): only when no asyncio loop runs, and only if
   ``trio`` is already imported (``sys.modules``; this module never imports it),
   ``trio.lowlevel.in_trio_run()``.

Callbacks run by the core (timer tasks, operation callbacks) must never unwind the
core's own bookkeeping, so their exceptions are caught and *reported*:

* asyncio: to the running loop's exception handler (``loop.call_exception_handler``,
  whose default logs at ERROR on the ``"asyncio"`` logger);
* trio: trio has no loop exception handler, so they are logged at ERROR, with the
  traceback, on the ``"purgatory"`` logger (:data:`logger`). Logging, rather than
  raising into the task group that runs the reaper, is deliberate: one operation's
  failing callback must not tear down the purgatory and every other request with
  it (Kafka's purgatory logs and carries on; so does asyncio's default handler).
  Attach a handler to ``logging.getLogger("purgatory")`` to collect them;
* no loop at all (a synchronous ``poll()``): collected by the caller and re-raised
  once its bookkeeping is consistent again (see :func:`raise_collected`).

Trio guest mode hosted on an asyncio loop is not supported: the asyncio loop is
found first, so a trio task there would be given asyncio primitives.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["in_trio_run", "logger", "raise_collected", "report_exception", "running_loop"]

#: Returns the running loop of this thread or ``None``; a C function, cheap.
running_loop = asyncio._get_running_loop

#: Where exceptions from callbacks go on trio (asyncio has its loop's handler).
logger = logging.getLogger("purgatory")


def in_trio_run() -> bool:
    """True inside ``trio.run`` (anyio's trio backend included). Never imports trio.

    Call it only once :func:`running_loop` returned ``None``. O(1): a dict lookup,
    then an attribute check when trio is imported.
    """
    trio = sys.modules.get("trio")
    return trio is not None and bool(trio.lowlevel.in_trio_run())


def report_exception(
    message: str, exc: BaseException, collected: list[BaseException] | None, **context: Any
) -> None:
    """Report ``exc`` to the running library (see the module doc), or append it to
    ``collected``. With no library running and no ``collected`` list, it is raised.
    """
    loop = running_loop()
    if loop is not None:
        loop.call_exception_handler({"message": message, "exception": exc, **context})
    elif in_trio_run():
        details = "".join(f"\n{key}: {value!r}" for key, value in context.items())
        logger.error(
            "%s%s",
            message,
            details,
            exc_info=(type(exc), exc, exc.__traceback__),
            extra={"purgatory_context": context},
        )
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
