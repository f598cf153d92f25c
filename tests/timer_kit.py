"""Test kit for the timer: tasks that record when they ran."""

from __future__ import annotations

from purgatory import SystemTimer, TimerTask
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


def poll_checked(timer: SystemTimer) -> int:
    """Poll, then check every invariant of the timer."""
    ran = timer.poll()
    timer._check_invariants()
    return ran
