"""The reaper: the task that drives a timer on the running event loop.

Kafka's ``SystemTimerReaper`` wraps a ``Timer`` in a thread that calls
``advanceClock(200)`` in a loop; the timer knows nothing of it. Here too: a
:class:`Reaper` wraps a synchronous :class:`~purgatory.core.timer.WheelTimer` and
runs one task per timer that loops:

1. ``timer.poll()``: run what is due, flush expired buckets through reinsert;
2. ask the timer for its next expiration (the earliest bucket that holds tasks,
   or "now" if tasks became due meanwhile, or nothing at all);
3. sleep until then with a single timed wake-up (asyncio: one ``loop.call_later``
   handle; trio: the deadline of one cancel scope), or with none at all when
   nothing is scheduled.

It never ticks: an idle timer costs no CPU, and a timer with 100k tasks far in
the future wakes once per expiring *bucket*, not per task or per millisecond.
While it sleeps, its sleeper is one of the timer's wake-ups
(``timer.add_wakeup``): when ``add`` creates a bucket earlier than the one the
reaper sleeps for (or a due task), the timer calls the sleeper's ``notify``,
which moves the wake-up earlier without waking the task. Buckets whose tasks
were all cancelled (operations completed before their timeouts) are not work:
the timer skips them, so the reaper wakes at most for the one it was already
sleeping for.

The loop is written once (:meth:`Reaper._run`); how it sleeps and how its task is
started and stopped is the backend's (:mod:`.backends`):

* **asyncio** (uvloop, anyio on asyncio): a plain task started by
  ``async with timer`` and awaited on exit. Nothing of trio or anyio is imported.
* **trio** (anyio on trio): the task runs in a nursery opened by
  ``async with timer`` and closed when the block exits: the reaper never outlives
  the block, cancelling the block cancels the reaper, and a reaper crash (a bug:
  exceptions from tasks never get that far) cancels the block and comes out of
  ``async with`` as an ExceptionGroup. An exception raised by the block itself
  comes out as itself, not wrapped in a group.

Exceptions raised by tasks are reported by the timer (to the loop's exception
handler on asyncio, the ``"purgatory"`` logger on trio) and the reaper carries
on. Its own cancellation arrives at its own await, never inside a task.
"""

from __future__ import annotations

from types import TracebackType

from ..core.timer import WheelTimer
from .backends import Backend, require_backend
from .backends.base import Sleeper, TaskHandle

__all__ = ["Reaper", "advance_clock"]

#: what ``__aexit__`` receives (``sys.exc_info()``'s triple, Nones when the block ended
#: normally): the timer's and the purgatory's exits hand it on to :meth:`Reaper.exit`
ExcInfo = tuple[type[BaseException] | None, BaseException | None, TracebackType | None]


class Reaper:
    """Drives one timer on the running asyncio loop or trio run; see the module doc."""

    __slots__ = ("_backend", "_sleeper", "_stopping", "_task", "_timer", "wakeups")

    def __init__(self, timer: WheelTimer) -> None:
        self._timer = timer
        self._backend: Backend | None = None
        self._task: TaskHandle | None = None
        self._sleeper: Sleeper | None = None
        self._stopping = False
        self.wakeups = 0  # times the task resumed from a sleep

    async def start(self) -> None:
        """Start the task on the running library; RuntimeError if none runs."""
        backend = self._backend = require_backend("a reaper")
        self._sleeper = backend.sleeper(self._timer)
        self._task = await backend.start_task(self._run, f"{self._timer.name}-reaper")

    def _is_stopping(self) -> bool:  # a call, so type checkers do not narrow it
        return self._stopping

    def request_stop(self) -> None:
        """Make the task end at its next turn; it polls no more from now on. O(1)."""
        self._stopping = True
        if self._sleeper is not None:
            self._sleeper.wake()

    @property
    def stops_fully(self) -> bool:
        """True if :meth:`stop` releases everything (asyncio); False on trio, whose
        nursery is released only by :meth:`exit` at the end of ``async with``."""
        return self._task is None or self._task.stops_fully

    async def stop(self) -> None:
        """Stop the task; tasks stay scheduled in the timer.

        asyncio: waits for the task to end. trio: the task ends at its next turn
        (it never polls again) and the nursery waits for it in :meth:`exit`.
        """
        self.request_stop()
        if self._task is not None:
            await self._task.join()

    async def exit(self, *exc_info: *ExcInfo) -> bool:
        """Stop and release the task at the end of ``async with`` (``exc_info``: the
        block's); True to suppress its exception (only trio's nursery ever does, for its
        own cancellation)."""
        self.request_stop()
        if self._task is None:
            return False
        _, exc, _ = exc_info
        return await self._task.exit(exc)

    async def _run(self) -> None:
        """The loop of the module doc; ``yield_now`` lets the library breathe."""
        timer = self._timer
        sleeper = self._sleeper
        backend = self._backend
        assert sleeper is not None and backend is not None
        while not self._is_stopping():
            try:
                timer.poll()  # task errors are reported by the timer; interrupts propagate
            except Exception as exc:  # noqa: BLE001 - a guard: a bug of the timer itself
                backend.report(f"reaper of {timer.name!r} failed to poll", exc, {})
            if self._is_stopping():  # a task may have stopped us while we polled
                break
            next_ms = timer.next_expiration_ms()
            if next_ms is not None and next_ms <= timer.now_ms():
                await backend.yield_now()  # let the loop breathe, then poll again
            else:
                await sleeper.sleep(next_ms)
            self.wakeups += 1


async def advance_clock(timer: WheelTimer, timeout_ms: int) -> bool:
    """Kafka's ``advanceClock``: wait up to ``timeout_ms`` for work, then poll.

    Returns True if any bucket expired or any due task ran.

    A loop's timer may wake the sleep a little before the time asked for, by the
    timer's clock (uvloop arms its timers from the loop time cached when the
    iteration began): the sleep is then taken again for what is left, so a
    bucket that expires within ``timeout_ms`` is always processed by this call.
    """
    if type(timeout_ms) is not int or timeout_ms < 0:
        raise ValueError(f"timeout_ms must be a non-negative int, not {timeout_ms!r}")
    now_ms = timer.now_ms()
    deadline_ms = now_ms + timeout_ms
    sleeper = None
    while now_ms < deadline_ms:
        next_ms = timer.next_expiration_ms()
        if next_ms is not None and next_ms <= timer.now_ms():  # due tasks: "now"
            break
        if sleeper is None:
            sleeper = require_backend("advance_clock").sleeper(timer)
        await sleeper.sleep(next_ms, deadline_ms)
        now_ms = timer.now_ms()
    ran = timer.poll()
    return ran > 0 or timer.buckets_flushed > 0
