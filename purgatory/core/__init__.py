"""The synchronous core: timer buckets, the timing wheel, the delay queue, the timer,
operations, the purgatory's watcher lists, the idle tracker.

Nothing here imports an event loop (asyncio, trio) or anything of
:mod:`purgatory.aio`; a test checks that. The core never sleeps and never awaits:
whoever owns a timer drives it by calling ``poll`` (the async shell's reaper does
that when the next bucket expires). It is the unit a compiler takes whole: its
hot modules are compiled with Cython when the package is built, with the same
``.py`` files as the pure-Python fallback (see :mod:`.build`).

The defaults (``DEFAULT_TICK_MS``, ``DEFAULT_WHEEL_SIZE``, ``DEFAULT_PURGE_INTERVAL``)
and the one exact-quantile rule (:mod:`.quantile`) are exported for the layers
above, so they never restate them.
"""

from . import _loading  # noqa: F401 - first: PURGATORY_NO_EXTENSIONS picks the pure modules
from .build import COMPILED
from .clock import Clock, ClockReader
from .errors import OperationCancelledError, PurgatoryClosedError
from .histogram import Histogram
from .idle import IdleTracker
from .keys import TopicPartition
from .operation import Operation, Outcome, Waiter
from .purgatory import DEFAULT_PURGE_INTERVAL, Purgatory, PurgatoryStatistics
from .quantile import exact_quantile, quantile_rank
from .timer import DEFAULT_TICK_MS, DEFAULT_WHEEL_SIZE, Timer, WheelTimer
from .timer_list import TimerTask

__all__ = [
    "COMPILED",
    "DEFAULT_PURGE_INTERVAL",
    "DEFAULT_TICK_MS",
    "DEFAULT_WHEEL_SIZE",
    "Clock",
    "ClockReader",
    "Histogram",
    "IdleTracker",
    "Operation",
    "OperationCancelledError",
    "Outcome",
    "Purgatory",
    "PurgatoryClosedError",
    "PurgatoryStatistics",
    "Timer",
    "TimerTask",
    "TopicPartition",
    "Waiter",
    "WheelTimer",
    "exact_quantile",
    "quantile_rank",
]
