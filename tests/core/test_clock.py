"""ClockReader: each factory reads the value its source gives, and a timer reads
through the reader it is given (``use_reader``).

The C readers (``monotonic``, ``libuv``) are checked against their Python source
by order only: the source read before, the reader, the source read after, each
in whole milliseconds, must not decrease. No timing threshold: a stall between
the reads only widens the interval. uvloop's reader is checked in
``tests/aio/test_clock.py`` (the core's tests run no loop).
"""

from __future__ import annotations

import math
import sys
import time

import pytest

from purgatory.core import COMPILED, ClockReader, WheelTimer
from purgatory.core.clock import C_CLOCKS
from purgatory.testing import ManualClock

from ..timer_kit import Recorder, poll_checked


def test_the_c_clocks_are_used_where_they_are_known_to_agree() -> None:
    assert (COMPILED and sys.platform.startswith("linux")) == C_CLOCKS


def test_a_clock_reader_reads_the_clocks_now_ms() -> None:
    clock = ManualClock(start_ms=40)
    reader = ClockReader.of(clock)
    assert (reader.kind, reader.source) == ("clock", clock)
    assert reader.now_ms() == 40
    clock.advance(7)
    assert reader.now_ms() == clock.now_ms() == 47
    assert ClockReader(clock).now_ms() == 47  # the constructor is of()


def test_a_seconds_reader_truncates_to_whole_milliseconds() -> None:
    now_s = [12.3456]
    reader = ClockReader.seconds(lambda: now_s[0])
    assert reader.kind == "seconds"
    assert reader.now_ms() == int(12.3456 * 1000) == 12_345
    now_s[0] = 0.0009
    assert reader.now_ms() == 0


def test_the_monotonic_reader_reads_time_monotonic() -> None:
    reader = ClockReader.monotonic()
    assert reader.source is time.monotonic
    assert reader.kind == ("monotonic" if C_CLOCKS else "seconds")
    for _ in range(1000):
        before = int(time.monotonic() * 1000)
        read = reader.now_ms()
        after = int(time.monotonic() * 1000)
        assert before <= read <= after


def test_a_libuv_reader_calls_its_source_where_the_c_clock_is_not_used() -> None:
    def loop_time() -> float:
        return 2.5

    reader = ClockReader.libuv(loop_time)
    assert reader.source is loop_time
    if C_CLOCKS:
        assert reader.kind == "libuv"  # read in C: the real uvloop case is in tests/aio
    else:
        assert (reader.kind, reader.now_ms()) == ("seconds", 2_500)


def test_bad_sources_are_refused_in_one_line() -> None:
    with pytest.raises(TypeError, match=r"^clock must have now_ms\(\), not int$"):
        ClockReader(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^seconds must be callable, not float$"):
        ClockReader.seconds(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^loop_time must be callable, not NoneType$"):
        ClockReader.libuv(None)  # type: ignore[arg-type]


def test_a_clock_that_raises_raises_through_the_reader() -> None:
    class Broken:
        def now_ms(self) -> int:
            raise OSError("no clock")

    with pytest.raises(OSError, match="no clock"):
        ClockReader.of(Broken()).now_ms()


def test_the_repr_says_what_it_reads() -> None:
    clock = ManualClock()
    assert repr(ClockReader.of(clock)) == f"<ClockReader clock of {clock!r}>"
    assert repr(ClockReader.monotonic()).startswith("<ClockReader ")


def test_a_timer_reads_its_clock_until_given_a_reader(clock: ManualClock) -> None:
    # Kafka's filing: a manual clock's whole milliseconds are exact (see test_never_early)
    timer = WheelTimer("t", clock=clock, may_expire_early=True)
    assert (timer.reader.kind, timer.reader.source) == ("clock", clock)
    ahead = ManualClock(start_ms=clock.now_ms())  # the same time, read another way
    reader = ClockReader.of(ahead)
    timer.use_reader(reader)
    assert timer.reader is reader
    ahead.advance(30)  # the timer now reads the reader, not its clock
    assert timer.now_ms() == timer.poll_now_ms() == 30
    ran: list[tuple[object, int]] = []
    timer.add(Recorder(10, "a", ahead, ran))  # due at 40 on the reader's time
    ahead.advance(9)
    assert poll_checked(timer) == 0
    ahead.advance(1)
    assert poll_checked(timer) == 1
    assert ran == [("a", 40)]
    timer.use_reader(None)  # back to the clock's own now_ms
    assert (timer.reader.kind, timer.reader.source, timer.now_ms()) == ("clock", clock, 0)


def test_use_reader_refuses_what_is_not_a_reader(clock: ManualClock) -> None:
    timer = WheelTimer("t", clock=clock)
    with pytest.raises(TypeError, match=r"^reader must be a ClockReader or None, not ManualClock$"):
        timer.use_reader(clock)  # type: ignore[arg-type]
    assert timer.reader.source is clock


def test_add_reads_each_kind_of_reader_as_now_ms_does(clock: ManualClock) -> None:
    # add inlines the timer's read (a seconds reader called and scaled there, a
    # clock's now_ms called, the C readers through the reader): every kind must
    # file the deadline now_ms gives, on the fast path (a short positive delay)
    # and on the checked one (zero, negative, long, float)
    timer = WheelTimer("t", clock=clock, may_expire_early=True)
    seconds = 12.3456
    readers = [
        ClockReader.seconds(lambda: seconds),
        ClockReader.of(ManualClock(start_ms=23_456)),
        ClockReader.monotonic(),
    ]
    for reader in readers:
        timer.use_reader(reader)
        for delay in (25, 0, -5, 2**31, 7.5):
            task = Recorder(delay, "a", clock, [])  # type: ignore[arg-type]
            before = reader.now_ms()
            assert before <= timer.now_ms() <= reader.now_ms()
            timer.add(task)
            after = reader.now_ms()
            assert before <= task.deadline_ms - math.ceil(delay) <= after, (reader, delay)
            task.cancel()
        timer._check_invariants()
    assert len(timer) == 0
