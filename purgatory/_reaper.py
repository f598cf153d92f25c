"""The reaper: the only code of the timer that touches the event loop.

The reaper is one task per timer. It loops:

1. ``timer.poll()``: run what is due, flush expired buckets through reinsert;
2. ask the timer for its next expiration (the earliest bucket, or "now" if tasks
   became due meanwhile, or nothing at all);
3. sleep until then with a single timed wake-up (asyncio: one ``loop.call_later``
   handle; trio: the deadline of one cancel scope), or with none at all when
   nothing is scheduled.

It never ticks: an idle timer costs no CPU, and a timer with 100k tasks far in
the future wakes once per expiring *bucket*, not per task or per millisecond.
When ``add`` creates a bucket earlier than the one the reaper sleeps for (or a
due task), the timer calls the sleeper's ``notify``, which moves the wake-up
earlier without waking the task.

Backends. The loop above (:meth:`Reaper._run`) is written once; what differs is
how it sleeps and how its task is started and stopped:

* **asyncio** (uvloop, anyio on asyncio): :class:`_Sleeper` here; the task is a
  plain ``loop.create_task`` started by ``async with timer`` and awaited on exit.
  Nothing of trio or anyio is imported.
* **trio** (anyio on trio): :mod:`purgatory._trio`, imported only inside
  ``trio.run``. The task runs in a nursery (trio's task group) opened by
  ``async with timer`` and closed when the block exits: the reaper never
  outlives the block, cancelling the block cancels the reaper, and a reaper
  crash (a bug: exceptions from tasks never get that far) cancels the block and
  comes out of ``async with`` as an ExceptionGroup. An exception raised by the
  block itself comes out as itself, not wrapped in a group.

Exceptions raised by tasks go to ``loop.call_exception_handler`` on asyncio and
to the ``"purgatory"`` logger on trio (see :mod:`purgatory._loop`; ``poll`` does
that whenever a library is running) and the reaper carries on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

from ._loop import in_trio_run, report_exception, running_loop
from ._timer import SystemTimer

if TYPE_CHECKING:
    from ._trio import TrioReaperScope

__all__ = ["Reaper", "advance_clock"]


class Sleeper(Protocol):
    """Sleeps until a time in the timer's clock; ``notify`` moves the wake-up earlier."""

    async def sleep(self, target_ms: int | None, limit_ms: int | None = None) -> None: ...

    def notify(self, expiration_ms: int) -> None: ...

    def wake(self) -> None: ...


class SleeperBase:
    """What every sleeper shares: the target, the limit and how ``notify`` moves them."""

    __slots__ = ("_limit_ms", "_target_ms", "_timer")

    def __init__(self, timer: SystemTimer) -> None:
        self._timer = timer
        self._target_ms: int | None = None  # the expiration slept for; None: no work
        self._limit_ms: int | None = None  # wake no later than this; None: no limit

    def _wake_time_ms(self) -> int | None:
        target, limit = self._target_ms, self._limit_ms
        if target is None:
            return limit
        return target if limit is None else min(target, limit)

    def _arm(self) -> None:
        raise NotImplementedError

    def notify(self, expiration_ms: int) -> None:
        """Work now exists at ``expiration_ms``: sleep no later than that. O(1)."""
        target = self._target_ms
        if target is None or expiration_ms < target:
            self._target_ms = expiration_ms
            self._arm()


