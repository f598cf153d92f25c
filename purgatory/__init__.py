"""purgatory: Kafka's delayed-operation purgatory for asyncio (and trio, through anyio).

A hierarchical timing wheel (:class:`SystemTimer`) with a reaper coroutine, and
the purgatory (:class:`DelayedOperationPurgatory`) that holds delayed operations
under keys until they complete early or expire.

The package is two layers: :mod:`purgatory.core`, synchronous, importing no
event loop (the timer, operations, watcher lists, the idle tracker), and
:mod:`purgatory.aio`, the async shell (the reaper, backends for asyncio and
trio, awaiting). The names below are the public API of both. ``compiled`` tells
whether the core loaded is the compiled one (Cython) or the pure-Python one.

Built on that API, in a distribution of its own (``purgatory-broker``, package
``purgatory_broker``, which this package never imports): a broker's core, its
simulation, a Kafka-wire broker and a Spark pipeline over its traces.
"""

from ._version import __version__
from .aio.clock import LoopClock
from .aio.operation import DelayedOperation
from .aio.purgatory import DelayedOperationPurgatory
from .aio.timer import SystemTimer
from .core.build import COMPILED as compiled
from .core.clock import Clock
from .core.errors import OperationCancelledError, PurgatoryClosedError
from .core.idle import IdleTracker
from .core.keys import TopicPartition
from .core.operation import Outcome
from .core.purgatory import PurgatoryStatistics
from .core.timer_list import TimerTask

__all__ = [
    "Clock",
    "DelayedOperation",
    "DelayedOperationPurgatory",
    "IdleTracker",
    "LoopClock",
    "OperationCancelledError",
    "Outcome",
    "PurgatoryClosedError",
    "PurgatoryStatistics",
    "SystemTimer",
    "TimerTask",
    "TopicPartition",
    "__version__",
    "compiled",
]
