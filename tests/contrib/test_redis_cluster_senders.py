"""The cluster publisher's sender per primary, without a Redis: the :class:`Outbox` that holds
the keys between ``publish`` and the primaries (its marks, what ``flush`` reads), checked
against a model after every change, and a :class:`ClusterKeyPublisher` whose sends go to a
fake cluster (a slot map the test changes; primaries whose sends the test holds, as a
paused primary holds them, or fails). Waits are under a hang guard; nothing is timed.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
from collections.abc import Callable
from typing import Any

import pytest

from purgatory.contrib.redis import (
    ClusterKeyPublisher,
    ReconnectSchedule,
    encode_key,
    shard_of_key,
)
from purgatory.contrib.redis._cluster import _Sender
from purgatory.contrib.redis._outbox import Outbox
from purgatory.contrib.redis._topology import Address, SlotMap, Topology

GUARD_S = 10  # a hang guard

A: Address = ("10.0.0.1", 7000)
B: Address = ("10.0.0.2", 7000)
C: Address = ("10.0.0.3", 7000)  # A's replica, promoted in the failover tests


# -- the outbox (no loop) ------------------------------------------------------------------


def test_the_worked_example_of_the_module_doc() -> None:
    box = Outbox()
    owner = {b"a1": A, b"a2": A, b"b1": B}.get
    box.admit([b"a1", b"b1"], 2)
    box.route(owner)
    assert box.queues == {A: {b"a1": 0}, B: {b"b1": 0}}
    assert box.take(B, 10) == [b"b1"]
    assert box.sent(B) == 1
    assert box.sent_upto == 0  # call 1 (a1) is not sent
    box.admit([b"a2", b"a1"], 4)
    assert box.route(owner) == {A}
    assert box.queues[A] == {b"a1": 0, b"a2": 2}  # a1's two copies: one, the older mark
    box._check_invariants()
    assert box.take(A, 10) == [b"a1", b"a2"]
    box.failed(A)
    box.hand_back(A)
    assert box.parked == {b"a1": 0, b"a2": 2}
    box.route(owner)
    box.take(A, 10)
    assert box.sent(A) == 2
    assert box.sent_upto == 4 and box.held == 0
    box._check_invariants()


def test_a_failed_batch_goes_back_ahead_of_its_queue_and_meets_its_newer_copy() -> None:
    box = Outbox()
    box.admit([b"x", b"y"], 2)
    box.route(lambda m: A)
    assert box.take(A, 1) == [b"x"]
    box.admit([b"z", b"x"], 4)  # x again while its first copy is being sent
    box.route(lambda m: A)
    assert box.queues[A] == {b"y": 0, b"z": 2, b"x": 2}
    box.failed(A)
    assert box.queues[A] == {b"x": 0, b"y": 0, b"z": 2}  # one x, first, the older mark
    assert box.held == 3 and box.waiting == 3
    box._check_invariants()


def test_a_key_with_no_owner_stays_parked_and_holds_flush_back() -> None:
    box = Outbox()
    box.admit([b"lost", b"found"], 2)
    assert box.route(lambda m: None if m == b"lost" else B) == {B}
    box.take(B, 10)
    box.sent(B)
    assert box.parked == {b"lost": 0} and box.sent_upto == 0
    assert box.route(lambda m: A) == {A}
    assert box.clear() == 1 and box.held == 0


def test_a_primary_whose_sender_ends_is_forgotten_only_when_it_holds_nothing() -> None:
    box = Outbox()
    box.admit([b"x"], 1)
    box.route(lambda m: A)
    with pytest.raises(ValueError, match=r"^\('10.0.0.1', 7000\) holds keys: its sender"):
        box.forget(A)
    box.take(A, 10)
    with pytest.raises(ValueError, match=r"holds keys"):
        box.forget(A)  # its batch is being sent
    box.sent(A)
    box.forget(A)
    assert box.queues == {} and box.held == 0


def test_one_batch_at_a_time_per_primary() -> None:
    box = Outbox()
    box.admit([b"x"], 1)
    box.route(lambda m: A)
    box.take(A, 10)
    with pytest.raises(ValueError, match=r"^a batch to .* is being sent already$"):
        box.take(A, 10)


Calls = dict[bytes, set[int]]  # key -> the publish calls (their numbers) it stands for
KEYS = [b"k%d" % i for i in range(12)]


class Model:
    """The outbox as sets: each held key stands for the publish calls it will announce; a
    copy meeting another is their union. Each method does one operation to the model and
    to ``box``."""

    def __init__(self, box: Outbox, rng: random.Random) -> None:
        self.box, self.rng = box, rng
        self.calls = 0
        self.pending: Calls = {}
        self.parked: Calls = {}
        self.queues: dict[Address, Calls] = {}
        self.flying: dict[Address, Calls] = {}

    @staticmethod
    def join(front: Calls, back: Calls) -> Calls:
        joined = {m: set(calls) for m, calls in front.items()}
        for m, calls in back.items():
            joined.setdefault(m, set()).update(calls)
        return joined

    def unsent(self) -> set[int]:
        places = [self.pending, self.parked, *self.queues.values(), *self.flying.values()]
        return {call for place in places for calls in place.values() for call in calls}

    def publish(self) -> None:
        self.calls += 1
        self.pending.setdefault(self.rng.choice(KEYS), set()).add(self.calls)

    def admit(self) -> None:
        if self.pending:
            self.box.admit(list(self.pending), self.calls)
            self.parked, self.pending = self.join(self.parked, self.pending), {}

    def route(self) -> None:
        route_of = {k: self.rng.choice([A, B, C, None]) for k in KEYS}
        self.box.route(route_of.__getitem__)
        for m, calls in list(self.parked.items()):
            if (owner := route_of[m]) is not None:
                del self.parked[m]
                self.queues[owner] = self.join(self.queues.get(owner, {}), {m: calls})

    def take(self, owner: Address) -> None:
        if owner not in self.flying:
            limit = self.rng.randint(1, 4)
            batch = self.box.take(owner, limit)
            queue = self.queues.get(owner, {})
            assert batch == list(queue)[:limit]
            self.flying[owner] = {m: queue.pop(m) for m in batch}

    def sent(self, owner: Address) -> None:
        if owner in self.flying:
            assert self.box.sent(owner) == len(self.flying.pop(owner))

    def failed(self, owner: Address) -> None:
        if owner in self.flying:
            self.box.failed(owner)
            self.queues[owner] = self.join(self.flying.pop(owner), self.queues.get(owner, {}))

    def hand_back(self, owner: Address) -> None:
        self.box.hand_back(owner)
        self.parked = self.join(self.queues.pop(owner, {}), self.parked)

    def check(self) -> None:
        """The same keys in the same order; no call up to ``sent_upto`` unsent; and
        ``sent_upto`` is the calls taken in once nothing is held."""
        box = self.box
        box._check_invariants()
        assert list(box.parked) == list(self.parked)
        assert {o: list(q) for o, q in box.queues.items() if q} == {
            o: list(q) for o, q in self.queues.items() if q
        }
        assert all(call > box.sent_upto for call in self.unsent())
        if box.held == 0:
            assert box.sent_upto == box.routed_upto


@pytest.mark.parametrize("seed", range(20))
def test_random_operations_agree_with_the_model_and_flush_never_runs_ahead(seed: int) -> None:
    """Seeded random mixes of publish, take-in, route (some keys without an owner),
    take, sent, failed and hand back, checked after each; then everything sent: the
    outbox says every call is."""
    rng = random.Random(seed)
    box = Outbox()
    model = Model(box, rng)
    per_owner = [model.take, model.sent, model.failed, model.hand_back]
    for _ in range(400):
        op = rng.randrange(3 + len(per_owner))
        if op >= 3:
            per_owner[op - 3](rng.choice([A, B, C]))
        else:
            [model.publish, model.admit, model.route][op]()
        model.check()
    model.admit()
    for owner in (A, B, C):
        model.failed(owner)
        model.hand_back(owner)
    box.route(lambda m: A)
    box.take(A, len(KEYS))
    box.sent(A)
    box._check_invariants()
    assert box.held == 0 and box.sent_upto == model.calls


# -- the publisher on a fake cluster -------------------------------------------------------


class FakeCluster:
    """A slot map the test changes, and what each primary received; a primary in
    ``held`` answers a send only once its event is set (a paused primary), one in
    ``failing`` fails it (a dead one)."""

    def __init__(self) -> None:
        self.map = SlotMap([(0, 8191, A), (8192, 16383, B)], [A, B, C])
        self.received: dict[Address, list[bytes]] = {}
        self.held: dict[Address, asyncio.Event] = {}
        self.failing: set[Address] = set()
        self.failures: dict[Address, int] = {}  # the sends each one in ``failing`` failed
        self.sending: set[Address] = set()  # a send in progress there
        self.on_failure: Callable[[Address], None] = lambda owner: None

    def fail_over(self, old: Address, new: Address) -> None:
        """``new`` takes every slot of ``old``."""
        ranges = [(0, 8191, A), (8192, 16383, B)]
        self.map = SlotMap([(s, e, new if o == old else o) for s, e, o in ranges], [A, B, C])


class FakeTopology(Topology):
    def __init__(self, cluster: FakeCluster, poll_ms: int) -> None:
        super().__init__(["redis://unused:1"], connect=self._no_client, poll_ms=poll_ms)
        self.cluster = cluster

    @staticmethod
    def _no_client(url: str) -> Any:
        raise AssertionError("no client in these tests")

    async def refresh(self) -> SlotMap:
        await asyncio.sleep(0)
        self.map = self.cluster.map
        self.refreshes += 1
        return self.map


class FakePublisher(ClusterKeyPublisher):
    """A cluster publisher on two shards (shard 0's slot on A, shard 1's on B) whose sends
    go to ``cluster``."""

    def __init__(self, cluster: FakeCluster, **options: Any) -> None:
        super().__init__(["redis://unused:1"], shards=2, poll_ms=1, **options)
        self.cluster = cluster
        self.routing.topology = FakeTopology(cluster, poll_ms=1)

    async def _send_batch(self, sender: _Sender, batch: list[bytes]) -> None:
        cluster, owner = self.cluster, sender.owner
        cluster.sending.add(owner)
        try:
            if owner in cluster.held:
                await cluster.held[owner].wait()
            if owner in cluster.failing:
                cluster.failures[owner] = cluster.failures.get(owner, 0) + 1
                cluster.on_failure(owner)
                raise ConnectionError(f"{owner} is down")
            cluster.received.setdefault(owner, []).extend(batch)
        finally:
            cluster.sending.discard(owner)


def _keys(shard: int, count: int, start: int = 0) -> list[str]:
    keys = (f"key-{i}" for i in range(start, start + 1000 * count))
    return [k for k in keys if shard_of_key(k, 2) == shard][:count]


def _encoded(keys: list[str]) -> list[bytes]:
    return [encode_key(k) for k in keys]


def _in_outage(publisher: FakePublisher) -> bool:
    """Whether an outage of ``publisher`` goes on (counted, not yet over)."""
    return publisher._down_since_s is not None


async def _until(done: Callable[[], bool]) -> None:
    while not done():
        await asyncio.sleep(0.001)


@pytest.mark.asyncio
async def test_a_held_primary_delays_only_its_own_keys() -> None:
    """A's send hangs (a paused primary); keys of B published while it hangs reach B, and
    ``flush`` waits for A's; once A answers, every key is sent once."""
    cluster = FakeCluster()
    cluster.held[A] = asyncio.Event()
    keys_a, keys_b = _keys(0, 30), _keys(1, 30)
    async with FakePublisher(cluster) as publisher, asyncio.timeout(GUARD_S):
        publisher.publish(keys_a[0])
        await _until(lambda: A in cluster.sending)  # A's first send hangs
        flushing = asyncio.create_task(publisher.flush())
        for key in keys_a[1:] + keys_b:
            publisher.publish(key)
        await _until(lambda: len(cluster.received.get(B, [])) == len(keys_b))
        assert cluster.received[B] == _encoded(keys_b)
        assert A not in cluster.received and not flushing.done()
        assert publisher.pending == len(keys_a) - 1  # A's first key is being sent
        cluster.held[A].set()
        await flushing
        await publisher.flush()
        assert sorted(cluster.received[A]) == sorted(_encoded(keys_a))
        assert publisher.published == len(keys_a) + len(keys_b) and publisher.pending == 0
    assert publisher.outages == 0


