"""Run a :class:`~._server.KafkaWireBroker` on its own event loop in a background thread.

Synchronous clients (kafka-python, confluent-kafka) block the calling thread, so
tests and the benchmark run the broker here instead::

    with BrokerThread(WireConfig(port=0)) as bt:
        producer = KafkaProducer(bootstrap_servers=bt.bootstrap_servers, acks="all")
        ...
        bt.call(lambda wb: wb.pause_replication())

Everything that touches the broker goes through :meth:`BrokerThread.call`, which
runs a function on the broker's loop and returns its result (the broker is not
thread-safe). Leaving the ``with`` closes the broker and joins the thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import TypeVar

from purgatory_broker.broker import HighWatermarkHook

from ._config import WireConfig
from ._server import KafkaWireBroker

__all__ = ["BrokerThread"]

T = TypeVar("T")

_START_TIMEOUT_S = 10.0


class BrokerThread:
    """A wire broker in a daemon thread; see module doc."""

    def __init__(
        self,
        config: WireConfig | None = None,
        *,
        loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
        on_high_watermark: HighWatermarkHook | None = None,
    ) -> None:
        self.config = WireConfig(port=0) if config is None else config
        self._loop_factory = loop_factory
        self._on_high_watermark = on_high_watermark
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._wire: KafkaWireBroker | None = None
        self._thread = threading.Thread(target=self._run, name="kafka-wire-broker", daemon=True)

    @property
    def wire(self) -> KafkaWireBroker:
        """The broker (touch it only through :meth:`call`)."""
        if self._wire is None:
            raise RuntimeError("the broker thread is not running")
        return self._wire

    @property
    def bootstrap_servers(self) -> str:
        return self.wire.bootstrap_servers

    def _run(self) -> None:
        with asyncio.Runner(loop_factory=self._loop_factory) as runner:
            runner.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            wire = KafkaWireBroker(self.config, on_high_watermark=self._on_high_watermark)
            await wire.start()
        except BaseException as exc:  # noqa: BLE001 - handed to the starting thread
            self._error = exc
            self._ready.set()
            return
        self._wire = wire
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await wire.close()

    def call(self, fn: Callable[[KafkaWireBroker], T], timeout_s: float = 10.0) -> T:
        """Run ``fn(broker)`` on the broker's loop and return its result."""
        loop = self._loop
        if loop is None or self._wire is None:
            raise RuntimeError("the broker thread is not running")
        wire = self._wire
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(fn(wire))
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
                future.set_exception(exc)

        loop.call_soon_threadsafe(run)
        return future.result(timeout_s)

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(_START_TIMEOUT_S):
            raise TimeoutError(f"the broker did not start within {_START_TIMEOUT_S} s")
        if self._error is not None:
            self._thread.join()
            raise RuntimeError(f"the broker failed to start: {self._error!r}") from self._error

    def stop(self) -> None:
        """Close the broker and join the thread. Idempotent."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and self._thread.is_alive():
            loop.call_soon_threadsafe(stop.set)
        if self._thread.is_alive():
            self._thread.join(_START_TIMEOUT_S)

    def __enter__(self) -> BrokerThread:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
