"""The hierarchical timing wheel: O(1) insertion of a task by its expiration.

A wheel has ``wheel_size`` buckets, each covering one tick of ``tick_ms``; the whole
wheel spans ``interval_ms = tick_ms * wheel_size``. Its ``current_ms`` is the start
of the current tick (always a multiple of ``tick_ms``). The timer files a task by
its ``deadline_ms``, in the wheels' own time (the clock's less a tick, unless it
may expire early: :mod:`.timer`); an entry due at ``e``:

* ``e < current_ms + tick_ms``: already due; refused (the timer runs it);
* ``e < current_ms + interval_ms``: goes into bucket ``(e // tick_ms) % wheel_size``,
  whose expiration becomes ``(e // tick_ms) * tick_ms``;
* otherwise: handed to the *overflow wheel*, created on first need with
  ``tick_ms`` equal to this wheel's interval, the same size, and this wheel's
  current time as its start. Overflow wheels chain, so any delay fits with
  O(log delay) levels, each created once.

``advance_clock(t)`` moves ``current_ms`` only when ``t`` reaches the next tick, to
``t - t % tick_ms``, and moves the overflow wheel with it. When an overflow bucket
expires, the timer flushes it back through ``add``: its entries now fall into a
finer wheel (they *cascade down*) until they are due.

Worked example, ``tick_ms=1, wheel_size=3`` (interval 3), start 0; the
overflow wheel has tick 3, interval 9; its overflow tick 9, interval 27::

    add e=2   -> level 0, bucket 2 % 3 = 2, bucket expiration 2
    add e=5   -> 5 >= 0+3: level 1: bucket (5//3) % 3 = 1, expiration 3
    add e=20  -> 20 >= 0+9: level 2: bucket (20//9) % 3 = 2, expiration 18

    time  bucket expires  advance_clock   flush reinserts
      2   L0 expiration 2  L0 current 2   e=2 refused: due, runs
      3   L1 expiration 3  L0 3, L1 3     e=5 -> L0 bucket 2, expiration 5
      5   L0 expiration 5  L0 5           e=5 refused: due, runs
     18   L2 expiration 18 L0 18, L1 18, L2 18
                                          e=20 -> L0 bucket 2, expiration 20
     20   L0 expiration 20 L0 20          e=20 refused: due, runs

A bucket is offered to the delay queue only when its expiration changes, which
happens once per rotation of its wheel, so the queue holds buckets, not tasks.

The buckets of the finest wheel (level 0, the one the timer makes) are marked
``finest``: every task in one expires within its tick, so by the time the bucket
expires all of them are due, and the timer runs them straight from the flush
instead of offering each to ``add`` only to have it refused (one call fewer per
expiring task; in the example above, the runs at 2, 5 and 20).
"""

from __future__ import annotations

from .delay_queue import DelayQueue
from .timer_list import TaskCounter, TimerTask, TimerTaskList

__all__ = ["TimingWheel"]


