"""The clock protocol: where a timer reads the time, in integer milliseconds.

A clock is any object with ``now_ms() -> int``. The timer reads it once per
``add`` and once per ``poll``, so it must be cheap, and monotonic: Kafka moved
its timer off wall-clock time after clock jumps broke it.

The core owns no clock of its own. :class:`purgatory.testing.ManualClock` moves
only when a test says so; :class:`purgatory.LoopClock` (the async shell's
default) follows the running event loop.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["Clock"]


@runtime_checkable
class Clock(Protocol):
    """Anything with ``now_ms() -> int``: monotonic, integer milliseconds."""

    def now_ms(self) -> int: ...
