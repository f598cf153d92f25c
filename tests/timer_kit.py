"""Test kit for the timer: the timer fixtures, tasks that record when they ran."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

import pytest

from purgatory import (
    TimerTask,
)
from purgatory.core import WheelTimer
from purgatory.testing import ManualClock

Timer = TypeVar("Timer", bound=WheelTimer)


def timer_fixtures(cls: type[Timer]) -> tuple[object, object]:
    """The ``timer`` and ``tiny_timer`` fixtures, timers of ``cls`` on the ``clock``
    fixture's manual clock: drive them with clock.advance + poll. ``timer`` is
    default-sized; ``tiny_timer`` has tick 1 and wheel size 3, so overflow wheels are
    exercised.

    They file tasks as Kafka does (``may_expire_early=True``): a manual clock's whole
    milliseconds are the true time, so with tick 1 a task then runs exactly at its
    deadline, the timings the tests state. The default filing, a millisecond later for
    a clock that truncates, is tested in core/test_never_early.py.
    """

    @pytest.fixture
    def timer(clock: ManualClock) -> Timer:
        return cls("test", clock=clock, may_expire_early=True)

    @pytest.fixture
    def tiny_timer(clock: ManualClock) -> Timer:
        return cls("tiny", tick_ms=1, wheel_size=3, clock=clock, may_expire_early=True)

    return timer, tiny_timer


class Recorder(TimerTask):
    """Records into ``log`` the clock time at which it ran, under its ``label``."""

    __slots__ = ("clock", "label", "log")

    def __init__(
        self, delay_ms: int, label: object, clock: ManualClock, log: list[tuple[object, int]]
    ) -> None:
        super().__init__(delay_ms)
        self.clock = clock
        self.label = label
        self.log = log

    def run(self) -> None:
        self.log.append((self.label, self.clock.now_ms()))


def poll_checked(timer: WheelTimer) -> int:
    """Poll, then check every invariant of the timer."""
    ran = timer.poll()
    timer._check_invariants()
    return ran


class Boom(TimerTask):
    def __init__(self, delay_ms: int, message: str) -> None:
        super().__init__(delay_ms)
        self.message = message

    def run(self) -> None:
        raise RuntimeError(self.message)


class Escaped(BaseException):
    """A BaseException of the user's own: not an Exception, not an interrupt."""


CALLBACK_ERRORS: list[Callable[[], BaseException]] = [
    asyncio.CancelledError,
    GeneratorExit,
    Escaped,
]


INTERRUPTS: list[Callable[[], BaseException]] = [KeyboardInterrupt, SystemExit]


class Raises(TimerTask):
    """Raises ``make()`` when it runs."""

    def __init__(self, delay_ms: int, make: Callable[[], BaseException]) -> None:
        super().__init__(delay_ms)
        self.make = make
        self.runs = 0

    def run(self) -> None:
        self.runs += 1
        raise self.make()
