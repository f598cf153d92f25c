"""Followers: the one follower loop and ISR check, on a real loop with short lags.

Each test runs a broker with two followers. Nothing here depends on the machine's
speed: waits are polls for a condition with a generous hang guard, and the
partitions' ``replica_lag_time_max_ms`` is far longer than any stall of a loaded
machine, so no follower ever leaves the ISR by accident. The follower that must
leave it does so because the test moves the broker's clock (:class:`JumpClock`)
past that limit, while the ISR check itself runs on the loop every
``CHECK_LAG_MS / 2`` as the Followers' setting says.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from purgatory_broker.broker import (
    Broker,
    DelayedFetch,
    ErrorCode,
    FetchPartitionStatus,
    Followers,
    build_batch,
)
from purgatory_broker.broker import followers as followers_module

from purgatory import LoopClock, TopicPartition

A = TopicPartition("f", 0)
B = TopicPartition("f", 1)
LAG_MS = 5
#: the partitions' limit: a follower not caught up for a minute leaves the ISR (no
#: loaded machine stalls that long; the test that needs it jumps the clock)
REPLICA_LAG_MS = 60_000
#: the Followers' setting: the ISR check runs every CHECK_LAG_MS / 2 of the loop
CHECK_LAG_MS = 60
HANG_GUARD_S = 60.0
HANG_GUARD_MS = 60_000


async def until(condition: Callable[[], bool], what: str, timeout_s: float = HANG_GUARD_S) -> None:
    """Wait for ``condition``; a hang guard, not a timing claim."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s"
        await asyncio.sleep(0.002)


class JumpClock:
    """The running loop's clock plus an offset the test moves forward with :meth:`jump`.

    The broker's purgatories and its ISR check read it; the loop's sleeps (the
    followers' lag, the ISR check's interval) do not, so a jump makes every follower
    look as long out of date as the test says, at once and on any machine."""

    def __init__(self) -> None:
        self._loop_clock = LoopClock()
        self._offset_ms = 0

    def now_ms(self) -> int:
        return self._loop_clock.now_ms() + self._offset_ms

    def jump(self, ms: int) -> None:
        assert ms >= 0
        self._offset_ms += ms


def _lead(broker: Broker) -> None:
    for tp in (A, B):
        broker.create_partition(
            tp, (1, 2), min_insync_replicas=2, replica_lag_time_max_ms=REPLICA_LAG_MS
        )


@pytest.fixture
def clock() -> JumpClock:
    return JumpClock()


@pytest_asyncio.fixture
async def broker(tmp_path: Path, clock: JumpClock) -> AsyncIterator[Broker]:
    async with Broker(tmp_path, clock=clock) as b:
        _lead(b)
        yield b
        b._check_invariants()


class FetchSpyBroker(Broker):
    """Notes each fetch as (replica id, partitions). A subclass, because the compiled
    build's ``Broker`` is an extension type: a method cannot be replaced on an instance."""

    fetched: list[tuple[int, list[str]]]

    def fetch(
        self, requests: Mapping[TopicPartition, FetchPartitionStatus], **options: Any
    ) -> DelayedFetch:
        self.fetched.append((options["replica_id"], sorted(map(str, requests))))
        return super().fetch(requests, **options)


MakeFollowers = Callable[..., Followers]


def all_paused(followers: Followers) -> bool:
    return followers.paused


@pytest_asyncio.fixture
async def followers_of(broker: Broker) -> AsyncIterator[MakeFollowers]:
    """Makes Followers of ``broker`` (ids 1 and 2); closes them before the broker."""
    made: list[Followers] = []

    def make(**changes: object) -> Followers:
        options: dict[str, object] = {
            "lag_ms": LAG_MS,
            "max_wait_ms": 100,
            "replica_lag_time_max_ms": CHECK_LAG_MS,
        }
        options.update(changes)
        made.append(Followers(broker, (1, 2), **options))  # type: ignore[arg-type]
        return made[-1]

    yield make
    for followers in made:
        await followers.close()


@pytest.mark.asyncio
async def test_a_group_is_fetched_in_one_request_and_acks_all_completes(tmp_path: Path) -> None:
    broker = FetchSpyBroker(tmp_path)
    async with broker:
        broker.fetched = []
        _lead(broker)
        followers = Followers(
            broker, (1, 2), lag_ms=LAG_MS, max_wait_ms=100, replica_lag_time_max_ms=CHECK_LAG_MS
        )
        try:
            followers.follow([A, B])
            assert len(followers._tasks) == 2  # one task per follower for the group
            for i in range(3):
                op = broker.produce(
                    {A: build_batch([b"a"]), B: build_batch([b"b", b"c"])},
                    timeout_ms=HANG_GUARD_MS,  # expiring is failing
                )
                result = await op
                assert {tp: r.error_code for tp, r in result.items()} == {A: 0, B: 0}
                assert {tp: r.base_offset for tp, r in result.items()} == {A: i, B: 2 * i}
            assert {rid for rid, _ in broker.fetched} == {1, 2}
            # one request for the group
            assert all(tps == ["f-0", "f-1"] for _, tps in broker.fetched)
            await followers.stop()
            assert not followers._tasks
        finally:
            await followers.close()
        broker._check_invariants()


