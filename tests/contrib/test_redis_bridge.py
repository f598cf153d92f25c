"""purgatory.contrib.redis: key events cross processes through a real redis-server, and
no outage (Redis killed and restarted, paused, a connection killed) leaves a watcher
waiting for its timeout.

Every test that talks to Redis starts its own ``redis-server`` (tests/contrib/redis_kit.py)
and stops it by pid. Watchers wait with a 60 s timeout under a 20 s hang guard, so a
watcher that waits for its timeout fails the test; nothing asserts on elapsed time, only
on outcomes and their order.
"""

from __future__ import annotations

import asyncio
import logging
import random
import shutil
from collections.abc import AsyncIterator, Hashable, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypedDict, Unpack

import pytest
import redis.asyncio

from purgatory import DelayedOperation, DelayedOperationPurgatory, TopicPartition
from purgatory.contrib.redis import (
    DEFAULT_CHANNEL,
    KeyEvents,
    KeyPublisher,
    ReconnectSchedule,
    Refresh,
    decode_key,
    encode_key,
)
from purgatory.contrib.redis._connection import aclose
from tests.childproc import Child
from tests.contrib.redis_kit import RedisServer

pytestmark = pytest.mark.system  # redis-server

GUARD_S = 20  # a hang guard, far below the watchers' timeout
TIMEOUT_MS = 60_000


# fast reconnects keep the outage tests short; the defaults are tested for what they mean
class Timing(TypedDict, total=False):
    reconnect_min_ms: int
    reconnect_max_ms: int
    health_check_ms: int


FAST: Timing = {"reconnect_min_ms": 20, "reconnect_max_ms": 200}


class Shared:
    """The state the watchers wait for: a set of keys that 'changed', seen by every
    purgatory of this process (the state a real deployment keeps in a database)."""

    def __init__(self) -> None:
        self.ready: set[Hashable] = set()


class WaitFor(DelayedOperation[str]):
    """Completes once its key is in ``shared.ready``; counts its completions."""

    def __init__(self, shared: Shared, key: Hashable, delay_ms: int = TIMEOUT_MS) -> None:
        super().__init__(delay_ms)
        self.shared = shared
        self.key = key
        self.completions = 0

    def try_complete(self) -> bool:
        return self.key in self.shared.ready and self.force_complete()

    def on_complete(self) -> str:
        self.completions += 1
        return f"done {self.key!r}"


Purg = DelayedOperationPurgatory[WaitFor]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    with RedisServer(tmp_path) as server:
        yield server


class Pair:
    """Two purgatories (two 'processes') with a bridge each, on one channel."""

    def __init__(self, a: Purg, b: Purg, ea: KeyEvents, eb: KeyEvents) -> None:
        self.a, self.b, self.ea, self.eb = a, b, ea, eb
        self.shared = Shared()

    def watch(self, key: Hashable, purgatory: Purg | None = None) -> WaitFor:
        op = WaitFor(self.shared, key)
        assert not (purgatory or self.b).try_complete_else_watch(op, [key])
        return op


@asynccontextmanager
async def running_pair(
    url: str, refresh: Refresh | None = None, **options: Unpack[Timing]
) -> AsyncIterator[Pair]:
    """Two purgatories and their bridges, subscribed; all closed on the way out.
    ``refresh``: b's bridge's (a's has none)."""
    async with (
        Purg("a") as a,
        Purg("b") as b,
        KeyEvents(a, url, channel="test:keys", **options) as ea,
        KeyEvents(b, url, channel="test:keys", refresh=refresh, **options) as eb,
    ):
        async with asyncio.timeout(GUARD_S):
            await ea.wait_subscribed()
            await eb.wait_subscribed()
        yield Pair(a, b, ea, eb)


