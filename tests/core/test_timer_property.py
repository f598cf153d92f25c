"""Random add / cancel / re-add / advance / poll sequences against a plain heap model.

The model keeps, per task, its expiration and whether it is live. Properties:
every task runs exactly once unless cancelled (or moved: only its last
scheduling counts); never before the start of its expiration's tick; and with
tick 1, at the first poll at or after its expiration. ``next_expiration_ms``
(what a reaper sleeps until) is None exactly when no task is scheduled, and never
later than the earliest task's expiration (or now, for a task already due):
buckets emptied by cancels are not work, and dropping them loses no task.

The timer files tasks as Kafka does (``may_expire_early=True``), the model's
expirations; the default filing has its own model in test_never_early.py.
"""

from __future__ import annotations

import heapq

from hypothesis import example, given, settings
from hypothesis import strategies as st

from purgatory import SystemTimer
from purgatory.testing import ManualClock

from ..timer_kit import Recorder

# small values hit tick and bucket boundaries; large ones reach the overflow wheels
DELAYS = st.one_of(st.integers(-5, 25), st.integers(-5, 2000))
STEPS = st.one_of(st.integers(0, 3), st.integers(0, 400))
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), DELAYS),
        st.tuples(st.just("cancel"), st.integers(0, 10_000)),
        st.tuples(st.just("readd"), st.integers(0, 10_000), DELAYS),
        st.tuples(st.just("advance"), STEPS),
        st.tuples(st.just("poll")),
        st.tuples(st.just("next")),
    ),
    max_size=120,
)


@settings(max_examples=500, derandomize=True, deadline=None)
@example(ops=[("add", 1), ("poll",)], shape=(1, 3))  # wheel time == now: due next tick
@example(ops=[("add", 3), ("advance", 3), ("poll",), ("add", 1), ("poll",)], shape=(1, 3))
@given(ops=OPS, shape=st.sampled_from([(1, 3), (1, 20), (2, 3), (5, 4), (10, 20)]))
def test_timer_matches_a_heap_model(ops: list[tuple[object, ...]], shape: tuple[int, int]) -> None:
    tick_ms, wheel_size = shape
    clock = ManualClock(start_ms=1000)
    timer = SystemTimer(tick_ms=tick_ms, wheel_size=wheel_size, clock=clock, may_expire_early=True)
    log: list[tuple[object, int]] = []
    tasks: list[Recorder] = []
    # model: task id -> expiration of its live scheduling; a heap for due order
    live: dict[int, int] = {}
    heap: list[tuple[int, int]] = []
    polled_at: list[int] = []  # times of every poll

    def check_poll() -> None:
        now = clock.now_ms()
        start = len(log)
        timer.poll()
        polled_at.append(now)
        ran = {int(str(label)) for label, _ in log[start:]}
        # what the model says must have run by now: with tick 1 exactly those
        # expired; with a coarser tick, also possibly those within the tick
        must: set[int] = set()
        while heap and heap[0][0] <= now:
            exp, tid = heapq.heappop(heap)
            if live.get(tid) == exp:
                must.add(tid)
                del live[tid]
        assert must <= ran, f"tasks {must - ran} did not run at {now}"
        for early in ran - must:  # ran early: only allowed with a coarse tick
            expiration = live.pop(early)
            assert tick_ms > 1 and expiration - expiration % tick_ms <= now, (
                f"{early} early at {now}"
            )
        timer._check_invariants()

    for op in ops:
        kind = op[0]
        if kind == "add":
            delay = op[1]
            assert isinstance(delay, int)
            tid = len(tasks)
            task = Recorder(delay, tid, clock, log)
            tasks.append(task)
            timer.add(task)
            live[tid] = clock.now_ms() + delay
            heapq.heappush(heap, (live[tid], tid))
        elif kind == "cancel" and tasks:
            index = op[1]
            assert isinstance(index, int)
            tid = index % len(tasks)
            tasks[tid].cancel()
            live.pop(tid, None)
        elif kind == "readd" and tasks:
            index, delay = op[1], op[2]
            assert isinstance(index, int) and isinstance(delay, int)
            tid = index % len(tasks)
            tasks[tid].delay_ms = delay
            timer.add(tasks[tid])
            live[tid] = clock.now_ms() + delay
            heapq.heappush(heap, (live[tid], tid))
        elif kind == "advance":
            step = op[1]
            assert isinstance(step, int)
            clock.advance(step)
        elif kind == "poll":
            check_poll()
        elif kind == "next":
            next_ms = timer.next_expiration_ms()
            if not live:
                assert next_ms is None, f"no task, yet next work at {next_ms}"
            else:
                # due tasks make it now, which may be past their expirations
                assert next_ms is not None
                assert next_ms <= max(clock.now_ms(), min(live.values()))
        timer._check_invariants()
        assert len(timer) == len(live)

    # drain: everything live runs exactly once, nothing else does
    clock.advance(5000)
    check_poll()
    assert not live and len(timer) == 0
