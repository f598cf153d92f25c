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

How ``await op`` reaches the loop. ``await op`` is the core's
``Operation.__await__`` (compiled: no Python frame of ours per await), and the core
imports no event loop, so it calls two hooks (``core.operation.set_await_hooks``).
This module owns them and sets them, once, where :class:`DelayedOperation` is
defined: the running asyncio loop's getter (``asyncio._get_running_loop``; a
pending operation then waits on one future of that loop, made by the core), and
``_await_otherwise`` for every other case: a done operation (its outcome at
once) or a trio run (``TrioBackend.wait``).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..core.operation import Operation, Waiter, set_await_hooks
from .backends import in_trio_run, running_loop

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


def _await_otherwise(op: Operation) -> Generator[Any, None, Any]:
    """``await op`` when ``op`` is done or no asyncio loop runs: the outcome at once, or
    a wait in the running trio task. O(1).

    The asyncio case is the core's ``Operation.__await__`` itself: it makes one
    future, registers it as the operation's waiter and hands the task that future's
    own (C) iterator, cheaper than a Python function of the shell doing the same
    (benchmarks/HISTORY.md). A cancelled awaiter's future is done, so settling skips
    it, and ``Operation.add_waiter`` drops such futures as it goes.
    """
    if op.is_done:
        return _settled(op)
    if not in_trio_run():
        raise RuntimeError("awaiting an operation needs a running event loop")
    from .backends.trio_backend import TRIO

    return TRIO.wait(op)


def _settled(op: Operation) -> Generator[Any, None, Any]:
    """A generator that returns (or raises) a done operation's outcome at once."""
    outcome = op.result()
    yield from ()  # makes this a generator; yields nothing
    return outcome


set_await_hooks(running_loop, _await_otherwise)  # the one place that sets them
