"""purgatory.contrib.redis: back within a probe interval of Redis answering again.

Once the reconnect waits have grown past ``probe_ms``, a side probes Redis every
``probe_ms`` and attempts at the first answered probe. Proved without timing: the
schedule's probe rule on integer milliseconds, the wait's probes on a virtual-time loop
(their spacing is exactly ``probe_ms``), the probe against a real redis-server (refused
when it is down, unanswered when it is paused), and, with a real redis-server killed
and restarted, that the subscription came back through an answered probe. The real
figures (0.2, 1 and 10 s outages) are ``benchmarks/redis_reconnect_bench.py``'s.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from purgatory.contrib.redis import KeyPublisher, ReconnectSchedule
from purgatory.contrib.redis._probe import address_of, answers
from purgatory.testing import VirtualTimeLoop, run_in_virtual_time
from tests.contrib.redis_kit import RedisServer, free_port
from tests.contrib.test_redis_bridge import GUARD_S, _until, running_pair

# -- the schedule's rule (integer milliseconds, a seeded draw) ------------------------------


def test_only_waits_longer_than_the_probe_interval_are_probed() -> None:
    schedule = ReconnectSchedule(10, 500, random.Random(0), probe_ms=50)
    assert not schedule.probing(50) and schedule.probing(51)
    assert not ReconnectSchedule(10, 500).probing(10_000)  # no probe_ms: never


def test_an_answered_probe_ends_the_wait_until_an_attempt_it_started_fails() -> None:
    """The probe-started attempt fails (a Redis that answers PING but refuses clients):
    answered probes end no wait until one probe fails; the waits go on growing."""
    schedule = ReconnectSchedule(10, 500, random.Random(1), probe_ms=50)
    schedule.connected(0)
    schedule.failed(1_000)  # retry at once
    assert not schedule.probed(answered=False)
    assert schedule.probed(answered=True)  # attempt now
    schedule.failed(1_100)  # ... and it failed
    assert [schedule.probed(answered=True) for _ in range(5)] == [False] * 5
    assert not schedule.probed(answered=False)  # refused once: armed again
    assert schedule.probed(answered=True)
    schedule.connected(1_500)  # that attempt worked
    schedule.failed(1_600)
    assert schedule.probed(answered=True)  # a working connection re-arms too


def test_the_backoff_itself_is_unchanged_by_probes() -> None:
    plain = ReconnectSchedule(10, 500, random.Random(7))
    probed = ReconnectSchedule(10, 500, random.Random(7), probe_ms=50)
    assert [plain.failed(t) for t in range(12)] == [probed.failed(t) for t in range(12)]


# -- the wait, in virtual time ------------------------------------------------------------


def test_a_long_wait_is_probed_every_probe_ms_and_ends_at_the_first_answer() -> None:
    """Redis killed at 1,000 ms (virtual) under a connection that had worked, answering
    again at 4,010 ms: the attempts keep to the backoff (at most 500 ms apart), each
    wait longer than 50 ms is probed every 50 ms from its start, and the attempt that
    succeeds comes at most 50 ms after 4,010."""
    back_ms = 4_010

    async def main() -> tuple[list[int], list[int]]:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, VirtualTimeLoop)
        side = KeyPublisher("redis://127.0.0.1:1", reconnect_min_ms=10, reconnect_max_ms=500)
        probes: list[int] = []
        attempts: list[int] = []

        def now_ms() -> int:
            return round(loop.time() * 1000)

        async def probe() -> bool:
            probes.append(now_ms())
            return probes[-1] >= back_ms

        side._probe = probe  # type: ignore[method-assign]
        side.reconnect_schedule.connected(0)
        loop.advance(1.0)
        while not attempts or attempts[-1] < back_ms:  # an attempt fails while Redis is down
            await side._wait_to_retry()  # as the task does
            attempts.append(now_ms())
        return probes, attempts

    probes, attempts = run_in_virtual_time(main())
    assert back_ms <= attempts[-1] <= back_ms + 50
    assert all(p < back_ms for p in probes[:-1])
    starts = [1_000, *attempts[:-1]]
    assert attempts[0] == 1_000  # the first retry: at once
    assert max(end - start for start, end in zip(starts, attempts, strict=True)) <= 500
    assert len(probes) >= 40  # 3 s of outage, a probe each 50 ms (and few waits unprobed)
    for start, end in zip(starts, attempts, strict=True):
        inside = [p for p in probes if start < p <= end]
        expected = [start + 50 * (i + 1) for i in range(len(inside))]
        assert all(abs(p - e) <= 1 for p, e in zip(inside, expected, strict=True)), inside


# -- the probe against a real redis-server -------------------------------------------------


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    with RedisServer(tmp_path) as server:
        yield server


@pytest.mark.system  # redis-server
@pytest.mark.asyncio
async def test_the_probe_follows_a_real_redis_down_paused_and_back(server: RedisServer) -> None:
    address, ping = address_of(server.url)
    assert address == ("127.0.0.1", server.port) and ping
    assert await answers(address, 1_000)
    server.pause()  # the kernel accepts the connect; nothing answers the PING
    try:
        assert not await answers(address, 100)
    finally:
        server.resume()
    assert await answers(address, 1_000)
    server.kill()
    assert not await answers(address, 1_000)  # refused
    assert not await answers(("127.0.0.1", free_port()), 1_000)


def test_a_url_names_what_the_probe_reaches() -> None:
    assert address_of("redis://h:7000/2") == (("h", 7000), True)
    assert address_of("redis://localhost") == (("localhost", 6379), True)
    assert address_of("rediss://h:1") == (("h", 1), False)  # TLS: connect only
    assert address_of("unix:///var/run/redis/redis-server.sock?db=1") == (
        "/var/run/redis/redis-server.sock",
        True,
    )


class ProbeSpy(ReconnectSchedule):
    """A bridge's schedule, taken over, recording each probe's outcome and answer. Its
    waits after the first retry last a minute, past the test's hang guard: only an
    answered probe can start the attempt that comes back (with the real waits, 250-500
    ms, a wait could end on its own between a refused probe and Redis answering)."""

    def __init__(self, base: ReconnectSchedule) -> None:
        super().__init__(base.min_ms, base.max_ms, probe_ms=base.probe_ms)
        self.failures, self.up_since_ms = base.failures, base.up_since_ms
        self.outcomes: list[tuple[bool, bool]] = []

    def probed(self, answered: bool) -> bool:
        start = super().probed(answered)
        self.outcomes.append((answered, start))
        return start

    def failed(self, now_ms: int) -> int:
        wait_ms = super().failed(now_ms)
        return wait_ms if wait_ms == 0 else 60_000


@pytest.mark.system
@pytest.mark.asyncio
async def test_after_a_long_outage_the_subscription_comes_back_through_a_probe(
    server: RedisServer,
) -> None:
    """Redis down until five probes were refused (counted, not timed: a loaded machine
    may probe less often than every 50 ms), the waits longer than the hang guard; then
    the answered probe starts the attempt that subscribes again."""
    async with running_pair(server.url) as pair:
        spy = ProbeSpy(pair.eb.reconnect_schedule)
        pair.eb.reconnect_schedule = spy
        op = pair.watch("k")
        server.kill()
        await _until(lambda: not pair.eb.subscribed, "the subscriber noticed the outage")
        pair.shared.ready.add("k")
        await _until(lambda: len(spy.outcomes) >= 5, "five refused probes")
        refused = len(spy.outcomes)
        server.start()
        async with asyncio.timeout(GUARD_S):
            assert await op == "done 'k'"
        await _until(lambda: pair.eb.subscribed, "subscribed again")
    assert refused >= 5 and all(outcome == (False, False) for outcome in spy.outcomes[:refused])
    assert spy.outcomes[-1] == (True, True)  # the attempt that worked: a probe's
