"""The asyncio backend: asyncio's own loop, uvloop, and anyio on asyncio.

==========================  =================================================
reaper's timed wake-up      one ``loop.call_later`` handle resolving a future
reaper's task               ``loop.create_task``, awaited when it stops
one awaiter of an op        an ``asyncio.Future`` registered as its waiter (by
                            the core's ``Operation.__await__`` itself, in C on
                            the compiled build); a cancelled awaiter's future
                            leaves the operation
errors from callbacks       ``loop.call_exception_handler`` (by default logged
                            at ERROR on the ``"asyncio"`` logger)
``call_threadsafe``         ``loop.call_soon_threadsafe``
clock                       ``loop.time()``: read as ``time.monotonic()`` when
                            the loop is asyncio's own (its ``time()`` is that),
                            as libuv's clock when it is uvloop's own (both in C
                            in the compiled core on Linux), else called
==========================  =================================================
"""

from __future__ import annotations

import asyncio
import sys
from asyncio import BaseEventLoop
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from ...core.clock import ClockReader
from ...core.timer import WheelTimer
from .base import SleeperBase

__all__ = ["AsyncioBackend", "AsyncioSleeper"]

T = TypeVar("T")


class AsyncioSleeper(SleeperBase):
    """One future to wait on and one ``call_later`` handle to resolve it."""

    __slots__ = ("_handle", "_loop", "_waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop, timer: WheelTimer) -> None:
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
        timer.add_wakeup(self.notify)
        try:
            await waiter
        finally:
            timer.remove_wakeup(self.notify)
            if self._handle is not None:
                self._handle.cancel()
                self._handle = None
            self._waiter = None

    def _arm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        sleep_s = self._sleep_s()
        if sleep_s is None:
            return
        if sleep_s:
            self._handle = self._loop.call_later(sleep_s, self.wake)
        else:
            self.wake()

    def wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class _TaskHandle:
    """A task on the loop; joining it awaits it."""

    __slots__ = ("_task",)

    def __init__(self, task: asyncio.Task[None]) -> None:
        self._task = task

    @property
    def stops_fully(self) -> bool:
        return True

    async def join(self) -> None:
        await self._task

    async def exit(self, exc: BaseException | None) -> bool:
        await self._task
        return False


class AsyncioBackend:
    """The backend of one running asyncio loop; see the module doc."""

    __slots__ = ("loop",)

    name = "asyncio"

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def sleeper(self, timer: WheelTimer) -> AsyncioSleeper:
        return AsyncioSleeper(self.loop, timer)

    async def start_task(
        self, fn: Callable[[], Coroutine[Any, Any, None]], name: str
    ) -> _TaskHandle:
        return _TaskHandle(self.loop.create_task(fn(), name=name))

    def yield_now(self) -> Awaitable[None]:
        return asyncio.sleep(0)

    def report(self, message: str, exc: BaseException, context: dict[str, Any]) -> None:
        self.loop.call_exception_handler({"message": message, "exception": exc, **context})

    def threadsafe_scheduler(self) -> Callable[[Callable[[], None]], object]:
        return self.loop.call_soon_threadsafe

    def clock_reader(self) -> ClockReader:
        """The loop's ``time()``, read the fastest way that gives its values: see the
        module doc. A loop class that overrides ``time()`` (a virtual-time test loop,
        say) is always called. Never imports uvloop. O(1)."""
        time = self.loop.time
        method = getattr(time, "__func__", None)
        if method is BaseEventLoop.time:  # asyncio's own: time.monotonic()
            return ClockReader.monotonic()
        uvloop_loop = sys.modules.get("uvloop.loop")
        if uvloop_loop is not None and method is getattr(uvloop_loop.Loop, "time", None):
            return ClockReader.libuv(time)  # uvloop's own: libuv's loop time, refreshed
        return ClockReader.seconds(time)

    def __repr__(self) -> str:
        return f"<AsyncioBackend loop={self.loop!r}>"
