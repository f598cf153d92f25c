"""What both sides of a bridge share: a task on the loop that keeps a Redis connection.

:class:`KeyPublisher` and :class:`KeyEvents` are each a :class:`_ChannelTask`: one task on
the running asyncio loop, started once and closed once (``async with`` is
:meth:`~_ChannelTask.start` then :meth:`~_ChannelTask.close`), that talks to Redis through
a client of its own (:meth:`~_ChannelTask._new_client`: it fails fast and never retries by
itself) and retries on its :class:`~._reconnect.ReconnectSchedule` when the connection
fails, probing Redis (:mod:`._probe`) every ``probe_ms`` during the longer waits so
that it is back within a probe interval of Redis answering again. A
``redis+sentinel://`` URL makes the client and the probe go through the sentinels
(:mod:`._sentinel`): to whichever Redis they name as the primary.

Outages. A failure starts an outage unless one is going on: one WARNING line on the
``purgatory.contrib.redis`` logger, with the error and no traceback (a traceback too
when the error is no network failure: a bug, logged where it happened), and the
outage is counted; the failed attempts that follow log at DEBUG. The first success
after it ends it with one INFO line: how long it lasted, and what the side did
about it (the keys the publisher still holds, the keys the subscriber re-checked).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any, Self, TypedDict

import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from ._probe import Address, address_of, answers
from ._reconnect import ReconnectSchedule
from ._sentinel import SentinelPrimary, parse_sentinel_url

__all__ = [
    "CLOSE_TIMEOUT_MS",
    "FAILURES",
    "HEALTH_CHECK_MS",
    "PROBE_MS",
    "RECONNECT_MAX_MS",
    "RECONNECT_MIN_MS",
    "TIMEOUT_MS",
    "Settings",
    "aclose",
    "check_timing",
    "describe",
    "logger",
    "stop_all",
]

#: one logger for the bridge, whichever module of it logs
logger = logging.getLogger("purgatory.contrib.redis")

#: What a connection failure looks like: redis-py's errors, sockets' and timeouts.
FAILURES = (RedisError, OSError, asyncio.TimeoutError, EOFError)

# The bridge's defaults, one home for every side (KeyEvents, KeyPublisher and the
# cluster's pair): the waits between reconnect attempts, a command's and a connect's
# timeout, the subscriber's health check, the publisher's drain at close, the probe's
# interval once the backoff passes it.
RECONNECT_MIN_MS = 10
RECONNECT_MAX_MS = 500
TIMEOUT_MS = 5000
HEALTH_CHECK_MS = 5000
CLOSE_TIMEOUT_MS = 1000
PROBE_MS = 50


def check_timing(**values_ms: int) -> None:
    """ValueError unless each value is a positive int (milliseconds)."""
    for name, value in values_ms.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive int (milliseconds), got {value!r}")


def describe(exc: BaseException) -> str:
    """An exception in one line: its type and the first line of its message."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def aclose(*closables: Any) -> None:
    """Close clients or pubsubs in order, ignoring a connection that is gone already.

    A cancellation meanwhile does not cut a close short: redis-py closes a connection's
    socket only after awaits of its own (a pool's lock, a release), and a close cut
    there leaves the socket open (a leaked transport: uvloop, closing its loop with
    warnings as errors, then waits on it for ever). So the closes run in a task of
    their own, which the caller waits for to the end, however often it is cancelled
    meanwhile (``stop_all`` cancels every 50 ms); then the cancellation is raised.
    Bounded by the clients' own timeouts. O(closables)."""
    closing = asyncio.ensure_future(_close_each(closables))
    cancelled = False
    while not closing.done():
        try:
            await asyncio.wait([closing])
        except asyncio.CancelledError:
            cancelled = True
    if not closing.cancelled():
        closing.result()  # a bug in a close (not the network) surfaces here
    if cancelled:
        raise asyncio.CancelledError


async def _close_each(closables: tuple[Any, ...]) -> None:
    for closable in closables:
        with contextlib.suppress(*FAILURES):
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
        logger.error("%s ended with %s", task.get_name(), describe(error))


