"""The publishing side of a bridge: keys announced on the channel, none lost to an outage.

Redis pub/sub delivers at most once, and a subscriber would not notice that a publisher's
own connection is down: so the publisher keeps every key it could not send.
:class:`KeyPublisher` coalesces keys in a pending set (a key published twice before it is
sent is sent once), sends them in pipelines of ``PUBLISH`` commands, and on an error keeps
them and sends them after it reconnects. A send to a paused or unreachable Redis (the TCP
connection up and silent) times out after ``timeout_ms`` and is retried the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Hashable, Mapping
from typing import Any

import redis.asyncio

from ._connection import (
    CLOSE_TIMEOUT_MS,
    PROBE_MS,
    RECONNECT_MAX_MS,
    RECONNECT_MIN_MS,
    TIMEOUT_MS,
    _ChannelTask,
    aclose,
    check_timing,
    logger,
)
from ._encoding import DEFAULT_CHANNEL, encode_key

__all__ = ["MAX_BATCH", "KeyPublisher"]

#: At most this many keys in one pipeline of PUBLISH commands.
MAX_BATCH = 1024


class KeyPublisher(_ChannelTask):
    """Announces "key K changed" on a Redis channel, to every :class:`KeyEvents` on it.

    ``publish(key)`` is synchronous and never waits for the network: the key joins a
    pending set, and a task sends the pending keys in pipelines of ``PUBLISH`` commands
    (at most :data:`MAX_BATCH` per round trip), keeping them through outages (see the
    module doc). Use as ``async with KeyPublisher(url) as publisher`` or
    ``await start()`` + ``await close()``. Closing sends what is pending (waiting at
    most ``close_timeout_ms``), then stops and disconnects; keys still pending then are
    dropped with one WARNING line.

    ``redis_url``: ``redis://``, ``rediss://`` or ``unix://`` for one Redis, or
    ``redis+sentinel://[[user]:password@]host:port[,host:port...]/service_name[/db]``
    for Redis Sentinel (the sentinels' addresses and the primary's name: the side
    follows a failover to the promoted replica).
    ``redis_options`` are passed to ``redis.asyncio.Redis.from_url`` (TLS, credentials,
    ...; through Sentinel, to the primary's connections, and
    ``redis_options["sentinel_kwargs"]`` to the sentinels'), over the bridge's own:
    ``socket_timeout`` and ``socket_connect_timeout`` of ``timeout_ms``, no retry
    inside redis-py. ``probe_ms``: see :class:`KeyEvents`.
    """

    def __init__(
        self,
        redis_url: str,
        *,
        channel: str = DEFAULT_CHANNEL,
        reconnect_min_ms: int = RECONNECT_MIN_MS,
        reconnect_max_ms: int = RECONNECT_MAX_MS,
        timeout_ms: int = TIMEOUT_MS,
        close_timeout_ms: int = CLOSE_TIMEOUT_MS,
        redis_options: Mapping[str, Any] | None = None,
        probe_ms: int = PROBE_MS,
    ) -> None:
        super().__init__(
            redis_url,
            channel=channel,
            reconnect_min_ms=reconnect_min_ms,
            reconnect_max_ms=reconnect_max_ms,
            timeout_ms=timeout_ms,
            redis_options=redis_options,
            log_name="key publisher",
            probe_ms=probe_ms,
        )
        check_timing(close_timeout_ms=close_timeout_ms)
        self.close_timeout_ms = close_timeout_ms
        self._pending: dict[bytes, None] = {}  # insertion-ordered set of encoded keys
        self._wake = asyncio.Event()
        self._enqueued = 0  # publish() calls so far
        self._sent_upto = 0  # every publish() up to this count has been sent
        self._sent_changed = asyncio.Condition()
        self._client: redis.asyncio.Redis | None = None  # the task's; None: not connected
        self.published = 0

    @property
    def pending(self) -> int:
        """Keys waiting to be sent. O(1)."""
        return len(self._pending)

    @property
    def outages(self) -> int:
        """Outages of the publisher's connection (each logged once). O(1)."""
        return self._outages

    def publish(self, key: Hashable) -> None:
        """Announce that ``key`` changed: it is sent shortly, once even if published
        again before then. O(len(key)); never waits.

        TypeError for a key :func:`encode_key` refuses; RuntimeError once closed or
        before :meth:`start`.
        """
        message = encode_key(key)
        if self._closed or self._task is None:
            state = "closed" if self._closed else "not started (use async with)"
            raise RuntimeError(f"{self._who} is {state}")
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
            raise RuntimeError(f"{self._who} is not running: nothing sends")

        async def sent() -> None:
            async with self._sent_changed:
                await self._sent_changed.wait_for(lambda: self._sent_upto >= target)

        if timeout_ms is None:
            await sent()
        else:
            await asyncio.wait_for(sent(), timeout_ms / 1000)

    async def _closing(self) -> None:
        """Send what is pending or in flight, waiting at most ``close_timeout_ms``."""
        task = self._task
        if task is not None and self._sent_upto < self._enqueued and not task.done():
            with contextlib.suppress(asyncio.TimeoutError):
                await self.flush(self.close_timeout_ms)

    def _closed_task(self) -> None:
        """Drop what could not be sent, in one WARNING line."""
        unsent = self._drop_unsent()
        if unsent:
            logger.warning(
                "%s closed with %d keys unsent (Redis unreachable)", self._log_name, unsent
            )

    def _drop_unsent(self) -> int:
        """Forget the keys not sent; how many they were."""
        unsent = len(self._pending)
        self._pending.clear()
        return unsent

    async def _run(self) -> None:
        """Send the pending keys a batch at a time, for ever; a failed batch is kept
        and sent again once the schedule's wait is over."""
        try:
            while True:
                if not self._pending:
                    await self._wait_for_keys()
                upto = self._enqueued
                batch, whole = self._take_batch()
                if not await self._send(batch):
                    await self._wait_to_retry()
                    continue
                self.published += len(batch)
                self._connection_works(
                    "Redis reachable again after %.1f s; %d keys pending", len(self._pending)
                )
                if whole:
                    await self._mark_sent(upto)
        finally:
            await self._disconnect()

    async def _wait_for_keys(self) -> None:
        self._wake.clear()
        await self._wake.wait()

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

    async def _send(self, batch: list[bytes]) -> bool:
        """Send ``batch`` in one pipeline (connecting first if need be): True once Redis
        has it. If it fails, the batch is pending again, oldest first, ahead of what
        came meanwhile; an ``Exception`` then counts as a connection failure (noted,
        the connection dropped, False returned), anything else (a cancellation)
        propagates."""
        try:
            if self._client is None:
                self._client = self._new_client()
            pipe = self._client.pipeline(transaction=False)
            for message in batch:
                pipe.publish(self.channel, message)
            await pipe.execute()
        except BaseException as exc:
            self._pending = dict.fromkeys(batch) | self._pending
            if not isinstance(exc, Exception):
                raise
            self._connection_failed(exc, "Redis unreachable (%s); keeping keys, retrying")
            await self._disconnect()
            return False
        return True

    async def _disconnect(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await aclose(client)

    async def _mark_sent(self, upto: int) -> None:
        async with self._sent_changed:
            self._sent_upto = upto
            self._sent_changed.notify_all()
