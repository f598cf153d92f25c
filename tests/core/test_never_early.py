"""Never early: a task's delay is a lower bound on its wait, at most a tick more.

The clock a timer reads is integer milliseconds, truncated, while true time runs
between readings. These tests keep the true time in microseconds on a
:class:`SubMsClock`, so a task can be added at 10.9 ms (the clock reads 10), and
check against the simple model: a task runs at a poll at or after its true
deadline (the true time of ``add`` plus its delay), and no later than the first
poll at or after that deadline plus one tick. Ticks 1, 7 and 10, on wheels of
size 3 so that long delays cascade down overflow wheels. ``may_expire_early=True``
keeps Kafka's filing, which these tests show running early, and the purgatory
counting it.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from purgatory import DelayedOperationPurgatory, SystemTimer, TimerTask
from purgatory.core import Purgatory, WheelTimer
from purgatory.testing import ManualClock

from ..purgatory_kit import MockOp
from ..timer_kit import Recorder

TICKS = [1, 7, 10]


class SubMsClock:
    """True time in integer microseconds; ``now_ms`` reads it truncated, as a loop's
    clock in seconds is read by the timer."""

    __slots__ = ("now_us",)

    def __init__(self, start_us: int) -> None:
        self.now_us = start_us

    def now_ms(self) -> int:
        return self.now_us // 1000

    def advance_us(self, us: int) -> None:
        self.now_us += us


class Stamp(TimerTask):
    """Records the true time (microseconds) at which it ran."""

    __slots__ = ("added_us", "clock", "ran_us")

    def __init__(self, delay_ms: int, clock: SubMsClock) -> None:
        super().__init__(delay_ms)
        self.clock = clock
        self.added_us = -1
        self.ran_us: int | None = None

    def run(self) -> None:
        assert self.ran_us is None, "ran twice"
        self.ran_us = self.clock.now_us


def run_all(timer: WheelTimer, clock: SubMsClock, step_us: int, until_us: int) -> None:
    """Poll every ``step_us`` of true time until nothing is left (or ``until_us``)."""
    while len(timer) and clock.now_us < until_us:
        timer.poll()
        timer._check_invariants()
        clock.advance_us(step_us)
    timer.poll()


@pytest.mark.parametrize("tick_ms", TICKS)
@pytest.mark.parametrize("phase_us", [0, 1, 400, 999, 6_999, 9_500])
def test_never_early_at_most_a_tick_late(tick_ms: int, phase_us: int) -> None:
    """Every delay from 0 past two overflow levels, added at a fractional start."""
    wheel_size = 3
    clock = SubMsClock(1_000_000 + phase_us)
    timer = WheelTimer("t", tick_ms=tick_ms, wheel_size=wheel_size, clock=clock)
    horizon_ms = 2 * tick_ms * wheel_size**3
    tasks = []
    for delay_ms in range(horizon_ms):
        task = Stamp(delay_ms, clock)
        task.added_us = clock.now_us
        timer.add(task)
        tasks.append(task)
    step_us = 100  # the poll granularity
    run_all(timer, clock, step_us, clock.now_us + 3 * horizon_ms * 1000)
    for task in tasks:
        assert task.ran_us is not None, f"delay {task.delay_ms} never ran"
        deadline_us = task.added_us + task.delay_ms * 1000
        assert task.ran_us >= deadline_us, f"delay {task.delay_ms} ran early"
        assert task.ran_us < deadline_us + tick_ms * 1000 + step_us, (
            f"delay {task.delay_ms} ran {task.ran_us - deadline_us} us late"
        )


@pytest.mark.parametrize("tick_ms", TICKS)
def test_on_a_whole_ms_clock_a_task_runs_at_its_first_tick_after_the_deadline(
    tick_ms: int,
) -> None:
    """On a manual clock (whole ms): exactly ``ceil((now + delay + 1) / tick) * tick``,
    a delay of zero or less at the next poll; added from every phase of a tick."""
    for start_ms in range(1000, 1000 + tick_ms):
        clock = ManualClock(start_ms)
        timer = WheelTimer("t", tick_ms=tick_ms, wheel_size=3, clock=clock)
        log: list[tuple[object, int]] = []
        delays = range(-2, 2 * tick_ms * 27)
        for delay_ms in delays:
            timer.add(Recorder(delay_ms, delay_ms, clock, log))
        while len(timer):
            timer.poll()
            clock.advance(1)
        assert len(log) == len(delays)
        for label, at_ms in log:
            delay_ms = int(str(label))
            if delay_ms <= 0:
                assert at_ms == start_ms
            else:
                expected = -(-(start_ms + delay_ms + 1) // tick_ms) * tick_ms
                assert at_ms == expected, (delay_ms, at_ms)
                assert start_ms + delay_ms < at_ms <= start_ms + delay_ms + tick_ms


@pytest.mark.parametrize("tick_ms", [1, 10])
def test_may_expire_early_runs_up_to_a_tick_before_the_deadline(tick_ms: int) -> None:
    """Kafka's filing, kept behind the option: early, by less than a tick."""
    clock = SubMsClock(10_900)  # the clock reads 10
    timer = WheelTimer("t", tick_ms=tick_ms, wheel_size=3, clock=clock, may_expire_early=True)
    assert timer.may_expire_early and "may_expire_early" in repr(timer)
    tasks = [Stamp(delay_ms, clock) for delay_ms in range(1, 200)]
    for task in tasks:
        task.added_us = clock.now_us
        timer.add(task)
    run_all(timer, clock, 100, 10**7)
    lateness_us = [t.ran_us - t.added_us - t.delay_ms * 1000 for t in tasks if t.ran_us]
    assert len(lateness_us) == len(tasks)
    assert min(lateness_us) < 0, "Kafka's filing runs some tasks early"
    assert min(lateness_us) > -tick_ms * 1000


