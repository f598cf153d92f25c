"""The bridge on a Redis Cluster: key events over sharded pub/sub, one primary's work each.

:class:`ClusterKeyEvents` and :class:`ClusterKeyPublisher` are :class:`KeyEvents` and
:class:`KeyPublisher` with the same methods, statistics and guarantees, for a Redis Cluster
(Redis >= 7). They take a list of startup node URLs and a number of ``shards``: a key's
events go to one of ``shards`` shard channels by the rule of :mod:`._sharding`, with
``SPUBLISH`` to the primary that owns the channel's slot (one primary's work per event,
where a plain ``PUBLISH`` is broadcast to every node of a cluster).

Publishing: a sender per primary. ``publish`` adds the key to the pending set, as
:class:`KeyPublisher`'s does; the publisher's task (the dispatcher) takes the pending keys
in, routes each to the primary of its shard by :mod:`._topology`'s slot map and wakes that
primary's sender, a task of its own that sends its queue in pipelines of ``SPUBLISH``
(at most :data:`~._publisher.MAX_BATCH` per round trip), one at a time, with its own
connection, ``timeout_ms`` and reconnect schedule (:mod:`._outbox` holds the queues). So
a primary that stalls (paused, a host gone silent) or fails delays only the keys of its own
shards; the other senders go on. A sender whose send fails keeps the batch (back at the
front of its queue), waits its schedule's wait, or less: until the slot of the batch's
first key has a new owner (the map polled every ``poll_ms``: a failover's promotion, a
slot moved), then hands its keys back to the dispatcher, which routes them by the map just
read: to the same primary again, or to the new owner. A key routed again meets its queued
copy, if any, and is sent once.

A send that outlasts ``poll_ms`` is watched: a task reads the map every ``poll_ms`` (that
primary asked last) until the send ends, and once the map names another owner of the slot
of one of its keys (the paused primary's replica promoted) the send is given up, as one
that failed: its keys follow the promotion within a poll, not at ``timeout_ms``. A batch
that failed or was given up may have reached Redis (a pipeline answered by a paused
primary once it resumes, ``MOVED`` for some of its keys only): it is sent again. So a key
is sent at least once, and once more at most per failed batch that held it: harmless,
since events are level-triggered.

A sender ends when it holds no key and the last map read (by the dispatcher, a sender
after a failure, or a watch) gives its primary no shard (a failover demoted it, its slots
moved): it leaves the senders and closes its connection; keys routed there again (the
primary back) start a new one. A new map wakes such senders, so an idle one ends too.
``flush`` returns once every key published before it is sent, whichever primaries they went
to (the marks of :mod:`._outbox`).

The subscriber, :class:`~._cluster_events.ClusterKeyEvents`, keeps one connection per
primary that serves its shard channels (see its module). Which shards a worker subscribes
to, and :func:`shard_of_key` for a router that sends each key's requests to the workers
subscribed to its shard: docs/how-to/redis.md, "The ceiling".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Collection, Hashable, Mapping, Sequence
from typing import Any

import redis.asyncio

from ._connection import (
    CLOSE_TIMEOUT_MS,
    FAILURES,
    RECONNECT_MAX_MS,
    RECONNECT_MIN_MS,
    TIMEOUT_MS,
    aclose,
    check_timing,
    describe,
    logger,
    stop_all,
)
from ._encoding import DEFAULT_CHANNEL, encode_key
from ._outbox import Outbox
from ._publisher import MAX_BATCH, KeyPublisher
from ._reconnect import ReconnectSchedule
from ._sharding import key_slot, shard_channels, shard_of
from ._topology import Address, SlotMap, Topology, startup_urls

__all__ = ["DEFAULT_SHARDS", "ClusterKeyPublisher", "shard_of_key"]

#: Shard channels of a cluster bridge unless told otherwise: as many on each primary when
#: 1, 2, 3, 4, 6, 8, 12 or 16 primaries split the slots evenly.
DEFAULT_SHARDS = 48


def shard_of_key(key: Hashable, shards: int = DEFAULT_SHARDS) -> int:
    """The shard whose channel carries ``key``'s events: ``CRC16(encode_key(key)) mod
    shards`` (the rule: docs/how-to/redis.md, "On a Redis Cluster").
    TypeError for a key :func:`encode_key` refuses. O(len(key))."""
    return shard_of(encode_key(key), shards)


class _SlotMoved(ConnectionError):
    """A primary pushed ``sunsubscribe``: a shard channel's slot left it."""