async def stop_all(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel ``tasks`` and wait for their ends, cancelling again while they go on (see
    :func:`_stop`); a cancellation of the caller meanwhile (the bridge closing presses
    every 50 ms) is kept for after, so no task is left running with its connection.
    O(tasks) per round."""
    interrupted = False
    while pending := [task for task in tasks if not task.done()]:
        for task in pending:
            task.cancel()
        try:
            await asyncio.wait(pending, timeout=0.05)
        except asyncio.CancelledError:
            interrupted = True
    for task in tasks:
        if not task.cancelled():
            task.exception()  # retrieved: the failures were logged as outages
    if interrupted:
        raise asyncio.CancelledError


class Settings(TypedDict):
    """How a side of a bridge reaches Redis (the bridge hands its own to its publisher)."""

    channel: str
    reconnect_min_ms: int
    reconnect_max_ms: int
    timeout_ms: int
    redis_options: Mapping[str, Any] | None


class _ChannelTask:
    """One side of a bridge on ``channel``: its task, its connection's settings and
    outages; see the module doc. Subclasses write :meth:`_run` (the task) and say how
    they are named in errors (the class name) and in the log (``log_name``)."""

    def __init__(
        self,
        redis_url: str,
        *,
        channel: str,
        reconnect_min_ms: int,
        reconnect_max_ms: int,
        timeout_ms: int,
        redis_options: Mapping[str, Any] | None,
        log_name: str,
        probe_ms: int = PROBE_MS,
    ) -> None:
        check_timing(
            reconnect_min_ms=reconnect_min_ms,
            reconnect_max_ms=reconnect_max_ms,
            timeout_ms=timeout_ms,
            probe_ms=probe_ms,
        )
        if reconnect_max_ms < reconnect_min_ms:
            raise ValueError(
                f"reconnect_max_ms ({reconnect_max_ms}) is below reconnect_min_ms "
                f"({reconnect_min_ms})"
            )
        self.redis_url = redis_url
        self.channel = channel
        self.timeout_ms = timeout_ms
        self.probe_ms = probe_ms
        options = dict(redis_options or {})
        sentinel_options = options.pop("sentinel_kwargs", None)
        self._options: Mapping[str, Any] = options
        self.reconnect_schedule = ReconnectSchedule(
            reconnect_min_ms, reconnect_max_ms, probe_ms=probe_ms
        )
        self._probe_target: tuple[Address, bool] | None = None  # address_of(url), once
        self._sentinel: SentinelPrimary | None = None  # a redis+sentinel:// URL's
        sentinel_url = parse_sentinel_url(redis_url)
        if sentinel_url is not None:
            self._sentinel = SentinelPrimary(
                sentinel_url, self._client_options(), self._sentinel_options(sentinel_options)
            )
        self._who = f"{type(self).__name__} on {channel!r}"  # errors name it so
        self._log_name = f"{log_name} on {channel!r}"  # log lines begin so
        self._task_name = f"{log_name.replace(' ', '-')} {channel}"  # "key-events watch:keys"
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._outages = 0
        self._down_since_s: float | None = None  # loop time the current outage began

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has begun. O(1)."""
        return self._closed

    async def start(self) -> None:
        """Start on the running loop. RuntimeError if it runs already, once closed, or
        outside asyncio. O(1)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                f"{type(self).__name__} runs on asyncio (redis.asyncio): "
                "enter it inside an asyncio or uvloop loop"
            ) from None
        if self._closed:
            raise RuntimeError(f"{self._who} is closed: it cannot restart")
        if self._task is not None:
            raise RuntimeError(f"{self._who} runs already")
        await self._starting()
        self._task = asyncio.create_task(self._run(), name=self._task_name)

    async def close(self) -> None:
        """Stop the task and close its connection; what else closing does is the
        class's (see its doc). Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._closing()
        finally:
            task, self._task = self._task, None
            if task is not None:
                await _stop(task)
            if self._sentinel is not None:
                await self._sentinel.aclose()
            self._closed_task()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- for the subclasses --------------------------------------------------

    async def _run(self) -> None:
        raise NotImplementedError

    async def _starting(self) -> None:
        """What :meth:`start` does before it starts the task."""

    async def _closing(self) -> None:
        """What :meth:`close` does before it stops the task."""

    def _closed_task(self) -> None:
        """What :meth:`close` does once the task has ended."""

    def _new_client(self, url: str | None = None) -> redis.asyncio.Redis:
        """A client (of ``url``, default ``redis_url``) that fails fast and does not retry
        by itself: the task retries. Through Sentinel, its connections go to the primary
        the sentinels name."""
        if self._sentinel is not None:
            return self._sentinel.client()
        return redis.asyncio.Redis.from_url(url or self.redis_url, **self._client_options())

    def _client_options(self) -> dict[str, Any]:
        """redis-py's options for a client: fail fast, no retry, ``redis_options`` over
        them, bytes."""
        kwargs: dict[str, Any] = {
            "socket_connect_timeout": self.timeout_ms / 1000,
            "socket_timeout": self.timeout_ms / 1000,
            "retry": Retry(NoBackoff(), 0),
            "health_check_interval": 0,
            "client_name": "purgatory-key-events",
        }
        kwargs.update(self._options)
        kwargs["decode_responses"] = False  # messages are bytes (the encoding is binary)
        return kwargs

    def _sentinel_options(self, given: Mapping[str, Any] | None) -> dict[str, Any]:
        """redis-py's options for the connections to the sentinels: fail fast and no
        retry as for Redis, ``redis_options["sentinel_kwargs"]`` over them."""
        kwargs: dict[str, Any] = {
            "socket_connect_timeout": self.timeout_ms / 1000,
            "socket_timeout": self.timeout_ms / 1000,
            "retry": Retry(NoBackoff(), 0),
            "health_check_interval": 0,
        }
        kwargs.update(given or {})
        return kwargs

    async def _probe(self) -> bool:
        """Does Redis answer now (see :mod:`._probe`; through Sentinel: do the sentinels
        name a primary that answers)? Bounded by ``probe_ms``; False for a URL that
        names no address (the attempts report it). O(1)."""
        if self._sentinel is not None:
            return await self._sentinel.probe(self.probe_ms)
        if self._probe_target is None:
            try:
                self._probe_target = address_of(self.redis_url)
            except ValueError:
                return False
        address, ping = self._probe_target
        return await answers(address, self.probe_ms, ping=ping)

    def _connection_failed(self, exc: Exception, lost: str) -> None:
        """The connection (or an attempt) failed with ``exc``: log it (see the module
        doc; ``lost`` says what the outage means for this side) and count a new
        outage. O(1)."""
        if not isinstance(exc, FAILURES):  # a bug, not the network: say where
            logger.exception("%s: unexpected error", self._log_name)
        if self._down_since_s is not None:
            logger.debug("%s: retry failed: %s", self._log_name, exc)
            return
        self._down_since_s = asyncio.get_running_loop().time()
        self._outages += 1
        logger.warning("%s: %s", self._log_name, lost % describe(exc))

    async def _wait_to_retry(self) -> None:
        """Wait what the reconnect schedule says after a failure; a wait longer than
        ``probe_ms`` is probed every ``probe_ms`` (at a fixed rate: a slow probe does
        not push the next one back) and ends at the first answered probe the schedule
        accepts (see :mod:`._reconnect`)."""
        loop = asyncio.get_running_loop()
        schedule = self.reconnect_schedule
        wait_ms = schedule.failed(int(loop.time() * 1000))
        deadline_s = loop.time() + wait_ms / 1000
        if schedule.probing(wait_ms):
            interval_s = self.probe_ms / 1000
            probe_at_s = loop.time() + interval_s
            while probe_at_s < deadline_s:
                await asyncio.sleep(probe_at_s - loop.time())
                if schedule.probed(await self._probe()):
                    return
                probe_at_s = max(probe_at_s + interval_s, loop.time())
        await asyncio.sleep(max(0.0, deadline_s - loop.time()))

    def _connection_works(self, back: str, *args: object) -> None:
        """The connection works (again): the schedule is told, and an outage going on
        ends with one INFO line, ``back`` formatted with its length in seconds and
        ``args``. O(1)."""
        now_s = asyncio.get_running_loop().time()
        self.reconnect_schedule.connected(int(now_s * 1000))
        down_since_s, self._down_since_s = self._down_since_s, None
        if down_since_s is not None:
            logger.info("%s: " + back, self._log_name, now_s - down_since_s, *args)
