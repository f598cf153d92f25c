"""SystemTimer: the timing wheel, the delay queue of buckets, and the due list.

``add(task)`` reads the clock once, computes ``expiration = now + delay_ms`` and
hands a new entry to the wheel: O(1) for delays within the finest wheel's
interval, O(levels) beyond. An entry the wheel refuses because it is already due
goes to the *due list* (a bucket of its own, so cancelling it is still O(1)); it
runs at the next ``poll``, never inside ``add``, so code that schedules a task
is never re-entered by it.

``poll()`` is the synchronous heart of the timer and needs no event loop:

1. run the tasks in the due list;
2. while the delay queue's earliest bucket has expired at ``now``: advance the
   wheel to the bucket's expiration and flush the bucket back through
   *reinsert*: each entry goes to the wheel again, landing in a finer bucket,
   or, refused as due, runs now (unless it was cancelled meanwhile). A bucket of
   the finest wheel holds only due entries, so its flush runs them directly.

With ``tick_ms == 1`` a task runs at the first poll at or after its expiration;
with a coarser tick it may run up to ``tick_ms - 1`` ms before it (its bucket
expires at the start of its tick), never earlier.

The reaper (:mod:`purgatory._reaper`) calls ``poll`` when the earliest bucket
expires and sleeps otherwise; :meth:`SystemTimer.advance_clock` is Kafka's
``advanceClock(timeoutMs)`` for code that drives the timer itself.

Nothing runs by itself: ``add`` only files the task. While no reaper runs (no
``async with timer``, or after it) and nobody calls ``poll``, added tasks simply
wait, however overdue; the first poll (or a reaper started later) runs every
task that is due by then, late rather than never.

Exceptions raised by tasks never unwind the timer: they go to the running loop's
exception handler (inside a trio run: to the ``"purgatory"`` logger), or, with no
loop running, are raised by ``poll`` after the whole pass is done (one exception
as itself, several as an ExceptionGroup). That holds for every ``BaseException``
a task raises (an asyncio ``CancelledError``, a ``trio.Cancelled``, a
``GeneratorExit``: a task raising one is a bug of that task, since the reaper's
own cancellation arrives at the reaper's await, never inside a task), except
``KeyboardInterrupt`` and ``SystemExit``: those end the pass at once and
propagate, as Python expects, with the timer consistent. The task that raised
counts as run; the interrupted bucket (or due list) goes back to the delay queue
with the tasks it still holds, so the next poll runs them. ``poll`` refuses to
run inside a task it is running (RuntimeError), which would otherwise re-flush
the very bucket being flushed.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING

from ._clock import Clock, LoopClock
from ._delay_queue import DelayQueue
from ._loop import logger, raise_collected, report_exception
from ._timer_list import TaskCounter, TimerTask, TimerTaskList
from ._timing_wheel import TimingWheel

if TYPE_CHECKING:
    from ._reaper import Reaper

__all__ = ["SystemTimer"]

#: Kafka's defaults: 1 ms ticks, 20 buckets per wheel level.
DEFAULT_TICK_MS = 1
DEFAULT_WHEEL_SIZE = 20


def coerce_delay(delay: object) -> int:
    """A task's delay as int milliseconds; finite floats round up (never early).

    Integers are ``int`` or anything with ``__index__`` (a NumPy integer, say), bool
    excepted; anything else is refused with TypeError, NaN and infinities with
    ValueError. O(1).
    """
    if isinstance(delay, float):
        if not math.isfinite(delay):
            raise ValueError(f"delay_ms must be finite, not {delay!r}")
        return math.ceil(delay)
    if not isinstance(delay, bool):
        try:
            return operator.index(delay)  # type: ignore[arg-type]
        except TypeError:
            pass
    raise TypeError(f"delay_ms must be an integer, not {type(delay).__name__}")


class SystemTimer:
    """A hierarchical timing-wheel timer. ``add`` O(1); ``cancel`` O(1); ``len`` O(1).

    ``clock`` is any object with ``now_ms() -> int``; by default the running event
    loop's clock (:class:`~purgatory._clock.LoopClock`).
    """

    __slots__ = (
        "__weakref__",
        "_clock",
        "_counter",
        "_due",
        "_errors",
        "_flushed",
        "_poll_now_ms",
        "_now_ms",
        "_queue",
        "_ran",
        "_reaper",
        "_sleepers",
        "_wheel",
        "name",
    )

    def __init__(
        self,
        name: str = "timer",
        *,
        tick_ms: int = DEFAULT_TICK_MS,
        wheel_size: int = DEFAULT_WHEEL_SIZE,
        clock: Clock | None = None,
    ) -> None:
        self.name = name
        self._clock: Clock = LoopClock() if clock is None else clock
        self._now_ms = self._clock.now_ms
        # invariant: value == len(self), the entries in the wheels and the due list
        self._counter = TaskCounter()
        self._queue = DelayQueue()
        self._wheel = TimingWheel(tick_ms, wheel_size, self._now_ms(), self._counter, self._queue)
        # invariant: holds only entries the wheel refused as due; expiration_ms stays -1
        self._due = TimerTaskList(self._counter)
        self._ran = 0  # tasks run by the current poll
        self._flushed = 0  # buckets flushed by the current poll
        self._poll_now_ms: int | None = None  # the time the running poll read; None outside
        # the async waiters (reaper, advance_clock) to wake when work appears earlier
        self._sleepers: list[Callable[[int], None]] = []
        self._queue.on_earlier = self._notify_sleepers
        self._errors: list[BaseException] | None = None
        self._reaper: Reaper | None = None

    # -- the synchronous core -------------------------------------------------

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def tick_ms(self) -> int:
        return self._wheel.tick_ms

    @property
    def wheel_size(self) -> int:
        return self._wheel.wheel_size

    def __len__(self) -> int:
        """Tasks scheduled and not yet run or cancelled. O(1)."""
        return self._counter.value

    def add(self, task: TimerTask) -> None:
        """Schedule ``task`` to run ``task.delay_ms`` from now; a scheduled task moves.

        A delay of zero or less makes the task due at the next poll. O(1) within
        the finest wheel's interval, O(levels) beyond it.
        """
        delay = task.delay_ms
        if delay.__class__ is not int:
            delay = coerce_delay(delay)
        expiration_ms = self._now_ms() + delay
        if not self._wheel.add(task, expiration_ms):
            self._add_due(task, expiration_ms)

    def _add_due(self, task: TimerTask, expiration_ms: int) -> None:
        due = self._due
        was_empty = not due
        due.add(task, expiration_ms)
        if was_empty and self._sleepers:
            self._notify_sleepers(expiration_ms)

    def _notify_sleepers(self, expiration_ms: int) -> None:
        for wake in self._sleepers:
            wake(expiration_ms)

    def _reinsert(self, task: TimerTask) -> None:
        """Put a flushed task back in the wheel, or run it if it is due."""
        if not self._wheel.add(task, task.expiration_ms):
            self._run_due(task)

    def poll(self) -> int:
        """Run everything due at ``clock.now_ms()``, cascading buckets; return how many ran.

        O(buckets expired * log buckets + entries flushed). Exceptions from tasks
        are reported (see the module doc) and the pass goes on, except
        ``KeyboardInterrupt`` and ``SystemExit``, which end it at once: the tasks
        it did not reach stay scheduled for the next poll. A task that calls
        ``poll`` (or ``advance_clock``) of the timer running it gets RuntimeError.
        """
        if self._poll_now_ms is not None:
            raise RuntimeError(f"poll() of timer {self.name!r} called from a task it is running")
        now_ms = self._now_ms()
        self._poll_now_ms = now_ms
        errors: list[BaseException] = []
        self._errors = errors
        self._ran = 0
        self._flushed = 0
        try:
            due = self._due
            if due:
                self._due = TimerTaskList(self._counter)  # made due meanwhile: next poll
                try:
                    due.flush(self._run_due)
                except BaseException:
                    self._keep_due(due)
                    raise
            queue = self._queue
            wheel = self._wheel
            reinsert = self._reinsert
            run_due = self._run_due
            bucket = queue.poll_expired(now_ms)
            while bucket is not None:
                self._flushed += 1
                wheel.advance_clock(bucket.expiration_ms)
                try:
                    # a finest bucket's tasks are all due: reinsert would only refuse them
                    bucket.flush(run_due if bucket.finest else reinsert)
                except BaseException:
                    self._keep_bucket(bucket)
                    raise
                bucket = queue.poll_expired(now_ms)
            ran = self._ran
        except BaseException:
            # KeyboardInterrupt or SystemExit from a task: what the pass collected
            # so far must not vanish with it
            for exc in errors:
                logger.error("%s", f"Exception in timer task of {self.name!r}", exc_info=exc)
            raise
        finally:
            self._errors = None
            self._poll_now_ms = None
        raise_collected(f"{len(errors)} timer tasks of {self.name!r} failed", errors)
        return ran

    def _keep_due(self, interrupted: TimerTaskList) -> None:
        """A pass over the due list was interrupted: its remaining tasks, then the
        ones made due meanwhile, are the due list again. O(tasks made due meanwhile)."""
        fresh = self._due
        self._due = interrupted
        while fresh:
            task = fresh._next
            assert isinstance(task, TimerTask)
            interrupted.add(task, task.expiration_ms)  # moves it, order kept

    def _keep_bucket(self, bucket: TimerTaskList) -> None:
        """A flush was interrupted: queue the bucket again with what it still holds,
        so the next poll takes it up where this one stopped. O(log buckets)."""
        if bucket:
            self._queue.offer(bucket)
        else:
            bucket.expiration_ms = -1  # what the flush would have ended with

    def _run_due(self, task: TimerTask) -> None:
        """Run a task just taken out of its bucket (flush unlinked it).

        Anything it raises is a task error, reported, except ``KeyboardInterrupt``
        and ``SystemExit``, which propagate: an asyncio ``CancelledError`` or a
        ``trio.Cancelled`` raised by a task is its own bug, never the cancellation
        of the reaper (which arrives at the reaper's own await, not in here).
        """
        self._ran += 1
        try:
            task.run()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - reported, never lost
            report_exception(
                f"Exception in timer task of {self.name!r}", exc, self._errors, task=task
            )

    def poll_now_ms(self) -> int:
        """The clock time the running ``poll`` works to (tasks it runs may ask, to
        save a clock read); outside a poll, the clock's time. O(1)."""
        now_ms = self._poll_now_ms
        return self._now_ms() if now_ms is None else now_ms

    def next_expiration_ms(self) -> int | None:
        """When the next poll has work: now-ish if tasks are due, else the earliest
        bucket's expiration; None when nothing is scheduled. O(1)."""
        if self._due:
            return self._now_ms()
        return self._queue.peek_expiration()

    def _check_invariants(self) -> None:
        """Check every level, bucket and entry, and the shared counter. O(entries)."""
        queued = {id(b) for b in self._queue.buckets()}
        total = self._wheel._check_invariants(queued)
        assert all(b.finest for b in self._wheel._buckets), "a finest bucket not marked"
        total += self._due._check_invariants()
        assert self._due.expiration_ms == -1
        assert total == self._counter.value, f"counter {self._counter.value}, entries {total}"

    def __repr__(self) -> str:
        levels = len(self._wheel.levels())
        return (
            f"<SystemTimer {self.name!r} size={len(self)} tick_ms={self.tick_ms} "
            f"wheel_size={self.wheel_size} levels={levels} "
            f"reaper={'running' if self._reaper is not None else 'stopped'}>"
        )

    # -- the async shell (see _reaper) ----------------------------------------

    async def advance_clock(self, timeout_ms: int) -> bool:
        """Wait up to ``timeout_ms`` for a bucket to expire, then process every expired
        bucket (Kafka's ``advanceClock``). True if anything was due."""
        from ._reaper import advance_clock

        return await advance_clock(self, timeout_ms)

    @property
    def reaper_wakeups(self) -> int:
        """How many times the running reaper has woken up (0 when none runs)."""
        return 0 if self._reaper is None else self._reaper.wakeups

    def _rebase(self) -> None:
        """Restart an empty timer's wheel at the clock's current time. O(wheel_size).

        The clock may have changed time base since the timer was made (the
        default clock follows the running library, and trio's clocks do not count
        from ``time.monotonic()``; see :mod:`purgatory._clock`); with no task
        scheduled, nothing depends on the old one.
        """
        assert not self._counter.value, "only an empty timer can be re-based"
        queue = DelayQueue()
        queue.on_earlier = self._notify_sleepers
        self._queue = queue
        now_ms = self._now_ms()
        self._wheel = TimingWheel(self.tick_ms, self.wheel_size, now_ms, self._counter, queue)

    async def __aenter__(self) -> SystemTimer:
        """Start the reaper on the running asyncio loop or trio run (see _reaper).

        Until the reaper stops, a :class:`~purgatory.LoopClock` is read pinned to
        that library (:meth:`~purgatory.LoopClock.pinned`), without finding the
        running loop again at every ``add``.
        """
        from ._reaper import Reaper

        if self._reaper is not None:
            raise RuntimeError(f"the reaper of {self.name!r} is already running")
        if not self._counter.value:
            self._rebase()
        reaper = Reaper(self)
        await reaper.start()
        self._reaper = reaper
        clock = self._clock
        if isinstance(clock, LoopClock):  # the reaper's library is where we live now
            self._now_ms = clock.pinned()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        """Stop the reaper; on trio, close its nursery (see _reaper). Tasks stay."""
        reaper = self._reaper
        if reaper is None:
            return False
        try:
            return await reaper.exit(exc_type, exc, tb)
        finally:
            self._reaper = None
            self._now_ms = self._clock.now_ms
