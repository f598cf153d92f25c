"""Callbacks that misbehave, and re-entrant calls: the core stays consistent.

A timer task or an operation callback may raise anything: an ``Exception``, a
``BaseException`` that is not one (``asyncio.CancelledError``, ``GeneratorExit``,
``trio.Cancelled`` raised by hand), or ``KeyboardInterrupt`` / ``SystemExit``.
The rules these tests pin down:

* anything but ``KeyboardInterrupt`` and ``SystemExit`` is a callback error like
  any other: reported (here, with no loop running: raised after the pass), and
  the pass goes on;
* ``KeyboardInterrupt`` and ``SystemExit`` propagate at once, leaving the timer
  and the purgatory consistent: what did not run yet stays scheduled and
  watched, and runs at the next poll or walk.

The purgatory's own methods may be called from its callbacks on the key being
walked (``check_and_complete``, ``cancel_for_key``, ``purge_completed``) and do
what they say; ``try_complete_else_watch`` validates everything before it
changes anything.

Real-loop versions (the reaper never dies) are in ``test_backends.py``.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

import numpy as np
import pytest

from purgatory import (
    DelayedOperationPurgatory,
    OperationCancelledError,
    SystemTimer,
    TimerTask,
)
from purgatory.testing import ManualClock

from .purgatory_kit import MockOp, manual_purgatory
from .timer_kit import Recorder


class Escaped(BaseException):
    """A BaseException of the user's own: not an Exception, not an interrupt."""


#: BaseExceptions that are callback errors, not interrupts
CALLBACK_ERRORS: list[Callable[[], BaseException]] = [
    asyncio.CancelledError,
    GeneratorExit,
    Escaped,
]
INTERRUPTS: list[Callable[[], BaseException]] = [KeyboardInterrupt, SystemExit]


class Raises(TimerTask):
    """Raises ``make()`` when it runs."""

    def __init__(self, delay_ms: int, make: Callable[[], BaseException]) -> None:
        super().__init__(delay_ms)
        self.make = make
        self.runs = 0

    def run(self) -> None:
        self.runs += 1
        raise self.make()


def _names(log: list[tuple[object, int]]) -> list[object]:
    return [label for label, _ in log]


# -- the timer ------------------------------------------------------------------------


@pytest.mark.parametrize("make", CALLBACK_ERRORS)
def test_a_base_exception_from_a_task_does_not_stop_the_pass(
    clock: ManualClock, tiny_timer: SystemTimer, make: Callable[[], BaseException]
) -> None:
    log: list[tuple[object, int]] = []
    tiny_timer.add(Recorder(2, "before", clock, log))
    tiny_timer.add(Raises(2, make))
    tiny_timer.add(Recorder(2, "after", clock, log))
    tiny_timer.add(Recorder(40, "later", clock, log))  # an overflow level
    clock.advance(2)
    with pytest.raises(make().__class__):  # no loop: raised once the pass is done
        tiny_timer.poll()
    assert _names(log) == ["before", "after"]
    tiny_timer._check_invariants()
    clock.advance(38)
    assert tiny_timer.poll() == 1
    assert _names(log) == ["before", "after", "later"]
    assert len(tiny_timer) == 0


@pytest.mark.parametrize("make", INTERRUPTS)
def test_an_interrupt_from_a_task_leaves_the_rest_of_its_bucket_scheduled(
    clock: ManualClock, tiny_timer: SystemTimer, make: Callable[[], BaseException]
) -> None:
    log: list[tuple[object, int]] = []
    tiny_timer.add(Recorder(2, "before", clock, log))
    raising = Raises(2, make)
    tiny_timer.add(raising)
    tiny_timer.add(Recorder(2, "after", clock, log))
    tiny_timer.add(Recorder(20, "cascading", clock, log))  # level 2
    clock.advance(2)
    with pytest.raises(make().__class__):
        tiny_timer.poll()
    assert _names(log) == ["before"]
    assert len(tiny_timer) == 2  # "after" and "cascading" are still scheduled
    tiny_timer._check_invariants()
    assert tiny_timer.next_expiration_ms() == 2  # the interrupted bucket comes back
    assert tiny_timer.poll() == 1  # the next poll runs what the interrupt stranded
    assert _names(log) == ["before", "after"]
    assert raising.runs == 1
    clock.advance(18)
    assert tiny_timer.poll() == 1
    assert _names(log) == ["before", "after", "cascading"]
    tiny_timer._check_invariants()