@pytest.mark.asyncio
async def test_a_failed_primarys_keys_follow_the_promoted_replica() -> None:
    """A fails its sends; C takes A's slots at the first failure: A's keys, the batch that
    failed and the ones queued behind it, are sent to C once; B's go on meanwhile."""
    cluster = FakeCluster()
    cluster.held[A] = asyncio.Event()
    cluster.failing.add(A)
    cluster.on_failure = lambda owner: cluster.fail_over(A, C)
    keys_a, keys_b = _keys(0, 20), _keys(1, 20)
    async with FakePublisher(cluster) as publisher, asyncio.timeout(GUARD_S):
        publisher.publish(keys_a[0])
        await _until(lambda: A in cluster.sending)
        for key in keys_a[1:] + keys_b:
            publisher.publish(key)
        await _until(lambda: len(cluster.received.get(B, [])) == len(keys_b))
        cluster.held[A].set()  # its send fails now, and C is the owner
        await publisher.flush()
        assert A not in cluster.received
        assert sorted(cluster.received[C]) == sorted(_encoded(keys_a))
        assert publisher.outages == 1 and publisher.published == 40


@pytest.mark.asyncio
async def test_a_primary_that_fails_then_answers_gets_its_keys_again() -> None:
    """No replica: A fails sends until the test lets it answer; its keys are kept, retried
    on A's own schedule, and sent there once it answers; the outage ends then."""
    cluster = FakeCluster()
    cluster.failing.add(A)
    keys_a, keys_b = _keys(0, 10), _keys(1, 10)
    async with FakePublisher(cluster) as publisher, asyncio.timeout(GUARD_S):
        for key in keys_a + keys_b:
            publisher.publish(key)
        await _until(
            lambda: cluster.failures.get(A, 0) >= 3 and len(cluster.received.get(B, [])) == 10
        )
        assert publisher.outages == 1 and publisher.pending == len(keys_a)
        cluster.failing.clear()
        await publisher.flush()
        assert sorted(cluster.received[A]) == sorted(_encoded(keys_a))
        assert publisher.outages == 1


