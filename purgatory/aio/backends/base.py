"""What every backend provides, and what the backends share.

A backend is the async shell's view of one library. Its methods, each used by one
part of the shell:

=========================  ========================================  ===================
method                     for                                       used by
=========================  ========================================  ===================
``sleeper(timer)``         sleep until a time on the timer's clock,  reaper,
                           woken earlier when work appears earlier   ``advance_clock``
``start_task(fn, name)``   run the reaper's loop as a task           reaper
``yield_now()``            let the library breathe between polls     reaper
``report(msg, exc, ctx)``  where a callback's exception goes         timer, purgatory
``threadsafe_scheduler()`` run a call on this loop from any thread   ``call_threadsafe``
``clock_reader()``         read this library's clock, the fastest    :class:`LoopClock`,
                           way (a ``ClockReader``)                   ``SystemTimer``
=========================  ========================================  ===================

The asyncio backend (:mod:`.asyncio_backend`) serves asyncio, uvloop and anyio on
asyncio; the trio backend (:mod:`.trio_backend`) trio and anyio on trio.

Awaiting an operation is no method here: on asyncio the core's
``Operation.__await__`` makes the one future itself (in C on the compiled build),
and on trio :mod:`purgatory.aio.operation`, which owns ``await op``'s hooks, calls
``TrioBackend.wait``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar

from ...core.clock import ClockReader
from ...core.timer import WheelTimer

__all__ = ["WAKE_MARGIN_S", "Backend", "Sleeper", "SleeperBase", "TaskHandle"]

T = TypeVar("T")

#: what a sleeper sleeps past its wake time: a float sum of seconds may land a hair
#: below a whole millisecond (8.0 + 0.001 is 8.000999...), which a clock read in
#: truncated milliseconds would see as the millisecond before, polling too soon for
#: its work and sleeping a millisecond more; a microsecond past it reads as it
WAKE_MARGIN_S = 1e-6


class Sleeper(Protocol):
    """Sleeps until a time in the timer's clock; ``notify`` moves the wake-up earlier."""

    async def sleep(self, target_ms: int | None, limit_ms: int | None = None) -> None: ...

    def notify(self, expiration_ms: int) -> None: ...

    def wake(self) -> None: ...


class TaskHandle(Protocol):
    """A running background task (the reaper's loop), as the shell controls it."""

    @property
    def stops_fully(self) -> bool:
        """True if :meth:`join` releases everything (asyncio); False on trio, whose
        nursery is released only by :meth:`exit` at the end of ``async with``."""

    async def join(self) -> None:
        """Wait for a task asked to stop (asyncio); trio: returns at once."""

    async def exit(self, exc: BaseException | None) -> bool:
        """Release the task at the end of the ``async with`` block that started it,
        which ``exc`` ended (None: no exception); True to suppress ``exc`` (only trio's
        nursery ever does, for its own cancellation)."""


class Backend(Protocol):
    """One async library, as the shell sees it; see the module doc."""

    name: str

    def sleeper(self, timer: WheelTimer) -> Sleeper: ...

    async def start_task(
        self, fn: Callable[[], Coroutine[Any, Any, None]], name: str
    ) -> TaskHandle: ...

    def yield_now(self) -> Awaitable[None]: ...

    def report(self, message: str, exc: BaseException, context: dict[str, Any]) -> None: ...

    def threadsafe_scheduler(self) -> Callable[[Callable[[], None]], object]: ...

    def clock_reader(self) -> ClockReader:
        """A reader of this library's clock, bound to it (valid while it runs)."""


class SleeperBase:
    """What every sleeper shares: the target, the limit and how ``notify`` moves them.

    A sleeper sleeps until ``min(target_ms, limit_ms)`` on the timer's clock; while
    it sleeps it is one of the timer's wake-ups (:meth:`WheelTimer.add_wakeup`), so
    work appearing earlier than the target moves the wake-up (``notify``) without
    waking the task.
    """

    __slots__ = ("_limit_ms", "_target_ms", "_timer")

    def __init__(self, timer: WheelTimer) -> None:
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

    def _sleep_s(self) -> float | None:
        """How long to sleep from now for the wake time: None if none, 0.0 if it
        has come; else the time to it on the timer's clock (relative, so any clock
        works) plus :data:`WAKE_MARGIN_S`, so a reading then is at or past it. O(1)."""
        when_ms = self._wake_time_ms()
        if when_ms is None:
            return None
        delay_ms = when_ms - self._timer.now_ms()
        return delay_ms / 1000 + WAKE_MARGIN_S if delay_ms > 0 else 0.0

    def notify(self, expiration_ms: int) -> None:
        """Work now exists at ``expiration_ms``: sleep no later than that. O(1)."""
        target = self._target_ms
        if target is None or expiration_ms < target:
            self._target_ms = expiration_ms
            self._arm()