@pytest.mark.asyncio
async def test_a_paused_follower_leaves_the_isr_and_rejoins(
    broker: Broker, followers_of: MakeFollowers, clock: JumpClock
) -> None:
    risen: list[tuple[TopicPartition, int]] = []
    followers = followers_of(on_high_watermark=lambda tp, hw: risen.append((tp, hw)))
    followers.follow([A])
    followers.follow([B])
    assert len(followers._tasks) == 4
    followers.pause(2)
    assert not all_paused(followers)  # follower 1 still fetches
    partition = broker.partitions[A]
    op = broker.produce({A: build_batch([b"x"])}, timeout_ms=10 * REPLICA_LAG_MS)
    await until(lambda: partition.replica(1).log_end_offset == 1, "follower 1 fetched the batch")
    # follower 2 holds the high watermark (ISR 3 > min ISR 2): the produce waits
    assert (partition.high_watermark, partition.isr, op.is_done) == (0, frozenset({0, 1, 2}), False)
    assert risen == []
    # a minute passes for the broker: follower 2 (paused at offset 0) last caught up
    # that long ago; follower 1 is at the leader's log end, caught up however long ago
    clock.jump(REPLICA_LAG_MS + 1)
    # the ISR check (on the loop, every CHECK_LAG_MS / 2) drops follower 2 alone
    async with asyncio.timeout(HANG_GUARD_S):
        assert (await op)[A].error_code == ErrorCode.NONE
    assert partition.isr == {0, 1}
    assert risen == [(A, 1)]  # the ISR shrink raised the high watermark, once
    followers.resume(2)
    await until(lambda: partition.isr == {0, 1, 2}, "follower 2 back in the ISR")
    assert broker.partitions[B].isr == {0, 1, 2}  # idle at its log end: never dropped
    followers.pause()
    assert all_paused(followers)
    await followers.stop()  # paused followers end at once


class SleepSpy:
    """Stands in for ``asyncio`` in :mod:`purgatory_broker.broker.followers`: notes each
    follower task's sleep as (replica id, seconds), then sleeps. The ISR check's
    sleeps are not noted."""

    def __init__(self) -> None:
        self.slept: list[tuple[int, float]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    async def sleep(self, delay: float) -> None:
        task = asyncio.current_task()
        assert task is not None
        name = task.get_name()
        if name.startswith("follower-"):
            self.slept.append((int(name.split("-")[1]), delay))
        await asyncio.sleep(delay)

    def since(self, mark: int, rid: int) -> list[float]:
        return [delay for r, delay in self.slept[mark:] if r == rid]


@pytest.mark.asyncio
async def test_an_erroring_partition_keeps_its_offset_and_backs_off(
    broker: Broker, followers_of: MakeFollowers, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = SleepSpy()
    monkeypatch.setattr(followers_module, "asyncio", spy)
    lag_s, backoff_s = LAG_MS / 1000, 30 / 1000
    followers = followers_of(error_backoff_ms=30)
    followers.follow([A])
    broker.produce({A: build_batch([b"1"])}, acks=1, timeout_ms=10)
    await until(lambda: broker.partitions[A].high_watermark == 1, "the followers fetched")
    broker.become_follower(A)
    mark = len(spy.slept)

    def backed_off_twice() -> bool:
        return all(spy.since(mark, rid).count(backoff_s) >= 2 for rid in (1, 2))

    await until(backed_off_twice, "both followers backed off twice")
    for rid in (1, 2):
        slept = spy.since(mark, rid)
        first = slept.index(backoff_s)
        # at most the lag of a round answered before the error, then only back-offs
        assert first <= 1 and slept[:first] == [lag_s] * first
        assert set(slept[first:]) == {backoff_s}, (rid, slept)
    broker.become_leader(A)
    op = broker.produce({A: build_batch([b"2"])}, timeout_ms=HANG_GUARD_MS)
    assert (await op)[A].error_code == ErrorCode.NONE  # they fetch on from offset 1
    assert (await op)[A].base_offset == 1
    assert [r.log_end_offset for r in map(broker.partitions[A].replica, (1, 2))] == [2, 2]


def test_bad_settings_are_refused(tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    with pytest.raises(ValueError, match="lag_ms"):
        Followers(broker, (1,), lag_ms=-1)
    with pytest.raises(ValueError, match="fetch_max_bytes"):
        Followers(broker, (1,), lag_ms=1, fetch_max_bytes=0)
