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
from .timer_kit import timer_fixtures


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


#: the shell's timers (the core's tests have WheelTimers: core/conftest.py), on ``clock``
timer, tiny_timer = timer_fixtures(SystemTimer)
