"""The synchronous timer: the timing wheel, the delay queue of buckets, and the due list.

:class:`WheelTimer` is Kafka's ``SystemTimer`` without its thread: everything but
waiting. It reads its clock, files tasks and runs what is due when asked
(``poll``); it never sleeps and imports no event loop. The async shell wraps it
(:class:`purgatory.SystemTimer` adds the reaper, which sleeps until the next
bucket, as Kafka's ``SystemTimerReaper`` wraps a ``Timer``). :class:`Timer` is
the interface the purgatory and the idle tracker accept (Kafka's ``Timer``).

``add(task)`` reads the clock once, sets the task's deadline ``deadline_ms =
now + delay_ms`` and hands the task to the wheel, which files it by that
deadline: O(1) for delays within the finest wheel's interval, O(levels) beyond.
An entry the wheel refuses because it is already due (and a delay of zero or
less) goes to the *due list* (a bucket of its own, so cancelling it is still
O(1)); it runs at the next ``poll``, never inside ``add``, so code that
schedules a task is never re-entered by it.

``poll()`` is the synchronous heart of the timer and needs no event loop:

1. run the tasks in the due list;
2. while the delay queue's earliest bucket has expired at the wheels' time
   (below): advance the wheel to the bucket's expiration and flush the bucket
   back through *reinsert*: each entry goes to the wheel again, landing in a
   finer bucket, or, refused as due, runs now (unless it was cancelled
   meanwhile). A bucket of the finest wheel holds only due entries, so its
   flush runs them directly.

Never early. The wheels are Kafka's, and in Kafka a bucket expires at the start
of its tick, so a task filed by its deadline would run up to a tick before it.
Here the wheels keep their own time, the clock's less a *pad* of one tick: they
start at ``now - tick_ms``, and a poll at ``now`` expires what is due at ``now -
tick_ms`` (the earliest bucket's expiration is compared with that, and
:meth:`WheelTimer.next_expiration_ms` adds the pad back). So the finest bucket
that holds a deadline ``d`` (the tick ``[k, k + tick_ms)`` containing it)
expires by the clock at ``k + tick_ms``, the end of that tick: after ``d``.
The clock reads whole milliseconds, truncated: a reading of ``now`` may be
anything in ``[now, now + 1)``, so the true deadline is below ``d + 1``, which
is at most ``k + tick_ms``, and a clock reading never runs ahead of the true
time: a task never runs before ``delay_ms`` has passed, and at most one tick
after (plus however late the poll comes). A coarser bucket flushed on the way
re-files its tasks by the same deadlines, in the same time, so they land in
those finest buckets (or run, if due). Example, tick 10: added at 10.9 (the
clock reads 10) with 25, deadline 35 (35.9 in true time), in the bucket of [30,
40) of the wheels' time, which expires when the clock reads 40. The pad costs
``add`` nothing: one subtraction a poll, and one addition where a time leaves
the wheels (``next_expiration_ms`` and the wake-ups). A delay of zero or less
is due at the next poll.

``may_expire_early=True`` keeps Kafka's filing instead, with no pad: a task is
filed in the bucket of the tick containing its deadline, which expires at that
tick's start, so it may run up to one tick (``tick_ms - 1`` ms by the clock,
nearly ``tick_ms`` in true time) before its deadline, and never later than the
poll after its tick starts. In both modes ``deadline_ms`` is ``now + delay_ms``
(the lateness the purgatory measures counts from it, and counts the expiries
before it).

The reaper (:mod:`purgatory.aio.reaper`) calls ``poll`` when the earliest bucket
with tasks expires and sleeps otherwise, woken earlier through
:meth:`WheelTimer.add_wakeup` when work appears before what it sleeps for;
``SystemTimer.advance_clock`` is Kafka's ``advanceClock(timeoutMs)`` for code that
drives the timer itself.

Buckets left empty. Most operations of a server complete before their timeout,
and cancelling their tasks leaves buckets empty that stay queued until they
expire (in Kafka too, whose reaper polls them and finds nothing).
:meth:`WheelTimer.next_expiration_ms`, what the reaper sleeps until, skips them
and drops them from the delay queue. Example: tasks added 500, 900 and 1,300 ms
from now (three buckets of the third level, 400 ms wide), all cancelled 20 ms
later while the reaper sleeps for the first. Kafka's reaper (and this one
before) woke for each of the three buckets; now it wakes for the first, finds it
empty, and sleeps with nothing to wait for. A bucket emptied while the reaper
sleeps for it still wakes it: moving that wake-up on each cancel cost more than
the wake-up in a loop that is busy anyway (BENCHMARKS.md).

The clock is any object with ``now_ms() -> int`` (:class:`~.clock.Clock`), read
once per ``add`` and once per ``poll`` through the timer's
:class:`~.clock.ClockReader`, which knows the fastest way to read it.
:meth:`WheelTimer.now_ms` is that read, public, so code living beside the timer
(the idle tracker, a user's) stamps times on the same clock at the same cost. A
shell that knows a cheaper reader of the same clock gives it to the timer with
:meth:`WheelTimer.use_reader` (the async shell does while the reaper runs: a
reader bound to the reaper's loop, which the compiled core reads in C for
asyncio's and uvloop's clocks), and puts the clock's own back with
``use_reader(None)``. ``use_reader`` notes which kind of reader it was given, so
that ``now_ms`` and ``add`` (which inlines it) read without calling the reader: a
clock in seconds is called and scaled in place, a clock's own ``now_ms`` called
directly; only the compiled core's C reads go through the reader. In the pure
core a call of the reader per ``add`` cost more than never early's deadline and
tick together (BENCHMARKS.md).

Nothing runs by itself: ``add`` only files the task. While no reaper runs (no
``async with timer``, or after it) and nobody calls ``poll``, added tasks simply
wait, however overdue; the first poll (or a reaper started later) runs every
task that is due by then, late rather than never.

Exceptions raised by tasks never unwind the timer: they go to
:meth:`WheelTimer.report_exception`, which here collects them for ``poll`` to raise
after the whole pass is done (one exception as itself, several as an
ExceptionGroup); the async shell's timer sends them to the running loop's exception
handler instead (inside a trio run: to the ``"purgatory"`` logger). That holds for
every ``BaseException`` a task raises (an asyncio ``CancelledError``, a
``trio.Cancelled``, a ``GeneratorExit``: a task raising one is a bug of that task,
since the reaper's own cancellation arrives at the reaper's await, never inside a
task), except ``KeyboardInterrupt`` and ``SystemExit``: those end the pass at once
and propagate, as Python expects, with the timer consistent. The task that raised
counts as run; the interrupted bucket (or due list) goes back to the delay queue
with the tasks it still holds, so the next poll runs them. ``poll`` refuses to run
inside a task it is running (RuntimeError), which would otherwise re-flush the very
bucket being flushed.
"""

