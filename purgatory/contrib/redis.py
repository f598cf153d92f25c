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
alone. An event carries no value: it says "re-check the operations on K", and each operation's
``try_complete`` reads the state it waits for, so that state must be visible to every process
(events are level-triggered: duplicates and coalesced events are harmless).

A process that reads that state through a local cache (the truth in Redis or a database,
a copy in memory for ``try_complete`` to read synchronously) gives the bridge a
``refresh`` coroutine function: ``KeyEvents(purgatory, url, refresh=cache.refresh)``.
The bridge awaits ``refresh(keys)`` before it checks the operations of those keys: before
the ``check_and_complete`` of received events (the keys of an event and of the events
already received behind it, each once, at most :data:`RECHECK_CHUNK`: one call per burst,
not per event) and before each chunk of a re-check (the watched keys of the chunk), so a
check never reads a cache older than the event or the subscription that caused it. A
``refresh`` that raises is a failure of the subscription: the bridge reconnects and
re-checks (refreshing) every watched key.

The encoding (one channel, one message per key). Every bridge of a deployment subscribes to
one channel (``channel``, default ``"purgatory:key-events"``; one per purgatory kind, e.g.
``"watch:keys"``), and a message is one key:

=====================================  =================================================
key                                    message bytes
=====================================  =================================================
``str`` (and its subclasses)           ``b"s"`` + the key in UTF-8
``bytes`` (and its subclasses)         ``b"b"`` + the key
:class:`~purgatory.TopicPartition`     ``b"t"`` + the partition in ASCII decimal + ``b":"``
                                       + the topic in UTF-8 (``TopicPartition("t", 3)``:
                                       ``b"t3:t"``)
=====================================  =================================================

Keys decode as plain ``str``, ``bytes`` and ``TopicPartition``, so a subclass key must hash
and compare equal to its plain value (``enum.StrEnum`` members do). Any other key (an
``int``, a tuple) raises ``TypeError`` in ``publish``, before anything is sent. A message
that decodes to nothing (another producer on the channel) is counted in ``malformed`` and
dropped; the first one is logged. One channel for every key keeps Redis's work per event
at one channel lookup and one write per subscriber (``PUBLISH`` is O(subscribers)), with no
``PSUBSCRIBE`` pattern matching and no subscription churn as keys come and go.

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
after a 1 s Redis restart, on a shared 2-core machine, the subscribers were subscribed
again 92-444 ms after Redis answered again, the reconnect schedule's wait, and every
watcher whose condition had become true meanwhile was answered within 0.7 ms of its
subscription). The publisher keeps, for its part, every key
it could not send: :class:`KeyPublisher` coalesces keys in a pending set (a key published
twice before it is sent is sent once), sends them in pipelines, and on an error keeps them
and sends them after it reconnects, so an outage of the publisher's own connection (which
the subscribers would not notice) loses nothing either.

A paused or unreachable Redis (``SIGSTOP``, a network partition: the TCP connection stays
up and silent). The subscriber pings after ``health_check_ms`` without a message and
reconnects when the pong has not come ``health_check_ms`` later; the publisher's sends
time out after ``timeout_ms`` and are retried. A Redis that resumes delivers what was
queued on the old connection; a new connection re-checks.

Reconnecting (:class:`ReconnectSchedule`). A connection that had worked for at least
``reconnect_max_ms`` and fails is retried at once (a dropped connection to a Redis that is
up comes back within a round trip); the next failures wait a capped exponential with
jitter: the k-th consecutive one a draw in [c/2, c] of c = min(``reconnect_max_ms``,
``reconnect_min_ms`` * 2**(k-2)), so with the defaults (10, 500) 0, 5-10, 10-20, ...,
250-500 ms, and never more than ``reconnect_max_ms`` between two attempts (so at most
that long between Redis answering again and the next attempt). A connection that fails
sooner after it began working does not restart the schedule, so nothing retries in a busy
loop. Each outage logs one WARNING line on the ``purgatory.contrib.redis`` logger when it
starts (with the error, no traceback) and one INFO line when it ends (how long it lasted,
how many keys were re-checked); the attempts in between log at DEBUG.

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

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from purgatory import TopicPartition

