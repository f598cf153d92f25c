"""Testing on trio with ``trio.testing.MockClock``: a 30-second timeout in no time.

With ``autojump_threshold=0`` trio's clock jumps to the next deadline whenever every
task is blocked. The purgatory's default clock follows the running trio clock, and its
reaper sleeps on it, so the reaper's sleep until the expiry is one such jump: no
``ManualClock`` and no ``poll()`` needed.
"""

from __future__ import annotations

import trio
from trio.testing import MockClock

from purgatory import DelayedOperation, DelayedOperationPurgatory


class Poll(DelayedOperation[str]):
    def try_complete(self) -> bool:
        return False  # only the timeout completes it

    def on_complete(self) -> str:
        return "timeout"


# [start-trio]
async def wait_for_timeout() -> float:
    """Return how many (virtual) seconds the 30 s poll took."""
    async with DelayedOperationPurgatory[Poll]("trio") as purgatory:
        start = trio.current_time()
        poll = Poll(30_000)
        purgatory.try_complete_else_watch(poll, ["key"])
        assert await poll == "timeout" and poll.expired
    return trio.current_time() - start


def test_poll_times_out_in_virtual_time() -> None:
    elapsed = trio.run(wait_for_timeout, clock=MockClock(autojump_threshold=0))
    assert 30.0 <= elapsed < 30.1


# [end-trio]


def main() -> float:
    elapsed = trio.run(wait_for_timeout, clock=MockClock(autojump_threshold=0))
    print(f"timed out after {elapsed:.3f} virtual seconds")
    return elapsed


if __name__ == "__main__":
    main()
