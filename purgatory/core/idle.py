"""Idle tracking on the timing wheel: call ``on_idle(key)`` once a key is silent.

A server with 100,000 connections must close any connection that has sent
nothing for ``timeout_ms``. Scanning a map of last-seen times is O(N) per scan;
asyncio's idiom (cancel the connection's ``call_later`` handle and make a new one
on every packet) costs a heap push and an allocation per packet.
:class:`IdleTracker` costs one dictionary lookup and one clock read per packet,
and one timer operation per *timeout period* per key, whatever the packet rate.

The algorithm is a *lazy re-arm*. Each tracked key owns one timer task and the
time of its last touch:

* ``touch(key)`` of a new key records the time and adds the task with delay
  ``timeout_ms``; ``touch(key)`` of a tracked key only records the time: no
  timer operation at all;
* when the task runs, it compares the last touch with now. If the key has
  been silent for ``timeout_ms``, the key is forgotten and ``on_idle(key)``
  called. Otherwise the task re-adds itself for the time that remains,
  ``touched_ms + timeout_ms - now_ms`` (at least one tick, so a coarse tick
  never makes it spin);
* ``forget(key)`` cancels the task: O(1), the wheel's buckets are linked lists.

Worked example, ``timeout_ms=100``, tick 1 ms (the timer files a task one
millisecond past its deadline, so that it never runs early: see
:mod:`.timer`)::

    t=0    touch(a)   touched 0, task added, due at 101
    t=30   touch(a)   touched 30           (no timer operation)
    t=80   touch(a)   touched 80           (no timer operation)
    t=101  task runs: silent 21 < 100: re-added for 79, due at 181
    t=181  task runs: silent 101: a forgotten, on_idle(a)

The alternative, *move per touch* (re-add the task on every touch: the timer
moves it in O(1)), keeps the wheel exact but pays a clock read, an unlink, a
level walk and a bucket insert per packet. ``benchmarks/idle_bench.py`` measures
both at 100k connections: the lazy touch is about 2x cheaper than the move (and
10-16x cheaper than asyncio's cancel + ``call_later``), for 40 more bytes per
connection (the last-touch time). Its cost is mostly the clock read, which is the
timer's own public one (``timer.now_ms()``, through the timer's
:class:`~.clock.ClockReader`): under the async shell, a reader bound to the loop
while the timer's reaper runs, in C for asyncio's and uvloop's clocks in the
compiled core (see :mod:`purgatory.aio.clock`).

Guarantee: ``on_idle(key)`` runs exactly once per silence, no earlier than
``timeout_ms`` after the last touch (by the timer's clock) and, with the reaper
running, no later than ``timeout_ms + tick_ms`` after it (plus the event loop's
own latency). The key is forgotten *before* ``on_idle`` runs, so ``on_idle`` may
touch it again to start afresh. An exception raised by ``on_idle`` is reported
like any timer task's (the loop's exception handler, or re-raised by a
loop-less ``poll``) and leaves the tracker consistent.

There is no default timer: a :class:`~purgatory.SystemTimer` does nothing until
its reaper runs (``async with timer``) or someone calls ``poll``, and whoever
owns that lifecycle should own the timer. Many trackers, and the purgatory, can
share one timer and one reaper. For second-scale timeouts a coarser timer
(``tick_ms=10`` or more) wakes the reaper less often and keeps the bound above.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ._signature import InitSignature, init_doc
from .timer import Timer, WheelTimer
from .timer_list import TimerTask

__all__ = ["IdleTracker"]

K = TypeVar("K", bound=Hashable)


class _IdleTask(TimerTask):
    """The timer task of one tracked key: when it runs, the key may be idle."""

    __slots__ = ("_tracker", "key", "touched_ms")

    def __init__(self, tracker: _Tracker, key: Hashable, touched_ms: int) -> None:
        super().__init__(tracker._timeout_ms)
        self._tracker = tracker
        self.key = key
        # invariant: the time of the key's last touch; never decreases
        self.touched_ms = touched_ms

    def run(self) -> None:
        self._tracker._expire(self)

    def __repr__(self) -> str:
        return f"<_IdleTask key={self.key!r} touched_ms={self.touched_ms}>"


class _Tracker:
    """The tracker itself, on keys of any type; :class:`IdleTracker` adds the key type.

    Not generic (a compiled core makes it an extension type, whose bases cannot
    include ``typing.Generic``); see :class:`IdleTracker` for the API.
    """

    __slots__ = (
        "_now_ms",
        "_on_idle",
        "_reaped",
        "_rearmed",
        "_tasks",
        "_timeout_ms",
        "_timer",
        "_wheel_timer",
    )

    #: the constructor's signature for ``inspect`` and ``help()`` in the compiled core too
    __signature__ = InitSignature()

    def __init__(self, timeout_ms: int, on_idle: Callable[[Any], object], *, timer: Timer) -> None:
        "__init__(self, timeout_ms, on_idle, *, timer)\n--\n\nA tracker of no keys yet."
        if type(timeout_ms) is not int or timeout_ms <= 0:
            raise ValueError(f"timeout_ms must be a positive int, not {timeout_ms!r}")
        if not callable(on_idle):
            raise TypeError(f"on_idle must be callable, not {type(on_idle).__name__}")
        if not isinstance(timer, Timer):
            raise TypeError(f"timer must be a timer (add, now_ms, ...), not {type(timer).__name__}")
        self._timeout_ms = timeout_ms
        self._on_idle = on_idle
        self._timer = timer
        self._now_ms = timer.now_ms  # bound once: a touch is this call and a dict lookup
        # the same timer when it is the core's own: the compiled core reads its clock in C
        self._wheel_timer: WheelTimer | None = timer if isinstance(timer, WheelTimer) else None
        # invariant: key -> its task; every task here is scheduled in self._timer,
        # task.key == key, and its entry expires by
        # task.touched_ms + timeout_ms + tick_ms (it never sleeps past the deadline)
        self._tasks: dict[Hashable, _IdleTask] = {}
        self._reaped = 0  # on_idle calls so far
        self._rearmed = 0  # expiries that found the key touched and re-added its task

    @property
    def timeout_ms(self) -> int:
        return self._timeout_ms

    @property
    def timer(self) -> Timer:
        return self._timer

    @property
    def reaped(self) -> int:
        """How many times ``on_idle`` was called. O(1)."""
        return self._reaped

    @property
    def rearmed(self) -> int:
        """How many expiries found their key touched meanwhile and re-added the task. O(1).

        With the lazy design this grows by about one per tracked chatty key per
        ``timeout_ms``, however many packets the key gets."""
        return self._rearmed

    def touch(self, key: Hashable) -> None:
        """Record activity on ``key``, tracking it if new. O(1).

        A tracked key costs one dictionary lookup and one clock read, no timer
        operation; a new key adds one timer task (O(levels)).
        """
        try:
            task = self._tasks[key]
        except KeyError:
            self._track(key)
            return
        # the timer's own clock read (its ClockReader: bound to the loop while its
        # reaper runs, see aio.clock); a C call when the timer is the core's
        wheel = self._wheel_timer
        task.touched_ms = wheel.now_ms() if wheel is not None else self._now_ms()

    def _track(self, key: Hashable) -> None:
        task = _IdleTask(self, key, self._timer.now_ms())
        self._tasks[key] = task
        self._timer.add(task)

    def forget(self, key: Hashable) -> bool:
        """Stop tracking ``key``; True if it was tracked. O(1)."""
        task = self._tasks.pop(key, None)
        if task is None:
            return False
        task.cancel()
        return True

    def clear(self) -> None:
        """Forget every key. O(keys)."""
        tasks = self._tasks
        self._tasks = {}
        for task in tasks.values():
            task.cancel()

    def last_touch_ms(self, key: Hashable) -> int:
        """When ``key`` was last touched, by the timer's clock; KeyError if untracked. O(1)."""
        return self._tasks[key].touched_ms

    def __len__(self) -> int:
        """The number of tracked keys. O(1)."""
        return len(self._tasks)

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is tracked. O(1)."""
        return key in self._tasks

    def __iter__(self) -> Iterator[Hashable]:
        """The tracked keys, in tracking order. Do not touch new keys while iterating."""
        return iter(self._tasks)

    def _expire(self, task: _IdleTask) -> None:
        """The timer ran ``task``: re-arm it for the remaining time, or reap its key."""
        key = task.key
        if self._tasks.get(key) is not task:  # defensive: a forgotten task never runs
            return
        now_ms = self._timer.now_ms()
        remaining_ms = task.touched_ms + self._timeout_ms - now_ms
        if remaining_ms > 0:
            wheel = self._wheel_timer
            if wheel is not None and not wheel.may_expire_early:
                task.delay_ms = remaining_ms  # filed after the deadline: it cannot spin
            else:
                # a timer that may run it within the current tick: at least one
                # tick, so that a coarse tick never makes it spin
                tick_ms = self._timer.tick_ms
                task.delay_ms = remaining_ms if remaining_ms >= tick_ms else tick_ms
            self._rearmed += 1
            self._timer.add(task)
            return
        del self._tasks[key]
        self._reaped += 1
        self._on_idle(key)  # may raise: the timer reports it; our state is done

    def _check_invariants(self) -> None:
        """Check every tracked key's task against the timer. O(keys)."""
        now_ms = self._timer.now_ms()
        bound_ms = self._timeout_ms + self._timer.tick_ms
        for key, task in self._tasks.items():
            assert task.key == key, f"task of {key!r} tracks {task.key!r}"
            assert task._tracker is self, "task of another tracker"
            assert task.touched_ms <= now_ms, "touched in the future"
            assert task._list is not None, f"the task of tracked key {key!r} is in no bucket"
            assert task.deadline_ms <= task.touched_ms + bound_ms, (
                f"task of {key!r} is due at {task.deadline_ms}, after the deadline "
                f"{task.touched_ms + self._timeout_ms} plus a tick"
            )
        assert len(self._tasks) <= len(self._timer), "more keys than timer tasks"

    def __repr__(self) -> str:
        return (
            f"<IdleTracker timeout_ms={self._timeout_ms} tracked={len(self._tasks)} "
            f"reaped={self._reaped} rearmed={self._rearmed} timer={self._timer.name!r}>"
        )


