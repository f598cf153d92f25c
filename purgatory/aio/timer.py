"""SystemTimer: the synchronous timer with a reaper on the running event loop.

:class:`SystemTimer` is a :class:`~purgatory.core.timer.WheelTimer` (every
synchronous method, unchanged) plus what needs a loop:

* ``async with timer`` starts a :class:`~.reaper.Reaper` wrapping it (Kafka's
  ``SystemTimerReaper``) and stops it on exit; tasks stay scheduled. While the
  reaper runs, the default clock (:class:`~.clock.LoopClock`) is read through a
  reader bound to the reaper's library (``use_reader``), without finding the
  running loop again at every ``add``. :meth:`SystemTimer.start_reaper` and
  :meth:`SystemTimer.stop_reaper` are the same steps for an owner that is not a
  block (the purgatory starts its timer's reaper through them).
* ``await timer.advance_clock(timeout_ms)``: Kafka's ``advanceClock``.
* Task errors go to the running library (the loop's exception handler, or the
  ``"purgatory"`` logger on trio); with none running, the core's rule (raised by
  ``poll`` after the pass).

The clock defaults to :class:`~.clock.LoopClock`, which follows the running
library; an empty timer is re-based on it when its reaper starts (trio's clocks
do not count from ``time.monotonic()``).
"""

from __future__ import annotations

from types import TracebackType

from ..core.clock import Clock
from ..core.timer import DEFAULT_TICK_MS, DEFAULT_WHEEL_SIZE, WheelTimer
from .backends import report_to_running_library
from .clock import LoopClock
from .reaper import ExcInfo, Reaper, advance_clock

__all__ = ["SystemTimer"]


class SystemTimer(WheelTimer):
    """A hierarchical timing-wheel timer with a reaper coroutine; see the module doc.

    ``add`` O(1); ``cancel`` O(1); ``len`` O(1). ``clock`` is any object with
    ``now_ms() -> int``; by default the running event loop's clock
    (:class:`~purgatory.LoopClock`). A task never runs before its delay has
    passed, at most a tick after; ``may_expire_early=True``: up to a tick before
    it instead, as in Kafka (see :mod:`purgatory.core.timer`).
    """

    __slots__ = ("_reaper",)

    def __init__(
        self,
        name: str = "timer",
        *,
        tick_ms: int = DEFAULT_TICK_MS,
        wheel_size: int = DEFAULT_WHEEL_SIZE,
        clock: Clock | None = None,
        may_expire_early: bool = False,
    ) -> None:
        super().__init__(
            name,
            tick_ms=tick_ms,
            wheel_size=wheel_size,
            clock=LoopClock() if clock is None else clock,
            may_expire_early=may_expire_early,
        )
        self._reaper: Reaper | None = None

    #: to the running library (see the module doc); with none, the core's rule
    report_exception = report_to_running_library

    @property
    def reaper(self) -> Reaper | None:
        """The running reaper, or None. O(1)."""
        return self._reaper

    @property
    def reaper_wakeups(self) -> int:
        """How many times the running reaper has woken up (0 when none runs)."""
        return 0 if self._reaper is None else self._reaper.wakeups

    async def start_reaper(self) -> Reaper:
        """Start the reaper on the running asyncio loop or trio run and return it.

        RuntimeError if one runs already, or if no library runs. An empty timer
        is re-based on its clock first; a :class:`~purgatory.LoopClock` is read
        through a reader bound to that library (:meth:`~purgatory.LoopClock.bound_reader`)
        until :meth:`stop_reaper`.
        """
        if self._reaper is not None:
            raise RuntimeError(f"the reaper of {self.name!r} is already running")
        if not len(self):
            self.rebase()
        reaper = Reaper(self)
        await reaper.start()
        self._reaper = reaper
        clock = self.clock
        if isinstance(clock, LoopClock):  # the reaper's library is where we live now
            self.use_reader(clock.bound_reader())
        return reaper

    async def stop_reaper(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        tb: TracebackType | None = None,
    ) -> bool:
        """Stop the reaper (on trio, close its nursery: call this in the block that
        started it); tasks stay. True to suppress ``exc`` (see Reaper.exit).
        Does nothing when no reaper runs."""
        reaper = self._reaper
        if reaper is None:
            return False
        try:
            return await reaper.exit(exc_type, exc, tb)
        finally:
            self._reaper = None
            self.use_reader(None)

    async def __aenter__(self) -> SystemTimer:
        """:meth:`start_reaper`."""
        await self.start_reaper()
        return self

    async def __aexit__(self, *exc_info: *ExcInfo) -> None:
        """:meth:`stop_reaper`; the block's exception goes on as itself (nothing is
        swallowed, so a type checker sees a ``return`` inside the block as final)."""
        await self.stop_reaper(*exc_info)

    async def advance_clock(self, timeout_ms: int) -> bool:
        """Wait up to ``timeout_ms`` for a bucket to expire, then process every expired
        bucket (Kafka's ``advanceClock``). True if anything was due."""
        return await advance_clock(self, timeout_ms)

    def __repr__(self) -> str:
        state = "running" if self._reaper is not None else "stopped"
        return f"{super().__repr__()[:-1]} reaper={state}>"
