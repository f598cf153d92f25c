"""The clock: where a timer reads the time, in integer milliseconds.

A clock is any object with ``now_ms() -> int`` (:class:`Clock`). The timer reads
it once per ``add`` and once per ``poll``, so it must be cheap, and monotonic:
Kafka moved its timer off wall-clock time after clock jumps broke it. The core
owns no clock of its own. :class:`purgatory.testing.ManualClock` moves only when
a test says so; :class:`purgatory.LoopClock` (the async shell's default) follows
the running event loop.

A timer holds its clock and asks it, through a :class:`ClockReader`: one small
object that knows the fastest way to read that one clock (trio's ``Clock`` and
Kafka's ``Time`` are the model: the timer does not know which loop or library the
clock belongs to). A reader reads in one of four ways:

================================  ============================================
``ClockReader.of(clock)``         ``clock.now_ms()`` (any clock; the default)
``ClockReader.seconds(fn)``       ``int(fn() * 1000)``: a clock in seconds
                                  (``loop.time``, ``trio.current_time``)
``ClockReader.monotonic()``       ``int(time.monotonic() * 1000)``, asyncio's
                                  own loop clock
``ClockReader.libuv(loop.time)``  ``int(loop.time() * 1000)`` of an unmodified
                                  uvloop loop: libuv's loop time
================================  ============================================

The last two are why the reader exists. A read through ``LoopClock.now_ms`` first
finds the running loop, and asyncio's ``_get_running_loop`` makes a ``getpid()``
system call each time (to notice a fork); while a timer's reaper runs, the timer
lives on that loop, so the async shell gives the timer a reader bound to it
(``WheelTimer.use_reader``) and puts the clock's own back when the reaper stops.
In the compiled core on Linux (:data:`C_CLOCKS`), ``monotonic()`` and
``libuv()`` readers compute their clock in C, bit for bit the values the Python
reads return, with no Python call (``cmonotonic.pxd`` says how); elsewhere, and
in the pure core, they call ``time.monotonic`` or ``loop.time`` as a
``seconds`` reader does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from ._signature import InitSignature, init_doc

try:
    import cython
except ImportError:  # the pure-Python core, with Cython not installed
    from . import _cython_shim as cython

if not cython.compiled:  # the compiled core cimports these readers in C (cmonotonic.pxd)
    from time import monotonic as monotonic_s

    #: monotonic_s() returns time.monotonic()'s value: here it is time.monotonic; the
    #: compiled core's is computed in C where built with the POSIX clocks (Linux), a
    #: stub elsewhere (then False, and no reader reads it)
    monotonic_is_time = True

    def libuv_now_ms() -> int:
        """libuv's ``uv_now()`` refreshed: what uvloop's ``loop.time()`` returns, in
        ms. Read only by the compiled core (the pure one calls ``loop.time``)."""
        return int(monotonic_s() * 1000)  # pragma: no cover - never reached, see libuv


__all__ = ["C_CLOCKS", "Clock", "ClockReader"]

#: True when :meth:`ClockReader.monotonic` and :meth:`ClockReader.libuv` read their
#: clock in C: the compiled core, on Linux, where CPython's ``time.monotonic`` and
#: libuv's loop time are known reads of CLOCK_MONOTONIC (see cmonotonic.pxd);
#: elsewhere CPython reads another clock (macOS: ``mach_absolute_time``), or the
#: platform has no POSIX clocks (Windows), so cmonotonic.pxd compiles a stub and the
#: readers call ``time.monotonic`` or ``loop.time``.
C_CLOCKS: bool = cython.compiled and bool(monotonic_is_time)

# how a reader reads (ClockReader._how): the first two call Python, the last two
# (C_CLOCKS only) compute the clock in C
_SECONDS = 0
_CLOCK = 1
_MONOTONIC = 2
_LIBUV = 3
_KINDS = ("seconds", "clock", "monotonic", "libuv")


@runtime_checkable
class Clock(Protocol):
    """Anything with ``now_ms() -> int``: monotonic, integer milliseconds."""

    def now_ms(self) -> int: ...


class ClockReader:
    """Reads one clock, the fastest way known for it, in integer milliseconds.

    Made by its factories (:meth:`of`, :meth:`seconds`, :meth:`monotonic`,
    :meth:`libuv`; see the module doc); immutable, so one reader may serve many
    timers. ``ClockReader(clock)`` is :meth:`of`. ``now_ms`` is O(1).
    """

    __slots__ = ("_how", "_read", "_source")

    #: the constructor's signature for ``inspect`` and ``help()`` in the compiled core too
    __signature__ = InitSignature()

    def __init__(self, clock: Clock) -> None:
        "__init__(self, clock)\n--\n\nA reader of ``clock.now_ms()``."
        read = getattr(clock, "now_ms", None)
        if not callable(read):
            raise TypeError(f"clock must have now_ms(), not {type(clock).__name__}")
        self._how = _CLOCK
        # what now_ms calls: the clock's bound now_ms, or the seconds reader; for the
        # C kinds, the Python read they replace (never called, kept as the source)
        self._read: Callable[[], Any] = read
        self._source: object = clock

    @staticmethod
    def of(clock: Clock) -> ClockReader:
        """A reader of ``clock.now_ms()``. O(1)."""
        return ClockReader(clock)

    @staticmethod
    def seconds(seconds: Callable[[], float]) -> ClockReader:
        """A reader of a clock in seconds: ``int(seconds() * 1000)``. O(1)."""
        if not callable(seconds):
            raise TypeError(f"seconds must be callable, not {type(seconds).__name__}")
        return _made(_SECONDS, seconds)

    @staticmethod
    def monotonic() -> ClockReader:
        """A reader of ``time.monotonic()`` (asyncio's own loop clock), in C where
        :data:`C_CLOCKS` holds, to the same values. O(1)."""
        return _made(_MONOTONIC if C_CLOCKS else _SECONDS, time.monotonic)

    @staticmethod
    def libuv(loop_time: Callable[[], float]) -> ClockReader:
        """A reader of ``loop_time``, which must be an unmodified uvloop loop's
        ``time`` (not a subclass's override: the caller checks): libuv's loop time,
        read in C where :data:`C_CLOCKS` holds, to the same values. O(1)."""
        if not callable(loop_time):
            raise TypeError(f"loop_time must be callable, not {type(loop_time).__name__}")
        return _made(_LIBUV if C_CLOCKS else _SECONDS, loop_time)

    @property
    def source(self) -> object:
        """What it reads: the clock (:meth:`of`), or the callable in seconds whose
        values it returns in ms (``time.monotonic``, a loop's ``time``). O(1)."""
        return self._source

    @property
    def kind(self) -> str:
        """How it reads: ``"clock"`` (calls ``now_ms``), ``"seconds"`` (calls the
        source), or ``"monotonic"`` / ``"libuv"``: computed in C, no call. O(1)."""
        return _KINDS[self._how]

    def now_ms(self) -> int:
        """The clock's time, in integer milliseconds. O(1)."""
        how = self._how
        if how == _SECONDS:  # first: the pure core's every bound reader
            now_s: float = self._read()
            return int(now_s * 1000)
        if how == _CLOCK:
            return self._read()  # type: ignore[no-any-return]
        if how == _MONOTONIC:
            return int(monotonic_s() * 1000)
        uv_now_s: float = libuv_now_ms() / 1000  # uvloop's loop.time(), as it divides
        return int(uv_now_s * 1000)

    def __repr__(self) -> str:
        return f"<ClockReader {self.kind} of {self._source!r}>"


init_doc(ClockReader)  # the text signature is for the compiled core only


def _made(how: int, source: Callable[[], float]) -> ClockReader:
    """A reader of ``source``, a clock in seconds, read as ``how`` says."""
    reader = ClockReader.__new__(ClockReader)
    reader._how = how
    reader._read = source
    reader._source = source
    return reader