init_doc(_Tracker)  # the text signature is for the compiled core only


class IdleTracker(_Tracker, Generic[K]):
    """Calls ``on_idle(key)`` once a key has not been touched for ``timeout_ms``.

    ``timer`` is a :class:`~.timer.Timer` the caller drives (a
    :class:`~purgatory.SystemTimer` with its reaper running, or one whose ``poll``
    is called); its clock is the tracker's clock. Keys are any
    hashable objects (a connection, a transport, a session id). See the module
    doc for the algorithm and the timing guarantee.

    ``touch``, ``forget``, ``len`` and ``in`` are O(1); the expiry of a key is
    O(1) plus one timer ``add`` (O(levels)) if it was touched meanwhile.
    """

    __slots__ = ()

    if TYPE_CHECKING:  # the tracker's methods, typed with the key type

        def __init__(
            self, timeout_ms: int, on_idle: Callable[[K], object], *, timer: Timer
        ) -> None: ...

        def touch(self, key: K) -> None:  # type: ignore[override]
            """Record activity on ``key`` (see _Tracker.touch)."""

        def forget(self, key: K) -> bool:  # type: ignore[override]
            """Stop tracking ``key`` (see _Tracker.forget)."""

        def last_touch_ms(self, key: K) -> int:  # type: ignore[override]
            """When ``key`` was last touched (see _Tracker.last_touch_ms)."""

        def __iter__(self) -> Iterator[K]: ...