@pytest.mark.asyncio
async def test_a_primary_failing_while_another_sends_is_one_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No replica: A fails every send while a key of B is published at every turn of the
    loop. After each failure A's keys go back to the dispatcher and are routed to A again;
    B's sends, some of them while A's keys wait to be routed, end nothing: one outage, one
    WARNING, and one INFO once A answers. (A send of B used to end the outage while A's
    keys waited, so that each failure of A began a new one.)"""
    cluster = FakeCluster()
    cluster.failing.add(A)
    keys_a, keys_b = _keys(0, 3), itertools.cycle(_keys(1, 50))
    options = {"reconnect_min_ms": 1, "reconnect_max_ms": 2}  # A retried every 1-2 ms
    with caplog.at_level(logging.INFO, logger="purgatory.contrib.redis"):
        async with FakePublisher(cluster, **options) as publisher, asyncio.timeout(GUARD_S):
            for key in keys_a:
                publisher.publish(key)
            while cluster.failures.get(A, 0) < 10:
                publisher.publish(next(keys_b))
                await asyncio.sleep(0)
            assert publisher.outages == 1
            cluster.failing.clear()
            await publisher.flush()
            assert sorted(cluster.received[A]) == sorted(_encoded(keys_a))
    assert publisher.outages == 1
    messages = [r.getMessage() for r in caplog.records]
    assert sum("unreachable" in m for m in messages) == 1
    assert sum("every primary reachable again" in m for m in messages) == 1


@pytest.mark.asyncio
async def test_a_send_elsewhere_ends_no_outage_while_a_failed_primarys_keys_wait() -> None:
    """The race of the test above, step by step: A's send failed and its keys went back to
    the dispatcher; a send of B works while they wait to be routed, and another once they
    are routed to A again (no new owner): the outage goes on, A holds keys. It ends when
    a send of A works."""
    cluster = FakeCluster()
    publisher = FakePublisher(cluster)
    box = publisher._outbox
    a_key, b_key = encode_key(_keys(0, 1)[0]), encode_key(_keys(1, 1)[0])
    owners = {a_key: A, b_key: B}
    senders = {owner: _Sender(owner, ReconnectSchedule(1, 2)) for owner in (A, B)}
    box.admit([a_key], 1)
    box.route(owners.get)
    batch = box.take(A, 10)
    box.failed(A)
    async with asyncio.timeout(GUARD_S):
        await publisher._sender_failed(senders[A], ConnectionError("A is down"), batch[0])
    assert box.parked == {a_key: 0} and publisher.outages == 1  # handed back
    publisher._sender_works(senders[B])  # while A's keys wait for the dispatcher
    box.route(owners.get)  # to A again: the map names no new owner
    publisher._sender_works(senders[B])
    assert _in_outage(publisher)  # it goes on
    assert box.take(A, 10) == [a_key] and box.sent(A) == 1
    publisher._sender_works(senders[A])
    assert not _in_outage(publisher) and publisher.outages == 1


@pytest.mark.asyncio
async def test_a_send_held_by_a_primary_whose_slots_moved_is_given_up() -> None:
    """A's send hangs for ever (a paused primary, and a ``timeout_ms`` beyond the test);
    C takes A's slots meanwhile: the send's watch (the map read every ``poll_ms`` once
    the send outlasts it) sees C, the send is given up, and A's keys, the batch and the
    ones queued behind it, go to C; A's sender ends. A never answers."""
    cluster = FakeCluster()
    cluster.held[A] = asyncio.Event()
    keys_a, keys_b = _keys(0, 20), _keys(1, 20)
    async with FakePublisher(cluster, timeout_ms=3_600_000) as publisher:
        async with asyncio.timeout(GUARD_S):
            publisher.publish(keys_a[0])
            await _until(lambda: A in cluster.sending)
            for key in keys_a[1:] + keys_b:
                publisher.publish(key)
            await _until(lambda: len(cluster.received.get(B, [])) == len(keys_b))
            publisher._check_invariants()
            cluster.fail_over(A, C)
            await publisher.flush()
            assert A not in cluster.received and A not in cluster.sending  # given up
            assert sorted(cluster.received[C]) == sorted(_encoded(keys_a))
            assert set(publisher._senders) == {B, C} and A not in publisher._outbox.queues
            publisher._check_invariants()
            assert publisher.outages == 1 and publisher.published == 40
            await _until(lambda: not publisher._retiring)  # A's task ended
        assert not cluster.held[A].is_set()


