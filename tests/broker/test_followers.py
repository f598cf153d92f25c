"""Followers: the one follower loop and ISR check, on a real loop with short lags.

Each test runs a broker with two followers; waits are polls with a deadline, so a
slow machine makes a test slower, not wrong.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from purgatory import TopicPartition
from purgatory.broker import (
    Broker,
    DelayedFetch,
    ErrorCode,
    FetchPartitionStatus,
    Followers,
    build_batch,
)

A = TopicPartition("f", 0)
B = TopicPartition("f", 1)
LAG_MS = 5
REPLICA_LAG_MS = 60


async def until(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.002)


def _lead(broker: Broker) -> None:
    for tp in (A, B):
        broker.create_partition(
            tp, (1, 2), min_insync_replicas=2, replica_lag_time_max_ms=REPLICA_LAG_MS
        )


@pytest_asyncio.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with Broker(tmp_path) as b:
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
            "replica_lag_time_max_ms": REPLICA_LAG_MS,
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
            broker, (1, 2), lag_ms=LAG_MS, max_wait_ms=100, replica_lag_time_max_ms=REPLICA_LAG_MS
        )
        try:
            followers.follow([A, B])
            assert len(followers._tasks) == 2  # one task per follower for the group
            for i in range(3):
                op = broker.produce(
                    {A: build_batch([b"a"]), B: build_batch([b"b", b"c"])}, timeout_ms=5000
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
    broker: Broker, followers_of: MakeFollowers
) -> None:
    risen: list[tuple[TopicPartition, int]] = []
    followers = followers_of(on_high_watermark=lambda tp, hw: risen.append((tp, hw)))
    followers.follow([A])
    followers.follow([B])
    assert len(followers._tasks) == 4
    followers.pause(2)
    assert not all_paused(followers)  # follower 1 still fetches
    op = broker.produce({A: build_batch([b"x"])}, timeout_ms=5000)
    # follower 2 holds the high watermark until the ISR check drops it (ISR 2 = min ISR)
    assert (await op)[A].error_code == ErrorCode.NONE
    assert broker.partitions[A].isr == {0, 1}
    assert (A, 1) in risen  # the ISR shrink raised the high watermark
    followers.resume(2)
    await until(lambda: broker.partitions[A].isr == {0, 1, 2})
    followers.pause()
    assert all_paused(followers)
    await followers.stop()  # paused followers end at once


@pytest.mark.asyncio
async def test_an_erroring_partition_keeps_its_offset_and_backs_off(
    broker: Broker, followers_of: MakeFollowers
) -> None:
    followers = followers_of(error_backoff_ms=30)
    followers.follow([A])
    broker.produce({A: build_batch([b"1"])}, acks=1, timeout_ms=10)
    await until(lambda: broker.partitions[A].high_watermark == 1)
    broker.become_follower(A)
    before = broker.counters.fetch_requests
    await asyncio.sleep(0.1)
    assert broker.counters.fetch_requests - before <= 2 * (100 // 30 + 1)  # backing off
    broker.become_leader(A)
    op = broker.produce({A: build_batch([b"2"])}, timeout_ms=5000)
    assert (await op)[A].error_code == ErrorCode.NONE  # they fetch on from offset 1
    assert (await op)[A].base_offset == 1


def test_bad_settings_are_refused(tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    with pytest.raises(ValueError, match="lag_ms"):
        Followers(broker, (1,), lag_ms=-1)
    with pytest.raises(ValueError, match="fetch_max_bytes"):
        Followers(broker, (1,), lag_ms=1, fetch_max_bytes=0)
