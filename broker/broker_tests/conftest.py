"""The application's shared fixtures: its asyncio tests run on asyncio and on uvloop.

pytest-asyncio (strict mode) runs each ``@pytest.mark.asyncio`` test once per loop
of :func:`pytest_asyncio_loop_factories`: the broker serves on both. ``clock`` is
the library's :class:`~purgatory.testing.ManualClock`, for tests in virtual time, and
``timer`` a timer on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest
import uvloop

from purgatory import SystemTimer
from purgatory.testing import ManualClock


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


@pytest.fixture
def clock() -> ManualClock:
    """A manual clock at 0 ms: the test moves it."""
    return ManualClock(start_ms=0)


@pytest.fixture
def timer(clock: ManualClock) -> SystemTimer:
    """A default-sized timer on the manual clock; drive it with clock.advance + poll."""
    return SystemTimer("test", clock=clock)
