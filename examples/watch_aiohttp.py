"""A long-poll watch service on aiohttp: the recipe (Consul blocking queries, etcd watch).

Usage: python examples/watch_aiohttp.py [--host 127.0.0.1] [--port 8080]

Then ``curl 'http://127.0.0.1:8080/watch/color?after=0&timeout_ms=30000'`` waits,
and ``curl -d red http://127.0.0.1:8080/put/color`` (in another shell) answers it
(``{"key": "color", "version": 1, "value": "red"}``). The API is in
``examples/watch_service.py``: ``GET /watch/{key}``, ``GET /watch?keys=a,b``,
``POST /put/{key}``, ``GET /metrics``. Each poll is a ``WatchPoll``, a
:class:`~purgatory.DelayedOperation` watched under its keys; the handler awaits it.

The lifecycle, on aiohttp's own hooks (:func:`make_app`):

* ``app.cleanup_ctx``: ``async with service.purgatory`` around the application's
  life. Entering it at startup binds the purgatory to the loop and starts its
  timer's reaper.
* ``app.on_shutdown``: ``await service.purgatory.close()``. aiohttp runs the
  on_shutdown callbacks after it stops listening and *before* it waits for the
  running handlers (``shutdown_timeout``, 60 s by default), and the cleanup
  contexts only after that wait. So closing in on_shutdown answers every pending
  poll at once (503 ``server shutting down``), while leaving it to the
  cleanup_ctx's exit makes shutdown wait for the polls' own timeouts. Measured:
  with ``async with`` in cleanup_ctx alone, shutdown waited 7.8 s for one pending
  8 s poll; with ``close()`` in on_shutdown, 1,000 pending polls were answered
  in 0.3 s.

A client that disconnects drops its poll. aiohttp 3.9+ no longer cancels a
handler when its client goes (it only fails the next read or write) unless the
server is made with ``handler_cancellation=True`` (``web.AppRunner(app,
handler_cancellation=True)`` as :func:`serve` does, or ``web.run_app(app,
handler_cancellation=True)``). Then the handler's ``await poll`` raises
``CancelledError`` and :meth:`WatchService.watch` cancels that one poll
(``poll.cancel()``): it leaves the timer at once, ``statistics().cancelled``
counts it, and its watcher-list entries go at the next purge. Without it, an
abandoned poll would wait for its timeout and be answered to nobody.

:func:`make_app` gives the application for any runner; :func:`serve` runs it on
``host:port`` (0: any free port) until SIGINT or SIGTERM; :func:`main` runs that in
``watch_service.tuned_gc()`` (the collector's pauses, not the purgatory, are what
made timeouts late with 5,000 polls pending: see ``watch_service``).
"""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from collections.abc import AsyncIterator

from aiohttp import web
from watch_service import Reply, WatchService, command_line, error, parse_keys, tuned_gc

SERVICE = web.AppKey("service", WatchService)


def _response(reply: Reply) -> web.Response:
    return web.Response(status=reply.status, body=reply.body or None, headers=reply.headers)


async def watch_key(request: web.Request) -> web.Response:
    query = request.query
    reply = await request.app[SERVICE].watch(
        [request.match_info["key"]], query.get("after"), query.get("timeout_ms")
    )
    assert reply is not None  # the client left: aiohttp cancelled this task instead
    return _response(reply)


async def watch_keys(request: web.Request) -> web.Response:
    query = request.query
    service = request.app[SERVICE]
    try:
        keys = parse_keys(query.get("keys"))
    except ValueError as exc:
        return _response(error(400, str(exc)))
    reply = await service.watch(keys, query.get("after"), query.get("timeout_ms"))
    assert reply is not None
    return _response(reply)


async def put(request: web.Request) -> web.Response:
    body = await request.read()  # past client_max_size (1 MiB): aiohttp answers 413
    return _response(await request.app[SERVICE].put_async(request.match_info["key"], body))


async def metrics(request: web.Request) -> web.Response:
    return _response(request.app[SERVICE].metrics())


async def _purgatory_context(app: web.Application) -> AsyncIterator[None]:
    """Startup: enter the purgatory (reaper started). Cleanup: leave it (closed by then)."""
    async with app[SERVICE].purgatory:
        yield


async def _answer_pending_polls(app: web.Application) -> None:
    """Shutdown has begun (no longer listening): answer every pending poll now."""
    await app[SERVICE].purgatory.close()


def make_app(service: WatchService | None = None) -> web.Application:
    """The aiohttp application of ``service`` (a new one by default); run it with
    ``handler_cancellation=True`` so that a client's disconnect cancels its poll."""
    app = web.Application()
    app[SERVICE] = WatchService() if service is None else service
    app.cleanup_ctx.append(_purgatory_context)
    app.on_shutdown.append(_answer_pending_polls)
    app.add_routes(
        [
            web.get("/watch/{key}", watch_key),
            web.get("/watch", watch_keys),
            web.post("/put/{key}", put),
            web.get("/metrics", metrics),
        ]
    )
    return app


async def start(
    app: web.Application, host: str, port: int, sock: socket.socket | None = None
) -> tuple[web.AppRunner, int]:
    """Start ``app`` on ``host:port``, or on the bound socket ``sock`` if given (host and
    port are then ignored); the runner (``await runner.cleanup()`` stops it) and the
    port listened on."""
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
    await runner.setup()
    try:
        site: web.BaseSite
        if sock is None:
            site = web.TCPSite(runner, host, port, backlog=4096)
        else:
            site = web.SockSite(runner, sock, backlog=4096)
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner, int(runner.addresses[0][1])


async def serve(host: str, port: int) -> None:
    """Serve on ``host:port`` until SIGINT or SIGTERM, then shut down gracefully."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    runner, bound = await start(make_app(), host, port)
    try:
        print(f"listening on {host}:{bound}", flush=True)
        await stop.wait()
        print("shutting down", flush=True)
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    host, port = command_line(__doc__.splitlines()[0], 8080, argv)
    with tuned_gc():  # see watch_service: the collector's pauses make timeouts late
        asyncio.run(serve(host, port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