class _Routing:
    """The shards of one side, their channels and slots, and the failure that the next
    retry waits on (the slot and the primary that failed)."""

    def __init__(self, channels: list[str], topology: Topology) -> None:
        self.shards = len(channels)
        self.channels = channels
        self.slots = [key_slot(name.encode()) for name in self.channels]
        self.topology = topology
        self.failed: tuple[int, Address | None] | None = None  # (slot, its old owner)
        self.stale = True  # the map is fetched again before its next use (after failures)

    async def owners(self, shards: Collection[int]) -> dict[Address, list[int]]:
        """``shards`` grouped by primary, from the map (fetched first if it is stale: a
        round trip after a failure, none otherwise). ConnectionError if a slot has no
        owner (the cluster is not serving it), or the map's fetch failed. O(shards)."""
        slot_map = self.topology.map
        if self.stale or slot_map is None:
            slot_map = await self.topology.refresh()
            self.stale = False
        groups: dict[Address, list[int]] = {}
        for i in sorted(shards):
            owner = slot_map.owner(self.slots[i])
            if owner is None:
                self.failed = (self.slots[i], None)
                raise ConnectionError(f"no primary serves slot {self.slots[i]}")
            groups.setdefault(owner, []).append(i)
        return groups

    async def moved_from(self, shard: int, owner: Address) -> bool:
        """Whether the map, read again, names another owner of ``shard``'s slot than
        ``owner`` (False if it cannot be read). One ``CLUSTER SLOTS``."""
        try:
            slot_map = await self.topology.refresh()
        except FAILURES:
            return False
        new = slot_map.owner(self.slots[shard])
        return new is not None and new != owner

    async def wait_to_retry(self, schedule_wait_ms: int) -> None:
        """Wait the schedule's ``schedule_wait_ms``, or less: until the slot that failed
        has a new owner (polled every ``poll_ms``)."""
        failed, self.failed = self.failed, None
        self.stale = True
        if failed is not None:
            self.topology.suspect(failed[1])
        if failed is None or schedule_wait_ms == 0:
            await asyncio.sleep(schedule_wait_ms / 1000)
        else:
            await self.topology.wait_for_new_owner(*failed, wait_ms=schedule_wait_ms)


class _SendGivenUp(ConnectionError):
    """A send outlasted ``poll_ms`` and the map names another owner of one of its keys:
    given up (:meth:`ClusterKeyPublisher._watch_send`)."""

    def __init__(self, owner: Address, moved: bytes) -> None:
        where = f"{owner[0]}:{owner[1]}"
        super().__init__(f"a key's slot has a new owner while the send to {where} hung")
        self.moved = moved  # a key whose slot has a new owner


class _Sender:
    """One primary's sender: the task that sends its queue, what wakes it, its reconnect
    schedule, its client (None: not connected), whether it waits for keys (``idle``),
    and what watches its sends (see :meth:`ClusterKeyPublisher._send_watched`)."""

    __slots__ = (
        "client",
        "idle",
        "moved",
        "owner",
        "schedule",
        "send_began_s",
        "sends",
        "task",
        "timer",
        "wake",
        "watch",
    )

    def __init__(self, owner: Address, schedule: ReconnectSchedule) -> None:
        self.owner = owner
        self.schedule = schedule
        self.wake = asyncio.Event()
        self.client: redis.asyncio.Redis | None = None
        self.task: asyncio.Task[None] | None = None
        self.idle = False  # waiting for ``wake``, holding no key
        self.sends = 0  # sends begun; the last one is going on while send_began_s is set
        self.send_began_s: float | None = None  # loop time it began (None: no send)
        self.timer: asyncio.TimerHandle | None = None  # the check of a send's length
        self.watch: asyncio.Task[None] | None = None  # the watch of a long send
        self.moved: bytes | None = None  # set by the watch: a key whose slot moved


