"""examples/watch_service.py without a web framework: when a poll times out, on a
virtual clock (``ManualClock``, the reaper off, the test polls the timer)."""

from __future__ import annotations

import pytest

from purgatory import DelayedOperationPurgatory, SystemTimer
from purgatory.testing import ManualClock

from . import watch_kit  # noqa: F401 - puts the examples folder on the path

# isort: split
from watch_service import WATCH_TICK_MS, KeyStore, WatchPoll, WatchRequest, WatchService


@pytest.mark.parametrize("tick_ms", [1, 7, WATCH_TICK_MS])
@pytest.mark.parametrize("start_ms", [0, 3, 9, 10_005])
@pytest.mark.parametrize("timeout_ms", [0, 1, 25, 30, 250, 1_234, 65_432])
def test_a_poll_times_out_never_early_and_at_most_one_tick_late(
    tick_ms: int, start_ms: int, timeout_ms: int
) -> None:
    clock = ManualClock(start_ms)
    purgatory = DelayedOperationPurgatory[WatchPoll](
        "watch", timer=SystemTimer("watch", tick_ms=tick_ms, clock=clock), reaper_enabled=False
    )
    poll = WatchPoll(KeyStore(), WatchRequest(("color",), 0, timeout_ms))
    assert not purgatory.try_complete_else_watch(poll, poll.keys)
    while not poll.is_done:  # a millisecond at a time, as a reaper would see them
        clock.advance(1)
        purgatory.timer.poll()
    waited_ms = clock.now_ms() - start_ms
    assert poll.expired and poll.result() is None
    # a bucket expires at its first millisecond: filed by the deadline alone (Kafka's
    # filing, may_expire_early=True), a 25 ms poll made at 3 ms on a 10 ms tick
    # expired after 17 ms; the library files it after the deadline
    assert timeout_ms <= waited_ms <= timeout_ms + tick_ms
    purgatory._check_invariants()


def test_the_service_polls_on_its_own_tick() -> None:
    assert WatchService().purgatory.timer.tick_ms == WATCH_TICK_MS
    assert WatchService(tick_ms=3).purgatory.timer.tick_ms == 3
