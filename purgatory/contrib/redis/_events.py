"""The subscribing side of a bridge: key events become ``check_and_complete`` here.

:class:`KeyEvents` subscribes to the channel and calls ``check_and_complete(key)`` on its
purgatory for every key event it receives (decoded as :mod:`._encoding` says; a message
that decodes to nothing is counted in ``malformed`` and dropped, the first one logged).

A process whose operations read the shared state through a local cache (the truth in
Redis or a database, a copy in memory for ``try_complete`` to read synchronously) gives
the bridge a ``refresh`` coroutine function: ``KeyEvents(purgatory, url, refresh=cache.refresh)``.
The bridge awaits ``refresh(keys)`` before it checks the operations of those keys: before
the ``check_and_complete`` of received events (the keys of an event and of the events
already received behind it, each once, at most :data:`RECHECK_CHUNK`: one call per burst,
not per event) and before each chunk of a re-check (the watched keys of the chunk), so a
check never reads a cache older than the event or the subscription that caused it. A
``refresh`` that raises is a failure of the subscription: the bridge reconnects and
re-checks (refreshing) every watched key.

What an event costs a process that does not watch the key: decoding it (a slice and a
UTF-8 decode) and ``check_and_complete(key)``, whose first step is ``dict.get`` on the
watcher lists, returning 0 when the key has none: one dictionary lookup, and nothing is
added to the purgatory.

Why pub/sub, and what covers its losses. Redis pub/sub delivers at most once: a message
published while a subscriber is disconnected (Redis restarted, the connection dropped or
killed) is lost for it. Rather than replaying events, the bridge replays *state*: every
time the subscription is confirmed (the ``subscribe`` reply, at the first connection and
after every reconnect), it calls ``check_and_complete`` on every key its purgatory watches
(``watched_keys()``) before it reads any further message. Any change made before the
confirmation is seen by that re-check; any change announced after it arrives as a message.
So a watcher whose condition became true during an outage completes at most one reconnect
after Redis is back, never at its timeout.

The alternative, a Redis stream (``XADD`` / ``XREAD`` from the last id seen), replays the
missed events after a dropped connection, but not after a restart of a Redis that keeps no
data (the usual cache-only setup: the stream and its ids are gone), nor past its ``MAXLEN``
trimming, nor for a subscriber that started after the event. Those cases need the re-check
anyway, and with the re-check in place the stream adds a Redis write and memory per event
and no guarantee. The re-check costs one ``check_and_complete`` per watched key, once per
reconnect, done in chunks of :data:`RECHECK_CHUNK` keys that yield to the loop (measured in
BENCHMARKS.md, "Key events through Redis": 0.3 µs per watched key, 30 ms for 100,000;
after a 1 s Redis restart, on a shared 2-core machine, every watcher whose condition had
become true meanwhile was answered within 0.7 ms of its subscription). The subscription
itself comes back within about ``probe_ms`` of Redis answering again, however long the
outage (the probes of :mod:`._reconnect`; measured in
``benchmarks/redis_reconnect_bench.py``: at most 52 ms after 0.2, 1 and 10 s outages).

A paused or unreachable Redis (``SIGSTOP``, a network partition: the TCP connection stays
up and silent): the subscriber pings after ``health_check_ms`` without a message and
reconnects when the pong has not come ``health_check_ms`` later. A Redis that resumes
delivers what was queued on the old connection; a new connection re-checks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ._connection import (
    CLOSE_TIMEOUT_MS,
    HEALTH_CHECK_MS,
    PROBE_MS,
    RECONNECT_MAX_MS,
    RECONNECT_MIN_MS,
    TIMEOUT_MS,
    Settings,
    _ChannelTask,
    aclose,
    check_timing,
    logger,
)
from ._encoding import DEFAULT_CHANNEL, decode_key, encode_key
from ._publisher import KeyPublisher

__all__ = ["RECHECK_CHUNK", "KeyEventStatistics", "KeyEvents", "Refresh", "Watchers"]

#: Keys re-checked between two yields to the loop after a (re)subscription.
RECHECK_CHUNK = 1024

#: ``KeyEvents(refresh=...)``: brings this process's view of the shared state up to date
#: for some keys before their operations are checked (see :class:`KeyEvents`)
Refresh = Callable[[Sequence[Hashable]], Awaitable[None]]


#: the pub/sub message types of a key event: a channel's, a shard channel's (a cluster's)
_EVENTS = frozenset({"message", "smessage"})

#: what a subscriber does with a message that is no key event (``KeyEvents._listen``)
_OnControl = Callable[[dict[str, Any]], Awaitable[None]]


class Watchers(Protocol):
    """What a bridge drives: any purgatory (``DelayedOperationPurgatory`` or the core's)."""

    def check_and_complete(self, key: Hashable) -> int: ...

    def watched_keys(self) -> list[Hashable]: ...


@dataclass(frozen=True, slots=True)
class KeyEventStatistics:
    """A snapshot of a bridge's counters (:meth:`KeyEvents.statistics`)."""

    #: subscribed now (the last subscription confirmed, no failure since)
    subscribed: bool
    #: subscriptions confirmed: the first one and one per reconnect
    subscriptions: int
    #: outages of the subscriber's connection (each logged once)
    outages: int
    #: events received and handed to ``check_and_complete``
    events: int
    #: messages on the channel that were no key event (dropped)
    malformed: int
    #: operations completed by received events and by re-checks
    completed: int
    #: keys re-checked after subscriptions, in total
    rechecked_keys: int
    #: keys sent by this bridge's publisher (after coalescing)
    published: int
    #: keys waiting in the publisher (not sent yet)
    publish_pending: int
    #: outages of the publisher's connection (each logged once)
    publish_outages: int


class _Unhealthy(ConnectionError):
    """The subscriber's connection answered no ping in time: a connection failure."""


class KeyEvents(_ChannelTask):
    """The bridge of one purgatory: every key event on ``channel`` becomes
    ``purgatory.check_and_complete(key)`` in this process, and :meth:`publish`
    announces this process's changes to the others.

    Use as ``async with KeyEvents(purgatory, redis_url) as events`` on the purgatory's
    loop, inside its ``async with``. Entering starts the subscriber (and the publisher)
    and returns at once, Redis reachable or not: until the first subscription is
    confirmed the purgatory is local only, and the confirmation re-checks every watched
    key (:meth:`wait_subscribed` waits for it). ``purgatory`` is anything with
    ``check_and_complete(key)`` and ``watched_keys()`` (:class:`Watchers`). Timing
    parameters are integer milliseconds: ``reconnect_min_ms``/``reconnect_max_ms``
    shape the reconnect waits (:class:`ReconnectSchedule`; the subscriber's is
    ``reconnect_schedule``, the publisher's ``publisher.reconnect_schedule``),
    ``timeout_ms`` bounds a connect and a command, ``health_check_ms`` is the silence
    after which the subscriber pings (and how long the pong may take),
    ``close_timeout_ms`` bounds the final send, ``probe_ms`` is the interval (and
    timeout) of the probes during the longer reconnect waits (back within about
    ``probe_ms`` of Redis answering again). ``redis_url`` and ``redis_options`` are as
    :class:`KeyPublisher` says (a ``redis+sentinel://`` URL for Redis Sentinel).

    ``refresh`` (a :data:`Refresh`: ``async def refresh(keys: Sequence[Hashable]) ->
    None``), for a process whose operations read a local cache of shared state: awaited
    before the ``check_and_complete`` of received events, with the keys of an event and
    of the events received already behind it (each key once, at most
    :data:`RECHECK_CHUNK`), and with each chunk of at most :data:`RECHECK_CHUNK` watched
    keys before that chunk is re-checked. If it raises, the subscription is treated as
    failed (logged as an outage; a non-network error with its traceback): the bridge
    reconnects and the re-check refreshes every watched key again. Messages are not
    read while it runs.
    It is not called by :meth:`publish`: the caller wrote the change, so its cache has
    it already. None (the default): the operations read shared state directly.

    Closing sends what the publisher holds (waiting at most ``close_timeout_ms``),
    stops the subscriber and closes both connections; the purgatory is left as it is.
    """

    def __init__(
        self,
        purgatory: Watchers,
        redis_url: str,
        *,
        channel: str = DEFAULT_CHANNEL,
        reconnect_min_ms: int = RECONNECT_MIN_MS,
        reconnect_max_ms: int = RECONNECT_MAX_MS,
        timeout_ms: int = TIMEOUT_MS,
        health_check_ms: int = HEALTH_CHECK_MS,
        close_timeout_ms: int = CLOSE_TIMEOUT_MS,
        redis_options: Mapping[str, Any] | None = None,
        refresh: Refresh | None = None,
        probe_ms: int = PROBE_MS,
    ) -> None:
        check_timing(health_check_ms=health_check_ms)
        settings = Settings(
            channel=channel,
            reconnect_min_ms=reconnect_min_ms,
            reconnect_max_ms=reconnect_max_ms,
            timeout_ms=timeout_ms,
            redis_options=redis_options,
        )
        super().__init__(redis_url, log_name="key events", probe_ms=probe_ms, **settings)
        self.publisher = KeyPublisher(
            redis_url, close_timeout_ms=close_timeout_ms, probe_ms=probe_ms, **settings
        )
        self.purgatory = purgatory
        self.refresh = refresh
        self.health_check_ms = health_check_ms
        self._subscribed = asyncio.Event()
        self._subscriptions = 0
        self._events = 0
        self._malformed = 0
        self._completed = 0
        self._rechecked_keys = 0

    @property
    def subscribed(self) -> bool:
        """Subscribed now: events reach this purgatory. O(1)."""
        return self._subscribed.is_set()

    def publish(self, key: Hashable) -> int:
        """``key`` changed: complete what is ready here now, announce it to the others.

        Calls ``purgatory.check_and_complete(key)`` at once and returns what it returned
        (how many operations completed in this process); the other processes'
        bridges do the same when the event reaches them (this one too: its echo then
        finds the completed operations gone). TypeError, before anything else, for a
        key :func:`encode_key` refuses; RuntimeError once closed. O(len(key)) plus the
        local ``check_and_complete``; never waits for the network.
        """
        encode_key(key)  # refuse an unsupported key before completing anything
        if self._closed:
            raise RuntimeError(f"{self._who} is closed")
        completed = self.purgatory.check_and_complete(key)
        self.publisher.publish(key)
        return completed

    async def wait_subscribed(self, timeout_ms: int | None = None) -> None:
        """Wait until the subscription is confirmed (and its re-check is done).

        TimeoutError after ``timeout_ms`` (None: no limit). O(1) plus the wait.
        """
        if timeout_ms is None:
            await self._subscribed.wait()
        else:
            await asyncio.wait_for(self._subscribed.wait(), timeout_ms / 1000)

    def statistics(self) -> KeyEventStatistics:
        """A snapshot of the counters. O(1)."""
        return KeyEventStatistics(
            subscribed=self._subscribed.is_set(),
            subscriptions=self._subscriptions,
            outages=self._outages,
            events=self._events,
            malformed=self._malformed,
            completed=self._completed,
            rechecked_keys=self._rechecked_keys,
            published=self.publisher.published,
            publish_pending=self.publisher.pending,
            publish_outages=self.publisher.outages,
        )

    async def _starting(self) -> None:
        await self.publisher.start()

    async def _closing(self) -> None:
        await self.publisher.close()

    def _closed_task(self) -> None:
        self._subscribed.clear()

    def _on_event(self, data: object) -> None:
        """One message: decode, then check_and_complete. O(len(data)) + the purgatory's walk
        (a dict lookup for a key this process does not watch)."""
        key = self._decode(data)
        if key is not None:
            self._complete(key)

    async def _on_events_refreshed(
        self, refresh: Refresh, pubsub: Any, data: object
    ) -> dict[str, Any] | None:
        """A message with a ``refresh``: it and the messages already received behind it
        (at most :data:`RECHECK_CHUNK` keys, each once) are decoded, refreshed in one call,
        then checked in their order. Returns the message that ended the batch if it is
        no key event (a ``subscribe`` reply, for the caller), else None. O(batch) + the
        refresh."""
        keys: dict[Hashable, None] = {}  # insertion-ordered set
        key = self._decode(data)
        if key is not None:
            keys[key] = None
        leftover: dict[str, Any] | None = None
        while len(keys) < RECHECK_CHUNK:
            message = await pubsub.get_message(timeout=0.0)  # only what arrived already
            if message is None:
                break
            if message["type"] not in _EVENTS:
                leftover = message
                break
            key = self._decode(message["data"])
            if key is not None:
                keys[key] = None
        if keys:
            batch = list(keys)
            await refresh(batch)
            for key in batch:
                self._complete(key)
        return leftover

    def _decode(self, data: object) -> Hashable | None:
        """The key of a message (counted in ``events``), or None (counted in ``malformed``,
        logged the first time)."""
        try:
            if not isinstance(data, bytes):
                raise ValueError(f"not bytes: {type(data).__name__}")
            key = decode_key(data)
        except ValueError as exc:
            self._malformed += 1
            log = logger.warning if self._malformed == 1 else logger.debug
            log("key events on %r: dropped a message that is no key event (%s)", self.channel, exc)
            return None
        self._events += 1
        return key

    def _complete(self, key: Hashable) -> None:
        try:
            self._completed += self.purgatory.check_and_complete(key)
        except Exception:  # noqa: BLE001 - logged with its traceback
            # an operation's callback failed and the purgatory raised it (the async
            # shell reports those to the loop instead): the bridge goes on
            logger.exception("key events on %r: check_and_complete(%r) failed", self.channel, key)

    async def _recheck(self) -> int:
        """check_and_complete on every watched key, yielding to the loop every
        RECHECK_CHUNK keys, each chunk refreshed first (if ``refresh`` is given).
        O(watched operations) in total, plus the refreshes."""
        keys = self.purgatory.watched_keys()
        refresh = self.refresh
        for start in range(0, len(keys), RECHECK_CHUNK):
            chunk = keys[start : start + RECHECK_CHUNK]
            if refresh is not None:
                await refresh(chunk)
            elif start:
                await asyncio.sleep(0)
            for key in chunk:
                self._complete(key)
        self._rechecked_keys += len(keys)
        return len(keys)

    async def _listen(self, pubsub: Any, on_control: _OnControl | None = None) -> None:
        """Read messages until the connection fails (raises): key events (``message``;
        ``smessage`` on a cluster's shard channel) are checked, any other message (the
        ``subscribe`` reply...) goes to ``on_control`` (None: :meth:`_on_control`)."""
        handle = self._on_control if on_control is None else on_control
        idle_s = self.health_check_ms / 1000
        pinged = False
        while True:
            message = await pubsub.get_message(timeout=idle_s)
            if message is None:
                if pinged:
                    raise _Unhealthy(f"no answer to a ping within {self.health_check_ms} ms")
                await pubsub.ping()
                pinged = True
                continue
            pinged = False
            if message["type"] in _EVENTS:
                if self.refresh is None:
                    self._on_event(message["data"])
                    continue
                message = await self._on_events_refreshed(self.refresh, pubsub, message["data"])
                if message is None:
                    continue  # else what ended the batch, handled below
            await handle(message)

    async def _on_control(self, message: dict[str, Any]) -> None:
        if message["type"] == "subscribe":
            await self._on_subscribed()

    async def _on_subscribed(self) -> None:
        """(Re)subscribed: what was published before is re-checked, what is published
        from now on arrives as messages."""
        self._subscriptions += 1
        rechecked = await self._recheck()
        self._subscribed.set()
        self._connection_works("subscribed again after %.1f s; re-checked %d keys", rechecked)

    async def _run(self) -> None:
        """Subscribe and listen; on a failure reconnect after the schedule's wait."""
        while True:
            client = self._new_client()
            pubsub = client.pubsub()
            try:
                await pubsub.subscribe(self.channel)
                await self._listen(pubsub)
            except Exception as exc:  # noqa: BLE001 - logged as an outage, retried
                self._subscribed.clear()
                self._connection_failed(
                    exc, "subscription lost (%s); reconnecting, then re-checking every watched key"
                )
            finally:
                await aclose(pubsub, client)
            await self._wait_to_retry()