def test_the_default_timers_never_expire_early() -> None:
    clock = ManualClock()
    assert not WheelTimer("t", clock=clock).may_expire_early
    assert not SystemTimer("t", clock=clock).may_expire_early
    assert SystemTimer("t", clock=clock, may_expire_early=True).may_expire_early


def test_a_task_notes_its_deadline_and_expires_at_the_end_of_its_tick() -> None:
    clock = ManualClock(1003)
    timer = WheelTimer("t", tick_ms=10, clock=clock)
    task = Stamp(25, SubMsClock(0))
    timer.add(task)
    # the tick [1020, 1030) holds the deadline: its bucket expires at its end
    assert (task.deadline_ms, timer.next_expiration_ms()) == (1028, 1030)
    early = WheelTimer("e", tick_ms=10, clock=clock, may_expire_early=True)
    early.add(task)  # moves it: Kafka's filing, the bucket expires at the tick's start
    assert (task.deadline_ms, early.next_expiration_ms()) == (1028, 1020)
    assert timer.next_expiration_ms() is None


# -- a property test against the model ----------------------------------------

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.one_of(st.integers(-3, 30), st.integers(0, 600))),
        st.tuples(st.just("cancel"), st.integers(0, 1000)),
        st.tuples(st.just("advance_us"), st.one_of(st.integers(0, 1500), st.integers(0, 90_000))),
        st.tuples(st.just("poll")),
    ),
    max_size=80,
)


@settings(max_examples=300, derandomize=True, deadline=None)
@example(ops=[("advance_us", 900), ("add", 1), ("advance_us", 1000), ("poll",)], tick_ms=1)
@example(ops=[("advance_us", 900), ("add", 25), ("advance_us", 25_000), ("poll",)], tick_ms=10)
@given(ops=OPS, tick_ms=st.sampled_from(TICKS))
def test_timer_matches_the_never_early_model(ops: list[tuple[object, ...]], tick_ms: int) -> None:
    """A task runs at a poll at or after its true deadline, and by the first poll at
    or after the deadline plus a tick (delays of zero or less: at the next poll)."""
    clock = SubMsClock(5_000_123)
    timer = WheelTimer("t", tick_ms=tick_ms, wheel_size=3, clock=clock)
    tasks: list[Stamp] = []
    live: dict[int, int] = {}  # task index -> latest true time it may run at

    def poll() -> None:
        timer.poll()
        timer._check_invariants()
        now_us = clock.now_us
        for index in list(live):
            task = tasks[index]
            deadline_us = task.added_us + task.delay_ms * 1000
            if task.ran_us is not None:
                del live[index]
                assert task.ran_us == now_us and now_us >= deadline_us, "early"
            else:
                assert now_us < live[index], f"task {index} not run at {now_us}"

    for op in ops:
        if op[0] == "add":
            delay_ms = op[1]
            assert isinstance(delay_ms, int)
            task = Stamp(delay_ms, clock)
            task.added_us = clock.now_us
            timer.add(task)
            tasks.append(task)
            deadline_us = task.added_us + max(delay_ms, 0) * 1000
            # due tasks: by the next poll; others: by deadline + tick
            live[len(tasks) - 1] = deadline_us + (tick_ms * 1000 if delay_ms > 0 else 1)
        elif op[0] == "cancel" and tasks:
            index = int(str(op[1])) % len(tasks)
            tasks[index].cancel()
            live.pop(index, None)
        elif op[0] == "advance_us":
            clock.advance_us(int(str(op[1])))
        elif op[0] == "poll":
            poll()
        assert len(timer) == len(live)
    clock.advance_us(10**7)
    poll()
    assert not live and not len(timer)


# -- the purgatory's lateness, from the deadline --------------------------------


def test_lateness_counts_from_the_deadline_and_shows_no_early_expiry() -> None:
    clock = ManualClock(1003)
    purgatory = Purgatory("p", timer=WheelTimer("t", tick_ms=10, clock=clock))
    op = MockOp(25)  # deadline 1028, filed at 1030
    assert not purgatory.try_complete_else_watch(op, ["k"])
    clock.advance(26)  # 1029: not yet
    purgatory.timer.poll()
    assert not op.is_done
    clock.advance(1)
    purgatory.timer.poll()
    assert op.expired
    stats = purgatory.statistics()
    assert (stats.expired, stats.expired_early, stats.lateness_max_ms) == (1, 0, 2)


def test_an_early_expiry_is_counted() -> None:
    """With Kafka's filing, an operation of 25 ms added at 1003 (tick 10) expires at
    1020: 8 ms before its deadline, counted as early (and as lateness 0)."""
    clock = ManualClock(1003)
    timer = SystemTimer("t", tick_ms=10, clock=clock, may_expire_early=True)
    purgatory: DelayedOperationPurgatory[MockOp] = DelayedOperationPurgatory(
        "p", timer=timer, reaper_enabled=False
    )
    assert not purgatory.try_complete_else_watch(MockOp(25), ["k"])
    second = MockOp(20)  # deadline 1023: in the bucket of [1020, 1030) too
    assert not purgatory.try_complete_else_watch(second, ["k"])
    clock.advance(17)
    timer.poll()
    stats = purgatory.statistics()
    assert (stats.expired, stats.expired_early) == (2, 2)
    assert (stats.lateness_count, stats.lateness_max_ms) == (2, 0)
