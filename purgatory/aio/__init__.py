"""The async shell: the core driven and awaited on a running event loop.

Thin on purpose. What it adds to :mod:`purgatory.core`:

* :mod:`.backends`: one interface, an asyncio (and uvloop) and a trio
  implementation, and the one place that picks between them;
* :mod:`.reaper`: the task that sleeps until the timer's next bucket and polls it
  (Kafka's ``SystemTimerReaper``), and ``advance_clock``;
* :mod:`.clock`: the running loop's clock (the default clock);
* :mod:`.timer`, :mod:`.operation`, :mod:`.purgatory`: the public classes, each
  the core class plus its lifecycle on the loop (``async with``, ``await``).
"""

from .clock import LoopClock
from .operation import DelayedOperation
from .purgatory import DelayedOperationPurgatory
from .reaper import Reaper
from .timer import SystemTimer

__all__ = ["DelayedOperation", "DelayedOperationPurgatory", "LoopClock", "Reaper", "SystemTimer"]
