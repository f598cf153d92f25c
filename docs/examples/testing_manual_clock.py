"""Testing with :class:`~purgatory.testing.ManualClock`: time moves only when told to.

The two functions are pytest tests as a project would write them (here they are also
run by ``main``). Give the purgatory a timer on a ``ManualClock`` and no reaper, move
the clock, and ``timer.poll()`` runs exactly what is due at that instant.
"""

from __future__ import annotations

import asyncio

from purgatory import DelayedOperation, DelayedOperationPurgatory, Outcome, SystemTimer
from purgatory.testing import ManualClock


class Poll(DelayedOperation[str]):
    """A long poll that an update completes; at its timeout it answers "timeout"."""

    def __init__(self, timeout_ms: int) -> None:
        super().__init__(timeout_ms)
        self.update: str | None = None

    def try_complete(self) -> bool:
        return self.update is not None and self.force_complete()

    def on_complete(self) -> str:
        return "timeout" if self.update is None else self.update


def manual_purgatory(clock: ManualClock) -> DelayedOperationPurgatory[Poll]:
    """A purgatory whose timer reads ``clock`` and has no reaper: the test polls it."""
    timer = SystemTimer("test", clock=clock, tick_ms=10)
    return DelayedOperationPurgatory("test", timer=timer, reaper_enabled=False)


# [start-tests]
def test_poll_expires_at_its_timeout() -> None:
    clock = ManualClock(start_ms=0)
    purgatory = manual_purgatory(clock)
    poll = Poll(timeout_ms=30_000)
    assert not purgatory.try_complete_else_watch(poll, ["key"])
    clock.advance(30_000)
    purgatory.timer.poll()
    assert poll.outcome is Outcome.PENDING  # never early: filed at the tick after 30,000
    clock.advance(10)
    assert purgatory.timer.poll() == 1  # one task ran: the expiry, at 30,010
    assert poll.expired
    assert poll.result() == "timeout"
    assert purgatory.num_delayed == 0


def test_update_completes_the_poll_early() -> None:
    async def scenario() -> str:
        clock = ManualClock()
        async with manual_purgatory(clock) as purgatory:
            poll = Poll(timeout_ms=30_000)
            purgatory.try_complete_else_watch(poll, ["key"])
            poll.update = "v1"
            assert purgatory.check_and_complete("key") == 1
            result = await poll
        return result

    assert asyncio.run(scenario()) == "v1"


# [end-tests]


def main() -> None:
    test_poll_expires_at_its_timeout()
    test_update_completes_the_poll_early()
    print("2 tests passed")


if __name__ == "__main__":
    main()
