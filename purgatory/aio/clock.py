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
fork. So while a timer's reaper runs, the timer reads through
:meth:`LoopClock.bound_reader` instead (``WheelTimer.use_reader``): a
:class:`~purgatory.core.ClockReader` of the same clock, chosen once for the
library the reaper runs on (the timer lives there for that long): 255 -> 113 ns
a read in the pure core (BENCHMARKS.md). Which library runs, and how its clock
is read, is the backends' decision (``Backend.clock_reader``):

* asyncio's own loops: ``loop.time()`` is ``time.monotonic()``, so the reader is
  ``ClockReader.monotonic()``, which the compiled core computes in C (CPython on
  Linux reads ``clock_gettime(CLOCK_MONOTONIC)`` and divides by 1e9; the core
  does the same arithmetic, so both builds read the same values);
* uvloop: ``loop.time()`` is ``uv_now(loop) / 1000`` right after
  ``uv_update_time(loop)`` (uvloop refreshes libuv's cached loop time on every
  call, as asyncio has no time cache): libuv's fast clock, ``clock_gettime`` of
  ``CLOCK_MONOTONIC_COARSE`` when its resolution is 1 ms or finer (else of
  ``CLOCK_MONOTONIC``), in whole milliseconds. So it *can* be read without a
  call into uvloop: for uvloop's own ``Loop.time`` (not a subclass's override)
  the reader is ``ClockReader.libuv(loop.time)``, which the pure core calls and
  the compiled core reads in C with libuv's rule, dividing as uvloop does: the
  same values as ``loop.time()``, no Python call. uvloop's own ``call_later``
  schedules on that same clock;
* any other loop, and a loop class that overrides ``time()`` (a virtual-time
  test loop such as :class:`purgatory.testing.VirtualTimeLoop`):
  ``ClockReader.seconds(loop.time)``, always called;
* trio: ``trio.current_time()``, the run's clock (a ``MockClock`` too): it does
  not count from CLOCK_MONOTONIC, so it is always called.

The C reads are used on Linux only (``purgatory.core.clock.C_CLOCKS``): on
macOS CPython's ``time.monotonic`` and libuv both read ``mach_absolute_time``,
not ``CLOCK_MONOTONIC``, so there the readers call them as in the pure core.

:class:`purgatory.testing.ManualClock` is the deterministic clock for tests.
"""

from __future__ import annotations

from ..core.clock import ClockReader
from .backends import clock_reader, current_backend, running_loop

__all__ = ["LoopClock"]


class LoopClock:
    """The running event loop's clock in whole milliseconds: asyncio's ``loop.time()``,
    ``trio.current_time()`` inside ``trio.run``, ``time.monotonic()`` with neither.

    ``now_ms`` is O(1): one C call to find the running loop, then a read through
    the loop's :class:`~purgatory.core.ClockReader` (see the module doc), cached
    while the same loop keeps running. Without an asyncio loop, a check for a trio
    run comes first (a dict lookup and an attribute test): the asyncio path never
    pays for it.
    """

    __slots__ = ("_loop", "_reader")

    def __init__(self) -> None:
        self._loop: object | None = None
        self._reader = clock_reader(None)

    def now_ms(self) -> int:
        loop = running_loop()
        if loop is not self._loop:
            self._loop = loop
            self._reader = clock_reader(loop)
        return self._reader.now_ms()

    def bound_reader(self) -> ClockReader:
        """A reader of the clock of the library running now, bound to it: it reads
        that clock without looking the running loop up again (its ``now_ms()`` is
        this clock's while that library runs). O(1) per read.

        The lookup is most of the cost of :meth:`now_ms` (asyncio's
        ``_get_running_loop`` makes a ``getpid()`` system call to detect forks), so a
        timer reads through this while its reaper runs, when the reaper's loop is
        the one it lives on (``WheelTimer.use_reader``; see
        :meth:`purgatory.SystemTimer.start_reaper`). For asyncio's own loop it is
        ``ClockReader.monotonic()``, which the compiled core reads in C.
        """
        backend = current_backend()
        return clock_reader(None) if backend is None else backend.clock_reader()

    def __repr__(self) -> str:
        return f"LoopClock(loop={self._loop!r})"
