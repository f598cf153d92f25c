"""The trio backend: trio, and anyio on trio.

Imported only from inside ``trio.run`` (anyio on trio included), never at import
time of the package: asyncio users never import trio. Everything here maps one
asyncio mechanism of the shell onto trio's own:

========================  ===============================  ==============================
what                      asyncio                          trio (this module)
========================  ===============================  ==============================
reaper's timed wake-up    ``loop.call_later`` + a future   a cancel scope's ``deadline``
reaper's task             ``loop.create_task``             a nursery opened by
                                                           ``async with timer``
one awaiter of an op      an ``asyncio.Future``            ``wait_task_rescheduled``
cancelling one awaiter    ``CancelledError``; its future   ``trio.Cancelled``; its waiter
                          leaves the op                    leaves the op (abort callback)
errors from callbacks     ``loop.call_exception_handler``  the ``"purgatory"`` logger
``call_threadsafe``       ``loop.call_soon_threadsafe``    ``TrioToken.run_sync_soon``
clock                     ``loop.time()``                  ``trio.current_time()``
========================  ===============================  ==============================

Errors from callbacks go to the ``"purgatory"`` logger, at ERROR with the
traceback: trio has no loop exception handler, and raising into the task group
that runs the reaper would let one operation's failing callback tear down the
purgatory and every other request with it (Kafka's purgatory logs and carries
on; so does asyncio's default handler). Attach a handler to
``logging.getLogger("purgatory")`` to collect them.

Why trio directly rather than anyio: the two backends anyio supports are asyncio
and trio, and each has native code here, so anyio would only add a layer on the
hot paths. Code running under ``anyio.run(..., backend="trio")`` *is* running on
trio and uses this module.

Cancellation on trio:

* cancelling the scope around ``await op`` (``move_on_after``, ``fail_after``, a
  cancelled nursery) raises ``trio.Cancelled`` in that task only: the abort
  callback removes its waiter, and the operation stays pending, watched and timed;
  other awaiters still get the outcome.
* closing the purgatory fails every pending operation with ``PurgatoryClosedError``;
  each awaiting task is rescheduled with that error.
* cancelling the block of ``async with timer`` (or purgatory) cancels the reaper
  with it; on the way out the purgatory still cancels its pending operations.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Coroutine, Generator
from contextlib import AbstractAsyncContextManager
from typing import Any, Generic, TypeVar

import outcome
import trio

from ...core.clock import ClockReader
from ...core.operation import Operation
from ...core.timer import WheelTimer
from .base import SleeperBase

__all__ = ["TRIO", "TrioBackend", "TrioSleeper", "TrioWaiter"]

T = TypeVar("T")

#: where exceptions from callbacks go on trio (asyncio has its loop's handler)
logger = logging.getLogger("purgatory")

#: the run's clock; one reader serves every timer (readers are immutable)
_CURRENT_TIME = ClockReader.seconds(trio.current_time)


class TrioSleeper(SleeperBase):
    """Sleep in a cancel scope whose deadline is the wake-up; ``wake`` cancels it."""

    __slots__ = ("_scope",)

    def __init__(self, timer: WheelTimer) -> None:
        super().__init__(timer)
        self._scope: trio.CancelScope | None = None

    async def sleep(self, target_ms: int | None, limit_ms: int | None = None) -> None:
        """Sleep until ``min(target_ms, limit_ms)`` (None: unbounded) or :meth:`wake`."""
        self._target_ms = target_ms
        self._limit_ms = limit_ms
        timer = self._timer
        with trio.CancelScope() as scope:
            self._scope = scope
            self._arm()
            timer.add_wakeup(self.notify)
            try:
                await trio.sleep_forever()
            finally:
                timer.remove_wakeup(self.notify)
                self._scope = None

    def _arm(self) -> None:
        scope = self._scope
        if scope is None:
            return
        sleep_s = self._sleep_s()
        if sleep_s is None:
            scope.deadline = math.inf
        elif sleep_s:
            scope.deadline = trio.current_time() + sleep_s
        else:
            scope.cancel()

    def wake(self) -> None:
        scope = self._scope
        if scope is not None:
            scope.cancel()


class _NurseryTask:
    """The nursery that runs a background task, open for the ``async with`` block."""

    __slots__ = ("_manager",)

    def __init__(self, manager: AbstractAsyncContextManager[trio.Nursery]) -> None:
        self._manager = manager

    @property
    def stops_fully(self) -> bool:
        return False

    async def join(self) -> None:
        """A nursery closes only in the block that opened it: see :meth:`exit`."""

    async def exit(self, exc: BaseException | None) -> bool:
        """Close the nursery (its task was asked to stop); see :func:`_only_the_body`."""
        exc_type = None if exc is None else type(exc)
        tb = None if exc is None else exc.__traceback__
        try:
            return bool(await self._manager.__aexit__(exc_type, exc, tb))
        except BaseExceptionGroup as group:
            if exc is None or not _only_the_body(group, exc):
                raise
            return False  # `async with` re-raises the block's exception as itself


def _only_the_body(group: BaseExceptionGroup[BaseException], exc: BaseException) -> bool:
    """True if ``group`` holds nothing but the block's own ``exc`` (plus the reaper's
    ``Cancelled`` when the block was cancelled too): then the nursery only wrapped
    the block's exception, and ``async with`` should raise it unwrapped."""
    cancelled = isinstance(exc, trio.Cancelled)

    def other(e: BaseException) -> bool:
        if isinstance(e, BaseExceptionGroup):
            return False  # look inside
        return e is not exc and not (cancelled and isinstance(e, trio.Cancelled))

    return group.subgroup(other) is None


