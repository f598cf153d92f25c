"""examples/watch_aiohttp.py: the real server (``web.AppRunner``, ``TCPSite`` on
127.0.0.1, port 0, ``handler_cancellation=True``) with aiohttp's real client; the
checks are in watch_kit.py, shared with the Starlette recipe's tests."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web

from . import watch_kit as kit
from .watch_kit import Served, many_fds  # noqa: F401 - a fixture

# isort: split
# the examples folder is on the path: watch_kit put it there
from watch_aiohttp import make_app, start
from watch_service import WatchService


class Client:
    """aiohttp's ClientSession, as the kit's Http."""

    def __init__(self, session: aiohttp.ClientSession, port: int) -> None:
        self.session, self.base = session, f"http://127.0.0.1:{port}"

    async def get(self, path: str) -> tuple[int, str]:
        async with self.session.get(self.base + path) as response:
            return response.status, await response.text()

    async def post(self, path: str, body: bytes) -> tuple[int, str]:
        async with self.session.post(self.base + path, data=body) as response:
            return response.status, await response.text()


@pytest_asyncio.fixture
async def served() -> AsyncIterator[Served]:
    service = WatchService()
    runner, port = await start(make_app(service), "127.0.0.1", 0)
    try:
        yield Served(service, port, runner.cleanup, lambda: runner.server is not None)
    finally:
        await runner.cleanup()  # a no-op once stopped


@pytest_asyncio.fixture
async def http(served: Served) -> AsyncIterator[Client]:
    async with aiohttp.ClientSession() as session:
        yield Client(session, served.port)


class TestRecipe(kit.RecipeTests):
    """The checks both recipes pass (watch_kit.RecipeTests), on this one."""


@pytest.mark.asyncio
async def test_bad_input_is_one_line(served: Served, http: Client) -> None:
    await kit.check_bad_input_is_one_line(served, http)
    async with http.session.post(
        f"{http.base}/put/big", data=io.BytesIO(b"x" * (2 * 1024**2))
    ) as response:
        assert response.status == 413  # aiohttp's own limit, client_max_size


@pytest.mark.asyncio
async def test_without_handler_cancellation_a_disconnect_is_not_seen() -> None:
    """Why the recipe turns handler_cancellation on: aiohttp (3.9+) leaves it off, and
    then an aborted poll stays pending until its timeout."""
    service = WatchService()
    runner = web.AppRunner(make_app(service), access_log=None)  # the default: off
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = int(runner.addresses[0][1])
        poll = await kit.RawPoll.open(port, "/watch/a?timeout_ms=300")
        await kit.wait_until(lambda: service.purgatory.num_delayed == 1, "the poll waits")
        poll.abort()
        await kit.wait_until(lambda: service.purgatory.statistics().expired == 1, "expired")
        assert service.gone == 0 and service.purgatory.statistics().cancelled == 0
    finally:
        await runner.cleanup()


def test_the_script_shuts_down_on_sigterm() -> None:
    kit.check_the_script_shuts_down_on_sigterm("watch_aiohttp.py")
