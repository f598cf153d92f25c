"""The long-poll watch service's logic, with no web framework: a versioned key store,
one :class:`~purgatory.DelayedOperation` per poll, and the replies.

:mod:`watch_aiohttp` and :mod:`watch_starlette` (beside this file) serve it over
HTTP; each is the recipe for its framework (lifecycle, disconnects), and this
module is what they share. The API, in the style of Consul's blocking queries
and etcd's watch:

* ``GET /watch/{key}?after=N&timeout_ms=T``: 200 with ``{"key", "version",
  "value"}`` as soon as the key's version passes N (at once if it already has),
  or 304 (no body) once T ms have passed;
* ``GET /watch?keys=a,b,c&after=N&timeout_ms=T``: one poll watched under several
  keys, answered with the newest of them once any passes N;
* ``POST /put/{key}`` (the body, UTF-8, is the value): stores it, answers the new
  entry, and wakes the polls watching the key (``check_and_complete(key)``);
* ``GET /metrics``: the purgatory's ``statistics()`` in Prometheus' text format
  (:class:`purgatory.contrib.prometheus.PurgatoryCollector`).

Versions are store-wide revisions, as etcd's and Consul's indexes: every put takes
the next one, and a key's version is the revision of its last put (0: never put).
So a client watching several keys polls again with ``after`` = the version it was
answered, and a 304 leaves its ``after`` as it was.

The store is one process's dict (:class:`KeyStore`) unless the service is given
another :class:`Store`: ``examples/watch_aiohttp_workers.py`` keeps the keys in
Redis, with a cache in each of several worker processes.

Bad input is a 400 whose body is one line (``after must be an integer from 0 to
...``); a poll that arrives, or is pending, while the server shuts down is
answered 503 ``server shutting down`` at once.

The recipes' ``main`` runs the server inside :func:`tuned_gc`: with thousands of
polls pending, CPython's cyclic collector is what makes timeouts late. Each pending
poll keeps its request, connection and task alive for seconds, so they survive the
young collections and the older ones walk them all, the loop stopped meanwhile:
benchmarks/watch_servers_bench.py (5,000 polls, aiohttp, a busy 2-core host) saw 50
pauses in 10 s, 991 ms in all, the longest 338 ms, and a timeout lateness p99 of 288
ms inside the server (the purgatory expired its polls on time: the late ones all
ended as a pause did); with the first threshold at 50,000, no pause in the window and
p99 6.6 ms, and shutdown with 5,000 polls pending 0.77 s instead of 1.95.
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

from _cli import PORT, Parser
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from purgatory import (
    DelayedOperation,
    DelayedOperationPurgatory,
    OperationCancelledError,
    PurgatoryClosedError,
    SystemTimer,
)
from purgatory.contrib.prometheus import PurgatoryCollector

DEFAULT_TIMEOUT_MS = 30_000
MAX_TIMEOUT_MS = 600_000  # Consul caps a blocking query's wait at 10 minutes too
MAX_VERSION = 2**63 - 1
MAX_KEYS = 64  # keys one poll may watch
MAX_KEY_CHARS = 256
MAX_VALUE_BYTES = 1024**2  # aiohttp's default request body limit
TEXT = "text/plain; charset=utf-8"
JSON = "application/json"


class BadRequest(ValueError):
    """Input the service refuses; its message is the one-line body of the 400."""


@dataclass(frozen=True, slots=True)
class Entry:
    """A key's state: ``version`` 0 and ``value`` None if it was never put."""

    key: str
    version: int
    value: str | None

    def to_json(self) -> bytes:
        return json.dumps({"key": self.key, "version": self.version, "value": self.value}).encode()


