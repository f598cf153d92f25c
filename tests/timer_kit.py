"""Test kit for the timer: tasks that record when they ran."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from purgatory import (
    TimerTask,
)
from purgatory.core import WheelTimer
from purgatory.testing import ManualClock


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
