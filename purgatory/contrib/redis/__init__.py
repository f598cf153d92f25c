"""Key events between processes through Redis: a put in one process wakes watchers in all.

Install with ``pip install 'aio-purgatory[redis]'`` (redis-py's ``redis.asyncio``); nothing
else in the package imports it. asyncio (and uvloop) only.

A purgatory's ``check_and_complete(key)`` reaches the operations of its own process. When a
service runs several worker processes (a ``POST /put/{key}`` lands on one, the long-polls
watching that key wait in the others), each worker enters a :class:`KeyEvents` bridge beside
its purgatory; a put calls :meth:`KeyEvents.publish`, which completes what it can in this
process at once and announces "key K changed" on a Redis channel, and every bridge calls
``check_and_complete(K)`` on its own purgatory for every announcement::

    from purgatory.contrib.redis import KeyEvents

    async with DelayedOperationPurgatory[Poll]("watch") as purgatory:
        async with KeyEvents(purgatory, "redis://127.0.0.1:6379/0", channel="watch:keys") as events:
            ...
            # a put: first the shared state (a database, Redis itself...), then
            await store.put(key, value)
            events.publish(key)

A process that only writes (a batch job, a different service) uses :class:`KeyPublisher`
alone. On a Redis Cluster (Redis >= 7), :class:`ClusterKeyEvents` and
:class:`ClusterKeyPublisher` do the same over sharded pub/sub: keys spread over ``shards``
shard channels by one rule (:func:`shard_of_key`), each event one primary's work, a
primary's failover followed (see :mod:`._cluster`).

An event carries no value: it says "re-check the operations on K", and each operation's
``try_complete`` reads the state it waits for, so that state must be visible to every process
(events are level-triggered: duplicates and coalesced events are harmless).

The bridge, one job a module: :mod:`._encoding` (a key as a message, one channel for
every key), :mod:`._events` (:class:`KeyEvents`: the subscriber, the re-check that covers
what pub/sub loses, ``refresh`` for a process that reads a local cache),
:mod:`._publisher` (:class:`KeyPublisher`: keys kept through outages),
:mod:`._reconnect` (:class:`ReconnectSchedule`: the waits between attempts, and the
probes that bring a side back within ``probe_ms`` of Redis answering again),
:mod:`._probe` (a probe: a connect and an inline ``PING``), :mod:`._sentinel` (Redis
Sentinel: a ``redis+sentinel://host:port,host:port/service_name`` URL makes both sides
talk to whichever Redis the sentinels name as the primary, and follow a failover),
:mod:`._sharding` (the cluster's key -> shard channel rule), :mod:`._topology` (the
cluster's slot map), :mod:`._cluster` and :mod:`._cluster_events` (the cluster bridge),
:mod:`._outbox` (the cluster publisher's queue per primary) and
:mod:`._connection` (what both sides share: the task's lifecycle and the outages, each
logged as one WARNING line when it starts and one INFO line when it ends on the
``purgatory.contrib.redis`` logger).

Threads. A bridge runs on the event loop of its purgatory (enter it there, inside the
purgatory's ``async with``): every ``check_and_complete`` runs on that loop's thread, so
the purgatory's exactly-once completion holds as it does for local calls. ``publish``
must be called on that loop too; from another thread use
``loop.call_soon_threadsafe(events.publish, key)``.

Closing. Leaving ``async with`` (or :meth:`KeyEvents.close`) sends what the publisher still
holds (waiting at most ``close_timeout_ms``; what is left is dropped with one WARNING line),
then stops both tasks and closes their connections. Close the bridge before its purgatory
(nest the ``async with`` inside the purgatory's).
"""

from ._cluster import DEFAULT_SHARDS, ClusterKeyPublisher, shard_of_key
from ._cluster_events import ClusterKeyEvents
from ._encoding import DEFAULT_CHANNEL, decode_key, encode_key
from ._events import KeyEvents, KeyEventStatistics, Refresh, Watchers
from ._publisher import KeyPublisher
from ._reconnect import ReconnectSchedule
from ._sharding import SLOTS, key_slot, shard_channels

__all__ = [
    "DEFAULT_CHANNEL",
    "DEFAULT_SHARDS",
    "SLOTS",
    "ClusterKeyEvents",
    "ClusterKeyPublisher",
    "KeyEventStatistics",
    "KeyEvents",
    "KeyPublisher",
    "ReconnectSchedule",
    "Refresh",
    "Watchers",
    "decode_key",
    "encode_key",
    "key_slot",
    "shard_channels",
    "shard_of_key",
]