# -- the encoding -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("orders", b"sorders"),
        ("", b"s"),
        ("clé:1", "sclé:1".encode()),
        (b"\x00\xffraw", b"b\x00\xffraw"),
        (TopicPartition("t", 3), b"t3:t"),
        (TopicPartition("a:b", -1), b"t-1:a:b"),
    ],
)
def test_each_supported_key_has_one_encoding_and_decodes_to_itself(
    key: Hashable, message: bytes
) -> None:
    assert encode_key(key) == message
    decoded = decode_key(message)
    assert decoded == key and type(decoded) is type(key)


@pytest.mark.parametrize("key", [1, 2.5, ("t", 3), None, frozenset({"a"}), True])
def test_an_unsupported_key_is_refused_with_a_type_error(key: Hashable) -> None:
    with pytest.raises(TypeError, match=r"cannot cross processes: use a str, bytes or"):
        encode_key(key)


@pytest.mark.parametrize("message", [b"", b"x1", b"t3", b"tx:topic", b"s\xff"])
def test_a_message_no_encoder_made_is_a_value_error(message: bytes) -> None:
    with pytest.raises(ValueError):
        decode_key(message)


def test_bad_timings_are_refused_in_one_line() -> None:
    purgatory = Purg("p")
    with pytest.raises(ValueError, match=r"^health_check_ms must be a positive int"):
        KeyEvents(purgatory, "redis://127.0.0.1:1", health_check_ms=0)
    with pytest.raises(ValueError, match=r"^reconnect_max_ms .10. is below reconnect_min_ms"):
        KeyEvents(purgatory, "redis://127.0.0.1:1", reconnect_min_ms=20, reconnect_max_ms=10)
    with pytest.raises(ValueError, match=r"^timeout_ms must be a positive int"):
        KeyPublisher("redis://127.0.0.1:1", timeout_ms=1.5)  # type: ignore[arg-type]


# -- the reconnect schedule (a fake clock: integer ms passed in; a seeded draw) ----------


def _ceilings(min_ms: int, max_ms: int, count: int) -> list[int]:
    return [min(max_ms, min_ms << k) for k in range(count)]


@pytest.mark.parametrize("seed", range(5))
def test_a_connection_that_worked_is_retried_at_once_then_backs_off_to_the_ceiling(
    seed: int,
) -> None:
    schedule = ReconnectSchedule(50, 1000, random.Random(seed))
    schedule.connected(0)
    waits = [schedule.failed(60_000)] + [schedule.failed(60_000 + i) for i in range(1, 9)]
    assert waits[0] == 0
    for wait, ceiling in zip(waits[1:], _ceilings(50, 1000, 8), strict=True):
        assert ceiling / 2 <= wait <= ceiling, (waits, ceiling)
    assert max(waits) <= 1000


@pytest.mark.parametrize("seed", range(5))
def test_a_process_starting_while_redis_is_down_backs_off_from_the_first_failure(
    seed: int,
) -> None:
    schedule = ReconnectSchedule(20, 200, random.Random(seed))
    waits = [schedule.failed(t) for t in range(6)]
    for wait, ceiling in zip(waits, _ceilings(20, 200, 6), strict=True):
        assert ceiling / 2 <= wait <= ceiling, (waits, ceiling)


def test_a_connection_that_fails_soon_after_working_keeps_backing_off() -> None:
    """Connected, failed within max_ms, again and again: the waits grow to the ceiling
    and there is no retry at once (no busy loop); once a connection lasts max_ms, the
    next failure is retried at once again."""
    schedule = ReconnectSchedule(50, 1000, random.Random(1))
    schedule.connected(0)
    assert schedule.failed(5_000) == 0  # it had worked for 5 s
    now = 5_000
    waits = []
    for _ in range(8):  # each connection works, then fails 10 ms later
        now += 100
        schedule.connected(now)
        waits.append(schedule.failed(now + 10))
    assert all(wait > 0 for wait in waits), waits
    for wait, ceiling in zip(waits, _ceilings(50, 1000, 8), strict=True):
        assert ceiling / 2 <= wait <= ceiling
    schedule.connected(now)
    assert schedule.failed(now + 999) > 0  # not max_ms yet
    schedule.connected(now + 2_000)
    assert schedule.failed(now + 3_000) == 0  # worked for exactly max_ms
    assert schedule.up_since_ms is None