class TrioWaiter(Generic[T]):
    """One trio task awaiting an operation: a :class:`~purgatory.core.Waiter`."""

    __slots__ = ("_done", "_task")

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self._task = task
        self._done = False  # rescheduled, or its wait aborted

    def done(self) -> bool:
        return self._done

    def set_result(self, value: T) -> None:
        self._done = True
        trio.lowlevel.reschedule(self._task, outcome.Value(value))

    def set_exception(self, exc: BaseException) -> None:
        self._done = True
        trio.lowlevel.reschedule(self._task, outcome.Error(exc))


async def _wait(op: Operation) -> Any:
    """Wait for a pending ``op`` in this trio task. O(1); cancelling it is O(waiters)."""
    waiter: TrioWaiter[Any] = TrioWaiter(trio.lowlevel.current_task())
    op.add_waiter(waiter)

    def abort(_raise_cancel: Any) -> trio.lowlevel.Abort:
        # cancelled before the operation settled: forget this waiter only
        waiter._done = True
        op.remove_waiter(waiter)
        return trio.lowlevel.Abort.SUCCEEDED

    return await trio.lowlevel.wait_task_rescheduled(abort)


class TrioBackend:
    """The backend of trio runs; see the module doc. Stateless: one for all runs."""

    __slots__ = ()

    name = "trio"

    def sleeper(self, timer: WheelTimer) -> TrioSleeper:
        return TrioSleeper(timer)

    async def start_task(
        self, fn: Callable[[], Coroutine[Any, Any, None]], name: str
    ) -> _NurseryTask:
        manager = trio.open_nursery()
        nursery = await manager.__aenter__()
        nursery.start_soon(fn, name=name)
        return _NurseryTask(manager)

    def yield_now(self) -> Awaitable[None]:
        return trio.sleep(0)

    def wait(self, op: Operation) -> Generator[Any, None, Any]:
        return (yield from _wait(op).__await__())

    def report(self, message: str, exc: BaseException, context: dict[str, Any]) -> None:
        details = "".join(f"\n{key}: {value!r}" for key, value in context.items())
        logger.error(
            "%s%s",
            message,
            details,
            exc_info=(type(exc), exc, exc.__traceback__),
            extra={"purgatory_context": context},
        )

    def threadsafe_scheduler(self) -> Callable[[Callable[[], None]], object]:
        """``run_sync_soon`` of this run's token (as ``trio.from_thread.run_sync``
        does, without blocking the calling thread)."""
        return trio.lowlevel.current_trio_token().run_sync_soon

    def clock_reader(self) -> ClockReader:
        """``trio.current_time()``, the run's clock (a ``MockClock`` too), in seconds:
        it does not count from CLOCK_MONOTONIC, so it is always called. O(1)."""
        return _CURRENT_TIME

    def __repr__(self) -> str:
        return "<TrioBackend>"


TRIO = TrioBackend()