@pytest.mark.asyncio
async def test_an_idle_sender_ends_when_a_map_read_gives_its_primary_no_shard() -> None:
    """A's sender is idle when C takes A's slots; the map is read again by B's watch (B's
    send hangs): A's sender, woken by the new map, ends; B's send goes on, and ends
    once B answers."""
    cluster = FakeCluster()
    keys_a, keys_b = _keys(0, 5), _keys(1, 5)
    async with FakePublisher(cluster) as publisher, asyncio.timeout(GUARD_S):
        for key in keys_a:
            publisher.publish(key)
        await publisher.flush()
        assert set(publisher._senders) == {A}
        cluster.held[B] = asyncio.Event()
        cluster.fail_over(A, C)
        for key in keys_b:
            publisher.publish(key)
        await _until(lambda: A not in publisher._senders)
        publisher._check_invariants()
        assert B in cluster.sending  # B's send still hangs: it read the map, no more
        cluster.held[B].set()
        await publisher.flush()
        assert set(publisher._senders) == {B} and publisher.outages == 0
        assert sorted(cluster.received[B]) == sorted(_encoded(keys_b))
        publisher._check_invariants()


@pytest.mark.asyncio
async def test_closing_with_a_held_primary_drops_only_its_keys(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = FakeCluster()
    cluster.held[A] = asyncio.Event()
    keys_a, keys_b = _keys(0, 5), _keys(1, 5)
    publisher = FakePublisher(cluster, close_timeout_ms=20)
    async with asyncio.timeout(GUARD_S):
        await publisher.start()
        for key in keys_a + keys_b:
            publisher.publish(key)
        await _until(lambda: len(cluster.received.get(B, [])) == 5 and A in cluster.sending)
        with caplog.at_level(logging.WARNING, logger="purgatory.contrib.redis"):
            await publisher.close()
    assert [r.getMessage() for r in caplog.records] == [
        "key publisher on 'purgatory:key-events' closed with 5 keys unsent (Redis unreachable)"
    ]
    assert publisher.pending == 0
