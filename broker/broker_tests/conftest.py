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

from .install_kit import check_installed


def pytest_sessionstart(session: pytest.Session) -> None:
    """PURGATORY_EXPECT_INSTALLED=1: both packages must come from site-packages (the
    check imports them now, before a test could put a source tree on sys.path)."""
    check_installed(["purgatory", "purgatory_broker"])


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
    """A default-sized timer on the manual clock; drive it with clock.advance + poll.

    Kafka's filing (may_expire_early), as the broker's own timers: on the manual
    clock a delayed request expires exactly at its timeout."""
    return SystemTimer("test", clock=clock, may_expire_early=True)
