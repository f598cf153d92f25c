"""Where a Redis Cluster's shard channels live: the slot map, refreshed from any live node.

A bridge on a cluster keeps a :class:`SlotMap` (each slot range and the address of the
primary that owns it, from ``CLUSTER SLOTS``) and asks it which primary serves each of its
shard channels (:mod:`._sharding`). The map goes stale when a slot moves (resharding) or a
primary fails and a replica is promoted; the bridge then learns it from a failure (a
dropped connection, ``MOVED`` on ``SPUBLISH``, the ``sunsubscribe`` a primary pushes when
the slot of a shard channel leaves it) or, publishing, from a send that outlasts
``poll_ms`` (its primary paused or silent: the map is read every ``poll_ms`` while it
lasts), and calls :meth:`Topology.refresh`, which asks the nodes it knows one after the
other (the last map's nodes, then the startup URLs) and takes the first answer. While a
primary is down and not yet replaced, every live node still names it:
:meth:`Topology.wait_for_new_owner` polls the map at a short fixed interval (``poll_ms``,
one ``CLUSTER SLOTS`` to a live node each) until another node owns the slot (the
failover's promotion) or a deadline passes, so the bridge reconnects within one poll of
the promotion rather than at its reconnect schedule's next step.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis.asyncio

from ._connection import FAILURES, aclose

__all__ = ["Address", "SlotMap", "Topology", "startup_urls"]

#: a node: (host, port)
Address = tuple[str, int]


class SlotMap:
    """The primaries of a cluster's slot ranges. O(log ranges) per :meth:`owner`."""

    __slots__ = ("_ends", "_owners", "_starts", "nodes")

    def __init__(self, ranges: Sequence[tuple[int, int, Address]], nodes: Sequence[Address]):
        ordered = sorted(ranges)
        self._starts = [start for start, _, _ in ordered]  # ascending, ranges disjoint
        self._ends = [end for _, end, _ in ordered]
        self._owners = [owner for _, _, owner in ordered]
        #: every node the map names, primaries first (where the next refresh asks)
        self.nodes: list[Address] = list(dict.fromkeys(nodes))

    @classmethod
    def from_cluster_slots(cls, reply: Sequence[Any]) -> SlotMap:
        """Parse a ``CLUSTER SLOTS`` reply (``[start, end, [host, port, id, ...],
        replica, ...]`` per range). O(ranges)."""
        ranges: list[tuple[int, int, Address]] = []
        primaries: list[Address] = []
        replicas: list[Address] = []
        for start, end, primary, *others in reply:
            owner = (_text(primary[0]), int(primary[1]))
            ranges.append((int(start), int(end), owner))
            primaries.append(owner)
            replicas.extend((_text(node[0]), int(node[1])) for node in others)
        return cls(ranges, primaries + replicas)

    def owner(self, slot: int) -> Address | None:
        """The primary that owns ``slot``, None if no range covers it."""
        i = bisect.bisect_right(self._starts, slot) - 1
        if i >= 0 and slot <= self._ends[i]:
            return self._owners[i]
        return None


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def startup_urls(urls: Sequence[str]) -> list[str]:
    """``urls`` as a list; ValueError (one line) unless it is a non-empty list of URLs."""
    if isinstance(urls, str) or not urls:
        raise ValueError("a cluster bridge needs a list of one or more startup node URLs")
    return list(urls)


def _address(url: str) -> Address:
    """A URL's (host, port); ValueError (one line) if it names no host."""
    parts = urlsplit(url)
    if not parts.hostname:
        raise ValueError(f"a cluster node URL needs a host: {url!r}")
    return (parts.hostname, parts.port or 6379)


class Topology:
    """The slot map of one cluster and how to reach its nodes (one per bridge side).

    ``urls``: the startup nodes (any nodes of the cluster: ``redis://host:port``, with
    credentials or ``rediss://`` as a plain connection would take them; the first one's
    scheme and credentials are used for every node). ``connect(url)`` makes a client
    that fails fast (the bridge's own: see :class:`KeyPublisher`).
    """

    def __init__(
        self,
        urls: Sequence[str],
        *,
        connect: Callable[[str], redis.asyncio.Redis],
        poll_ms: int,
    ) -> None:
        self.urls = startup_urls(urls)
        self.poll_ms = poll_ms
        self._connect = connect
        self._startup = [_address(url) for url in self.urls]
        self._suspects: dict[Address, None] = {}  # nodes that failed, asked last (in order)
        self.map: SlotMap | None = None  # None: never fetched
        self.refreshes = 0  # maps fetched

    def client(self, address: Address) -> redis.asyncio.Redis:
        """A new client of one node, reached like the first startup URL (its scheme and
        credentials): the caller retries and closes it."""
        parts = urlsplit(self.urls[0])
        credentials = parts.netloc.rpartition("@")[0]
        netloc = f"{credentials}@" if credentials else ""
        host = f"[{address[0]}]" if ":" in address[0] else address[0]
        return self._connect(urlunsplit((parts.scheme, f"{netloc}{host}:{address[1]}", "", "", "")))

    def suspect(self, address: Address | None) -> None:
        """``address`` failed: it is asked last by the next refreshes (a host that is
        down may take ``timeout_ms`` to refuse), until it answers again. O(1)."""
        if address is not None:
            self._suspects[address] = None

    def trust(self, address: Address) -> None:
        """``address`` works (a subscription confirmed there): no suspect. O(1)."""
        self._suspects.pop(address, None)

    def is_suspect(self, address: Address) -> bool:
        """Whether ``address`` failed and has not answered since. O(1)."""
        return address in self._suspects

    async def refresh(self) -> SlotMap:
        """Fetch the map from the first node that answers: the last map's nodes, then the
        startup nodes, the suspects last (see :meth:`suspect`); a node that does not answer
        becomes a suspect. The last node's error if none answers. O(nodes) attempts."""
        known = list(self.map.nodes) if self.map is not None else []
        suspects = self._suspects
        ordered = dict.fromkeys(n for n in [*known, *self._startup] if n not in suspects)
        error: BaseException = ConnectionError("no cluster node to ask")
        for node in [*ordered, *suspects]:
            client = self.client(node)
            try:
                reply = await client.execute_command("CLUSTER", "SLOTS")  # type: ignore[no-untyped-call]
            except FAILURES as exc:
                error = exc
                suspects[node] = None
                continue
            finally:
                await aclose(client)
            suspects.pop(node, None)
            self.map = SlotMap.from_cluster_slots(reply)
            self.refreshes += 1
            return self.map
        raise error

    async def wait_for_new_owner(self, slot: int, old: Address | None, wait_ms: int) -> None:
        """Refresh the map every ``poll_ms`` until a node other than ``old`` owns ``slot``
        or ``wait_ms`` have passed; a refresh that fails waits ``poll_ms`` more. O(wait_ms /
        poll_ms) refreshes."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_ms / 1000
        while True:
            try:
                new = (await self.refresh()).owner(slot)
            except FAILURES:
                new = old
            remaining_s = deadline - loop.time()
            if (new is not None and new != old) or remaining_s <= 0:
                return
            await asyncio.sleep(min(self.poll_ms / 1000, remaining_s))