@pytest.mark.parametrize("make", INTERRUPTS)
def test_an_interrupt_while_cascading_keeps_the_overflow_bucket(
    clock: ManualClock, tiny_timer: SystemTimer, make: Callable[[], BaseException]
) -> None:
    log: list[tuple[object, int]] = []
    # one level-1 bucket (tick 3) covering 3..5; at 3 its flush runs the task due at 3
    tiny_timer.add(Raises(3, make))
    tiny_timer.add(Recorder(3, "same", clock, log))
    tiny_timer.add(Recorder(4, "cousin", clock, log))
    tiny_timer.add(Recorder(5, "later", clock, log))
    clock.advance(3)
    with pytest.raises(make().__class__):
        tiny_timer.poll()
    assert log == [] and len(tiny_timer) == 3
    tiny_timer._check_invariants()
    assert tiny_timer.poll() == 1
    assert _names(log) == ["same"]
    clock.advance(2)
    assert tiny_timer.poll() == 2
    assert _names(log) == ["same", "cousin", "later"]
    assert len(tiny_timer) == 0
    tiny_timer._check_invariants()


@pytest.mark.parametrize("make", INTERRUPTS)
def test_an_interrupt_from_a_due_task_keeps_the_due_list(
    clock: ManualClock, timer: SystemTimer, make: Callable[[], BaseException]
) -> None:
    log: list[tuple[object, int]] = []
    timer.add(Recorder(0, "first", clock, log))
    timer.add(Raises(0, make))
    timer.add(Recorder(-5, "second", clock, log))

    class AddsDue(TimerTask):
        def run(self) -> None:
            timer.add(Recorder(0, "made due while polling", clock, log))

    timer.add(AddsDue(0))
    with pytest.raises(make().__class__):
        timer.poll()
    assert _names(log) == ["first"]
    assert len(timer) == 2
    timer._check_invariants()
    assert timer.poll() == 2
    assert _names(log) == ["first", "second"]
    assert timer.poll() == 1
    assert _names(log) == ["first", "second", "made due while polling"]
    timer._check_invariants()


def test_poll_from_inside_a_task_is_refused(clock: ManualClock, timer: SystemTimer) -> None:
    log: list[tuple[object, int]] = []
    refused: list[str] = []

    class PollsAgain(TimerTask):
        def run(self) -> None:
            try:
                timer.poll()
            except RuntimeError as exc:
                refused.append(str(exc))

    timer.add(PollsAgain(1))
    timer.add(Recorder(1, "next", clock, log))
    timer.add(Recorder(3, "later", clock, log))
    clock.advance(1)
    assert timer.poll() == 2
    assert refused == ["poll() of timer 'test' called from a task it is running"]
    assert _names(log) == ["next"]
    clock.advance(2)
    assert timer.poll() == 1
    timer._check_invariants()


def test_advance_clock_from_inside_a_task_is_refused(
    clock: ManualClock, timer: SystemTimer
) -> None:
    errors: list[BaseException] = []

    class Advances(TimerTask):
        def run(self) -> None:
            coro = timer.advance_clock(0)  # with no wait, it polls at its first step
            try:
                coro.send(None)
            except BaseException as exc:  # noqa: BLE001 - what the nested call raised
                errors.append(exc)
            finally:
                coro.close()

    timer.add(Advances(0))
    assert timer.poll() == 1
    assert [type(e) for e in errors] == [RuntimeError]


# -- the purgatory: errors from callbacks --------------------------------------------


class Hostile(MockOp):
    """An operation whose ``try_complete`` runs ``action`` (once) first."""

    def __init__(self, delay_ms: int, name: str = "hostile") -> None:
        super().__init__(delay_ms, name)
        self.action: Callable[[], object] | None = None
        self.seen: list[object] = []

    def try_complete(self) -> bool:
        action, self.action = self.action, None
        if action is not None:
            self.seen.append(action())
        return super().try_complete()


@pytest.mark.parametrize("make", CALLBACK_ERRORS)
def test_a_base_exception_from_try_complete_is_a_callback_error(
    clock: ManualClock, make: Callable[[], BaseException]
) -> None:
    p = manual_purgatory(clock)
    a, bad, c = MockOp(100, "a"), Hostile(100, "bad"), MockOp(100, "c")
    for op in (a, bad, c):
        p.try_complete_else_watch(op, ["k", "other"])

    def fail() -> None:
        raise make()

    bad.action = fail
    a.completable = bad.completable = c.completable = True
    with pytest.raises(make().__class__):  # no loop: raised once the walk is done
        p.check_and_complete("k")
    assert a.is_completed and c.is_completed and not bad.is_done
    p._check_invariants()
    assert p.check_and_complete("k") == 1  # bad, on the next walk
    p._check_invariants()