from __future__ import annotations

import logging
import math
import operator
from collections.abc import Callable
from typing import Protocol, cast, runtime_checkable

from ._signature import InitSignature, init_doc
from .clock import Clock, ClockReader
from .delay_queue import DelayQueue
from .report import collect_exception, raise_collected
from .timer_list import TaskCounter, TaskSink, TimerTask, TimerTaskList
from .timing_wheel import TimingWheel

try:
    import cython
except ImportError:  # the pure-Python core, with Cython not installed
    from . import _cython_shim as cython


__all__ = [
    "BUILD",
    "COMPILED",
    "DEFAULT_TICK_MS",
    "DEFAULT_WHEEL_SIZE",
    "MAX_DELAY_MS",
    "MAX_WHEEL_SIZE",
    "Timer",
    "WheelTimer",
    "coerce_delay",
]

#: True when this module is the compiled core (Cython), False when it is the .py
COMPILED: bool = cython.compiled
#: which build this module is, as reprs show it
BUILD = "compiled" if COMPILED else "pure"

#: where a collected error goes when an interrupt ends the pass that collected it
logger = logging.getLogger("purgatory")

#: Kafka's defaults: 1 ms ticks, 20 buckets per wheel level.
DEFAULT_TICK_MS = 1
DEFAULT_WHEEL_SIZE = 20
#: The largest delay either way, about 34.8 years: with it (and the bounds on
#: tick_ms and wheel_size) every time and every wheel's interval stays well
#: inside a 64-bit integer, which is what the compiled core keeps them in. The
#: same limits hold in both builds.
MAX_DELAY_MS = 2**40
#: The largest wheel size; with the largest tick, the widest wheel's interval
#: stays below 2**62.
MAX_WHEEL_SIZE = 2**16
# 0 < delay <= 2**30 - 1 (12.4 days) is add's fast path: CPython compares such
# ints (one 30-bit digit) without a generic call; other delays go through
# coerce_delay
_SHORT_MS = 2**30 - 1


