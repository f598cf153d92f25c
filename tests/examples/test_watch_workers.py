"""examples/watch_aiohttp_workers.py: four worker processes on one port (SO_REUSEPORT),
their store and key events in a real redis-server (tests/contrib/redis_kit.py), and
aiohttp's real client. A put on one worker wakes the polls waiting on every worker, and
SIGTERM to the parent answers the polls still pending 503 on every worker.

Polls wait up to 60 s under a 30 s hang guard, so a missed wake fails the test; no
assertion reads elapsed time. Every loop is bounded. The parent, its workers (their
pids from /whoami and the parent's first line) and redis-server are stopped by pid.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from tests.contrib.redis_kit import RedisServer, free_port

from ..repo_kit import needs
from .watch_kit import EXAMPLES, GUARD_S, LONG_MS

pytestmark = [pytest.mark.system, needs("examples/watch_aiohttp_workers.py")]  # redis-server

WORKERS = 4
MAX_POLLS = 64  # P(some worker got none of them) is about 4 * (3/4)**64
MAX_ROUNDS = 2000  # /whoami requests in one wait


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    with RedisServer(tmp_path) as server:
        yield server


def _stop(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


class Cluster:
    """The aiohttp client's view of the workers: /whoami over a new connection each time
    (so the kernel picks a worker each time), the latest answer of each pid kept."""

    def __init__(self, session: aiohttp.ClientSession, port: int) -> None:
        self.session = session
        self.base = f"http://127.0.0.1:{port}"
        self.seen: dict[int, dict[str, object]] = {}

    async def whoami(self) -> dict[str, object]:
        async with self.session.get(self.base + "/whoami") as response:
            assert response.status == 200
            answer: dict[str, object] = await response.json()
        pid = answer["pid"]
        assert isinstance(pid, int)
        self.seen[pid] = answer
        return answer

    async def until(self, what: str, done: object) -> None:
        """Ask /whoami until ``done(seen)`` holds (every worker answered, each answer
        recent enough), at most MAX_ROUNDS times."""
        assert callable(done)
        for _ in range(MAX_ROUNDS):
            await self.whoami()
            if len(self.seen) == WORKERS and done(self.seen):
                return
            await asyncio.sleep(0.005)
        raise AssertionError(f"never happened: {what}; seen {self.seen}")


async def _poll(session: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with session.get(url) as response:
        return response.status, await response.text()


@pytest.mark.asyncio
@pytest.mark.parametrize("subscriptions_killed", [False, True], ids=["steady", "client-kill"])
async def test_a_put_on_one_worker_wakes_the_polls_on_every_worker(
    redis_server: RedisServer, subscriptions_killed: bool
) -> None:
    """``client-kill``: every worker's subscription is dropped (CLIENT KILL TYPE pubsub)
    just before the put, so its event probably reaches nobody: the workers' re-checks
    after they subscribe again (each refreshing the watched keys from Redis) answer the
    polls."""
    port = free_port()
    parent = subprocess.Popen(
        [
            sys.executable,
            str(EXAMPLES / "watch_aiohttp_workers.py"),
            *("--port", str(port), "--workers", str(WORKERS)),
            *("--redis-url", redis_server.url, "--channel", "test:watch"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    worker_pids: list[int] = []
    polls: list[asyncio.Task[tuple[int, str]]] = []
    try:
        assert parent.stdout is not None
        first = await asyncio.to_thread(parent.stdout.readline)  # "listening on ... workers P.."
        assert f"listening on 127.0.0.1:{port} with workers" in first, first
        worker_pids = [int(pid) for pid in first.split("workers", 1)[1].split()]
        assert len(worker_pids) == WORKERS
        # a new connection for every request: the kernel spreads them over the workers
        connector = aiohttp.TCPConnector(force_close=True, limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            cluster = Cluster(session, port)
            async with asyncio.timeout(GUARD_S):
                for _ in range(MAX_ROUNDS):  # the workers start listening one by one
                    with contextlib.suppress(aiohttp.ClientConnectionError):
                        await cluster.whoami()
                        break
                    await asyncio.sleep(0.01)
                await cluster.until(
                    "every worker subscribed",
                    lambda seen: all(answer["subscribed"] for answer in seen.values()),
                )
                assert sorted(cluster.seen) == sorted(worker_pids)

                # polls on k until every worker holds at least one
                url = f"{cluster.base}/watch/k?after=0&timeout_ms={LONG_MS}"

                def every_worker_polls(seen: dict[int, dict[str, object]]) -> bool:
                    counts = [a["polls"] for a in seen.values()]
                    return all(isinstance(n, int) and n >= 1 for n in counts)

                def all_polls_arrived(seen: dict[int, dict[str, object]]) -> bool:
                    return sum(int(str(a["polls"])) for a in seen.values()) == len(polls)

                while len(polls) < MAX_POLLS:
                    polls.append(asyncio.ensure_future(_poll(session, url)))
                    await cluster.until("the new poll arrived", all_polls_arrived)
                    if every_worker_polls(cluster.seen):
                        break
                assert every_worker_polls(cluster.seen), cluster.seen
                assert not any(poll.done() for poll in polls)

                if subscriptions_killed:
                    assert redis_server.command("CLIENT", "KILL", "TYPE", "pubsub") == b":4"
                # one put, on whichever worker the kernel picks
                async with session.post(f"{cluster.base}/put/k", data=b"red") as response:
                    assert response.status == 200
                    assert json.loads(await response.text()) == {
                        "key": "k",
                        "version": 1,
                        "value": "red",
                    }
                answers = await asyncio.gather(*polls)
            expected = json.dumps({"key": "k", "version": 1, "value": "red"})
            assert answers == [(200, expected)] * len(polls)

            # SIGTERM to the parent: every worker answers its pending polls 503
            async with asyncio.timeout(GUARD_S):
                cluster.seen.clear()
                later = [
                    asyncio.ensure_future(
                        _poll(session, f"{cluster.base}/watch/k?after=1&timeout_ms={LONG_MS}")
                    )
                    for _ in range(2 * WORKERS)
                ]
                polls = later
                await cluster.until("the later polls arrived", all_polls_arrived)
                parent.send_signal(signal.SIGTERM)
                answers = await asyncio.gather(*later)
            assert answers == [(503, "server shutting down\n")] * len(later)
        rest, _ = await asyncio.to_thread(parent.communicate, timeout=GUARD_S)
        assert parent.returncode == 0, rest
        assert "Traceback" not in rest, rest
    finally:
        for task in polls:
            task.cancel()
        if parent.poll() is None:
            parent.kill()
            parent.communicate()
        for pid in worker_pids:  # normally gone already (stopped by the parent)
            _stop(pid)
