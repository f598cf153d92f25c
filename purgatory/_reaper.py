"""The reaper: the only code of the timer that touches the event loop.

The reaper is one coroutine per timer. It loops:

1. ``timer.poll()``: run what is due, flush expired buckets through reinsert;
2. ask the timer for its next expiration (the earliest bucket, or "now" if tasks
   became due meanwhile, or nothing at all);
3. sleep until then with a single ``loop.call_later`` handle, or with no handle
   at all when nothing is scheduled.

It never ticks: an idle timer costs no CPU, and a timer with 100k tasks far in
the future wakes once per expiring *bucket*, not per task or per millisecond.
When ``add`` creates a bucket earlier than the one the reaper sleeps for (or a
due task), the timer calls :meth:`_Sleeper.notify`, which moves the sleeping
handle earlier without waking the coroutine.

Exceptions raised by tasks go to ``loop.call_exception_handler`` (``poll`` does
that whenever a loop is running) and the reaper carries on.
"""

from __future__ import annotations

import asyncio

from ._timer import SystemTimer

__all__ = ["Reaper", "advance_clock"]


class _Sleeper:
    """Sleep until a time in the timer's clock, woken earlier when work appears earlier."""

    __slots__ = ("_handle", "_limit_ms", "_loop", "_target_ms", "_timer", "_waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop, timer: SystemTimer) -> None:
        self._loop = loop
        self._timer = timer
        self._waiter: asyncio.Future[None] | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._target_ms: int | None = None  # the expiration slept for; None: no work
        self._limit_ms: int | None = None  # wake no later than this; None: no limit

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

    def _wake_time_ms(self) -> int | None:
        target, limit = self._target_ms, self._limit_ms
        if target is None:
            return limit
        return target if limit is None else min(target, limit)

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

    def notify(self, expiration_ms: int) -> None:
        """Work now exists at ``expiration_ms``: sleep no later than that. O(1)."""
        target = self._target_ms
        if target is None or expiration_ms < target:
            self._target_ms = expiration_ms
            self._arm()

    def wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class Reaper:
    """Drives one timer on the running loop; see the module doc."""

    __slots__ = ("_sleeper", "_stopping", "_task", "_timer", "wakeups")

    def __init__(self, timer: SystemTimer) -> None:
        self._timer = timer
        self._task: asyncio.Task[None] | None = None
        self._sleeper: _Sleeper | None = None
        self._stopping = False
        self.wakeups = 0  # times the coroutine resumed from a sleep

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._sleeper = _Sleeper(loop, self._timer)
        self._task = loop.create_task(self._run(), name=f"{self._timer.name}-reaper")

    def _is_stopping(self) -> bool:  # a call, so type checkers do not narrow it
        return self._stopping

    async def stop(self) -> None:
        """Stop the coroutine and wait for it; tasks stay scheduled in the timer."""
        self._stopping = True
        if self._sleeper is not None:
            self._sleeper.wake()
        task = self._task
        if task is not None:
            await task

    async def _run(self) -> None:
        timer = self._timer
        sleeper = self._sleeper
        assert sleeper is not None
        loop = asyncio.get_running_loop()
        while not self._is_stopping():
            try:
                timer.poll()
            except Exception as exc:  # noqa: BLE001 - poll reports task errors itself; a guard
                loop.call_exception_handler(
                    {"message": f"reaper of {timer.name!r} failed to poll", "exception": exc}
                )
            if self._is_stopping():  # a task may have stopped us while we polled
                break
            next_ms = timer.next_expiration_ms()
            if next_ms is not None and next_ms <= timer._now_ms():
                await asyncio.sleep(0)  # let the loop breathe, then poll again
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
        sleeper = _Sleeper(asyncio.get_running_loop(), timer)
        await sleeper.sleep(next_ms, now_ms + timeout_ms)
    ran = timer.poll()
    return ran > 0 or timer._flushed > 0