def coerce_delay(delay: object) -> int:
    """A task's delay as int milliseconds; finite floats round up (never early).

    Integers are ``int`` or anything with ``__index__`` (a NumPy integer, say), bool
    excepted; anything else is refused with TypeError. NaN, infinities and delays
    beyond :data:`MAX_DELAY_MS` either way are refused with ValueError. O(1).
    """
    if isinstance(delay, float):
        if not math.isfinite(delay):
            raise ValueError(f"delay_ms must be finite, not {delay!r}")
        delay = math.ceil(delay)
    elif not isinstance(delay, bool) and hasattr(type(delay), "__index__"):
        delay = operator.index(delay)  # type: ignore[arg-type]
    if type(delay) is not int:
        raise TypeError(f"delay_ms must be an integer, not {type(delay).__name__}")
    if not -MAX_DELAY_MS <= delay <= MAX_DELAY_MS:
        raise ValueError(f"delay_ms must be within +-2**40 (about 34.8 years), not {delay!r}")
    return delay


@runtime_checkable
class Timer(Protocol):
    """What the purgatory and the idle tracker need of a timer (Kafka's ``Timer``).

    :class:`WheelTimer` and :class:`purgatory.SystemTimer` are timers; a test may
    pass its own.
    """

    name: str

    @property
    def tick_ms(self) -> int: ...

    def add(self, task: TimerTask) -> None:
        """Schedule ``task`` ``task.delay_ms`` from now (a scheduled task moves)."""

    def now_ms(self) -> int:
        """The timer's clock, in integer milliseconds."""

    def poll_now_ms(self) -> int:
        """The time the running poll works to; the clock's time outside a poll."""

    def poll(self) -> int:
        """Run what is due now; return how many ran (Kafka's ``advanceClock(0)``)."""

    def __len__(self) -> int: ...


