"""Shared fixtures: every async test runs on asyncio and on uvloop."""

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
    return ManualClock(start_ms=0)


@pytest.fixture
def timer(clock: ManualClock) -> SystemTimer:
    """A default-sized timer on a manual clock; drive it with clock.advance + poll."""
    return SystemTimer("test", clock=clock)


@pytest.fixture
def tiny_timer(clock: ManualClock) -> SystemTimer:
    """A timer with tick 1 and wheel size 3, so overflow wheels are exercised."""
    return SystemTimer("tiny", tick_ms=1, wheel_size=3, clock=clock)
