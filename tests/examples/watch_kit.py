"""What the tests of the watch recipes (examples/watch_aiohttp.py, watch_starlette.py)
share: each checks the same behaviour of its real server on 127.0.0.1 (port 0) with
a real HTTP client, so the checks are written once here, against :class:`Served`
(the running server) and :class:`Http` (the client).

Polls that must stay pending use timeouts (60 s) far longer than any hang guard
(``GUARD_S``), so a server that waited for them would fail the test, not slow it.
The one assertion that reads elapsed time is a lower bound (a 304 never comes before
its timeout), which a slow machine cannot break.
"""

from __future__ import annotations

import asyncio
import json
import re
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ..repo_kit import need

#: the recipes: their tests import them, and are skipped without them (this kit is
#: imported first)
RECIPES = ("watch_service.py", "watch_aiohttp.py", "watch_starlette.py")
EXAMPLES = need(*(f"examples/{name}" for name in RECIPES)) / "examples"
sys.path.insert(0, str(EXAMPLES))
from watch_service import WatchService  # noqa: E402

from purgatory.contrib.prometheus import FAMILIES  # noqa: E402

GUARD_S = 30.0  # a hang guard: far beyond what a busy 2-core machine needs
LONG_MS = 60_000  # a poll that must not time out during a test


class Http(Protocol):
    """The real HTTP client of a test: status and text of a GET or a POST."""

    async def get(self, path: str) -> tuple[int, str]: ...

    async def post(self, path: str, body: bytes) -> tuple[int, str]: ...


@dataclass
class Served:
    """A running server: its service, its port, and how to stop it (graceful shutdown)."""

    service: WatchService
    port: int
    stop: Callable[[], Awaitable[None]]
    is_running: Callable[[], bool]


async def wait_until(predicate: Callable[[], bool], what: str) -> None:
    async with asyncio.timeout(GUARD_S):
        while not predicate():
            await asyncio.sleep(0.01)
    assert predicate(), what