def test_connected_keeps_the_first_moment_a_connection_worked() -> None:
    schedule = ReconnectSchedule(50, 1000, random.Random(2))
    schedule.connected(100)
    schedule.connected(900)  # a later success on the same connection
    assert schedule.up_since_ms == 100
    assert schedule.failed(1_100) == 0  # 1,000 ms since it began working


# -- across purgatories and processes -------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "key",
    ["k", b"k\x00", TopicPartition("orders", 7)],
    ids=["str", "bytes", "TopicPartition"],
)
async def test_a_publish_in_one_purgatory_wakes_a_watcher_in_another(
    server: RedisServer, key: Hashable
) -> None:
    async with running_pair(server.url) as pair:
        here = pair.watch(key, pair.a)
        there = pair.watch(key, pair.b)
        pair.shared.ready.add(key)
        assert pair.ea.publish(key) == 1  # this process: at once
        assert here.is_completed
        async with asyncio.timeout(GUARD_S):
            assert await there == f"done {key!r}"
        assert not there.expired and there.completions == 1 and here.completions == 1
        assert pair.b.watched_keys() == []


@pytest.mark.asyncio
async def test_an_unsupported_key_fails_at_publish_and_nothing_happens(
    server: RedisServer,
) -> None:
    async with running_pair(server.url) as pair:
        op = WaitFor(pair.shared, 5)
        pair.a.try_complete_else_watch(op, [5])
        pair.shared.ready.add(5)
        with pytest.raises(TypeError, match="key 5 of type int cannot cross processes"):
            pair.ea.publish(5)
        assert not op.is_done  # refused before the local check too
        assert pair.ea.publisher.pending == 0
        with pytest.raises(TypeError):
            pair.ea.publisher.publish(5)


class Counting:
    """Watchers that count what the bridge asks of them (a purgatory's two methods)."""

    def __init__(self) -> None:
        self.checked: list[Hashable] = []
        self.listed = 0

    def check_and_complete(self, key: Hashable) -> int:
        self.checked.append(key)
        return 0

    def watched_keys(self) -> list[Hashable]:
        self.listed += 1
        return []


@pytest.mark.asyncio
async def test_an_unwatched_key_costs_one_lookup_and_is_not_watched_afterwards(
    server: RedisServer,
) -> None:
    counting = Counting()
    async with (
        Purg("b") as purgatory,
        KeyEvents(purgatory, server.url) as events,
        KeyEvents(counting, server.url) as counted,
        KeyPublisher(server.url) as publisher,
    ):
        async with asyncio.timeout(GUARD_S):
            await events.wait_subscribed()
            await counted.wait_subscribed()
            for key in ("nobody", b"nobody", TopicPartition("nobody", 0)):
                publisher.publish(key)
            while events.statistics().events < 3 or len(counting.checked) < 3:
                await asyncio.sleep(0.01)
        # the bridge's whole work per event: one check_and_complete, nothing else
        assert counting.checked == ["nobody", b"nobody", TopicPartition("nobody", 0)]
        assert counting.listed == 1  # the subscription's re-check, not the events
        stats = purgatory.statistics()
        assert purgatory.watched_keys() == [] and stats.keys == 0 and stats.watched == 0
        assert events.statistics().completed == 0 and events.statistics().malformed == 0
        # and the purgatory's part of it: a dict get that finds nothing, and returns 0
        assert purgatory.check_and_complete("nobody") == 0
        assert purgatory.watched_keys() == []


