"""The loop clock: the async shell's default clock, in integer milliseconds.

A clock is any object with a ``now_ms() -> int`` method
(:class:`~purgatory.core.clock.Clock`); the timer reads it once per ``add`` and
once per ``poll``, so it must be cheap and monotonic.

:class:`LoopClock` (the default of :class:`~purgatory.SystemTimer`) follows the
running event loop's own clock, ``loop.time()``, truncated to whole milliseconds.
Following the loop rather than ``time.monotonic()`` directly keeps the timer and the
loop's scheduling on one time base: the reaper sleeps with ``loop.call_at`` on the
same numbers, and tools that make a loop travel in time move the timer too. With no
running loop (a synchronous ``poll()`` from a plain function, say), it falls back to
``time.monotonic()``, which is what asyncio's and uvloop's loops count in too.

Inside ``trio.run`` (anyio on trio included) there is no asyncio loop; the clock
then reads ``trio.current_time()``, the run's own clock, so the reaper's cancel
scope deadlines and the timer agree, and a ``trio.testing.MockClock`` (autojump or
not) moves the timer in virtual time. Trio's clocks do not count from
``time.monotonic()`` (the default adds a random offset of hours; a ``MockClock``
starts at 0), which is why an *empty* timer re-bases its wheel on the clock when
its reaper starts (``async with timer``): a timer made outside the run starts at
the run's time. A timer holding tasks must stay on one library.

Reading the clock is on the hot path (every ``add``), and most of
:meth:`LoopClock.now_ms` is finding the running loop: asyncio's
``_get_running_loop`` makes a ``getpid()`` system call on every call, to notice a
fork. So while a timer's reaper runs, the timer reads
:meth:`LoopClock.pinned_seconds` instead (``WheelTimer.pin_clock``): the same
clock, chosen once for the library the reaper runs on (the timer lives there for
that long): 255 -> 113 ns a read in the pure core (BENCHMARKS.md). Which library
runs, and how its clock is read, is the backends' decision
(:func:`~.backends.time_reader`):

* asyncio's own loops: ``loop.time()`` is ``time.monotonic()``, so the reader is
  ``time.monotonic`` itself, which the compiled core computes in C (CPython on
  Linux reads ``clock_gettime(CLOCK_MONOTONIC)`` and divides by 1e9; the core
  does the same arithmetic, so both builds read the same values);
* uvloop: ``loop.time()`` is ``uv_now(loop) / 1000`` right after
  ``uv_update_time(loop)`` (uvloop refreshes libuv's cached loop time on every
  call, as asyncio has no time cache): libuv's fast clock, ``clock_gettime`` of
  ``CLOCK_MONOTONIC_COARSE`` when its resolution is 1 ms or finer (else of
  ``CLOCK_MONOTONIC``), in whole milliseconds. So it *can* be read without a
  call into uvloop: the reader stays ``loop.time`` (the pure core calls it), and
  the compiled core, told so by :func:`~.backends.is_libuv_time` (uvloop's own
  ``Loop.time``, not a subclass's override), reads the same clock with libuv's
  rule and divides as uvloop does, in C: the same values as ``loop.time()``,
  no Python call. uvloop's own ``call_later`` schedules on that same clock;
* trio: ``trio.current_time()``, the run's clock (a ``MockClock`` too): it does
  not count from CLOCK_MONOTONIC, so it is always called.

The C reads are used on Linux only (``purgatory.core.timer.C_CLOCKS``): on
macOS CPython's ``time.monotonic`` and libuv both read ``mach_absolute_time``,
not ``CLOCK_MONOTONIC``, so there the pinned reader is called as in the pure
core.

:class:`purgatory.testing.ManualClock` is the deterministic clock for tests.
"""

from __future__ import annotations

from collections.abc import Callable

from .backends import current_backend, running_loop, time_reader

__all__ = ["LoopClock"]


class LoopClock:
    """The running event loop's clock in whole milliseconds: asyncio's ``loop.time()``,
    ``trio.current_time()`` inside ``trio.run``, ``time.monotonic()`` with neither.

    ``now_ms`` is O(1): one C call to find the running loop, one to read its time.
    The loop's bound ``time`` method is cached while the same loop keeps running;
    when it is asyncio's own ``BaseEventLoop.time`` (which returns
    ``time.monotonic()``), ``time.monotonic`` is called directly, a third cheaper.
    Without an asyncio loop, a check for a trio run comes first (a dict lookup and
    an attribute test): the asyncio path never pays for it.
    """

    __slots__ = ("_loop", "_time")

    def __init__(self) -> None:
        self._loop: object | None = None
        self._time: Callable[[], float] = time_reader(None)

    def now_ms(self) -> int:
        loop = running_loop()
        if loop is not self._loop:
            self._loop = loop
            self._time = time_reader(loop)
        return int(self._time() * 1000)

    def pinned_seconds(self) -> Callable[[], float]:
        """The clock of the library running now, in seconds, bound to it: it reads
        that clock without looking the running loop up again (``now_ms`` is
        ``int(pinned_seconds()() * 1000)`` while that library runs). O(1) per read.

        The lookup is most of the cost of :meth:`now_ms` (asyncio's
        ``_get_running_loop`` makes a ``getpid()`` system call to detect forks), so a
        timer pins this while its reaper runs, when the reaper's loop is the one
        it lives on (``WheelTimer.pin_clock``; see
        :meth:`purgatory.SystemTimer.start_reaper`). For asyncio's own loop it is
        ``time.monotonic`` itself, which the compiled core reads in C.
        """
        backend = current_backend()
        return time_reader(None) if backend is None else backend.time_reader()

    def __repr__(self) -> str:
        return f"LoopClock(loop={self._loop!r})"
