"""Schedule a few thousand timers on a real event loop and report how late they fired.

Usage: python examples/timers.py [--tasks N] [--max-delay-ms MS] [--seed S] [--asyncio]

Each task records ``loop.time()`` when it runs; the report compares that with the
moment it was due. One task in ten (the 10th, 20th, ...) is cancelled and must
never run. Quantiles are exact, by nearest rank (:func:`purgatory.core.exact_quantile`),
so the report holds for any number of tasks, one included (then min, p50, p99 and
max are that task's lateness). uvloop is used when installed, unless ``--asyncio``
is given.
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections.abc import Callable

from _cli import Parser, integer

from purgatory import SystemTimer, TimerTask
from purgatory.core import WheelTimer, exact_quantile
from purgatory.testing import ManualClock


class Probe(TimerTask):
    """A task that records how late it ran."""

    __slots__ = ("due_s", "record")

    def __init__(self, delay_ms: int, due_s: float, record: Callable[[float], None]) -> None:
        super().__init__(delay_ms)
        self.due_s = due_s
        self.record = record

    def run(self) -> None:
        self.record(asyncio.get_running_loop().time() - self.due_s)


async def main(tasks: int, max_delay_ms: int, seed: int) -> None:
    rng = random.Random(seed)
    loop = asyncio.get_running_loop()
    lateness_ms: list[float] = []

    def record(late_s: float) -> None:
        lateness_ms.append(late_s * 1000)

    async with SystemTimer("demo") as timer:
        start = loop.time()
        cancelled = 0
        for i in range(tasks):
            delay_ms = rng.randint(1, max_delay_ms)
            probe = Probe(delay_ms, loop.time() + delay_ms / 1000, record)
            timer.add(probe)
            if i % 10 == 9:  # cancel one task in ten; it must never run
                probe.cancel()
                cancelled += 1
        expected = tasks - cancelled
        print(f"scheduled {tasks} tasks over {max_delay_ms} ms, cancelled {cancelled}")
        while len(lateness_ms) < expected:
            await asyncio.sleep(0.05)
        elapsed = loop.time() - start
        print(
            f"fired {len(lateness_ms)} of {expected} in {elapsed:.2f} s;"
            f" reaper woke {timer.reaper_wakeups} times; {len(timer)} left in the timer"
        )
    lateness_ms.sort()
    p50, p99 = exact_quantile(lateness_ms, 0.5), exact_quantile(lateness_ms, 0.99)
    early = sum(1 for x in lateness_ms if x < -1.0)
    print(
        f"lateness ms: min {lateness_ms[0]:.2f}  p50 {p50:.2f}  p99 {p99:.2f}"
        f"  max {lateness_ms[-1]:.2f}  (fired more than 1 ms early: {early})"
    )


def run(argv: list[str] | None = None) -> None:
    parser = Parser(
        description=__doc__.splitlines()[0],
        epilog="The report's quantiles are exact (nearest rank), so any number of tasks works, "
        "one included. Exit status: 0 when done, 2 for a refused option.",
    )
    parser.add_argument(
        "--tasks",
        type=integer(1),
        default=5000,
        help="timers to schedule, at least 1; every 10th is cancelled",
    )
    parser.add_argument(
        "--max-delay-ms",
        type=integer(1),
        default=2000,
        help="delays are drawn uniformly from 1 ms to this",
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the random delays")
    parser.add_argument("--asyncio", action="store_true", help="use asyncio even if uvloop exists")
    args = parser.parse_args(argv)
    try:  # the timer's own limit (2**40 ms), checked before anything runs
        WheelTimer(clock=ManualClock()).add(TimerTask(args.max_delay_ms))
    except ValueError as exc:
        parser.error(f"argument --max-delay-ms: {exc}")
    coro = main(args.tasks, args.max_delay_ms, args.seed)
    try:
        if not args.asyncio:
            try:
                import uvloop
            except ImportError:
                pass
            else:
                print("event loop: uvloop")
                uvloop.run(coro)
                return
        print("event loop: asyncio")
        asyncio.run(coro)
    except KeyboardInterrupt:
        sys.exit(130)  # Ctrl-C: no traceback, the shell's status for SIGINT


if __name__ == "__main__":
    run()