class _Sleeper(SleeperBase):
    """asyncio: one future to wait on and one ``call_later`` handle to resolve it."""

    __slots__ = ("_handle", "_loop", "_waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop, timer: SystemTimer) -> None:
        super().__init__(timer)
        self._loop = loop
        self._waiter: asyncio.Future[None] | None = None
        self._handle: asyncio.TimerHandle | None = None

    async def sleep(self, target_ms: int | None, limit_ms: int | None = None) -> None:
        """Sleep until ``min(target_ms, limit_ms)`` (None: unbounded) or :meth:`wake`."""
        self._target_ms = target_ms
        self._limit_ms = limit_ms
        waiter = self._waiter = self._loop.create_future()
        self._arm()
        timer = self._timer
        timer._sleepers.append(self.notify)
        try:
            await waiter
        finally:
            timer._sleepers.remove(self.notify)
            if self._handle is not None:
                self._handle.cancel()
                self._handle = None
            self._waiter = None

    def _arm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        when_ms = self._wake_time_ms()
        if when_ms is None:
            return
        delay_ms = when_ms - self._timer._now_ms()
        if delay_ms <= 0:
            self.wake()
        else:
            self._handle = self._loop.call_later(delay_ms / 1000, self.wake)

    def wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class Reaper:
    """Drives one timer on the running asyncio loop or trio run; see the module doc."""

    __slots__ = ("_scope", "_sleeper", "_stopping", "_task", "_timer", "wakeups")

    def __init__(self, timer: SystemTimer) -> None:
        self._timer = timer
        self._task: asyncio.Task[None] | None = None  # asyncio only
        self._scope: TrioReaperScope | None = None  # trio only: the nursery
        self._sleeper: Sleeper | None = None
        self._stopping = False
        self.wakeups = 0  # times the task resumed from a sleep

    async def start(self) -> None:
        """Start the task on the running library; RuntimeError if none runs."""
        loop = running_loop()
        name = f"{self._timer.name}-reaper"
        if loop is not None:
            self._sleeper = _Sleeper(loop, self._timer)
            self._task = loop.create_task(self._run(asyncio.sleep), name=name)
        elif in_trio_run():
            from ._trio import TrioReaperScope, TrioSleeper

            self._sleeper = TrioSleeper(self._timer)
            self._scope = await TrioReaperScope.open(self, name)
        else:
            raise RuntimeError("no running event loop")

    def _is_stopping(self) -> bool:  # a call, so type checkers do not narrow it
        return self._stopping

    def request_stop(self) -> None:
        """Make the task end at its next turn; it polls no more from now on. O(1)."""
        self._stopping = True
        if self._sleeper is not None:
            self._sleeper.wake()

    @property
    def stops_fully(self) -> bool:
        """True if :meth:`stop` releases everything (asyncio); False on trio, whose
        nursery is released only by :meth:`exit` at the end of ``async with``."""
        return self._scope is None

    async def stop(self) -> None:
        """Stop the task; tasks stay scheduled in the timer.

        asyncio: waits for the task to end. trio: the task ends at its next turn
        (it never polls again) and the nursery waits for it in :meth:`exit`.
        """
        self.request_stop()
        task = self._task
        if task is not None:
            await task

    async def exit(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        """Stop and release the task at the end of ``async with``; True to suppress
        ``exc`` (only trio's nursery ever does, for its own cancellation)."""
        scope = self._scope
        if scope is None:
            await self.stop()
            return False
        self.request_stop()
        return await scope.close(exc_type, exc, tb)

    async def _run(self, sleep: Callable[[float], Awaitable[None]]) -> None:
        """The loop of the module doc; ``sleep(0)`` lets the library breathe."""
        timer = self._timer
        sleeper = self._sleeper
        assert sleeper is not None
        while not self._is_stopping():
            try:
                timer.poll()
            except Exception as exc:  # noqa: BLE001 - poll reports task errors itself; a guard
                report_exception(f"reaper of {timer.name!r} failed to poll", exc, None)
            if self._is_stopping():  # a task may have stopped us while we polled
                break
            next_ms = timer.next_expiration_ms()
            if next_ms is not None and next_ms <= timer._now_ms():
                await sleep(0)  # let the loop breathe, then poll again
            else:
                await sleeper.sleep(next_ms)
            self.wakeups += 1


async def advance_clock(timer: SystemTimer, timeout_ms: int) -> bool:
    """Kafka's ``advanceClock``: wait up to ``timeout_ms`` for work, then poll.

    Returns True if any bucket expired or any due task ran.
    """
    if type(timeout_ms) is not int or timeout_ms < 0:
        raise ValueError(f"timeout_ms must be a non-negative int, not {timeout_ms!r}")
    now_ms = timer._now_ms()
    next_ms = timer.next_expiration_ms()
    if timeout_ms > 0 and (next_ms is None or next_ms > now_ms):
        loop = running_loop()
        sleeper: Sleeper
        if loop is not None:
            sleeper = _Sleeper(loop, timer)
        elif in_trio_run():
            from ._trio import TrioSleeper

            sleeper = TrioSleeper(timer)
        else:
            raise RuntimeError("no running event loop")
        await sleeper.sleep(next_ms, now_ms + timeout_ms)
    ran = timer.poll()
    return ran > 0 or timer._flushed > 0
