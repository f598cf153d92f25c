"""The timing wheel tick by tick: ``tick_ms=1``, ``wheel_size=3``, tasks due at 2, 5, 20.

The timer is polled once per millisecond on a ``ManualClock``. Each task prints the
time it runs at, and the loop prints the expiration of the next bucket the timer
will flush whenever it changes: the buckets of the overflow wheels (level 1 spans
9 ms in buckets of 3, level 2 spans 27 ms in buckets of 9) expire and hand their
tasks down to a finer wheel before the tasks are due.
"""

from __future__ import annotations

from purgatory import SystemTimer, TimerTask
from purgatory.testing import ManualClock


class Report(TimerTask):
    def __init__(self, delay_ms: int, clock: ManualClock, ran: list[tuple[int, int]]) -> None:
        super().__init__(delay_ms)
        self.clock = clock
        self.ran = ran

    def run(self) -> None:
        self.ran.append((self.delay_ms, self.clock.now_ms()))
        print(f"t={self.clock.now_ms():>2}: the task due at {self.delay_ms} runs")


def main() -> list[tuple[int, int]]:
    clock = ManualClock(start_ms=0)
    # Kafka's filing: the expiration is the deadline (the default files a task one
    # millisecond later, so that a truncating clock never runs it early)
    timer = SystemTimer("wheel", tick_ms=1, wheel_size=3, clock=clock, may_expire_early=True)
    ran: list[tuple[int, int]] = []
    for delay_ms in (2, 5, 20):
        timer.add(Report(delay_ms, clock, ran))
    next_ms = timer.next_expiration_ms()
    print(f"t= 0: next bucket expires at {next_ms}")
    while len(timer):
        clock.advance(1)
        timer.poll()
        if timer.next_expiration_ms() != next_ms:
            next_ms = timer.next_expiration_ms()
            print(f"t={clock.now_ms():>2}: next bucket expires at {next_ms}")
    return ran


if __name__ == "__main__":
    main()
