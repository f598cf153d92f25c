"""Shared fixtures: every async test runs on asyncio and on uvloop, and on trio too
when it is backend-neutral.

Two plugins drive async tests, side by side:

* pytest-asyncio (strict mode) runs ``@pytest.mark.asyncio`` tests, which use
  asyncio's own API, on asyncio and uvloop (``pytest_asyncio_loop_factories``);
* anyio's plugin (it comes with anyio) runs ``@pytest.mark.anyio`` tests, written
  against anyio's API, on every backend of the ``anyio_backend`` fixture below:
  asyncio, asyncio with uvloop, and trio. Strict mode keeps pytest-asyncio off them.
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
    """PURGATORY_EXPECT_INSTALLED=1: the library must come from site-packages."""
    check_installed(["purgatory"])


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("asyncio", id="asyncio"),
        pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop"),
        pytest.param("trio", id="trio"),
    ],
)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    """The backends of ``@pytest.mark.anyio`` tests (anyio's plugin reads this)."""
    return request.param


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start_ms=0)


# The timers on a manual clock file tasks as Kafka does (may_expire_early=True): a
# manual clock's whole milliseconds are the true time, so with tick 1 a task then runs
# exactly at its deadline, the timings the tests state. The default filing, a
# millisecond later for a clock that truncates, is tested in core/test_never_early.py.


@pytest.fixture
def timer(clock: ManualClock) -> SystemTimer:
    """A default-sized timer on a manual clock; drive it with clock.advance + poll."""
    return SystemTimer("test", clock=clock, may_expire_early=True)


@pytest.fixture
def tiny_timer(clock: ManualClock) -> SystemTimer:
    """A timer with tick 1 and wheel size 3, so overflow wheels are exercised."""
    return SystemTimer("tiny", tick_ms=1, wheel_size=3, clock=clock, may_expire_early=True)