class ClusterKeyPublisher(KeyPublisher):
    """:class:`KeyPublisher` on a Redis Cluster: keys announced with ``SPUBLISH`` on their
    shard channels (see the module doc), each to the primary that owns the channel, by a
    sender per primary.

    ``redis_urls``: startup nodes (a list: any nodes of the cluster). ``shards`` and
    ``channel`` must be the same in every process of the deployment. ``poll_ms``: how often
    the slot map is polled while a primary is down (one ``CLUSTER SLOTS`` to a live node).
    Other options as :class:`KeyPublisher`'s; ``timeout_ms`` bounds each primary's sends
    on their own, and each sender keeps its own reconnect schedule. Per round trip: one
    pipeline to one primary.
    """

    def __init__(
        self,
        redis_urls: Sequence[str],
        *,
        channel: str = DEFAULT_CHANNEL,
        shards: int = DEFAULT_SHARDS,
        poll_ms: int = 25,
        reconnect_min_ms: int = RECONNECT_MIN_MS,
        reconnect_max_ms: int = RECONNECT_MAX_MS,
        timeout_ms: int = TIMEOUT_MS,
        close_timeout_ms: int = CLOSE_TIMEOUT_MS,
        redis_options: Mapping[str, Any] | None = None,
    ) -> None:
        check_timing(poll_ms=poll_ms)
        urls = startup_urls(redis_urls)
        channels = shard_channels(channel, shards)  # refuses bad ones before anything
        super().__init__(
            urls[0],
            channel=channel,
            reconnect_min_ms=reconnect_min_ms,
            reconnect_max_ms=reconnect_max_ms,
            timeout_ms=timeout_ms,
            close_timeout_ms=close_timeout_ms,
            redis_options=redis_options,
        )
        topology = Topology(urls, connect=self._new_client, poll_ms=poll_ms)
        self.routing = _Routing(channels, topology)
        self._outbox = Outbox()
        self._senders: dict[Address, _Sender] = {}
        #: the tasks of senders that ended (their primary serves no shard), until done
        self._retiring: set[asyncio.Task[None]] = set()
        self._down: set[Address] = set()  # primaries whose last send failed (see _sender_works)
        #: the last map read, each shard's primary by it, and those primaries
        self._owners: tuple[SlotMap | None, list[Address | None], frozenset[Address]] = (
            None,
            [],
            frozenset(),
        )
        #: while keys are parked with no owner (their slot unserved): the loop time at
        #: which the map is read again for them (None: every parked key had an owner)
        self._map_due_s: float | None = None

    @property
    def pending(self) -> int:
        """Keys waiting to be sent (not yet routed, or queued for their primary).
        O(primaries)."""
        return len(self._pending) + self._outbox.waiting

    # -- the dispatcher: the task of the publisher -------------------------------------

    async def _run(self) -> None:
        """Route the pending keys to their primaries' senders, for ever (see the module
        doc); the senders are stopped with it."""
        try:
            while True:
                await self._wait_for_work()
                if self._pending:
                    self._outbox.admit(self._pending, self._enqueued)
                    self._pending = {}
                await self._route()
        finally:
            senders = [s.task for s in self._senders.values() if s.task is not None]
            try:
                await stop_all(senders + list(self._retiring))
            finally:  # also when stop_all ends raising the cancellation it kept
                await self._disconnect()

    async def _wait_for_work(self) -> None:
        """Until a wake-up (keys published, or handed back by a sender), or, while keys
        are parked without an owner, until the map is due to be read again."""
        if self._map_due_s is not None:
            wait_s = max(0.0, self._map_due_s - asyncio.get_running_loop().time())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait_s)
        else:
            await self._wake.wait()
        self._wake.clear()  # before the work: a wake-up during it is kept for the next

    async def _route(self) -> None:
        """Parked keys to their owners' queues, by the slot map (read first if there is
        none yet, or if keys found no owner ``poll_ms`` ago or more: the last map's
        otherwise, which a failed sender reads again before it hands its keys back);
        wake those senders."""
        outbox, topology = self._outbox, self.routing.topology
        loop = asyncio.get_running_loop()
        slot_map, due_s = topology.map, self._map_due_s
        if slot_map is None or (due_s is not None and loop.time() >= due_s):
            try:
                slot_map = await topology.refresh()
            except Exception as exc:  # noqa: BLE001 - logged as an outage, retried
                if slot_map is None:
                    lost = "no slot map of the Redis Cluster (%s); keeping keys, retrying"
                    self._connection_failed(exc, lost)
                    await self._wait_to_retry()
                    self._map_due_s = loop.time()  # read it again at once
                    return
        owners = self._owners_by_shard(slot_map)
        shards = self.routing.shards
        for owner in outbox.route(lambda message: owners[shard_of(message, shards)]):
            self._sender(owner).wake.set()
        if not outbox.parked:
            self._map_due_s = None
        elif due_s is None or loop.time() >= due_s:
            self._map_due_s = loop.time() + topology.poll_ms / 1000

    def _owners_by_shard(self, slot_map: SlotMap) -> list[Address | None]:
        """Each shard's primary by ``slot_map`` (None: no owner), computed once per map.
        A new map wakes the senders of the primaries it gives no shard: each ends once
        it holds no key (:meth:`_retire`). O(shards x log ranges + senders) for a new
        map, O(1) else."""
        known, owners, _ = self._owners
        if known is not slot_map:
            owners = [slot_map.owner(slot) for slot in self.routing.slots]
            serving = frozenset(owner for owner in owners if owner is not None)
            self._owners = (slot_map, owners, serving)
            for owner, sender in self._senders.items():
                if owner not in serving:
                    sender.wake.set()
        return owners

    def _sender(self, owner: Address) -> _Sender:
        """``owner``'s sender, started on first use (at most one per node the cluster named
        a primary; an idle one waits and costs nothing; it ends once the map gives its
        primary no shard: :meth:`_retire`)."""
        sender = self._senders.get(owner)
        if sender is None:
            schedule = ReconnectSchedule(
                self.reconnect_schedule.min_ms, self.reconnect_schedule.max_ms
            )
            sender = self._senders[owner] = _Sender(owner, schedule)
        if sender.task is None or sender.task.done():
            if sender.task is not None and (error := sender.task.exception()) is not None:
                # a bug, not the network (those are retried inside): said, and restarted
                logger.error("%s ended with %s", sender.task.get_name(), describe(error))
            self._outbox.failed(owner)  # its batch, if it was sending one
            name = f"{self._task_name} -> {owner[0]}:{owner[1]}"
            sender.task = asyncio.create_task(self._send_loop(sender), name=name)
        return sender

    async def _wait_to_retry(self) -> None:
        """The schedule's wait after the map could not be read (no probes: any node may
        answer)."""
        now_ms = int(asyncio.get_running_loop().time() * 1000)
        await asyncio.sleep(self.reconnect_schedule.failed(now_ms) / 1000)

    # -- a sender: one task per primary ------------------------------------------------

    async def _send_loop(self, sender: _Sender) -> None:
        """Send ``sender``'s queue a batch at a time (a pipeline of at most
        :data:`MAX_BATCH` ``SPUBLISH``), for ever; after a failure, retry as
        :meth:`_sender_failed` says."""
        outbox, owner = self._outbox, sender.owner
        try:
            while True:
                if not outbox.queued(owner):
                    if self._retire(sender):
                        return
                    await self._idle(sender)
                    continue
                batch = outbox.take(owner, MAX_BATCH)
                try:
                    await self._send_watched(sender, batch)
                except Exception as exc:  # noqa: BLE001 - logged as an outage, retried
                    outbox.failed(owner)
                    moved = exc.moved if isinstance(exc, _SendGivenUp) else batch[0]
                    await self._sender_failed(sender, exc, moved)
                    continue
                except BaseException:
                    outbox.failed(owner)
                    raise
                self.published += outbox.sent(owner)
                self._sender_works(sender)
                await self._mark_sent(outbox.sent_upto)
        finally:
            if sender.timer is not None:
                sender.timer.cancel()
                sender.timer = None
            client, sender.client = sender.client, None
            if client is not None:
                await aclose(client)

    @staticmethod
    async def _idle(sender: _Sender) -> None:
        """Until the sender is woken (keys queued, or a new map: see :meth:`_retire`)."""
        sender.wake.clear()
        sender.idle = True
        try:
            await sender.wake.wait()
        finally:
            sender.idle = False

    def _retire(self, sender: _Sender) -> bool:
        """Whether the sender, holding no key, ends: the last map read gives its primary
        no shard (a failover demoted it, its slots moved). It then leaves the senders (a
        key routed there again starts a new one) and its task closes its connection as
        it ends. O(1); O(shards) for a new map."""
        slot_map, owner = self.routing.topology.map, sender.owner
        if slot_map is None:
            return False
        self._owners_by_shard(slot_map)
        if owner in self._owners[2]:
            return False
        del self._senders[owner]
        self._outbox.forget(owner)
        if sender.task is not None:
            self._retiring.add(sender.task)
            sender.task.add_done_callback(self._retiring.discard)
        logger.debug("%s: %s:%d serves no shard: its sender ends", self._log_name, *owner)
        return True

    async def _send_watched(self, sender: _Sender, batch: list[bytes]) -> None:
        """:meth:`_send_batch`, watched once it outlasts ``poll_ms`` (:meth:`_watch_send`):
        :class:`_SendGivenUp` if the map names another owner of one of its keys
        meanwhile (its primary paused or silent, a replica promoted: the send would
        wait for ``timeout_ms``). O(1) more than the send: the sender's timer is armed
        if it is not (it fires at most once per ``poll_ms``: :meth:`_check_send`)."""
        task = asyncio.current_task()
        sender.sends += 1
        sender.send_began_s = asyncio.get_running_loop().time()
        if sender.timer is None:
            self._arm(sender)
        try:
            await self._send_batch(sender, batch)
        except asyncio.CancelledError:
            # the watch's cancellation (as asyncio.timeout's): taken back, unless the
            # task is cancelled besides (the publisher closing), or the watch did not
            moved = sender.moved
            if moved is None or task is None or task.uncancel() > 0:
                raise
            raise _SendGivenUp(sender.owner, moved) from None
        finally:
            sender.send_began_s = sender.moved = None
            watch, sender.watch = sender.watch, None
            if watch is not None:
                await stop_all([watch])

    def _arm(self, sender: _Sender) -> None:
        """The sender's timer, at ``poll_ms`` after its send began."""
        began_s = sender.send_began_s
        if began_s is not None:
            when_s = began_s + self.routing.topology.poll_ms / 1000
            sender.timer = asyncio.get_running_loop().call_at(
                when_s, self._check_send, sender, sender.sends
            )

    def _check_send(self, sender: _Sender, sends: int) -> None:
        """The sender's timer: its send ``sends`` goes on after ``poll_ms``: watched
        (:meth:`_watch_send`); a later one goes on: the timer armed again for it; no
        send: the timer rests until the next. O(batch) to start a watch, else O(1)."""
        sender.timer = None
        if sender.send_began_s is None or sender.watch is not None:
            return
        if sender.sends != sends:
            self._arm(sender)
            return
        batch = list(self._outbox.flying.get(sender.owner, ()))
        name = f"{self._task_name} -> {sender.owner[0]}:{sender.owner[1]} watch"
        sender.watch = asyncio.create_task(self._watch_send(sender, batch), name=name)

    async def _watch_send(self, sender: _Sender, batch: list[bytes]) -> None:
        """The send of ``batch`` outlasts ``poll_ms``: read the map every ``poll_ms`` (the
        sender's primary asked last: it may be the one not answering) until it names
        another owner of the slot of one of the batch's keys; then note that key and
        cancel the send (the sender's task: :meth:`_send_watched` takes it as a give-up).
        Cancelled when the send ends. O(batch) once, then one ``CLUSTER SLOTS`` per
        ``poll_ms``."""
        topology, shards = self.routing.topology, self.routing.shards
        by_shard = {shard_of(message, shards): message for message in batch}
        topology.suspect(sender.owner)
        moved: bytes | None = None
        while moved is None:
            try:
                owners = self._owners_by_shard(await topology.refresh())
            except FAILURES:
                owners = [None] * shards
            stay = (None, sender.owner)
            moved = next((m for i, m in by_shard.items() if owners[i] not in stay), None)
            if moved is None:
                await asyncio.sleep(topology.poll_ms / 1000)
        if sender.watch is asyncio.current_task() and sender.task is not None:
            sender.moved = moved  # the send goes on (the watch ends with it)
            sender.task.cancel()

    async def _send_batch(self, sender: _Sender, batch: list[bytes]) -> None:
        """One pipeline to the sender's primary (connecting first if need be); on a
        failure its client is dropped and the error raised."""
        routing = self.routing
        if sender.client is None:
            sender.client = routing.topology.client(sender.owner)
        pipe = sender.client.pipeline(transaction=False)
        for message in batch:
            pipe.spublish(routing.channels[shard_of(message, routing.shards)], message)
        try:
            await pipe.execute()
        except BaseException:
            client, sender.client = sender.client, None
            await aclose(client)
            raise

    async def _sender_failed(self, sender: _Sender, exc: Exception, first: bytes) -> None:
        """A send to the sender's primary failed: its keys wait for the sender's schedule
        (a new owner of ``first``'s slot ends the wait: the map polled every
        ``poll_ms``), then go back to the dispatcher, routed by the map just read: to the
        same primary (tried again), or to its successor."""
        owner, topology = sender.owner, self.routing.topology
        topology.suspect(owner)
        self._down.add(owner)
        where = f"Redis Cluster primary {owner[0]}:{owner[1]}"
        self._connection_failed(exc, where + " unreachable (%s); keeping its keys, retrying")
        now_ms = int(asyncio.get_running_loop().time() * 1000)
        slot = self.routing.slots[shard_of(first, self.routing.shards)]
        await topology.wait_for_new_owner(slot, owner, sender.schedule.failed(now_ms))
        self._outbox.hand_back(owner)
        self._wake.set()

    def _sender_works(self, sender: _Sender) -> None:
        """A send to the sender's primary worked: an outage ends once no primary that
        failed holds keys (it works again, or its keys went to its successor) and no key
        waits for an owner. O(primaries that failed)."""
        sender.schedule.connected(int(asyncio.get_running_loop().time() * 1000))
        self.routing.topology.trust(sender.owner)
        outbox = self._outbox
        self._down.discard(sender.owner)
        if outbox.parked:
            # keys wait for the dispatcher, among them maybe the keys a failed primary
            # handed back, which may be routed to it again (no new owner yet): until
            # they are routed, holding none says nothing about that primary
            return
        self._down = {owner for owner in self._down if outbox.holds(owner)}
        if not self._down:
            self._connection_works(
                "every primary reachable again after %.1f s; %d keys pending", self.pending
            )

    def _drop_unsent(self) -> int:
        return super()._drop_unsent() + self._outbox.clear()

    def _check_invariants(self) -> None:
        """AssertionError unless the outbox's invariants hold, each sender is its
        primary's, and a sender whose primary the last map read gives no shard holds
        keys or is about to end (not idle, or woken: it ends at its next turn). For the
        tests, after changes. O(keys held + senders)."""
        self._outbox._check_invariants()
        known, _, serving = self._owners
        for owner, sender in self._senders.items():
            assert sender.owner == owner, (sender.owner, owner)
            if known is not None and owner not in serving:
                held = self._outbox.holds(owner)
                assert held or not sender.idle or sender.wake.is_set(), owner

    async def _disconnect(self) -> None:
        clients = []
        for sender in self._senders.values():
            client, sender.client = sender.client, None
            if client is not None:
                clients.append(client)
        await aclose(*clients)