@dataclass(frozen=True, slots=True)
class Reply:
    """What the service answers, for any framework to send as it is."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


NOT_MODIFIED = Reply(304)
SHUTTING_DOWN = Reply(503, b"server shutting down\n", {"Content-Type": TEXT, "Connection": "close"})


def error(status: int, message: str) -> Reply:
    """A reply whose body is ``message`` on one line."""
    return Reply(status, (" ".join(message.split()) + "\n").encode(), {"Content-Type": TEXT})


def ok(entry: Entry) -> Reply:
    return Reply(200, entry.to_json(), {"Content-Type": JSON})


class Store(Protocol):
    """Where a :class:`WatchService` keeps its keys. A poll reads them synchronously
    (``get``, ``newest``: from memory, a cache if the truth is elsewhere); the service
    awaits ``load(keys)`` before it first tries a poll (bring the cache up to date for
    those keys; nothing to do for :class:`KeyStore`) and ``write`` for a put."""

    def get(self, key: str) -> Entry: ...

    def newest(self, keys: Iterable[str], after: int) -> Entry | None: ...

    async def load(self, keys: Sequence[str]) -> None: ...

    async def write(self, key: str, value: str) -> Entry: ...


class KeyStore:
    """Keys and their values, versioned by a store-wide revision. O(1) a put or get.

    A :class:`Store`; also the cache of a store kept elsewhere (:meth:`remember`)."""

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}
        self.revision = 0  #: the last put's version

    def get(self, key: str) -> Entry:
        entry = self._entries.get(key)
        return Entry(key, 0, None) if entry is None else entry

    def put(self, key: str, value: str) -> Entry:
        self.revision += 1
        entry = self._entries[key] = Entry(key, self.revision, value)
        return entry

    def remember(self, entry: Entry) -> Entry:
        """Keep ``entry`` unless a newer version of its key is kept already (a cache fed
        out of order: versions only go up); the entry kept. O(1)."""
        kept = self._entries.get(entry.key)
        if kept is not None and kept.version >= entry.version:
            return kept
        self._entries[entry.key] = entry
        self.revision = max(self.revision, entry.version)
        return entry

    async def load(self, keys: Sequence[str]) -> None:
        """Nothing to load: this store is the truth."""

    async def write(self, key: str, value: str) -> Entry:
        return self.put(key, value)

    def newest(self, keys: Iterable[str], after: int) -> Entry | None:
        """The newest entry among ``keys`` whose version is past ``after``, or None."""
        best: Entry | None = None
        best_version = -1
        entries = self._entries
        for key in keys:
            entry = entries.get(key)
            if entry is not None and entry.version > max(after, best_version):
                best, best_version = entry, entry.version
        return best


@dataclass(frozen=True, slots=True)
class WatchRequest:
    """A parsed poll: its keys (distinct, in order), ``after`` and ``timeout_ms``."""

    keys: tuple[str, ...]
    after: int
    timeout_ms: int


def check_key(key: str) -> str:
    if not key or len(key) > MAX_KEY_CHARS:
        raise BadRequest(f"a key must have 1 to {MAX_KEY_CHARS} characters, not {len(key)}")
    return key


def parse_int(name: str, text: str | None, default: int, high: int) -> int:
    """``text`` as an integer from 0 to ``high`` (plain decimal digits), or ``default``."""
    if text is None:
        return default
    if not (text.isascii() and text.isdigit()) or int(text) > high:
        raise BadRequest(f"{name} must be an integer from 0 to {high}, not {text[:40]!r}")
    return int(text)


def parse_keys(text: str | None) -> list[str]:
    """The ``keys`` parameter of ``GET /watch``: comma-separated, 1 to MAX_KEYS keys."""
    if not text:
        raise BadRequest("keys is required: GET /watch?keys=a,b,c")
    keys = text.split(",")
    if len(keys) > MAX_KEYS:
        raise BadRequest(f"keys may name at most {MAX_KEYS} keys, not {len(keys)}")
    return keys


def parse_put(key: str, body: bytes) -> tuple[str, str] | Reply:
    """A put's key and value (``body`` decoded), or the error to answer (400, 413)."""
    if len(body) > MAX_VALUE_BYTES:
        return error(413, f"a value may have at most {MAX_VALUE_BYTES} bytes, not {len(body)}")
    try:
        return check_key(key), body.decode()
    except BadRequest as exc:
        return error(400, str(exc))
    except UnicodeDecodeError as exc:
        return error(400, f"the value must be UTF-8: {exc.reason} at byte {exc.start}")


