"""examples/watch_starlette.py: the real server (uvicorn's ``Server`` as
:class:`WatchServer`, ``lifespan="on"``, 127.0.0.1, port 0, run as a task) with
httpx's real client; the checks are in watch_kit.py, shared with the aiohttp
recipe's tests."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio
import uvicorn

from . import watch_kit as kit
from .watch_kit import Served, many_fds  # noqa: F401 - a fixture

# isort: split
# the examples folder is on the path: watch_kit put it there
from watch_service import WatchService
from watch_starlette import WatchServer, make_app, server


class Client:
    """httpx's AsyncClient, as the kit's Http."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def get(self, path: str) -> tuple[int, str]:
        response = await self.client.get(path)
        return response.status_code, response.text

    async def post(self, path: str, body: bytes) -> tuple[int, str]:
        response = await self.client.post(path, content=body)
        return response.status_code, response.text


async def run(uvicorn_server: uvicorn.Server) -> tuple[asyncio.Task[None], int]:
    """Serve as a task; its port once started (the task's error if it failed first)."""
    task = asyncio.ensure_future(uvicorn_server.serve())
    async with asyncio.timeout(kit.GUARD_S):
        while not uvicorn_server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
    return task, int(uvicorn_server.servers[0].sockets[0].getsockname()[1])


async def stop(uvicorn_server: uvicorn.Server, task: asyncio.Task[None]) -> None:
    """uvicorn's graceful shutdown, as on SIGTERM."""
    uvicorn_server.should_exit = True
    await task


@pytest_asyncio.fixture
async def served() -> AsyncIterator[Served]:
    service = WatchService()
    watch_server = server(service, "127.0.0.1", 0, log_config=None)
    task, port = await run(watch_server)
    try:
        yield Served(service, port, lambda: stop(watch_server, task), lambda: not task.done())
    finally:
        await stop(watch_server, task)


@pytest_asyncio.fixture
async def http(served: Served) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{served.port}") as client:
        yield Client(client)


class TestRecipe(kit.RecipeTests):
    """The checks both recipes pass (watch_kit.RecipeTests), on this one."""


@pytest.mark.asyncio
async def test_bad_input_is_one_line(served: Served, http: Client) -> None:
    await kit.check_bad_input_is_one_line(served, http)
    status, text = await http.post("/put/big", b"x" * (1024**2 + 1))
    assert status == 413 and text == "a value may have at most 1048576 bytes, not 1048577\n"


@pytest.mark.asyncio
async def test_uvicorn_alone_waits_for_the_polls_before_the_lifespan_ends() -> None:
    """Why the recipe closes the purgatory in WatchServer.shutdown: with uvicorn's own
    Server, the lifespan's exit (which would close it) runs only after every
    connection has closed, so a pending poll is answered by its timeout, not 503."""
    service = WatchService()
    config = uvicorn.Config(
        make_app(service), host="127.0.0.1", port=0, lifespan="on", log_config=None
    )
    plain = uvicorn.Server(config)
    assert not isinstance(plain, WatchServer)
    task, port = await run(plain)
    try:
        poll = await kit.RawPoll.open(port, "/watch/a?timeout_ms=500")
        await kit.wait_until(lambda: kit.waited(service) == 1, "the poll waits")
        plain.should_exit = True
        async with asyncio.timeout(kit.GUARD_S):
            assert await poll.answer() == (304, b"")  # its timeout, not the shutdown
            await task
    finally:
        await stop(plain, task)
    assert service.purgatory.closed and service.purgatory.statistics().expired == 1


@pytest.mark.asyncio
async def test_the_signal_itself_answers_the_pending_polls() -> None:
    """WatchServer.handle_exit, as SIGTERM calls it, answers the polls on the loop at
    once: with uvicorn's flag taken back right after, uvicorn never starts its
    shutdown, and the polls are answered 503 all the same. (uvicorn raises the signals
    its handler saw again once it has served: here to a handler that ignores it.)"""
    service = WatchService()
    watch_server = server(service, "127.0.0.1", 0, log_config=None)
    before = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    task, port = await run(watch_server)
    try:
        polls = [await kit.RawPoll.open(port, f"/watch/k{i}?timeout_ms=60000") for i in range(3)]
        await kit.wait_until(lambda: service.purgatory.num_delayed == 3, "the polls wait")
        watch_server.handle_exit(signal.SIGTERM, None)
        watch_server.should_exit = False  # uvicorn's own way out: not taken
        async with asyncio.timeout(kit.GUARD_S):
            answers = [await poll.answer() for poll in polls]
        assert {status for status, _ in answers} == {503}
        assert service.purgatory.closed and not task.done()
        assert service.purgatory.statistics().cancelled == 3
    finally:
        await stop(watch_server, task)
        signal.signal(signal.SIGTERM, before)


def test_the_script_shuts_down_on_sigterm() -> None:
    # after its graceful shutdown uvicorn raises the signal it caught again, so the
    # process ends by SIGTERM, as a shell expects of a terminated program
    kit.check_the_script_shuts_down_on_sigterm("watch_starlette.py", -signal.SIGTERM)