@pytest.mark.parametrize("make", INTERRUPTS)
def test_an_interrupt_from_try_complete_keeps_the_watcher_list(
    clock: ManualClock, make: Callable[[], BaseException]
) -> None:
    p = manual_purgatory(clock)
    a, bad, c = MockOp(100, "a"), Hostile(100, "bad"), MockOp(100, "c")
    for op in (a, bad, c):
        p.try_complete_else_watch(op, ["k"])

    def interrupt() -> None:
        raise make()

    bad.action = interrupt
    a.completable = True
    with pytest.raises(make().__class__):
        p.check_and_complete("k")
    assert a.is_completed and not bad.is_done and not c.is_done
    p._check_invariants()
    assert p.watched == 2 and p.watched_keys() == ["k"]
    bad.completable = c.completable = True
    assert p.check_and_complete("k") == 2
    assert p.watched == 0
    p._check_invariants()


@pytest.mark.parametrize("make", INTERRUPTS)
def test_an_interrupt_from_on_complete_on_expiry_keeps_the_rest(
    clock: ManualClock, make: Callable[[], BaseException]
) -> None:
    class Interrupting(MockOp):
        def on_complete(self) -> str:
            raise make()

    p = manual_purgatory(clock)
    bad, after = Interrupting(5, "bad"), MockOp(5, "after")
    p.try_complete_else_watch(bad, ["k"])
    p.try_complete_else_watch(after, ["k"])
    clock.advance(5)
    with pytest.raises(make().__class__):
        p.timer.poll()
    assert bad.is_completed and not after.is_done  # bad completed, with the error
    with pytest.raises(make().__class__):
        bad.result()
    p.timer._check_invariants()
    p._check_invariants()
    p.timer.poll()
    assert after.is_completed and after.result() == "after:expired"
    assert p.num_delayed == 0
    p._check_invariants()


@pytest.mark.asyncio
async def test_awaiters_of_a_list_an_interrupt_hit_are_failed_by_close() -> None:
    clock = ManualClock(0)
    p = DelayedOperationPurgatory[MockOp](
        "p", timer=SystemTimer("t", clock=clock), reaper_enabled=False
    )
    async with p:
        bad, waiting = Hostile(100, "bad"), MockOp(100, "waiting")
        p.try_complete_else_watch(bad, ["k"])
        p.try_complete_else_watch(waiting, ["k"])
        awaiter = asyncio.ensure_future(waiting)
        await asyncio.sleep(0)

        def interrupt() -> None:
            raise KeyboardInterrupt

        bad.action = interrupt
        with pytest.raises(KeyboardInterrupt):
            p.check_and_complete("k")
    with pytest.raises(OperationCancelledError):
        await asyncio.wait_for(awaiter, 5)


# -- the purgatory: re-entrant calls --------------------------------------------------


def test_check_and_complete_of_the_key_being_walked_completes_what_is_ready(
    clock: ManualClock,
) -> None:
    p = manual_purgatory(clock)
    first, ready = Hostile(100, "first"), MockOp(100, "ready")
    p.try_complete_else_watch(first, ["k"])
    p.try_complete_else_watch(ready, ["k"])

    def nested() -> int:
        ready.completable = True
        return p.check_and_complete("k")

    first.action = nested
    assert p.check_and_complete("k") == 0  # the outer walk completed nothing itself
    assert first.seen == [1]  # the nested walk completed `ready`
    assert ready.is_completed and ready.result() == "ready:done"
    assert p.watched == 1
    p._check_invariants()


def test_cancel_for_key_of_the_key_being_walked_cancels_its_operations(
    clock: ManualClock,
) -> None:
    p = manual_purgatory(clock)
    first, second = Hostile(100, "first"), MockOp(100, "second")
    p.try_complete_else_watch(first, ["k", "j"])
    p.try_complete_else_watch(second, ["k"])
    first.action = lambda: p.cancel_for_key("k")
    second.completable = True
    assert p.check_and_complete("k") == 0
    [cancelled] = first.seen
    assert cancelled == [first, second]
    assert first.is_cancelled and second.is_cancelled
    assert p.num_delayed == 0 and len(p.timer) == 0
    assert p.watched_keys() == ["j"]  # first's other entry: lazily dropped
    p._check_invariants()


def test_a_purge_during_a_walk_leaves_every_list_consistent(clock: ManualClock) -> None:
    p = manual_purgatory(clock, purge_interval=0)
    walker = Hostile(100, "walker")
    others = [MockOp(100, f"o{i}") for i in range(4)]
    p.try_complete_else_watch(walker, ["k"])
    for op in others:
        p.try_complete_else_watch(op, ["k", "j"])

    def complete_some_and_purge() -> int:
        others[0].force_complete()
        others[2].force_complete()
        late = MockOp(100, "late")
        p.try_complete_else_watch(late, ["k"])
        late.force_complete()
        return p.purge_completed()

    walker.action = complete_some_and_purge
    others[1].completable = True
    assert p.check_and_complete("k") == 1
    p._check_invariants()
    assert p.watched == 3  # walker and o3 on k; o3 on j
    assert set(p.watched_keys()) == {"k", "j"}