__all__ = [
    "DEFAULT_CHANNEL",
    "KeyEventStatistics",
    "KeyEvents",
    "KeyPublisher",
    "ReconnectSchedule",
    "Refresh",
    "Watchers",
    "decode_key",
    "encode_key",
]

logger = logging.getLogger(__name__)

#: The channel bridges use unless told otherwise.
DEFAULT_CHANNEL = "purgatory:key-events"

#: Keys re-checked between two yields to the loop after a (re)subscription.
RECHECK_CHUNK = 1024

#: At most this many keys in one pipeline of PUBLISH commands.
MAX_BATCH = 1024

_STR, _BYTES, _TP = b"s"[0], b"b"[0], b"t"[0]

#: What a connection failure looks like: redis-py's errors, sockets' and timeouts.
_FAILURES = (RedisError, OSError, asyncio.TimeoutError, EOFError)


def encode_key(key: Hashable) -> bytes:
    """The message announcing ``key`` (see the module doc's table). O(len(key)).

    TypeError for a key that is not ``str``, ``bytes`` or ``TopicPartition``;
    UnicodeEncodeError for a ``str`` with lone surrogates.
    """
    if isinstance(key, str):
        return b"s" + key.encode()
    if isinstance(key, bytes):
        return b"b" + key
    if isinstance(key, TopicPartition):
        return b"t%d:%s" % (key.partition, key.topic.encode())
    raise TypeError(
        f"key {key!r} of type {type(key).__name__} cannot cross processes: "
        "use a str, bytes or TopicPartition key"
    )


def decode_key(data: bytes) -> Hashable:
    """The key a message announces: the inverse of :func:`encode_key`. O(len(data)).

    ValueError (UnicodeDecodeError included) for bytes no ``encode_key`` produces.
    """
    if not data:
        raise ValueError("empty key event")
    tag = data[0]
    if tag == _STR:
        return data[1:].decode()
    if tag == _BYTES:
        return data[1:]
    if tag == _TP:
        partition, sep, topic = data[1:].partition(b":")
        if not sep:
            raise ValueError(f"topic-partition event without ':': {data[:40]!r}")
        return TopicPartition(topic.decode(), int(partition))
    raise ValueError(f"unknown key event tag {data[:1]!r}")


#: ``KeyEvents(refresh=...)``: brings this process's view of the shared state up to date
#: for some keys before their operations are checked (see :class:`KeyEvents`)
Refresh = Callable[[Sequence[Hashable]], Awaitable[None]]


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


def _client(redis_url: str, timeout_ms: int, options: Mapping[str, Any]) -> redis.asyncio.Redis:
    """A client that fails fast and does not retry by itself: the bridge retries."""
    kwargs: dict[str, Any] = {
        "socket_connect_timeout": timeout_ms / 1000,
        "socket_timeout": timeout_ms / 1000,
        "retry": Retry(NoBackoff(), 0),
        "health_check_interval": 0,
        "client_name": "purgatory-key-events",
    }
    kwargs.update(options)
    kwargs["decode_responses"] = False  # messages are bytes (the encoding is binary)
    return redis.asyncio.Redis.from_url(redis_url, **kwargs)