class TimingWheel:
    """One level of the hierarchical wheel; ``overflow`` is the next, coarser one."""

    __slots__ = (
        "_buckets",
        "_counter",
        "_queue",
        "current_ms",
        "interval_ms",
        "overflow",
        "tick_ms",
        "wheel_size",
    )

    def __init__(
        self,
        tick_ms: int,
        wheel_size: int,
        start_ms: int,
        counter: TaskCounter,
        queue: DelayQueue,
        *,
        finest: bool = True,
    ) -> None:
        for name, value in (("tick_ms", tick_ms), ("wheel_size", wheel_size)):
            if type(value) is not int or value <= 0:
                raise ValueError(f"{name} must be a positive int, not {value!r}")
        if type(start_ms) is not int:
            raise TypeError(f"start_ms must be an int, not {start_ms!r}")
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.interval_ms = tick_ms * wheel_size
        # invariant: a multiple of tick_ms; never decreases
        self.current_ms = start_ms - start_ms % tick_ms
        self._counter = counter
        self._queue = queue
        self._buckets = [TimerTaskList(counter, finest=finest) for _ in range(wheel_size)]
        # invariant: None, or a wheel with tick_ms == self.interval_ms and
        # current_ms == self.current_ms rounded down to its tick
        self.overflow: TimingWheel | None = None

    def _add_overflow_wheel(self) -> TimingWheel:
        if self.overflow is None:
            self.overflow = TimingWheel(
                self.interval_ms,
                self.wheel_size,
                self.current_ms,
                self._counter,
                self._queue,
                finest=False,
            )
        return self.overflow

    def add(self, task: TimerTask, deadline_ms: int) -> bool:
        """Put ``task`` into the bucket of ``deadline_ms`` (its expiration ``e`` in the
        module doc) on this or a coarser wheel, moving it there; sets its
        ``deadline_ms``.

        Returns False, and stores nothing, if the task expires before
        ``current_ms + tick_ms`` (already due). O(1) for delays within this
        wheel's interval, O(levels) beyond. The walk up the levels is a loop and
        the bucket insert is inlined: this is the timer's hot path (measured in
        benchmarks/timer_bench.py).
        """
        wheel = self
        while True:
            current_ms = wheel.current_ms
            tick_ms = wheel.tick_ms
            if deadline_ms < current_ms + tick_ms:
                return False
            if deadline_ms < current_ms + wheel.interval_ms:
                virtual_id = deadline_ms // tick_ms
                bucket = wheel._buckets[virtual_id % wheel.wheel_size]
                if task._list is not None:
                    task._unlink()
                task.deadline_ms = deadline_ms
                tail = bucket._prev
                task._next = bucket
                task._prev = tail
                task._list = bucket
                tail._next = task
                bucket._prev = task
                self._counter.value += 1
                bucket_ms = virtual_id * tick_ms
                if bucket.expiration_ms != bucket_ms:  # a new rotation of this bucket
                    bucket.expiration_ms = bucket_ms
                    self._queue.offer(bucket)
                return True
            overflow = wheel.overflow
            wheel = wheel._add_overflow_wheel() if overflow is None else overflow

    def advance_clock(self, time_ms: int) -> None:
        """Move to the tick containing ``time_ms`` if that is a later tick. O(levels)."""
        if time_ms >= self.current_ms + self.tick_ms:
            self.current_ms = time_ms - time_ms % self.tick_ms
            if self.overflow is not None:
                self.overflow.advance_clock(self.current_ms)

    def levels(self) -> list[TimingWheel]:
        """This wheel and its overflow wheels, finest first. O(levels)."""
        out: list[TimingWheel] = []
        wheel: TimingWheel | None = self
        while wheel is not None:
            out.append(wheel)
            wheel = wheel.overflow
        return out

    def _check_invariants(self, queued: set[int]) -> int:
        """Check this level and the coarser ones; return how many entries they hold.

        ``queued`` holds the ids of the buckets live in the delay queue. O(entries).
        """
        assert self.current_ms % self.tick_ms == 0, "current time not on a tick"
        total = 0
        for index, bucket in enumerate(self._buckets):
            size = bucket._check_invariants()
            total += size
            if size == 0:
                continue
            expiration_ms = bucket.expiration_ms
            assert expiration_ms != -1, "bucket with entries but no expiration"
            assert id(bucket) in queued, "bucket with entries is not in the delay queue"
            assert expiration_ms % self.tick_ms == 0
            assert (expiration_ms // self.tick_ms) % self.wheel_size == index, "wrong slot"
            for task in bucket:
                assert expiration_ms <= task.deadline_ms < expiration_ms + self.tick_ms, (
                    f"task at {task.deadline_ms} outside its bucket's tick {expiration_ms}"
                )
        overflow = self.overflow
        if overflow is not None:
            assert overflow.tick_ms == self.interval_ms
            assert overflow.wheel_size == self.wheel_size
            assert not any(b.finest for b in overflow._buckets), "a coarse bucket marked finest"
            assert overflow.current_ms == self.current_ms - self.current_ms % overflow.tick_ms, (
                "overflow wheel's time is not this wheel's, rounded"
            )
            total += overflow._check_invariants(queued)
        return total

    def __repr__(self) -> str:
        return (
            f"<TimingWheel tick_ms={self.tick_ms} wheel_size={self.wheel_size} "
            f"current_ms={self.current_ms} overflow={self.overflow is not None}>"
        )
