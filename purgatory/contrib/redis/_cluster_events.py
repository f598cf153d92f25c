"""The subscribing side of a bridge on a Redis Cluster: one connection per primary.

:class:`ClusterKeyEvents` is :class:`KeyEvents` on a cluster (see :mod:`._cluster` for the
sharding and the publisher). It opens one connection per primary that serves its shard
channels (``SSUBSCRIBE`` of each, one command per channel: a command's channels must share
a slot) and runs one task per connection. When every ``ssubscribe`` of a connection is
confirmed it re-checks every watched key, as :class:`KeyEvents` does after a reconnect:
what was published on those shards before is seen by the re-check, what is published after
arrives as messages.

A connection that fails (dropped, no pong within ``health_check_ms``, a refused
``SSUBSCRIBE`` such as ``MOVED``, or the ``sunsubscribe`` a primary pushes when a channel's
slot leaves it) takes down only its own shards: the subscriber refreshes the slot map, waits
for a new owner of the failed slot (the map polled every ``poll_ms``) at most the reconnect
schedule's wait, subscribes those shards on their owners and re-checks; the other primaries'
subscriptions go on. Through a primary's failover, a watcher whose condition became true
waits at most for the promotion + one poll + connect, subscribe and the re-check.

``subscribed`` is true while every shard is subscribed; an outage (one WARNING line, one
INFO line when it ends) runs from the first shard lost to the moment all are back.

Which shards a worker subscribes to: all (``subscribe_shards=None``, the default), since a
worker's purgatory may watch any key. A worker that only ever watches keys of some shards
(requests routed by :func:`~._cluster.shard_of_key`, as a load balancer routes by a hash)
passes those and receives only their events (docs/how-to/redis.md, "The ceiling").
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ._cluster import DEFAULT_SHARDS, ClusterKeyPublisher, _Routing, _SlotMoved
from ._connection import (
    CLOSE_TIMEOUT_MS,
    HEALTH_CHECK_MS,
    RECONNECT_MAX_MS,
    RECONNECT_MIN_MS,
    TIMEOUT_MS,
    Settings,
    aclose,
    stop_all,
)
from ._encoding import DEFAULT_CHANNEL
from ._events import KeyEvents, Refresh, Watchers
from ._topology import Address, Topology

__all__ = ["ClusterKeyEvents"]


class ClusterKeyEvents(KeyEvents):
    """:class:`KeyEvents` on a Redis Cluster with sharded pub/sub (Redis >= 7): the same
    methods, statistics and guarantees; see the module doc.

    ``redis_urls``: startup nodes (a list: any nodes of the cluster). ``shards`` and
    ``channel`` must be the same in every process of the deployment (the rule:
    :func:`shard_of_key`). ``subscribe_shards``: the shards this worker receives (None: all;
    see the module doc). ``poll_ms``: how often the slot map is polled while a primary is
    down. Other options as :class:`KeyEvents`'s; ``publisher`` is a
    :class:`ClusterKeyPublisher`.
    """

    publisher: ClusterKeyPublisher

    def __init__(
        self,
        purgatory: Watchers,
        redis_urls: Sequence[str],
        *,
        channel: str = DEFAULT_CHANNEL,
        shards: int = DEFAULT_SHARDS,
        subscribe_shards: Collection[int] | None = None,
        poll_ms: int = 25,
        reconnect_min_ms: int = RECONNECT_MIN_MS,
        reconnect_max_ms: int = RECONNECT_MAX_MS,
        timeout_ms: int = TIMEOUT_MS,
        health_check_ms: int = HEALTH_CHECK_MS,
        close_timeout_ms: int = CLOSE_TIMEOUT_MS,
        redis_options: Mapping[str, Any] | None = None,
        refresh: Refresh | None = None,
    ) -> None:
        settings = Settings(
            channel=channel,
            reconnect_min_ms=reconnect_min_ms,
            reconnect_max_ms=reconnect_max_ms,
            timeout_ms=timeout_ms,
            redis_options=redis_options,
        )
        publisher = ClusterKeyPublisher(
            redis_urls,
            shards=shards,
            poll_ms=poll_ms,
            close_timeout_ms=close_timeout_ms,
            **settings,
        )
        wanted = set(range(shards) if subscribe_shards is None else subscribe_shards)
        if not wanted or not wanted <= set(range(shards)):
            raise ValueError(f"subscribe_shards must be some of 0..{shards - 1}")
        super().__init__(
            purgatory,
            publisher.routing.topology.urls[0],
            health_check_ms=health_check_ms,
            close_timeout_ms=close_timeout_ms,
            refresh=refresh,
            **settings,
        )
        self.publisher = publisher
        topology = Topology(
            publisher.routing.topology.urls, connect=self._new_client, poll_ms=poll_ms
        )
        self.routing = _Routing(publisher.routing.channels, topology)
        self.subscribe_shards = frozenset(wanted)
        self._live: set[int] = set()  # shards subscribed now

    @property
    def subscribed_shards(self) -> frozenset[int]:
        """The shards subscribed now (all of ``subscribe_shards`` when
        :attr:`subscribed`). O(shards)."""
        return frozenset(self._live)

    async def _run(self) -> None:
        """Subscribe every shard on its primary, one task per connection; when one fails,
        resubscribe its shards (see the module doc)."""
        tasks: dict[asyncio.Task[None], list[int]] = {}
        down = set(self.subscribe_shards)
        try:
            while True:
                if down:
                    try:
                        groups = await self.routing.owners(down)
                    except Exception as exc:  # noqa: BLE001 - logged as an outage, retried
                        self._lost(exc)
                        await self._wait_to_retry()
                        continue
                    for owner, shards in groups.items():
                        task = asyncio.create_task(self._subscribe_node(owner, shards))
                        tasks[task] = shards
                    down.clear()
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    shards = tasks.pop(task)
                    down.update(shards)
                    self._live.difference_update(shards)
                    self._lost(task.exception() or ConnectionError("subscription ended"))
                await self._wait_to_retry()
        finally:
            await stop_all(list(tasks))

    def _lost(self, exc: BaseException) -> None:
        self._subscribed.clear()
        error = exc if isinstance(exc, Exception) else ConnectionError(repr(exc))
        self._connection_failed(
            error, "shard subscription lost (%s); resubscribing, then re-checking watched keys"
        )

    async def _wait_to_retry(self) -> None:
        now_ms = int(asyncio.get_running_loop().time() * 1000)
        await self.routing.wait_to_retry(self.reconnect_schedule.failed(now_ms))

    async def _subscribe_node(self, owner: Address, shards: list[int]) -> None:
        """Subscribe ``shards`` on ``owner``, re-check once confirmed, then read its
        messages until the connection fails (raises; the failed slot noted for the
        retry's wait)."""
        client = self.routing.topology.client(owner)
        pubsub = client.pubsub()
        try:
            await self._confirmed(pubsub, owner, shards)
            await self._on_shards_subscribed(shards)
            await self._listen(pubsub, self._on_node_control)
        except BaseException:
            self.routing.failed = (self.routing.slots[shards[0]], owner)
            raise
        finally:
            await aclose(pubsub, client)

    async def _confirmed(self, pubsub: Any, owner: Address, shards: list[int]) -> None:
        """Send the ``SSUBSCRIBE``s and wait for every confirmation, at most
        ``timeout_ms``. Messages received before are dropped: the re-check that follows
        covers them. On an owner that failed before (a suspect: a primary down and not
        yet replaced, or paused), the map is read again every ``poll_ms`` of silence,
        and a new owner ends the wait (:class:`_SlotMoved`): a paused primary does not
        delay the move to the promoted replica. (A connect to a host that is down and
        sends no reset takes up to ``timeout_ms``: nothing here cancels it, since a
        connect cancelled inside redis-py can leave its socket open.)"""
        routing = self.routing
        for i in shards:
            await pubsub.ssubscribe(routing.channels[i])
        suspect = routing.topology.is_suspect(owner)
        wait_s = (routing.topology.poll_ms if suspect else self.timeout_ms) / 1000
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_ms / 1000
        left = len(shards)
        while left:
            message = await pubsub.get_message(timeout=wait_s)
            if message is not None:
                left -= message["type"] == "ssubscribe"
            elif loop.time() >= deadline:
                raise TimeoutError(f"no ssubscribe confirmed within {self.timeout_ms} ms")
            elif suspect and await routing.moved_from(shards[0], owner):
                raise _SlotMoved(f"the slot of shard {shards[0]} has a new owner")
        routing.topology.trust(owner)

    async def _on_node_control(self, message: dict[str, Any]) -> None:
        if message["type"] == "sunsubscribe":
            raise _SlotMoved(f"the slot of {message['channel']!r} moved")

    async def _on_shards_subscribed(self, shards: list[int]) -> None:
        """Every shard of a connection confirmed: re-check, then count them live."""
        rechecked = await self._recheck()
        self._live.update(shards)
        if self._live >= self.subscribe_shards:
            self._subscriptions += 1
            self._subscribed.set()
            self._connection_works(
                "every shard subscribed again after %.1f s; re-checked %d keys", rechecked
            )