def parse_watch(keys: Sequence[str], after: str | None, timeout_ms: str | None) -> WatchRequest:
    """Check a poll's input; BadRequest (one line) names the first thing wrong."""
    return WatchRequest(
        tuple(dict.fromkeys(check_key(key) for key in keys)),
        parse_int("after", after, 0, MAX_VERSION),
        parse_int("timeout_ms", timeout_ms, DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS),
    )


class WatchPoll(DelayedOperation[Entry | None]):
    """One long poll: completes when a watched key's version passes ``after``, or
    expires once ``timeout_ms`` has passed (then ``expired`` is True and its outcome
    None).

    Its delay is ``timeout_ms``: the library's timer never expires an operation
    early, and at most one tick (and the loop's own delay) late.
    """

    __slots__ = ("_store", "after", "keys")

    def __init__(self, store: Store, request: WatchRequest) -> None:
        super().__init__(request.timeout_ms)
        self._store = store
        self.keys = request.keys
        self.after = request.after

    def try_complete(self) -> bool:
        return self._store.newest(self.keys, self.after) is not None and self.force_complete()

    def on_complete(self) -> Entry | None:
        return self._store.newest(self.keys, self.after)  # None: expired


#: waits until the client has gone (returns then); None: the framework cancels the
#: handler's task instead (aiohttp with handler_cancellation)
ClientGone = Callable[[], Awaitable[object]] | None


#: the tick of a :class:`WatchService`'s timer. A poll waits seconds, and 10 ms more
#: is nothing to its client. At the library's default tick of 1 ms (Kafka's), a
#: thousand polls timing out each second wake the loop about once per timeout, and a
#: wake-up of the loop costs more CPU than expiring the poll; at 10 ms one wake-up
#: expires every poll due in those 10 ms. What it saves per answer is in BENCHMARKS.md
#: (benchmarks/watch_servers_bench.py).
WATCH_TICK_MS = 10


