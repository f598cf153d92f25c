"""purgatory: Kafka's delayed-operation purgatory for asyncio (and trio, through anyio).

A hierarchical timing wheel (:class:`SystemTimer`) with a reaper coroutine, and
the purgatory (:class:`DelayedOperationPurgatory`) that holds delayed operations
under keys until they complete early or expire.
"""

from ._clock import Clock, LoopClock
from ._errors import OperationCancelledError, PurgatoryClosedError
from ._idle import IdleTracker
from ._keys import TopicPartition
from ._operation import DelayedOperation
from ._purgatory import DelayedOperationPurgatory, PurgatoryStatistics
from ._timer import SystemTimer
from ._timer_list import TimerTask

__all__ = [
    "Clock",
    "DelayedOperation",
    "DelayedOperationPurgatory",
    "IdleTracker",
    "LoopClock",
    "OperationCancelledError",
    "PurgatoryClosedError",
    "PurgatoryStatistics",
    "SystemTimer",
    "TimerTask",
    "TopicPartition",
]