def test_try_complete_else_watch_of_itself_from_try_complete_is_refused(
    clock: ManualClock,
) -> None:
    p = manual_purgatory(clock)
    op = Hostile(100, "self")
    refused: list[str] = []

    def resubmit() -> None:
        try:
            p.try_complete_else_watch(op, ["k", "j"])
        except ValueError as exc:
            refused.append(str(exc))

    op.action = resubmit
    assert not p.try_complete_else_watch(op, ["k"])
    assert refused == [f"{op!r} is already in a purgatory"]
    assert p.watched == 1 and p.watched_keys() == ["k"] and p.num_delayed == 1
    p._check_invariants()


# -- the purgatory: validation before any change --------------------------------------


def _nothing_changed(p: DelayedOperationPurgatory[MockOp]) -> None:
    assert p.watched == 0 and p.num_delayed == 0 and p.watched_keys() == []
    assert len(p.timer) == 0
    stats = p.statistics()
    assert stats.completed_early == stats.expired == stats.cancelled == 0
    p._check_invariants()


@pytest.mark.parametrize(
    ("delay", "error", "message"),
    [
        (math.nan, ValueError, "delay_ms must be finite, not nan"),
        (math.inf, ValueError, "delay_ms must be finite, not inf"),
        ("100", TypeError, "delay_ms must be an integer, not str"),
        (None, TypeError, "delay_ms must be an integer, not NoneType"),
        (True, TypeError, "delay_ms must be an integer, not bool"),
    ],
)
def test_a_delay_the_timer_would_refuse_changes_nothing(
    clock: ManualClock, delay: object, error: type[Exception], message: str
) -> None:
    p = manual_purgatory(clock)
    op = MockOp(100)
    op.delay_ms = delay  # type: ignore[assignment]
    with pytest.raises(error, match=f"^{message}$"):
        p.try_complete_else_watch(op, ["a", "b"])
    _nothing_changed(p)
    assert op.tries == 0
    op.delay_ms = 5  # fixed, the same operation may be given again
    assert not p.try_complete_else_watch(op, ["a", "b"])
    clock.advance(5)
    p.timer.poll()
    assert op.result() == "op:expired"
    p._check_invariants()


def test_an_unhashable_key_changes_nothing(clock: ManualClock) -> None:
    p = manual_purgatory(clock)
    op = MockOp(100)
    with pytest.raises(TypeError, match=r"^keys must be hashable: unhashable type: 'list'$"):
        p.try_complete_else_watch(op, ["a", ["b"]])  # type: ignore[list-item]
    _nothing_changed(p)
    assert op.tries == 0
    assert not p.try_complete_else_watch(op, ["a", "b"])
    p._check_invariants()


def test_an_operation_in_another_purgatory_or_done_is_refused(clock: ManualClock) -> None:
    p, q = manual_purgatory(clock), manual_purgatory(clock)
    op = MockOp(100)
    p.try_complete_else_watch(op, ["a"])
    with pytest.raises(ValueError, match="is already in a purgatory"):
        q.try_complete_else_watch(op, ["a"])
    _nothing_changed(q)
    done = MockOp(100)
    done.force_complete()
    with pytest.raises(ValueError, match="is already done"):
        q.try_complete_else_watch(done, ["a"])
    _nothing_changed(q)


def test_numpy_integer_delays_are_integers(clock: ManualClock) -> None:
    p = manual_purgatory(clock)
    op = MockOp(np.int64(30))  # type: ignore[arg-type]
    assert not p.try_complete_else_watch(op, ["a"])
    clock.advance(29)
    p.timer.poll()
    assert not op.is_done
    clock.advance(1)
    p.timer.poll()
    assert op.result() == "op:expired"
    task = Recorder(np.int32(3), "np", clock, [])  # type: ignore[arg-type]
    p.timer.add(task)
    assert task.expiration_ms == clock.now_ms() + 3


def test_keys_given_twice_are_watched_once(clock: ManualClock) -> None:
    p = manual_purgatory(clock)
    op = MockOp(100)
    p.try_complete_else_watch(op, iter(["a", "b", "a"]))
    assert p.watched == 2
    p._check_invariants()


# -- the purge counts cancelled operations -------------------------------------------


def test_operations_only_ever_cancelled_are_purged(clock: ManualClock) -> None:
    p = manual_purgatory(clock, purge_interval=10)
    for i in range(1000):
        p.try_complete_else_watch(MockOp(60_000, f"op{i}"), [f"own{i}", "shared"])
        assert len(p.cancel_for_key(f"own{i}")) == 1
        assert p.watched <= 10 + 1  # the shared list holds only what awaits the purge
    stats = p.statistics()
    assert stats.cancelled == 1000 and stats.purges >= 90
    p._check_invariants()
