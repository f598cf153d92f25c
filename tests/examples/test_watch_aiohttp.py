"""examples/watch_aiohttp.py: the real server (``web.AppRunner``, ``TCPSite`` on
127.0.0.1, port 0, ``handler_cancellation=True``) with aiohttp's real client; the
checks are in watch_kit.py, shared with the Starlette recipe's tests."""

from __future__ import annotations

import gc
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
from watch_service import GC_THRESHOLD0, WatchService, tuned_gc


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
        await kit.wait_until(lambda: kit.waited(service) == 1, "the poll waits")
        poll.abort()
        await kit.wait_until(lambda: service.purgatory.statistics().expired == 1, "expired")
        assert service.gone == 0 and service.purgatory.statistics().cancelled == 0
    finally:
        await runner.cleanup()


def test_the_script_shuts_down_on_sigterm() -> None:
    kit.check_the_script_shuts_down_on_sigterm("watch_aiohttp.py")


class TestTunedGc:
    """watch_service.tuned_gc, which both recipes' main() serve in (here beside the
    aiohttp recipe's tests: it belongs to neither framework)."""

    def test_sets_the_threshold_and_freezes_then_restores_both(self) -> None:
        before = gc.get_threshold()
        assert gc.get_freeze_count() == 0
        with tuned_gc(12_345):
            assert gc.get_threshold() == (12_345, *before[1:])
            assert gc.get_freeze_count() > 0  # what existed is out of the collections
        assert gc.get_threshold() == before
        assert gc.get_freeze_count() == 0

    def test_restores_on_an_exception(self) -> None:
        before = gc.get_threshold()
        with pytest.raises(RuntimeError, match="boom"), tuned_gc():
            assert gc.get_threshold()[0] == GC_THRESHOLD0
            raise RuntimeError("boom")
        assert gc.get_threshold() == before
        assert gc.get_freeze_count() == 0

    def test_leaves_a_freeze_made_before_it(self) -> None:
        gc.freeze()
        try:
            frozen = gc.get_freeze_count()
            with tuned_gc():
                pass
            assert gc.get_freeze_count() == frozen  # not its freeze: not its to undo
        finally:
            gc.unfreeze()
