"""Fixtures for the wire broker's tests.

The wire broker is :mod:`purgatory_broker.wire`. It is
imported here, before any test module, on purpose: it imports kafka-python with
its schema loader's DeprecationWarning silenced, so the test modules' later
``import kafka`` does not trip ``filterwarnings = error``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from purgatory_broker.wire import BrokerThread, KafkaWireBroker, WireConfig


def fast_config(**changes: object) -> WireConfig:
    """Port 0, 3 partitions, 2 followers lagging 10 ms."""
    base: dict[str, object] = {"port": 0, "partitions": 3, "followers": 2, "follower_lag_ms": 10}
    base.update(changes)
    return WireConfig(**base)  # type: ignore[arg-type]


@pytest_asyncio.fixture
async def wire() -> AsyncIterator[KafkaWireBroker]:
    """A wire broker on the test's loop; checks it never hit an internal error."""
    async with KafkaWireBroker(fast_config()) as wb:
        yield wb
        assert wb.stats.internal_errors == 0
        wb.broker._check_invariants()


@pytest.fixture
def broker_thread() -> Iterator[BrokerThread]:
    """A wire broker on its own loop in a thread, for the blocking clients."""
    with BrokerThread(fast_config()) as bt:
        yield bt
        assert bt.call(lambda wb: wb.stats.internal_errors) == 0