class WatchService:
    """The store, the purgatory of polls, and the metrics registry of one server.

    The web framework enters ``purgatory`` at startup (``async with``: it binds the
    purgatory to the loop and starts the timer's reaper) and closes it as shutdown
    begins (``await purgatory.close()``: every pending poll is answered 503 at once).
    ``gone`` counts polls cancelled because their client went away. ``store``: a
    new :class:`KeyStore` by default; ``tick_ms``: the timer's tick (a poll times out
    at most one tick after its ``timeout_ms``, never before).
    """

    def __init__(
        self, name: str = "watch", store: Store | None = None, *, tick_ms: int = WATCH_TICK_MS
    ) -> None:
        self.store: Store = KeyStore() if store is None else store
        self.purgatory: DelayedOperationPurgatory[WatchPoll] = DelayedOperationPurgatory(
            name, timer=SystemTimer(name, tick_ms=tick_ms)
        )
        self.registry = CollectorRegistry()
        self.registry.register(PurgatoryCollector(self.purgatory))
        self.gone = 0

    def put(self, key: str, body: bytes) -> Reply:
        """Store ``body`` (UTF-8) under ``key`` and wake the polls watching it; with a
        :class:`KeyStore` (TypeError for another store: use :meth:`put_async`)."""
        store = self.store
        if not isinstance(store, KeyStore):
            raise TypeError(f"put() writes a KeyStore, not a {type(store).__name__}: use put_async")
        checked = parse_put(key, body)
        if isinstance(checked, Reply):
            return checked
        entry = store.put(*checked)
        self.purgatory.check_and_complete(key)
        return ok(entry)

    async def put_async(self, key: str, body: bytes) -> Reply:
        """:meth:`put` for any :class:`Store` (``await store.write``): the store has the
        new entry when the polls of this process are checked."""
        checked = parse_put(key, body)
        if isinstance(checked, Reply):
            return checked
        entry = await self.store.write(*checked)
        self.purgatory.check_and_complete(key)
        return ok(entry)

    def metrics(self) -> Reply:
        """The purgatory's statistics in Prometheus' text exposition format."""
        return Reply(200, generate_latest(self.registry), {"Content-Type": CONTENT_TYPE_LATEST})

    async def watch(
        self,
        keys: Sequence[str],
        after: str | None,
        timeout_ms: str | None,
        client_gone: ClientGone = None,
    ) -> Reply | None:
        """Answer one poll: 200 (an entry), 304 (timed out), 400, or 503 (shutting down).

        None when the client went away first: its poll was cancelled (``op.cancel()``:
        out of the timer, counted as cancelled, purged from the watcher lists) and
        nobody is left to answer. ``client_gone`` (see ClientGone) is watched while
        the poll waits; if this task is cancelled instead, the poll is cancelled too.
        """
        try:
            request = parse_watch(keys, after, timeout_ms)
            poll = WatchPoll(self.store, request)
        except BadRequest as exc:
            return error(400, str(exc))
        await self.store.load(poll.keys)  # a KeyStore: returns at once, no loop yield
        try:
            if self.purgatory.try_complete_else_watch(poll, poll.keys):
                return self._answer(poll)  # already past ``after``: at once
        except PurgatoryClosedError:
            return SHUTTING_DOWN
        watcher = None
        if client_gone is not None:
            watcher = asyncio.ensure_future(self._cancel_when_gone(client_gone, poll))
        try:
            await poll
        except PurgatoryClosedError:
            return SHUTTING_DOWN
        except OperationCancelledError:
            return None  # its client went away (the watcher cancelled it)
        except BaseException:
            if watcher is not None:
                watcher.cancel()
            raise
        finally:
            self._drop(poll)  # if this task was cancelled: aiohttp saw the client go
        # the watcher is left to end by itself: an ASGI server answers a receive() with
        # http.disconnect once the response is sent (cancelling it costs more)
        return self._answer(poll)

    def _answer(self, poll: WatchPoll) -> Reply:
        entry = poll.result()
        return NOT_MODIFIED if poll.expired or entry is None else ok(entry)

    def _drop(self, poll: WatchPoll) -> None:
        """Cancel this one poll if it is still pending (its client went away)."""
        if poll.cancel():
            self.gone += 1

    async def _cancel_when_gone(
        self, client_gone: Callable[[], Awaitable[object]], poll: WatchPoll
    ) -> None:
        await client_gone()
        self._drop(poll)


#: the cyclic collector's first threshold in :func:`tuned_gc` (CPython's is 700): a
#: young collection every 50,000 new container objects, so the older generations,
#: which walk every pending poll, are collected about 70 times less often
GC_THRESHOLD0 = 50_000


@contextmanager
def tuned_gc(threshold0: int = GC_THRESHOLD0) -> Iterator[None]:
    """Collect less often while a server runs: the collector's first threshold set to
    ``threshold0``, and what is alive on entry (the modules, the app) frozen out of
    the collections (``gc.collect()`` then ``gc.freeze()``). Both restored on exit
    (the freeze only if nothing was frozen on entry: that freeze was someone
    else's). The trade: up to ``threshold0`` young objects (a few MB) wait for their
    collection. See the module doc for the pauses it removes."""
    thresholds = gc.get_threshold()
    froze = gc.get_freeze_count() == 0
    if froze:
        gc.collect()  # garbage frozen would never be freed (nor its finalizers run)
        gc.freeze()
    gc.set_threshold(threshold0, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        if froze:
            gc.unfreeze()


def command_line(description: str, default_port: int, argv: list[str] | None) -> tuple[str, int]:
    """The examples' shared options: ``--host`` and ``--port``."""
    parser = Parser(description=description)
    parser.add_argument("--host", default="127.0.0.1", help="address or host name to listen on")
    parser.add_argument(
        "--port", type=PORT, default=default_port, help="TCP port; 0 picks any free port"
    )
    args = parser.parse_args(argv)
    return str(args.host), int(args.port)