class WheelTimer(TaskSink):
    """A hierarchical timing-wheel timer, driven by ``poll``; see the module doc.

    ``add`` O(1); ``cancel`` O(1); ``len`` O(1). ``clock`` is any object with
    ``now_ms() -> int``: time as the timer sees it, monotonic, in milliseconds;
    the timer reads it through a :class:`~.clock.ClockReader` (:attr:`reader`).
    A task never runs before its delay has passed, at most a tick after;
    ``may_expire_early=True``: up to a tick before it instead, as in Kafka.
    """

    __slots__ = (
        "_clock",
        "_counter",
        "_due",
        "_errors",
        "_flushed",
        "_pad_ms",
        "_poll_now_ms",
        "_queue",
        "_ran",
        "_read_ms",
        "_read_s",
        "_reader",
        "_wakeups",
        "_wheel",
        "name",
    )

    #: the constructor's signature for ``inspect`` and ``help()`` in the compiled core too
    __signature__ = InitSignature()

    def __init__(
        self,
        name: str = "timer",
        *,
        tick_ms: int = DEFAULT_TICK_MS,
        wheel_size: int = DEFAULT_WHEEL_SIZE,
        clock: Clock,
        may_expire_early: bool = False,
    ) -> None:
        "__init__(self, name='timer', *, tick_ms=1, wheel_size=20, clock, may_expire_early=False)\n--\n\nA timer named ``name`` whose finest wheel has ``wheel_size`` buckets of ``tick_ms``."  # noqa: E501
        for setting, value, limit in (
            ("tick_ms", tick_ms, MAX_DELAY_MS),
            ("wheel_size", wheel_size, MAX_WHEEL_SIZE),
        ):
            if type(value) is not int or value <= 0:
                raise ValueError(f"{setting} must be a positive int, not {value!r}")
            if value > limit:
                raise ValueError(f"{setting} must be at most {limit}, not {value!r}")
        self.name = name
        self._clock = clock
        self.use_reader(None)
        # invariant: tick_ms (never early), or 0 with may_expire_early (Kafka's
        # filing): how far the wheels' time runs behind the clock (module doc)
        self._pad_ms = 0 if may_expire_early else tick_ms
        # invariant: value == len(self), the entries in the wheels and the due list
        self._counter = TaskCounter()
        self._queue = DelayQueue()
        self._wheel = self._new_wheel(tick_ms, wheel_size, self._queue)
        # invariant: holds only tasks due at the next poll; expiration_ms stays -1
        self._due = TimerTaskList(self._counter, finest=True)
        self._ran = 0  # tasks run by the current poll
        self._flushed = 0  # buckets flushed by the last poll
        self._poll_now_ms: int | None = None  # the time the running poll read; None outside
        # called with a time (the clock's) when work appears earlier than any before
        self._wakeups: list[Callable[[int], None]] = []
        self._errors: list[BaseException] | None = None

    def _new_wheel(self, tick_ms: int, wheel_size: int, queue: DelayQueue) -> TimingWheel:
        """A finest wheel starting at the wheels' time now (the clock's less the
        pad), its buckets queued in ``queue``. O(wheel_size)."""
        queue.on_earlier = self._notify_bucket
        start_ms = self.now_ms() - self._pad_ms
        return TimingWheel(tick_ms, wheel_size, start_ms, self._counter, queue)

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def tick_ms(self) -> int:
        return self._wheel.tick_ms

    @property
    def wheel_size(self) -> int:
        return self._wheel.wheel_size

    @property
    def may_expire_early(self) -> bool:
        """Whether a task may run up to ``tick_ms`` before its deadline, as in Kafka
        (the constructor's option); False: never before it (the default). O(1)."""
        return not self._pad_ms

    def __len__(self) -> int:
        """Tasks scheduled and not yet run or cancelled. O(1)."""
        return self._counter.value

    def now_ms(self) -> int:
        """The timer's clock, read the way ``add`` reads it: through :attr:`reader`.
        O(1); with a ``monotonic`` or ``libuv`` reader, in C (no Python call)."""
        # the reader's read, taken apart by use_reader (add inlines these lines)
        read_s = self._read_s
        if read_s is not None:
            now_s: float = read_s()
            return int(now_s * 1000)
        read_ms = self._read_ms
        if read_ms is not None:
            return read_ms()
        return self._reader.now_ms()

    @property
    def reader(self) -> ClockReader:
        """How the timer reads its clock: ``ClockReader.of(clock)``, or the reader
        :meth:`use_reader` was given. O(1)."""
        return self._reader

    def use_reader(self, reader: ClockReader | None) -> None:
        """Read the clock through ``reader`` from now on; None: through the clock's
        ``now_ms()`` again (``ClockReader.of(clock)``). O(1).

        ``reader`` must read the *same* clock, only cheaper: the async shell gives
        a timer a reader bound to its reaper's loop while the reaper runs (a read
        then skips finding the running loop, and the compiled core reads asyncio's
        and uvloop's clocks in C), and calls ``use_reader(None)`` when it stops.
        """
        if reader is None:
            reader = ClockReader.of(self._clock)
        elif not isinstance(reader, ClockReader):
            raise TypeError(f"reader must be a ClockReader or None, not {type(reader).__name__}")
        # invariant: reads self._clock (its now_ms, or a cheaper read of the same
        # clock that use_reader was given)
        self._reader = reader
        # how now_ms and add read it without a call of the reader (a Python frame
        # fewer per add in the pure core): a clock in seconds, called and scaled
        # there; else a clock's own now_ms, called; else (both None: the compiled
        # core's C reads) through reader.now_ms(); read from the reader's public
        # kind and source, what its now_ms calls for those two kinds
        kind, source = reader.kind, reader.source
        self._read_s: Callable[[], float] | None = (
            cast("Callable[[], float]", source) if kind == "seconds" else None
        )
        self._read_ms: Callable[[], int] | None = (
            cast(Clock, source).now_ms if kind == "clock" else None
        )

    def add(self, task: TimerTask) -> None:
        """Schedule ``task`` to run ``task.delay_ms`` from now; a scheduled task moves.

        The task runs no earlier than ``delay_ms`` after this call and at most one
        tick (plus the poll's delay) after that; with ``may_expire_early``, up to
        ``tick_ms`` before it instead, as in Kafka (see the module doc). Sets the
        task's ``deadline_ms``: the clock now plus ``delay_ms``. A delay of zero or
        less makes the task due at the next poll. O(1) within the finest wheel's interval,
        O(levels) beyond it.
        """
        delay = task.delay_ms
        delay_ms: int
        if type(delay) is int:
            try:
                delay_ms = delay  # the compiled core's C integer: past 64 bits, OverflowError
            except OverflowError:
                delay_ms = coerce_delay(delay)  # raises the ValueError both builds raise
            if 0 < delay_ms <= _SHORT_MS:
                # the hot path, a short positive delay: every line here costs in the
                # pure core (BENCHMARKS.md), so now_ms is inlined (a Python frame
                # fewer) and the sign test is the range test's
                read_s = self._read_s
                if read_s is not None:
                    now_s: float = read_s()
                    now_ms = int(now_s * 1000)
                else:
                    read_ms = self._read_ms
                    # not a ternary: of an object and a C int, Cython boxes the C read
                    if read_ms is not None:  # noqa: SIM108
                        now_ms = read_ms()
                    else:
                        now_ms = self._reader.now_ms()
                # filed by its deadline in the wheels' time, which runs a tick
                # behind the clock: never early at no cost here (module doc)
                deadline_ms = now_ms + delay_ms
                if not self._wheel.add(task, deadline_ms):  # may_expire_early only
                    self._add_due(task, deadline_ms)
                return
        self._add_checked(task, coerce_delay(delay))

    def _add_checked(self, task: TimerTask, delay_ms: int) -> None:
        """``add`` for any delay but a short positive int: ``delay_ms`` coerced and
        checked (zero or less: due at the next poll). O(levels)."""
        deadline_ms = self.now_ms() + delay_ms
        if delay_ms <= 0 or not self._wheel.add(task, deadline_ms):
            self._add_due(task, deadline_ms)

    def _add_due(self, task: TimerTask, deadline_ms: int) -> None:
        due = self._due
        was_empty = not due
        due.add(task, deadline_ms)
        if was_empty and self._wakeups:
            self._notify_wakeups(deadline_ms)

    def add_wakeup(self, wake: Callable[[int], None]) -> None:
        """Call ``wake(time_ms)`` whenever work appears earlier than all the work
        before it (a bucket earlier than any queued, or a due task), until
        :meth:`remove_wakeup`; ``time_ms`` is when, by the clock, the next poll
        has that work. How a sleeping reaper learns to wake sooner. O(1)."""
        self._wakeups.append(wake)

    def remove_wakeup(self, wake: Callable[[int], None]) -> None:
        """Stop calling ``wake``; ValueError if it was not added. O(wakeups)."""
        self._wakeups.remove(wake)

    def _notify_wakeups(self, time_ms: int) -> None:
        for wake in self._wakeups:
            wake(time_ms)

    def _notify_bucket(self, expiration_ms: int) -> None:
        """The delay queue's earliest bucket moved earlier: tell the wake-ups when it
        expires by the clock (the wheels' time plus the pad)."""
        time_ms = expiration_ms + self._pad_ms
        for wake in self._wakeups:  # _notify_wakeups, inlined: one call, as before the pad
            wake(time_ms)

    def _reinsert(self, task: TimerTask) -> None:
        """Put a flushed task back in the wheel, or run it if it is due."""
        if not self._wheel.add(task, task.deadline_ms):
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
        now_ms = self.now_ms()
        self._poll_now_ms = now_ms
        errors: list[BaseException] = []
        self._errors = errors
        self._ran = 0
        self._flushed = 0
        try:
            due = self._due
            if due:
                # made due meanwhile: next poll
                self._due = TimerTaskList(self._counter, finest=True)
                try:
                    due.flush(self)
                except BaseException:
                    self._keep_due(due)
                    raise
            queue = self._queue
            wheel = self._wheel
            wheels_ms = now_ms - self._pad_ms  # the wheels' time (module doc)
            bucket = queue.poll_expired(wheels_ms)
            while bucket is not None:
                self._flushed += 1
                wheel.advance_clock(bucket.expiration_ms)
                try:
                    # to _run_due from a finest bucket (all its tasks are due: reinsert
                    # would only refuse them), else to _reinsert
                    bucket.flush(self)
                except BaseException:
                    self._keep_bucket(bucket)
                    raise
                bucket = queue.poll_expired(wheels_ms)
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
        if errors:  # the message is built only then
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
            interrupted.add(task, task.deadline_ms)  # moves it, order kept

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
            self.report_exception(
                f"Exception in timer task of {self.name!r}", exc, self._errors, task=task
            )

    #: where a callback's exception goes during a pass (see :mod:`.report`)
    report_exception = collect_exception

    def poll_now_ms(self) -> int:
        """The clock time the running ``poll`` works to (tasks it runs may ask, to
        save a clock read); outside a poll, the clock's time. O(1)."""
        now_ms = self._poll_now_ms
        return self.now_ms() if now_ms is None else now_ms

    @property
    def buckets_flushed(self) -> int:
        """How many buckets the last (or running) ``poll`` flushed. O(1)."""
        return self._flushed

    def next_expiration_ms(self) -> int | None:
        """When, by the clock, the next poll has work: now if tasks are due, else
        when the earliest bucket that holds tasks expires; None when nothing is
        scheduled.

        Buckets emptied by cancels are dropped from the delay queue on the way
        (see the module doc). O(1) when the earliest bucket holds tasks; O(log
        buckets) for each one dropped.
        """
        if self._due:
            return self.now_ms()
        expiration_ms = self._queue.earliest_with_work()
        return None if expiration_ms is None else expiration_ms + self._pad_ms

    def rebase(self) -> None:
        """Restart an empty timer's wheel at the clock's current time. O(wheel_size).

        For a clock that changed its time base since the timer was made (the
        async shell's default clock follows the running library, and trio's
        clocks do not count from ``time.monotonic()``). RuntimeError if any task
        is scheduled: those depend on the old base.
        """
        if self._counter.value:
            raise RuntimeError(f"timer {self.name!r} holds tasks: it cannot be re-based")
        queue = DelayQueue()
        self._wheel = self._new_wheel(self.tick_ms, self.wheel_size, queue)
        self._queue = queue

    def _check_invariants(self) -> None:
        """Check every level, bucket and entry, and the shared counter. O(entries)."""
        queued = {id(b) for b in self._queue.buckets()}
        total = self._wheel._check_invariants(queued)
        assert all(b.finest for b in self._wheel._buckets), "a finest bucket not marked"
        total += self._due._check_invariants()
        assert self._due.expiration_ms == -1 and self._due.finest
        assert total == self._counter.value, f"counter {self._counter.value}, entries {total}"

    def __repr__(self) -> str:
        levels = len(self._wheel.levels())
        return (
            f"<{type(self).__name__} {self.name!r} size={len(self)} tick_ms={self.tick_ms} "
            f"wheel_size={self.wheel_size} levels={levels} build={BUILD}"
            f"{'' if self._pad_ms else ' may_expire_early'}>"
        )


init_doc(WheelTimer)  # the text signature is for the compiled core only