@pytest.mark.asyncio
async def test_a_foreign_message_on_the_channel_is_dropped_and_logged_once(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    async with Purg("b") as purgatory, KeyEvents(purgatory, server.url) as events:
        async with asyncio.timeout(GUARD_S):
            await events.wait_subscribed()
            for _ in range(3):
                assert server.command("PUBLISH", DEFAULT_CHANNEL, "hello") == b":1"
            while events.statistics().malformed < 3:
                await asyncio.sleep(0.01)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "no key event" in warnings[0].getMessage()


@pytest.mark.asyncio
async def test_a_second_os_process_is_woken_and_wakes_back(
    server: RedisServer, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    shared_path = state / "reply"

    class FileExists(DelayedOperation[None]):
        def try_complete(self) -> bool:
            return shared_path.exists() and self.force_complete()

        def on_complete(self) -> None:
            return None

    url = server.url
    with Child(["-m", "tests.contrib.redis_child", url, str(state), "go", "reply"]) as child:
        async with (
            DelayedOperationPurgatory[FileExists]("parent") as purgatory,
            KeyEvents(purgatory, url, channel="test:child") as events,
        ):
            reply = FileExists(TIMEOUT_MS)
            assert not purgatory.try_complete_else_watch(reply, ["reply"])
            async with asyncio.timeout(GUARD_S):
                await events.wait_subscribed()
                line = await asyncio.to_thread(child.read_line, GUARD_S)
                assert line == "watching", child.kill()
                (state / "go").touch()
                events.publish("go")  # nothing watches it here; the child does
                line = await asyncio.to_thread(child.read_line, GUARD_S)
                assert line == "completed go"
                await reply  # the child's publish woke our watcher
                assert not reply.expired
                assert await asyncio.to_thread(child.read_line, GUARD_S) == "published reply"
        assert child.proc.wait(timeout=GUARD_S) == 0, child.stderr()
        assert child.stderr() == ""


class Cache:
    """A process's cache of the shared state (``truth``): its operations read ``view``,
    which only ``refresh`` brings up to date; ``refresh`` records its calls, and fails
    once (as a lost connection to the store would) when ``fail_next`` is set."""

    def __init__(self, truth: Shared) -> None:
        self.truth = truth
        self.view = Shared()
        self.calls: list[list[Hashable]] = []
        self.fail_next = False

    async def refresh(self, keys: Sequence[Hashable]) -> None:
        self.calls.append(list(keys))
        if self.fail_next:
            self.fail_next = False
            raise ConnectionError("the store went away")
        await asyncio.sleep(0)  # a round trip to the store
        self.view.ready.update(key for key in keys if key in self.truth.ready)


@pytest.mark.asyncio
async def test_refresh_runs_before_the_checks_of_an_event_and_of_a_recheck(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """With ``refresh``, an operation reading a stale cache is still woken: by an event
    (refreshed first), and, when the refresh of an event fails, by the re-check after
    the reconnect (refreshed first too)."""
    truth = Shared()
    cache = Cache(truth)
    async with running_pair(server.url, cache.refresh, **FAST) as pair:
        b, ea, eb = pair.b, pair.ea, pair.eb
        assert cache.calls == []  # nothing watched at the first re-check: nothing to refresh
        op = WaitFor(cache.view, "k")
        assert not b.try_complete_else_watch(op, ["k"])
        truth.ready.add("k")
        assert ea.publish("k") == 0  # nothing watches it in a
        async with asyncio.timeout(GUARD_S):
            assert await op == "done 'k'"
        assert cache.calls == [["k"]]  # the event's key, refreshed before its check
        # the refresh of the next event fails: an outage, then a refreshed re-check
        later = WaitFor(cache.view, "j")
        assert not b.try_complete_else_watch(later, ["j"])
        truth.ready.add("j")
        cache.fail_next = True
        ea.publish("j")
        async with asyncio.timeout(GUARD_S):
            assert await later == "done 'j'"
        assert cache.calls[1:] == [["j"], ["j"]]  # the failed one, then the re-check's
        stats = eb.statistics()
        assert stats.outages == 1 and stats.subscriptions == 2 and stats.rechecked_keys == 1
        assert later.completions == 1 and not later.expired
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert "subscription lost (ConnectionError: the store went away)" in warnings[0]


def once(keys: Sequence[str]) -> list[str]:
    """``keys`` in their order, each once."""
    return list(dict.fromkeys(keys))


class GatedCache(Cache):
    """A Cache whose refresh waits at ``gate`` (once set, every refresh passes)."""

    def __init__(self, truth: Shared) -> None:
        super().__init__(truth)
        self.gate = asyncio.Event()

    async def refresh(self, keys: Sequence[Hashable]) -> None:
        await self.gate.wait()
        await super().refresh(keys)


@pytest.mark.asyncio
async def test_events_received_during_a_refresh_are_refreshed_together_once_each(
    server: RedisServer,
) -> None:
    """While the refresh of the first event waits, three more events arrive (one key
    twice): what b had received when the first refresh began is in it, the rest in the
    next call, each key once per call, in their order; every watcher completes once."""
    truth = Shared()
    cache = GatedCache(truth)
    async with running_pair(server.url, cache.refresh, **FAST) as pair:
        b, ea, eb = pair.b, pair.ea, pair.eb
        ops = {key: WaitFor(cache.view, key) for key in ("first", "x", "y")}
        for key, op in ops.items():
            assert not b.try_complete_else_watch(op, [key])
        truth.ready.update(ops)
        for key in ("first", "x", "x", "y"):  # sent one by one: "x" is not coalesced
            ea.publish(key)
            async with asyncio.timeout(GUARD_S):
                await ea.publisher.flush()
        # a's bridge received all four, while b's refresh of "first" waits; Redis writes
        # a PUBLISH to each subscriber in the same round of its event loop, and answers
        # a command sent after that in a later round: once it has, all four reached b's
        # socket, so the next refresh takes what the first did not (never a third call)
        await _until(lambda: ea.statistics().events >= 4, "the events reached a")
        assert server.command("PING") == b"+PONG"
        assert cache.calls == []
        cache.gate.set()
        async with asyncio.timeout(GUARD_S):
            for op in ops.values():
                await op
        sent = ["first", "x", "x", "y"]
        splits = [[once(sent[:cut]), once(sent[cut:])] for cut in range(1, len(sent))]
        assert cache.calls in [[once(sent)], *splits]
        assert all(op.completions == 1 and not op.expired for op in ops.values())
        assert eb.statistics().events == 4


# -- outages ---------------------------------------------------------------------------------


def bridge_tasks() -> list[asyncio.Task[object]]:
    """The bridges' tasks still alive (named ``key-events ...`` and ``key-publisher ...``)."""
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("key-")]


async def _until(predicate: object, what: str) -> None:
    """Poll ``predicate()`` (a zero-argument callable) under the hang guard."""
    assert callable(predicate)
    try:
        async with asyncio.timeout(GUARD_S):
            while not predicate():
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"never happened: {what}") from None


@pytest.mark.asyncio
@pytest.mark.parametrize("announced", [True, False], ids=["published", "event-lost"])
async def test_redis_restarted_while_a_watcher_waits(
    server: RedisServer, announced: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The condition becomes true while Redis is down; the watcher completes once Redis
    is back. ``event-lost``: nobody publishes at all (the writer's event died with the
    outage), so only the re-check after the resubscription can wake it."""
    async with running_pair(server.url, **FAST) as pair:
        op = pair.watch("k")
        server.kill()
        await _until(lambda: not pair.eb.subscribed, "the subscriber noticed the outage")
        pair.shared.ready.add("k")
        if announced:
            pair.ea.publish("k")
        server.start()  # blocks the loop while it starts: fine
        async with asyncio.timeout(GUARD_S):
            assert await op == "done 'k'"
        assert not op.expired and op.completions == 1
        stats = pair.eb.statistics()
        assert stats.subscriptions >= 2 and stats.outages >= 1 and stats.rechecked_keys >= 1
        if announced:
            await _until(lambda: pair.ea.publisher.pending == 0, "the publish was sent")
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    # one line per outage and per side, however many reconnect attempts; no traceback
    assert all(r.exc_info is None for r in caplog.records)
    subscriber = [r for r in warnings if "subscription lost" in r.getMessage()]
    assert len(subscriber) == 2  # the two bridges, one outage each
    publisher = [r for r in warnings if "key publisher" in r.getMessage()]
    assert len(publisher) <= 1  # if its send met the outage
    assert len(warnings) == len(subscriber) + len(publisher)


@pytest.mark.asyncio
@pytest.mark.parametrize("health_check_ms", [5000, 300], ids=["same-connection", "reconnect"])
async def test_redis_paused_then_resumed(server: RedisServer, health_check_ms: int) -> None:
    """SIGSTOP for about 2 s with a put in the middle, then SIGCONT: the event is delivered
    (``same-connection``: the pause is shorter than the health check), or the subscriber
    gave up on the silent connection and re-checks on its new one (``reconnect``)."""
    async with running_pair(
        server.url, health_check_ms=health_check_ms, reconnect_min_ms=20, reconnect_max_ms=200
    ) as pair:
        op = pair.watch("k")
        server.pause()
        try:
            await asyncio.sleep(1)
            pair.shared.ready.add("k")
            pair.ea.publish("k")
            await asyncio.sleep(1)
        finally:
            server.resume()
        async with asyncio.timeout(GUARD_S):
            assert await op == "done 'k'"
        assert not op.expired and op.completions == 1
        await _until(lambda: pair.ea.publisher.pending == 0, "the publish was sent")


@pytest.mark.asyncio
async def test_subscriber_connections_killed(server: RedisServer) -> None:
    """CLIENT KILL TYPE pubsub drops both subscriptions; the put right after it is
    probably published before they are back (lost for them): the re-check covers it."""
    async with running_pair(server.url, **FAST) as pair:
        op = pair.watch("k")
        before = pair.eb.statistics().subscriptions
        assert server.command("CLIENT", "KILL", "TYPE", "pubsub") == b":2"
        pair.shared.ready.add("k")
        pair.ea.publish("k")
        async with asyncio.timeout(GUARD_S):
            assert await op == "done 'k'"
        assert not op.expired and op.completions == 1
        await _until(lambda: pair.eb.statistics().subscriptions > before, "resubscribed")
        assert pair.eb.statistics().outages == 1


class WaitSpy(ReconnectSchedule):
    """A bridge's schedule, taken over as it stands, recording what ``failed`` answered."""

    def __init__(self, events: KeyEvents) -> None:
        base = events.reconnect_schedule
        super().__init__(base.min_ms, base.max_ms)
        self.failures, self.up_since_ms = base.failures, base.up_since_ms
        self.waits: list[int] = []
        events.reconnect_schedule = self

    def failed(self, now_ms: int) -> int:
        wait = super().failed(now_ms)
        self.waits.append(wait)
        return wait


@pytest.mark.asyncio
async def test_a_killed_subscription_that_had_worked_is_retried_at_once(
    server: RedisServer,
) -> None:
    """CLIENT KILL of subscriptions that had worked for reconnect_max_ms: each
    subscriber's first (and only) attempt comes with no wait, and succeeds; counted
    on the schedule, not timed."""
    async with running_pair(server.url, reconnect_min_ms=20, reconnect_max_ms=50) as pair:
        spies = [WaitSpy(pair.ea), WaitSpy(pair.eb)]
        before = [e.statistics().subscriptions for e in (pair.ea, pair.eb)]
        await asyncio.sleep(0.2)  # past reconnect_max_ms: the subscriptions are settled
        assert server.command("CLIENT", "KILL", "TYPE", "pubsub") == b":2"
        await _until(
            lambda: all(
                e.statistics().subscriptions > n
                for e, n in zip((pair.ea, pair.eb), before, strict=True)
            ),
            "both resubscribed",
        )
        assert [spy.waits for spy in spies] == [[0], [0]]


@pytest.mark.asyncio
async def test_a_redis_restart_is_retried_at_once_then_on_the_schedule(
    server: RedisServer,
) -> None:
    """Redis killed under a subscription that had worked: the first retry has no wait,
    the next ones follow the capped exponential (each within [c/2, c])."""
    async with running_pair(server.url, reconnect_min_ms=20, reconnect_max_ms=80) as pair:
        spy = WaitSpy(pair.eb)
        await asyncio.sleep(0.2)  # past reconnect_max_ms
        server.kill()
        await _until(lambda: len(spy.waits) >= 5, "five failed attempts")
        server.start()
        await _until(lambda: pair.eb.subscribed, "subscribed again")
        waits = list(spy.waits)
    assert waits[0] == 0
    for wait, ceiling in zip(waits[1:], _ceilings(20, 80, len(waits) - 1), strict=True):
        assert ceiling / 2 <= wait <= ceiling, waits


@pytest.mark.asyncio
async def test_publisher_connection_killed(server: RedisServer) -> None:
    """CLIENT KILL TYPE normal drops the publisher's connection only (the subscribers
    notice nothing): the next send fails, and the publisher sends the keys again."""
    async with running_pair(server.url, **FAST) as pair:
        first = pair.watch("first")
        pair.shared.ready.add("first")
        pair.ea.publish("first")
        async with asyncio.timeout(GUARD_S):
            await first
            await pair.ea.publisher.flush()
        assert int(server.command("CLIENT", "KILL", "TYPE", "normal")[1:]) >= 1
        op = pair.watch("k")
        pair.shared.ready.add("k")
        pair.ea.publish("k")
        async with asyncio.timeout(GUARD_S):
            assert await op == "done 'k'"
        assert pair.eb.statistics().outages == 0


@pytest.mark.asyncio
async def test_each_operation_completes_once_through_events_rechecks_and_local_calls(
    server: RedisServer,
) -> None:
    """Many watchers on a few keys, woken at once by local calls, events from both
    sides, duplicates, and a re-check after a killed subscription: one completion each."""
    async with running_pair(server.url, **FAST) as pair:
        keys = [f"k{i}" for i in range(8)]
        ops = [pair.watch(keys[i % 8], pair.a if i % 2 else pair.b) for i in range(400)]
        # several keys per operation too
        multi = [WaitFor(pair.shared, keys[i % 8]) for i in range(20)]
        for op in multi:
            pair.b.try_complete_else_watch(op, ["m", *keys])
        pair.shared.ready.update(keys)
        server.command("CLIENT", "KILL", "TYPE", "pubsub")
        for key in keys:
            pair.ea.publish(key)
            pair.eb.publish(key)
            pair.ea.publish(key)
        async with asyncio.timeout(GUARD_S):
            await asyncio.gather(*ops, *multi)
        assert [op.completions for op in ops + multi] == [1] * 420
        assert not any(op.expired for op in ops + multi)


# -- lifecycle -----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_close_is_clean_and_leaves_no_task(server: RedisServer) -> None:
    async with Purg("p") as purgatory:
        op = WaitFor(Shared(), "k")
        purgatory.try_complete_else_watch(op, ["k"])
        events = KeyEvents(purgatory, server.url)
        async with events:
            async with asyncio.timeout(GUARD_S):
                await events.wait_subscribed()
            events.publish("k")
        assert events.closed and not events.subscribed
        await events.close()  # idempotent
        assert events.statistics().publish_pending == 0
        assert not op.is_done  # the purgatory is left as it is
        with pytest.raises(RuntimeError, match="closed"):
            events.publish("k")
        with pytest.raises(RuntimeError, match="cannot restart"):
            await events.start()
        assert not bridge_tasks()


@pytest.mark.asyncio
async def test_a_close_cancelled_at_its_first_await_still_closes_the_connection(
    server: RedisServer,
) -> None:
    """A bridge that closes cancels its tasks every 50 ms until they end (``stop_all``),
    so a task's close of its client can be cancelled. redis-py closes a socket only after
    awaits of its own: a close cut there left the socket open, and uvloop, closing its loop
    with warnings as errors, then waited on the leaked transport for ever (a fresh clone's
    run hung in a cluster test's teardown). Cancelled at its first await, and again, the
    close goes on to the end, then the cancellation is raised."""
    client = redis.asyncio.Redis.from_url(server.url, single_connection_client=True)
    assert await client.ping()
    connection = client.connection
    assert connection is not None and connection.is_connected
    closing = asyncio.create_task(aclose(client))
    await asyncio.sleep(0)  # the close runs to its first await
    closing.cancel()
    await asyncio.sleep(0)
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    assert not connection.is_connected


@pytest.mark.asyncio
async def test_close_while_redis_is_down_or_paused_drops_what_it_cannot_send(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    async with Purg("p") as purgatory:
        async with KeyEvents(purgatory, server.url, close_timeout_ms=200, **FAST) as events:
            async with asyncio.timeout(GUARD_S):
                await events.wait_subscribed()
            server.kill()
            events.publish("k")
            await _until(lambda: events.statistics().publish_outages == 1, "publisher outage")
        assert not bridge_tasks()
        dropped = [r for r in caplog.records if "unsent" in r.getMessage()]
        assert len(dropped) == 1 and "1 keys unsent" in dropped[0].getMessage()
    server.start()
    async with Purg("q") as purgatory:
        async with KeyEvents(purgatory, server.url, close_timeout_ms=200, **FAST) as events:
            async with asyncio.timeout(GUARD_S):
                await events.wait_subscribed()
            server.pause()
            try:
                events.publish("k")
                async with asyncio.timeout(GUARD_S):
                    await events.close()
            finally:
                server.resume()
        assert not bridge_tasks()


@pytest.mark.asyncio
async def test_entering_with_redis_down_runs_local_then_catches_up(tmp_path: Path) -> None:
    """Redis is down when the bridge starts: the purgatory works locally, and the first
    subscription (once Redis is up) re-checks what changed meanwhile."""
    server = RedisServer(tmp_path)
    try:
        shared = Shared()
        async with Purg("p") as purgatory, KeyEvents(purgatory, server.url, **FAST) as events:
            op = WaitFor(shared, "k")
            purgatory.try_complete_else_watch(op, ["k"])
            await _until(lambda: events.statistics().outages == 1, "the first failure")
            assert not events.subscribed
            shared.ready.add("k")  # changed by another process: no event reaches us
            server.start()  # blocks the loop while it starts: fine
            async with asyncio.timeout(GUARD_S):
                assert await op == "done 'k'"
    finally:
        server.kill()


@pytest.mark.asyncio
async def test_publisher_misuse_fails_in_one_line() -> None:
    publisher = KeyPublisher("redis://127.0.0.1:1")
    with pytest.raises(RuntimeError, match=r"^KeyPublisher on '.*' is not started \(use async"):
        publisher.publish("k")
    async with publisher:
        with pytest.raises(RuntimeError, match="runs already"):
            await publisher.start()
    with pytest.raises(RuntimeError, match="is closed"):
        publisher.publish("k")


@pytest.mark.asyncio
async def test_flush_waits_until_the_keys_reached_redis(server: RedisServer) -> None:
    publisher = KeyPublisher(server.url, channel="test:flush")
    await publisher.flush()  # nothing published: nothing to wait for
    async with publisher:
        for key in ("a", "b", "a"):
            publisher.publish(key)
        async with asyncio.timeout(GUARD_S):
            await publisher.flush()
        assert publisher.pending == 0 and publisher.published == 2  # "a" coalesced
    await publisher.flush()  # closed, everything sent: returns at once


def test_without_redis_server_the_tests_fail_naming_the_install_script(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(pytest.fail.Exception, match=r"^redis-server is not installed: run `bash"):
        RedisServer(tmp_path)