def _describe(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ReconnectSchedule:
    """The waits before reconnect attempts, in integer milliseconds (both sides of a bridge
    keep one). O(1) per call.

    ``connected(now_ms)`` when a connection is confirmed working (the subscription
    confirmed and re-checked; a pipeline sent), ``failed(now_ms)`` when a connection or an
    attempt fails: it returns the wait before the next attempt. With ``min_ms`` 10 and
    ``max_ms`` 500 (the defaults of :class:`KeyEvents` and :class:`KeyPublisher`):

    ===============================================  ==============================
    failure                                          wait before the next attempt
    ===============================================  ==============================
    of a connection that had worked >= ``max_ms``    0 (retry at once)
    then the 2nd, 3rd, 4th, 5th... consecutive one   5-10, 10-20, 20-40, 40-80 ms...
    ... until the ceiling ``max_ms``                 250-500 ms each (capped)
    ===============================================  ==============================

    The k-th consecutive failure (k >= 2) waits a draw, uniform in [c/2, c], of
    c = min(``max_ms``, ``min_ms`` * 2**(k-2)): the jitter keeps a fleet of workers that
    lost Redis together from reconnecting in step, the ceiling bounds how long after
    Redis answers again the next attempt comes (at most ``max_ms``). The retry at once
    brings a dropped connection to a Redis that is up (``CLIENT KILL``, a proxy's idle
    timeout) back within a round trip. A connection that fails less than ``max_ms``
    after it began working does not reset the count (the waits go on growing): a Redis
    that accepts and then drops, or a ``refresh`` that keeps failing, costs at most one
    immediate retry per ``max_ms``, never a busy loop. Before any connection worked (a
    process starting while Redis is down), the first failure counts as the second.
    """

    __slots__ = ("failures", "max_ms", "min_ms", "up_since_ms", "_random")

    def __init__(self, min_ms: int, max_ms: int, rng: random.Random | None = None) -> None:
        self.min_ms = min_ms
        self.max_ms = max_ms
        #: consecutive failures since a connection last worked for max_ms (1 at the start:
        #: the first attempt of a process is no retry after a working connection)
        self.failures = 1
        #: when the current connection began working (None: no connection works now)
        self.up_since_ms: int | None = None
        self._random = rng if rng is not None else random.Random()

    def connected(self, now_ms: int) -> None:
        """A connection works (from ``now_ms`` on, if it did not already)."""
        if self.up_since_ms is None:
            self.up_since_ms = now_ms

    def failed(self, now_ms: int) -> int:
        """A connection or an attempt failed at ``now_ms``: the wait before the next one."""
        up_since, self.up_since_ms = self.up_since_ms, None
        if up_since is not None and now_ms - up_since >= self.max_ms:
            self.failures = 0  # it had worked long enough: start the schedule again
        self.failures += 1
        if self.failures == 1:
            return 0
        ceiling = min(self.max_ms, self.min_ms << min(self.failures - 2, 30))
        return round(self._random.uniform(ceiling / 2, ceiling))


def _now_ms(loop: asyncio.AbstractEventLoop) -> int:
    return int(loop.time() * 1000)


def _check_timing(**values_ms: int) -> None:
    for name, value in values_ms.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive int (milliseconds), got {value!r}")


def _running_loop(what: str) -> asyncio.AbstractEventLoop:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError(
            f"{what} runs on asyncio (redis.asyncio): enter it inside an asyncio or uvloop loop"
        ) from None


class KeyPublisher:
    """Announces "key K changed" on a Redis channel, to every :class:`KeyEvents` on it.

    ``publish(key)`` is synchronous and never waits for the network: the key joins a
    pending set, and a task sends the pending keys in pipelines of ``PUBLISH`` commands
    (at most :data:`MAX_BATCH` per round trip), keeping them through outages (see the
    module doc). Use as ``async with KeyPublisher(url) as publisher`` or
    ``await start()`` + ``await close()``.

    ``redis_options`` are passed to ``redis.asyncio.Redis.from_url`` (TLS, credentials,
    ...), over the bridge's own: ``socket_timeout`` and ``socket_connect_timeout`` of
    ``timeout_ms``, no retry inside redis-py.
    """

    def __init__(
        self,
        redis_url: str,
        *,
        channel: str = DEFAULT_CHANNEL,
        reconnect_min_ms: int = 10,
        reconnect_max_ms: int = 500,
        timeout_ms: int = 5000,
        close_timeout_ms: int = 1000,
        redis_options: Mapping[str, Any] | None = None,
    ) -> None:
        _check_timing(
            reconnect_min_ms=reconnect_min_ms,
            reconnect_max_ms=reconnect_max_ms,
            timeout_ms=timeout_ms,
            close_timeout_ms=close_timeout_ms,
        )
        if reconnect_max_ms < reconnect_min_ms:
            raise ValueError(
                f"reconnect_max_ms ({reconnect_max_ms}) is below reconnect_min_ms "
                f"({reconnect_min_ms})"
            )
        self.redis_url = redis_url
        self.channel = channel
        self.timeout_ms = timeout_ms
        self.close_timeout_ms = close_timeout_ms
        self._options: Mapping[str, Any] = dict(redis_options or {})
        self.reconnect_schedule = ReconnectSchedule(reconnect_min_ms, reconnect_max_ms)
        self._pending: dict[bytes, None] = {}  # insertion-ordered set of encoded keys
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._enqueued = 0  # publish() calls so far
        self._sent_upto = 0  # every publish() up to this count has been sent
        self._sent_changed = asyncio.Condition()
        self.published = 0
        self.outages = 0

    @property
    def pending(self) -> int:
        """Keys waiting to be sent. O(1)."""
        return len(self._pending)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has begun. O(1)."""
        return self._closed

    def publish(self, key: Hashable) -> None:
        """Announce that ``key`` changed: it is sent shortly, once even if published
        again before then. O(len(key)); never waits.

        TypeError for a key :func:`encode_key` refuses; RuntimeError once closed or
        before :meth:`start`.
        """
        message = encode_key(key)
        if self._closed or self._task is None:
            state = "closed" if self._closed else "not started (use async with)"
            raise RuntimeError(f"publisher on {self.channel!r} is {state}")
        self._pending[message] = None
        self._enqueued += 1
        self._wake.set()

    async def flush(self, timeout_ms: int | None = None) -> None:
        """Wait until every key published before this call has been sent to Redis.

        TimeoutError after ``timeout_ms`` (None: no limit; through an outage that is
        until Redis is back); RuntimeError if keys are unsent and the publisher is not
        running. O(1) plus the wait.
        """
        target = self._enqueued
        if self._sent_upto >= target:
            return
        if self._task is None:
            raise RuntimeError(f"publisher on {self.channel!r} is not running: nothing sends")

        async def sent() -> None:
            async with self._sent_changed:
                await self._sent_changed.wait_for(lambda: self._sent_upto >= target)

        if timeout_ms is None:
            await sent()
        else:
            await asyncio.wait_for(sent(), timeout_ms / 1000)

    async def start(self) -> None:
        """Start the sending task on the running loop. RuntimeError if it runs already,
        once closed, or outside asyncio."""
        _running_loop("KeyPublisher")
        if self._closed:
            raise RuntimeError(f"publisher on {self.channel!r} is closed: it cannot restart")
        if self._task is not None:
            raise RuntimeError(f"publisher on {self.channel!r} runs already")
        self._task = asyncio.create_task(self._run(), name=f"key-publisher {self.channel}")

    async def close(self) -> None:
        """Send what is pending (at most ``close_timeout_ms``), then stop and disconnect;
        keys still pending are dropped with one WARNING line. Idempotent."""
        if self._closed:
            return
        self._closed = True  # publish() refuses from now on
        task = self._task
        if task is None:
            return
        if self._sent_upto < self._enqueued and not task.done():  # pending or in flight
            with contextlib.suppress(asyncio.TimeoutError):
                await self.flush(self.close_timeout_ms)
        self._task = None
        await _stop(task)
        if self._pending:
            logger.warning(
                "key publisher on %r closed with %d keys unsent (Redis unreachable)",
                self.channel,
                len(self._pending),
            )
            self._pending.clear()

    async def __aenter__(self) -> KeyPublisher:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def _take_batch(self) -> tuple[list[bytes], bool]:
        """Up to MAX_BATCH pending keys, oldest first; whether that was all of them."""
        pending = self._pending
        if len(pending) <= MAX_BATCH:
            self._pending = {}
            return list(pending), True
        batch = []
        for message in pending:
            batch.append(message)
            if len(batch) == MAX_BATCH:
                break
        for message in batch:
            del pending[message]
        return batch, False

    async def _mark_sent(self, upto: int) -> None:
        async with self._sent_changed:
            self._sent_upto = upto
            self._sent_changed.notify_all()

    async def _run(self) -> None:
        client: redis.asyncio.Redis | None = None
        down_since: float | None = None
        loop = asyncio.get_running_loop()
        channel = self.channel
        try:
            while True:
                if not self._pending:
                    self._wake.clear()
                    await self._wake.wait()
                upto = self._enqueued
                batch, whole = self._take_batch()
                try:
                    if client is None:
                        client = _client(self.redis_url, self.timeout_ms, self._options)
                    pipe = client.pipeline(transaction=False)
                    for message in batch:
                        pipe.publish(channel, message)
                    await pipe.execute()
                except Exception as exc:
                    # keep them, oldest first, ahead of what came meanwhile
                    self._pending = dict.fromkeys(batch) | self._pending
                    if not isinstance(exc, _FAILURES):  # a bug, not the network: say where
                        logger.exception("key publisher on %r: unexpected error", channel)
                    if down_since is None:
                        down_since = loop.time()
                        self.outages += 1
                        logger.warning(
                            "key publisher on %r: Redis unreachable (%s); keeping keys, retrying",
                            channel,
                            _describe(exc),
                        )
                    else:
                        logger.debug("key publisher on %r: retry failed: %s", channel, exc)
                    if client is not None:
                        old, client = client, None
                        await _aclose(old)
                    await asyncio.sleep(self.reconnect_schedule.failed(_now_ms(loop)) / 1000)
                    continue
                except BaseException:
                    self._pending = dict.fromkeys(batch) | self._pending
                    raise
                self.published += len(batch)
                self.reconnect_schedule.connected(_now_ms(loop))
                if down_since is not None:
                    logger.info(
                        "key publisher on %r: Redis reachable again after %.1f s; %d keys pending",
                        channel,
                        loop.time() - down_since,
                        len(self._pending),
                    )
                    down_since = None
                if whole:
                    await self._mark_sent(upto)
        finally:
            if client is not None:
                await _aclose(client)


async def _aclose(closable: Any) -> None:
    """Close a client or pubsub, ignoring a connection that is gone already."""
    with contextlib.suppress(*_FAILURES):
        await closable.aclose()


async def _stop(task: asyncio.Task[None]) -> None:
    """Cancel ``task`` and wait for its end, cancelling again while it goes on: seen with
    redis-py 8.1 on Python 3.11, a cancellation that reached the subscriber while its
    dropped connection was being noticed was absorbed inside redis-py, and the task went
    on reading. O(1) per round (every 50 ms)."""
    while not task.done():
        task.cancel()
        await asyncio.wait([task], timeout=0.05)
    if not task.cancelled() and (error := task.exception()) is not None:
        logger.error("%s ended with %s", task.get_name(), _describe(error))


class _Unhealthy(Exception):
    """The subscriber's connection answered no ping in time."""


class KeyEvents:
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
    ``close_timeout_ms`` bounds the final send. ``redis_options`` go to
    ``redis.asyncio.Redis.from_url`` (see :class:`KeyPublisher`).

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
    """

    def __init__(
        self,
        purgatory: Watchers,
        redis_url: str,
        *,
        channel: str = DEFAULT_CHANNEL,
        reconnect_min_ms: int = 10,
        reconnect_max_ms: int = 500,
        timeout_ms: int = 5000,
        health_check_ms: int = 5000,
        close_timeout_ms: int = 1000,
        redis_options: Mapping[str, Any] | None = None,
        refresh: Refresh | None = None,
    ) -> None:
        _check_timing(health_check_ms=health_check_ms)
        self.publisher = KeyPublisher(
            redis_url,
            channel=channel,
            reconnect_min_ms=reconnect_min_ms,
            reconnect_max_ms=reconnect_max_ms,
            timeout_ms=timeout_ms,
            close_timeout_ms=close_timeout_ms,
            redis_options=redis_options,
        )
        self.purgatory = purgatory
        self.refresh = refresh
        self.redis_url = redis_url
        self.channel = channel
        self.timeout_ms = timeout_ms
        self.health_check_ms = health_check_ms
        self._options: Mapping[str, Any] = dict(redis_options or {})
        self.reconnect_schedule = ReconnectSchedule(reconnect_min_ms, reconnect_max_ms)
        self._task: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()
        self._closed = False
        self._subscriptions = 0
        self._outages = 0
        self._events = 0
        self._malformed = 0
        self._completed = 0
        self._rechecked_keys = 0
        self._down_since: float | None = None  # loop time the current outage began

    @property
    def subscribed(self) -> bool:
        """Subscribed now: events reach this purgatory. O(1)."""
        return self._subscribed.is_set()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has begun. O(1)."""
        return self._closed

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
            raise RuntimeError(f"key events on {self.channel!r} are closed")
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

    async def start(self) -> None:
        """Start the subscriber and the publisher on the running loop (the purgatory's).

        RuntimeError if they run already, once closed, or outside asyncio. O(1).
        """
        _running_loop("KeyEvents")
        if self._closed:
            raise RuntimeError(f"key events on {self.channel!r} are closed: they cannot restart")
        if self._task is not None:
            raise RuntimeError(f"key events on {self.channel!r} run already")
        await self.publisher.start()
        self._task = asyncio.create_task(self._run(), name=f"key-events {self.channel}")

    async def close(self) -> None:
        """Send what the publisher holds (at most ``close_timeout_ms``), stop the
        subscriber, close both connections. The purgatory is left as it is. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await self.publisher.close()
        finally:
            task, self._task = self._task, None
            if task is not None:
                await _stop(task)
            self._subscribed.clear()

    async def __aenter__(self) -> KeyEvents:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

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
            if message["type"] != "message":
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
        except Exception:
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

    async def _listen(self, pubsub: Any) -> None:
        """Read messages until the connection fails (raises)."""
        loop = asyncio.get_running_loop()
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
            kind = message["type"]
            if kind == "message":
                if self.refresh is None:
                    self._on_event(message["data"])
                    continue
                message = await self._on_events_refreshed(self.refresh, pubsub, message["data"])
                if message is None:
                    continue
                kind = message["type"]  # what ended the batch, handled below
            if kind == "subscribe":
                # (re)subscribed: what was published before is re-checked, what is
                # published from now on arrives as messages
                self._subscriptions += 1
                rechecked = await self._recheck()
                self.reconnect_schedule.connected(_now_ms(loop))
                self._subscribed.set()
                down_since, self._down_since = self._down_since, None
                if down_since is not None:
                    logger.info(
                        "key events on %r: subscribed again after %.1f s; re-checked %d keys",
                        self.channel,
                        loop.time() - down_since,
                        rechecked,
                    )

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            client = _client(self.redis_url, self.timeout_ms, self._options)
            pubsub = client.pubsub()
            try:
                await pubsub.subscribe(self.channel)
                await self._listen(pubsub)
            except Exception as exc:
                self._subscribed.clear()
                if not isinstance(exc, (*_FAILURES, _Unhealthy)):  # a bug: say where
                    logger.exception("key events on %r: unexpected error", self.channel)
                if self._down_since is None:  # a new outage: one line
                    self._down_since = loop.time()
                    self._outages += 1
                    logger.warning(
                        "key events on %r: subscription lost (%s); reconnecting, "
                        "then re-checking every watched key",
                        self.channel,
                        _describe(exc),
                    )
                else:
                    logger.debug("key events on %r: reconnect failed: %s", self.channel, exc)
            finally:
                await _aclose(pubsub)
                await _aclose(client)
            await asyncio.sleep(self.reconnect_schedule.failed(_now_ms(loop)) / 1000)
