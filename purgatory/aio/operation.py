"""DelayedOperation: an operation you can ``await``.

:class:`DelayedOperation` is the core's :class:`~purgatory.core.operation.Operation`
(lifecycle, exactly-once completion, callbacks: see there) plus ``await op``.

Awaiting is lazy: an operation nobody awaits never creates a waiter. Each
``await op`` makes its own waiter through the running library's backend (on
asyncio and uvloop an ``asyncio.Future``; on trio a task rescheduled by
``wait_task_rescheduled``), registered with ``op.add_waiter``. Cancelling one
awaiting task cancels only that wait: its waiter is done (on asyncio, its future
is cancelled) and settling skips it (on trio it leaves the operation at once,
``remove_waiter``); the operation, its watchers and its timer task are
untouched, and other awaiters still get the outcome. To drop the operation
itself (its client went away), call ``op.cancel()``. On asyncio,
``task.cancel()`` (or ``asyncio.timeout``, or an anyio cancel scope) raises
``CancelledError`` in the awaiter; on trio, a cancelled scope raises
``trio.Cancelled``. Either way, an operation cancelled by the purgatory
(``cancel_for_key``, or ``close``: then :class:`~purgatory.PurgatoryClosedError`)
fails every awaiter with that error.

An operation never given to a purgatory can be awaited too: nothing watches or
times it, so it completes only when someone calls ``force_complete()`` (its
awaiters then get ``on_complete``'s value) and otherwise waits for ever; give it
to a purgatory (``try_complete_else_watch``) for a timeout. Its ``delay_ms`` means
nothing until then.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..core.operation import Operation, Waiter
from . import backends  # noqa: F401 - sets the core's await hooks

__all__ = ["DelayedOperation"]

T = TypeVar("T")


class DelayedOperation(Operation, Generic[T]):
    """An operation that completes early via ``try_complete`` or on timeout, and can
    be awaited; see :mod:`purgatory.core.operation` for its lifecycle.

    ``delay_ms`` is the timeout. ``force_complete``, ``is_completed`` and the state
    checks are O(1); ``await op`` allocates one waiter per awaiter, only if awaited.
    """

    __slots__ = ()

    if TYPE_CHECKING:  # the core's methods, typed with the outcome's type

        def on_complete(self) -> T:
            """Build and return the outcome; runs exactly once."""

        def result(self) -> T:
            """The outcome of a completed operation (see Operation.result)."""

        def add_waiter(self, waiter: Waiter[T]) -> None:
            """Register ``waiter`` for the outcome (see Operation.add_waiter)."""

        def remove_waiter(self, waiter: Waiter[T]) -> None:
            """Forget ``waiter`` (see Operation.remove_waiter)."""

    if TYPE_CHECKING:

        def __await__(self) -> Generator[Any, None, T]:
            """Wait for the outcome: on_complete's value, or its exception, or
            OperationCancelledError. Needs a running asyncio loop or trio run while
            pending (see the module doc for cancellation)."""
