"""The bridge on a Redis Cluster: key events over sharded pub/sub, one primary's work each.

:class:`ClusterKeyEvents` and :class:`ClusterKeyPublisher` are :class:`KeyEvents` and
:class:`KeyPublisher` with the same methods, statistics and guarantees, for a Redis Cluster
(Redis >= 7). They take a list of startup node URLs and a number of ``shards``: a key's
events go to one of ``shards`` shard channels by the rule of :mod:`._sharding`, with
``SPUBLISH`` to the primary that owns the channel's slot (one primary's work per event,
where a plain ``PUBLISH`` is broadcast to every node of a cluster).

Publishing. The publisher groups each batch of pending keys by the primary of their shard
(:mod:`._topology`'s slot map) and sends one pipeline of ``SPUBLISH`` per primary, all at
once. A primary whose pipeline fails (connection lost, timeout, ``MOVED`` after a slot
moved) gets its keys back in the pending set, oldest first; the others' are sent. Then it
waits for the slot's new owner (the map polled every ``poll_ms``) at most the reconnect
schedule's wait, and sends again.

The subscriber, :class:`~._cluster_events.ClusterKeyEvents`, keeps one connection per
primary that serves its shard channels (see its module). Which shards a worker subscribes
to, and :func:`shard_of_key` for a router that sends each key's requests to the workers
subscribed to its shard: docs/how-to/redis.md, "The ceiling".
"""

from __future__ import annotations

import asyncio
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
)
from ._encoding import DEFAULT_CHANNEL, encode_key
from ._publisher import KeyPublisher
from ._sharding import key_slot, shard_channels, shard_of
from ._topology import Address, Topology, startup_urls

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


class ClusterKeyPublisher(KeyPublisher):
    """:class:`KeyPublisher` on a Redis Cluster: keys announced with ``SPUBLISH`` on their
    shard channels (see the module doc), each to the primary that owns the channel.

    ``redis_urls``: startup nodes (a list: any nodes of the cluster). ``shards`` and
    ``channel`` must be the same in every process of the deployment. ``poll_ms``: how often
    the slot map is polled while a primary is down (one ``CLUSTER SLOTS`` to a live node).
    Other options as :class:`KeyPublisher`'s. Per round trip: one pipeline per primary.
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
        self._clients: dict[Address, redis.asyncio.Redis] = {}

    async def _send(self, batch: list[bytes]) -> bool:
        """One pipeline of ``SPUBLISH`` per primary, at once: True once every key is
        sent; else the failed primaries' keys are pending again (oldest first) and it
        returns False (the sent ones counted in ``published`` here)."""
        routing = self.routing
        try:
            groups = await routing.owners({shard_of(m, routing.shards) for m in batch})
        except Exception as exc:  # noqa: BLE001 - no map: nothing sent, retried
            return await self._failed(batch, exc)
        except BaseException:
            self._pending = dict.fromkeys(batch) | self._pending
            raise
        owner_of = {i: owner for owner, shards in groups.items() for i in shards}
        per_owner: dict[Address, list[bytes]] = {owner: [] for owner in groups}
        for message in batch:
            per_owner[owner_of[shard_of(message, routing.shards)]].append(message)
        owners = list(per_owner)
        try:
            results = await asyncio.gather(
                *(self._send_to(owner, per_owner[owner]) for owner in owners),
                return_exceptions=True,
            )
        except BaseException:
            self._pending = dict.fromkeys(batch) | self._pending
            raise
        failed = [(o, r) for o, r in zip(owners, results, strict=True) if r is not None]
        if not failed:
            return True
        unsent = [m for owner, _ in failed for m in per_owner[owner]]
        self.published += len(batch) - len(unsent)
        owner, error = failed[0]
        routing.failed = (routing.slots[shard_of(per_owner[owner][0], routing.shards)], owner)
        return await self._failed(unsent, error)

    async def _send_to(self, owner: Address, messages: list[bytes]) -> BaseException | None:
        """One pipeline to ``owner``: None once sent, else the error (its client
        dropped)."""
        client = self._clients.get(owner)
        if client is None:
            client = self._clients[owner] = self.routing.topology.client(owner)
        routing = self.routing
        pipe = client.pipeline(transaction=False)
        for message in messages:
            pipe.spublish(routing.channels[shard_of(message, routing.shards)], message)
        try:
            await pipe.execute()
        except Exception as exc:  # noqa: BLE001 - returned to the caller, who retries
            del self._clients[owner]
            await aclose(client)
            return exc
        return None

    async def _failed(self, unsent: list[bytes], error: BaseException) -> bool:
        self._pending = dict.fromkeys(unsent) | self._pending
        if not isinstance(error, Exception):
            raise error
        self._connection_failed(error, "Redis Cluster unreachable (%s); keeping keys, retrying")
        return False

    async def _wait_to_retry(self) -> None:
        now_ms = int(asyncio.get_running_loop().time() * 1000)
        await self.routing.wait_to_retry(self.reconnect_schedule.failed(now_ms))

    async def _disconnect(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await aclose(client)
