"""Testing on asyncio with :class:`~purgatory.testing.VirtualTimeLoop`: a 30-second
timeout in no time, with the real reaper.

The loop's clock jumps to the next timer whenever nothing is ready. The purgatory's
default clock follows ``loop.time()`` and its reaper sleeps on the loop's timers, so
the reaper's sleep until each expiry is one such jump: no ``ManualClock``, no
``poll()``, and each operation expires exactly at its deadline.
"""

from __future__ import annotations

import asyncio

from purgatory import DelayedOperation, DelayedOperationPurgatory
from purgatory.testing import run_in_virtual_time


class Poll(DelayedOperation[float]):
    """A long poll nothing answers: it completes at its timeout, with the time then."""

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> float:
        return asyncio.get_running_loop().time()


# [start-virtual]
async def expiry_times() -> list[float]:
    """When a 30 s and a 10 s poll expire (virtual seconds from the loop's start)."""
    async with DelayedOperationPurgatory[Poll]("virtual") as purgatory:
        polls = [Poll(30_000), Poll(10_000)]
        for poll in polls:
            purgatory.try_complete_else_watch(poll, ["key"])
        return list(await asyncio.gather(*polls))


def test_polls_expire_at_their_virtual_deadlines() -> None:
    # a millisecond after each timeout: never early on a clock read in whole ms
    times = run_in_virtual_time(expiry_times())
    assert [round(t, 3) for t in times] == [30.001, 10.001]


# [end-virtual]


def main() -> list[float]:
    times = [round(t, 3) for t in run_in_virtual_time(expiry_times())]
    print("expired at", ", ".join(f"{t:.3f}" for t in times), "virtual seconds")
    return times


if __name__ == "__main__":
    main()
