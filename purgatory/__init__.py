"""purgatory: Kafka's delayed-operation purgatory for asyncio.

A hierarchical timing wheel (:class:`SystemTimer`) with a reaper coroutine, and
the purgatory that holds delayed operations until they complete or expire.
"""

from ._clock import Clock, LoopClock
from ._timer import SystemTimer
from ._timer_list import TimerTask

__all__ = ["Clock", "LoopClock", "SystemTimer", "TimerTask"]