@pytest.fixture
def many_fds() -> Iterator[None]:
    """Room for a thousand connections (two fds each in one process); restored after."""
    need = 4096
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {need}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class RawPoll:
    """A poll on its own TCP connection, written by hand: it can be aborted (an RST,
    as a client killed mid-request) and read to the end."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int, path: str) -> RawPoll:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        return cls(reader, writer)

    def abort(self) -> None:
        self.writer.transport.abort()

    async def answer(self) -> tuple[int, bytes]:
        """Status and body, once the server has answered and closed."""
        data = await self.reader.read()
        self.writer.close()
        head, _, body = data.partition(b"\r\n\r\n")
        return int(head.split(b" ", 2)[1]), body


def pending(served: Served) -> int:
    return served.service.purgatory.num_delayed


def waited(service: WatchService) -> int:
    """Polls waiting now or expired: a short poll (``timeout_ms`` of a few hundred) may
    expire, on a stalled machine, before a test sees it wait; either way it waited."""
    stats = service.purgatory.statistics()
    return stats.num_delayed + stats.expired


# -- the checks ----------------------------------------------------------------------


async def check_a_put_wakes_a_poll(served: Served, http: Http) -> None:
    poll = asyncio.ensure_future(http.get(f"/watch/color?after=0&timeout_ms={LONG_MS}"))
    await wait_until(lambda: pending(served) == 1, "the poll waits")
    assert not poll.done()
    status, text = await http.post("/put/color", b"red")
    assert status == 200 and json.loads(text) == {"key": "color", "version": 1, "value": "red"}
    async with asyncio.timeout(GUARD_S):
        status, text = await poll
    assert status == 200 and json.loads(text) == {"key": "color", "version": 1, "value": "red"}
    # already past ``after``: answered at once, never watched
    status, text = await http.get("/watch/color?after=0&timeout_ms=60000")
    assert status == 200 and json.loads(text)["version"] == 1
    stats = served.service.purgatory.statistics()
    assert stats.completed_early == 2 and stats.num_delayed == 0 and stats.expired == 0


async def check_a_timeout_is_304(served: Served, http: Http) -> None:
    await http.post("/put/color", b"red")
    seen: list[bool] = []
    original = served.service._answer

    def spy(poll: object) -> object:  # the operation the handler awaited
        seen.append(bool(getattr(poll, "expired", False)))
        return original(poll)  # type: ignore[arg-type]

    served.service._answer = spy  # type: ignore[assignment,method-assign]
    sent = time.monotonic()
    status, text = await http.get("/watch/color?after=1&timeout_ms=50")
    assert time.monotonic() - sent >= 0.050  # never early (the tick is added: WatchPoll)
    assert (status, text) == (304, "")
    assert seen == [True]  # op.expired chose the 304
    stats = served.service.purgatory.statistics()
    assert stats.expired == 1 and stats.lateness_count == 1 and stats.num_delayed == 0


async def check_several_keys(served: Served, http: Http) -> None:
    await http.post("/put/a", b"1")  # version 1
    poll = asyncio.ensure_future(http.get(f"/watch?keys=a,b,c&after=1&timeout_ms={LONG_MS}"))
    await wait_until(lambda: served.service.purgatory.watched == 3, "watched under 3 keys")
    assert pending(served) == 1  # one operation
    status, text = await http.post("/put/b", b"2")
    assert status == 200
    async with asyncio.timeout(GUARD_S):
        status, text = await poll
    assert status == 200 and json.loads(text) == {"key": "b", "version": 2, "value": "2"}
    # the newest of the keys past ``after``, at once
    await http.post("/put/c", b"3")
    status, text = await http.get("/watch?keys=a,b,c&after=0")
    assert json.loads(text) == {"key": "c", "version": 3, "value": "3"}
    served.service.purgatory.purge_completed()
    assert served.service.purgatory.watched == 0


async def check_bad_input_is_one_line(served: Served, http: Http) -> None:
    for path, mentions in [
        ("/watch/a?after=x", "after must be an integer from 0 to"),
        ("/watch/a?after=-1", "after must be an integer from 0 to"),
        ("/watch/a?timeout_ms=600001", "timeout_ms must be an integer from 0 to 600000"),
        ("/watch/a?timeout_ms=1.5", "timeout_ms must be an integer from 0 to 600000"),
        ("/watch?after=1", "keys is required"),
        ("/watch?keys=a,,b", "a key must have 1 to 256 characters, not 0"),
        ("/watch?keys=" + ",".join(map(str, range(65))), "at most 64 keys"),
    ]:
        status, text = await http.get(path)
        assert status == 400, path
        assert text.endswith("\n") and text.count("\n") == 1 and mentions in text, text
    status, text = await http.post("/put/a", b"\xff")
    assert status == 400 and text.startswith("the value must be UTF-8")
    assert served.service.purgatory.statistics().num_delayed == 0


async def check_the_lifecycle(served: Served, http: Http) -> None:
    """Started: the purgatory is entered (its reaper runs). Stopped: closed, reaper gone."""
    purgatory = served.service.purgatory

    def reaper_and_closed() -> tuple[bool, bool]:
        return purgatory.timer.reaper is not None, purgatory.closed

    assert reaper_and_closed() == (True, False)
    assert (await http.get("/watch/a?timeout_ms=0"))[0] == 304
    await served.stop()
    assert reaper_and_closed() == (False, True)
    assert not served.is_running()


async def check_a_disconnect_drops_its_operation(served: Served, n: int) -> None:
    """``n`` clients abort their polls: each poll is cancelled (counted), none is left
    in the timer, and the purge leaves nothing watched."""
    purgatory = served.service.purgatory
    polls = [
        await RawPoll.open(served.port, f"/watch/k{i % 50}?timeout_ms={LONG_MS}") for i in range(n)
    ]
    await wait_until(lambda: purgatory.num_delayed == n, f"{n} polls wait")
    for poll in polls:
        poll.abort()
    await wait_until(lambda: served.service.gone == n, f"{n} polls dropped")
    purgatory.purge_completed()
    stats = purgatory.statistics()
    assert stats.num_delayed == 0 and stats.watched == 0 and stats.keys == 0
    assert stats.cancelled == n and stats.expired == 0 and stats.completed_early == 0
    assert len(purgatory.timer) == 0


async def check_shutdown_answers_every_pending_poll(served: Served, n: int) -> None:
    """Shutdown answers ``n`` polls waiting 60 s each (503) instead of waiting for them:
    the hang guard (30 s) is shorter than their timeout."""
    polls = [
        await RawPoll.open(served.port, f"/watch/k{i % 7}?timeout_ms={LONG_MS}") for i in range(n)
    ]
    await wait_until(lambda: pending(served) == n, f"{n} polls wait")
    async with asyncio.timeout(GUARD_S):
        await served.stop()
        answers = await asyncio.gather(*(poll.answer() for poll in polls))
    assert answers == [(503, b"server shutting down\n")] * n
    stats = served.service.purgatory.statistics()
    assert stats.cancelled == n and stats.num_delayed == 0 and stats.expired == 0


async def check_metrics_equal_the_statistics(served: Served, http: Http) -> None:
    await http.post("/put/a", b"1")
    await http.get("/watch/a?after=0")  # completed early
    await http.get("/watch/a?after=1&timeout_ms=0")  # expired
    aborted = await RawPoll.open(served.port, f"/watch/b?timeout_ms={LONG_MS}")
    kept = await RawPoll.open(served.port, f"/watch?keys=c,d&timeout_ms={LONG_MS}")
    await wait_until(lambda: pending(served) == 2, "two polls wait")
    aborted.abort()
    await wait_until(lambda: served.service.gone == 1, "the aborted poll is dropped")
    status, text = await http.get("/metrics")
    stats = served.service.purgatory.statistics()
    assert status == 200
    samples = {
        sample.name: (sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    for suffix, kind, field, _ in FAMILIES:
        name = f"purgatory_{suffix}" + ("_total" if kind == "counter" else "")
        assert samples[name] == ({"purgatory": "watch"}, float(getattr(stats, field))), name
    assert stats.completed_early == 1 and stats.expired == 1 and stats.cancelled == 1
    # watched: the kept poll under c and d, and the done ones (a, b) until a purge
    assert stats.num_delayed == 1 and stats.watched == 4 and stats.keys == 4
    kept.abort()


def check_the_script_shuts_down_on_sigterm(script: str, status: int = 0) -> None:
    """``python examples/SCRIPT --port 0``: it serves, and on SIGTERM answers a pending
    poll 503 at once and exits with ``status``."""
    with subprocess.Popen(
        [sys.executable, str(EXAMPLES / script), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None
            port = 0
            while not port:  # "listening on 127.0.0.1:P" or uvicorn's "running on http://..."
                line = proc.stdout.readline()
                assert line, "the script ended before it listened"
                found = re.search(r"127\.0\.0\.1:(\d+)", line)
                port = int(found.group(1)) if found else 0

            async def poll_then_terminate() -> tuple[int, bytes]:
                poll = await RawPoll.open(port, f"/watch/a?timeout_ms={LONG_MS}")
                async with asyncio.timeout(GUARD_S):
                    while b'purgatory_delayed{purgatory="watch"} 1.0' not in await _get(port):
                        await asyncio.sleep(0.01)
                    proc.send_signal(signal.SIGTERM)
                    return await poll.answer()

            assert asyncio.run(poll_then_terminate()) == (503, b"server shutting down\n")
            proc.communicate(timeout=GUARD_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == status


async def _get(port: int) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
    data = await reader.read()
    writer.close()
    await writer.wait_closed()
    return data


class RecipeTests:
    """The tests both recipes pass, written once. A recipe's test module subclasses it
    (``class TestRecipe(RecipeTests)``) beside its own ``served`` and ``http``
    fixtures, which start that recipe's real server and client."""

    @pytest.mark.asyncio
    async def test_a_put_wakes_a_poll(self, served: Served, http: Http) -> None:
        await check_a_put_wakes_a_poll(served, http)

    @pytest.mark.asyncio
    async def test_a_timeout_is_304(self, served: Served, http: Http) -> None:
        await check_a_timeout_is_304(served, http)

    @pytest.mark.asyncio
    async def test_several_keys(self, served: Served, http: Http) -> None:
        await check_several_keys(served, http)

    @pytest.mark.asyncio
    async def test_the_lifecycle(self, served: Served, http: Http) -> None:
        await check_the_lifecycle(served, http)

    @pytest.mark.asyncio
    @pytest.mark.usefixtures("many_fds")
    async def test_a_disconnect_drops_its_operation(self, served: Served) -> None:
        await check_a_disconnect_drops_its_operation(served, 1)

    @pytest.mark.asyncio
    @pytest.mark.usefixtures("many_fds")
    async def test_a_thousand_aborted_polls_leave_nothing_behind(self, served: Served) -> None:
        await check_a_disconnect_drops_its_operation(served, 1000)

    @pytest.mark.asyncio
    async def test_shutdown_answers_every_pending_poll(self, served: Served) -> None:
        await check_shutdown_answers_every_pending_poll(served, 200)

    @pytest.mark.asyncio
    async def test_metrics_equal_the_statistics(self, served: Served, http: Http) -> None:
        await check_metrics_equal_the_statistics(served, http)
