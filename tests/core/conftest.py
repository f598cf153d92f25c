"""The core's tests run on the core's own timer (:class:`WheelTimer`), no loop: the
``timer`` and ``tiny_timer`` fixtures of :func:`~tests.timer_kit.timer_fixtures`."""

from __future__ import annotations

from purgatory.core import WheelTimer

from ..timer_kit import timer_fixtures

timer, tiny_timer = timer_fixtures(WheelTimer)
