"""Test helpers: a clock that moves only when told to.

With :class:`ManualClock` injected into a :class:`~purgatory.SystemTimer`, time
is whatever the test says it is, and ``timer.poll()`` runs exactly the tasks due
at that instant, with no event loop and no sleeping::

    clock = ManualClock(start_ms=0)
    timer = SystemTimer(clock=clock)
    timer.add(task)          # task.delay_ms == 10
    clock.advance(9); timer.poll()    # 0 ran
    clock.advance(1); timer.poll()    # 1 ran
"""

from __future__ import annotations

__all__ = ["ManualClock"]


class ManualClock:
    """A monotonic clock in integer milliseconds that moves only by :meth:`advance`."""

    __slots__ = ("_now_ms",)

    def __init__(self, start_ms: int = 0) -> None:
        if type(start_ms) is not int:
            raise TypeError(f"start_ms must be an int, not {type(start_ms).__name__}")
        self._now_ms = start_ms  # invariant: never decreases

    def now_ms(self) -> int:
        """The current time. O(1)."""
        return self._now_ms

    def advance(self, ms: int) -> int:
        """Move the clock forward by ``ms`` (>= 0) and return the new time. O(1)."""
        if type(ms) is not int:
            raise TypeError(f"ms must be an int, not {type(ms).__name__}")
        if ms < 0:
            raise ValueError(f"a clock never goes back: advance({ms})")
        self._now_ms += ms
        return self._now_ms

    def __repr__(self) -> str:
        return f"ManualClock(now_ms={self._now_ms})"
