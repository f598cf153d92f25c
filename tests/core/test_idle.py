"""IdleTracker on a ManualClock: deterministic, no event loop unless a test needs one."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from purgatory import IdleTracker, SystemTimer, TimerTask
from purgatory.core import WheelTimer
from purgatory.testing import ManualClock

T = 100  # the timeout of most tests, in ms


class Recorder:
    """An on_idle that records (time, key) and can be told to raise for some keys."""

    def __init__(self, clock: ManualClock, raise_for: frozenset[object] = frozenset()) -> None:
        self.clock = clock
        self.calls: list[tuple[int, object]] = []
        self.raise_for = raise_for

    def __call__(self, key: object) -> None:
        self.calls.append((self.clock.now_ms(), key))
        if key in self.raise_for:
            raise RuntimeError(f"on_idle failed for {key!r}")

    @property
    def keys(self) -> list[object]:
        return [k for _, k in self.calls]


def make(
    clock: ManualClock, timer: WheelTimer, timeout_ms: int = T
) -> tuple[IdleTracker[object], Recorder]:
    rec = Recorder(clock)
    return IdleTracker(timeout_ms, rec, timer=timer), rec


def step(clock: ManualClock, timer: WheelTimer, tracker: IdleTracker[Any], ms: int) -> None:
    """Advance one millisecond at a time, polling and checking invariants after each."""
    for _ in range(ms):
        clock.advance(1)
        timer.poll()
        tracker._check_invariants()
        timer._check_invariants()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10", None])
def test_rejects_a_timeout_that_is_not_a_positive_int(timer: WheelTimer, bad: object) -> None:
    with pytest.raises(ValueError, match="timeout_ms must be a positive int"):
        IdleTracker(bad, print, timer=timer)  # type: ignore[arg-type]


def test_rejects_a_bad_callback_or_timer(timer: WheelTimer) -> None:
    with pytest.raises(TypeError, match="on_idle must be callable"):
        IdleTracker(T, "print", timer=timer)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="timer must be a timer"):
        IdleTracker(T, print, timer=object())  # type: ignore[arg-type]


def test_idle_after_exactly_the_timeout(clock: ManualClock, timer: WheelTimer) -> None:
    tracker, rec = make(clock, timer)
    tracker.touch("a")
    assert "a" in tracker and len(tracker) == 1
    assert tracker.last_touch_ms("a") == 0
    step(clock, timer, tracker, T - 1)
    assert rec.calls == []
    step(clock, timer, tracker, 1)
    assert rec.calls == [(T, "a")]
    assert "a" not in tracker and len(tracker) == 0 and len(timer) == 0
    assert tracker.reaped == 1


def test_touch_postpones(clock: ManualClock, timer: WheelTimer) -> None:
    tracker, rec = make(clock, timer)
    tracker.touch("a")
    step(clock, timer, tracker, 50)
    tracker.touch("a")
    step(clock, timer, tracker, 70)  # t=120: past the first deadline (100)
    tracker.touch("a")  # touched at 120: idle at 220
    step(clock, timer, tracker, T - 1)
    assert rec.calls == []
    step(clock, timer, tracker, 1)
    assert rec.calls == [(220, "a")]


def test_touches_cost_one_timer_operation_per_period(clock: ManualClock) -> None:
    """The lazy design: a key touched every ms re-adds its task about once per timeout."""
    adds = 0

    class CountingTimer(SystemTimer):
        def add(self, task: TimerTask) -> None:
            nonlocal adds
            adds += 1
            super().add(task)

    timer = CountingTimer("counting", clock=clock)
    tracker, rec = make(clock, timer)
    for _ in range(10 * T):
        tracker.touch("chatty")
        clock.advance(1)
        timer.poll()
    assert rec.calls == []
    assert adds == tracker.rearmed + 1 <= 11  # the first add, then one per period
    step(clock, timer, tracker, T)
    assert rec.keys == ["chatty"]


def test_forget_prevents_on_idle(clock: ManualClock, timer: WheelTimer) -> None:
    tracker, rec = make(clock, timer)
    tracker.touch("a")
    tracker.touch("b")
    assert tracker.forget("a") is True
    assert tracker.forget("a") is False
    assert tracker.forget("never") is False
    assert "a" not in tracker and len(tracker) == 1 and len(timer) == 1
    tracker._check_invariants()
    step(clock, timer, tracker, 3 * T)
    assert rec.keys == ["b"]


def test_forget_after_a_touch_extended_the_deadline(clock: ManualClock, timer: WheelTimer) -> None:
    tracker, rec = make(clock, timer)
    tracker.touch("a")
    step(clock, timer, tracker, 60)
    tracker.touch("a")
    step(clock, timer, tracker, 60)  # the task re-armed at 100
    assert tracker.rearmed == 1
    tracker.forget("a")
    step(clock, timer, tracker, 3 * T)
    assert rec.calls == [] and len(timer) == 0


def test_on_idle_runs_exactly_once(clock: ManualClock, timer: WheelTimer) -> None:
    tracker, rec = make(clock, timer)
    for key in range(5):
        tracker.touch(key)
    step(clock, timer, tracker, T)
    for _ in range(3):
        step(clock, timer, tracker, 10 * T)
    assert sorted(rec.keys) == [0, 1, 2, 3, 4]  # type: ignore[type-var]
    assert len(tracker) == 0 and tracker.reaped == 5


def test_touch_after_idle_starts_fresh(clock: ManualClock, timer: WheelTimer) -> None:
    tracker, rec = make(clock, timer)
    tracker.touch("a")
    step(clock, timer, tracker, T + 30)
    assert rec.calls == [(T, "a")]
    tracker.touch("a")  # at 130: a new silence, idle at 230
    assert tracker.last_touch_ms("a") == 130
    step(clock, timer, tracker, T - 1)
    assert len(rec.calls) == 1
    step(clock, timer, tracker, 1)
    assert rec.calls == [(T, "a"), (230, "a")]


def test_on_idle_may_touch_the_key_again(clock: ManualClock, timer: WheelTimer) -> None:
    calls: list[int] = []

    def on_idle(key: str) -> None:
        assert key not in tracker  # forgotten before the call
        calls.append(clock.now_ms())
        if len(calls) < 3:
            tracker.touch(key)

    tracker: IdleTracker[str] = IdleTracker(T, on_idle, timer=timer)
    tracker.touch("a")
    step(clock, timer, tracker, 5 * T)
    assert calls == [T, 2 * T, 3 * T]
    assert len(tracker) == 0


def test_on_idle_raising_does_not_break_the_tracker(clock: ManualClock, timer: WheelTimer) -> None:
    rec = Recorder(clock, raise_for=frozenset({"bad"}))
    tracker: IdleTracker[object] = IdleTracker(T, rec, timer=timer)
    tracker.touch("bad")
    tracker.touch("good")
    clock.advance(T)
    with pytest.raises(RuntimeError, match="on_idle failed for 'bad'"):
        timer.poll()  # no loop: the timer re-raises after the whole pass
    assert sorted(rec.keys) == ["bad", "good"]  # type: ignore[type-var]
    assert len(tracker) == 0 and tracker.reaped == 2
    tracker._check_invariants()
    timer._check_invariants()
    tracker.touch("bad")  # tracked afresh, reaped (and raising) once more
    tracker.touch("good")
    clock.advance(T)
    with pytest.raises(RuntimeError):
        timer.poll()
    assert rec.keys.count("bad") == 2 and rec.keys.count("good") == 2


def test_clear_len_contains_iter_repr(clock: ManualClock, timer: WheelTimer) -> None:
    tracker, rec = make(clock, timer)
    for key in ("a", "b", "c"):
        tracker.touch(key)
    assert list(tracker) == ["a", "b", "c"]
    assert len(tracker) == 3 and "b" in tracker and "z" not in tracker
    assert tracker.timeout_ms == T and tracker.timer is timer
    assert repr(tracker) == "<IdleTracker timeout_ms=100 tracked=3 reaped=0 rearmed=0 timer='test'>"
    tracker.clear()
    assert len(tracker) == 0 and len(timer) == 0
    tracker._check_invariants()
    step(clock, timer, tracker, 2 * T)
    assert rec.calls == []
    with pytest.raises(KeyError):
        tracker.last_touch_ms("a")


def test_shares_its_timer_with_other_tasks(clock: ManualClock, timer: WheelTimer) -> None:
    ran: list[int] = []

    class Other(TimerTask):
        def run(self) -> None:
            ran.append(clock.now_ms())

    tracker, rec = make(clock, timer)
    other_tracker, other_rec = make(clock, timer, timeout_ms=30)
    timer.add(Other(50))
    tracker.touch("a")
    other_tracker.touch("a")  # the same key in another tracker is another key
    step(clock, timer, tracker, 2 * T)
    other_tracker._check_invariants()
    assert ran == [50]
    assert rec.calls == [(T, "a")] and other_rec.calls == [(30, "a")]


@pytest.mark.parametrize("tick_ms", [1, 7, 20])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_touches_match_a_model(clock: ManualClock, tick_ms: int, seed: int) -> None:
    """Seeded random mixes of touch/forget/time on tiny wheels (size 3: overflow wheels
    in play), checked against a map of last touches: every key is reaped exactly once
    per silence, no earlier than its deadline and no later than the deadline plus a tick."""
    rng = random.Random(seed)
    timer = SystemTimer("model", tick_ms=tick_ms, wheel_size=3, clock=clock)
    timeout_ms = 50
    reaped: list[tuple[int, int]] = []
    tracker: IdleTracker[int] = IdleTracker(
        timeout_ms, lambda k: reaped.append((clock.now_ms(), k)), timer=timer
    )
    last: dict[int, int] = {}  # the model: key -> last touch
    for _ in range(3_000):
        op = rng.random()
        key = rng.randrange(30)
        if op < 0.55:
            tracker.touch(key)
            last[key] = clock.now_ms()
        elif op < 0.6:
            assert tracker.forget(key) is (key in last)
            last.pop(key, None)
        else:
            clock.advance(rng.randrange(1, 6))
            timer.poll()
            now_ms = clock.now_ms()
            for when_ms, k in reaped:
                assert when_ms == now_ms
                deadline_ms = last.pop(k)  # KeyError: reaped an untracked key
                assert deadline_ms + timeout_ms <= now_ms, f"key {k} reaped early"
                # the poll after the deadline plus a tick, at worst (polls are <= 5 ms apart)
                assert now_ms < deadline_ms + timeout_ms + tick_ms + 5, f"key {k} reaped late"
            reaped.clear()
            for k, touched_ms in last.items():
                assert now_ms < touched_ms + timeout_ms + tick_ms, f"key {k} not reaped"
        assert set(tracker) == set(last)
        tracker._check_invariants()
        timer._check_invariants()
    for _ in range(timeout_ms + tick_ms):
        clock.advance(1)
        timer.poll()
    assert sorted(k for _, k in reaped) == sorted(last)  # the rest, reaped once each
    assert len(tracker) == 0 and len(timer) == 0


def test_coarse_tick_never_spins(clock: ManualClock) -> None:
    """A re-arm shorter than a tick waits a whole tick: one add, not a busy loop
    (a timer with Kafka's filing, which could run it within the current tick)."""
    timer = SystemTimer("coarse", tick_ms=10, clock=clock, may_expire_early=True)
    tracker, rec = make(clock, timer)
    tracker.touch("a")  # at 0: the task is due at 100
    clock.advance(95)
    tracker.touch("a")  # deadline 195
    clock.advance(5)
    timer.poll()  # t=100: 95 ms remain: re-armed
    clock.advance(90)
    assert timer.poll() == 1  # t=190: the bucket of 190..199 expired; 5 ms remain
    assert rec.calls == [] and tracker.rearmed == 2
    tracker._check_invariants()
    clock.advance(1)
    assert timer.poll() == 0  # t=191: waits for the next tick, no spinning
    clock.advance(9)
    timer.poll()  # t=200
    assert rec.calls == [(200, "a")]


def test_a_never_early_timer_re_arms_for_exactly_what_remains(clock: ManualClock) -> None:
    """The default filing puts a re-arm after its deadline: no tick added, no spin."""
    timer = SystemTimer("coarse", tick_ms=10, clock=clock)
    tracker, rec = make(clock, timer)
    tracker.touch("a")  # at 0: deadline 100, filed at 110
    clock.advance(95)
    tracker.touch("a")  # deadline 195
    clock.advance(5)
    assert timer.poll() == 0  # t=100: not yet
    clock.advance(10)
    assert timer.poll() == 1 and tracker.rearmed == 1  # t=110: 85 remain, filed at 200
    tracker._check_invariants()
    for _ in range(89):  # t=111..199: nothing runs
        clock.advance(1)
        assert timer.poll() == 0
    clock.advance(1)
    timer.poll()  # t=200
    assert rec.calls == [(200, "a")] and tracker.rearmed == 1


@pytest.mark.asyncio
async def test_on_idle_raising_goes_to_the_loop_exception_handler(clock: ManualClock) -> None:
    timer = SystemTimer("test", clock=clock)  # the shell's timer reports to the loop
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        rec = Recorder(clock, raise_for=frozenset({"bad"}))
        tracker: IdleTracker[object] = IdleTracker(T, rec, timer=timer)
        tracker.touch("bad")
        tracker.touch("good")
        clock.advance(T + 1)  # never early: the tick after the deadline
        assert timer.poll() == 2  # with a loop running, nothing is raised
    finally:
        loop.set_exception_handler(None)
    assert [type(c["exception"]) for c in reported] == [RuntimeError]
    assert sorted(rec.keys) == ["bad", "good"]  # type: ignore[type-var]
    assert len(tracker) == 0
