"""DelayedOperationPurgatory beyond Kafka's scenarios: awaiting, closing, errors, purge.

Callbacks that misbehave, and re-entrant calls: the core stays consistent. A timer
task or an operation callback may raise anything: an ``Exception``, a
``BaseException`` that is not one (``asyncio.CancelledError``, ``GeneratorExit``,
``trio.Cancelled`` raised by hand: ``timer_kit.CALLBACK_ERRORS``), or
``KeyboardInterrupt`` / ``SystemExit`` (``timer_kit.INTERRUPTS``). The rules the
tests here and in ``test_timer.py`` pin down:

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

Real-loop versions (the reaper never dies) are in ``tests/aio/test_backends.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from purgatory import (
    DelayedOperationPurgatory,
    SystemTimer,
    TopicPartition,
)
from purgatory.core import Purgatory, WheelTimer
from purgatory.testing import ManualClock

from ..purgatory_kit import Hostile, MockOp, Raising, manual_purgatory
from ..timer_kit import CALLBACK_ERRORS, INTERRUPTS, Recorder

# -- awaiting ---------------------------------------------------------------


# -- closing ------------------------------------------------------------------


# -- callbacks raising --------------------------------------------------------


def test_try_complete_raising_in_check_does_not_stop_the_others(clock: ManualClock) -> None:
    p = manual_purgatory(clock)
    bad, good = Raising(100, "try_complete"), MockOp(100, "good")
    with pytest.raises(RuntimeError):  # the caller's own first try: to the caller
        p.try_complete_else_watch(bad, ["k"])
    assert p.watched == 0 and p.num_delayed == 0
    bad.where = "ok"
    p.try_complete_else_watch(bad, ["k"])
    bad.where = "try_complete"
    p.try_complete_else_watch(good, ["k"])
    good.completable = True
    with pytest.raises(RuntimeError, match="try_complete failed"):
        p.check_and_complete("k")  # no loop: raised after the walk
    assert good.is_completed
    assert not bad.is_done and p.watched == 1 and p.num_delayed == 1
    p._check_invariants()
    clock.advance(100)
    p.timer.poll()  # it still expires
    assert bad.is_completed and bad.expirations == 1


# -- threads ------------------------------------------------------------------


# -- purge ----------------------------------------------------------------------


def test_purge_bounds_memory_with_a_million_operations_completed_outside(
    clock: ManualClock,
) -> None:
    """1M operations, each on two keys, completed directly (never through a key)."""
    purge_interval = 1000
    p = manual_purgatory(clock, purge_interval=purge_interval)
    keys = [TopicPartition("t", i) for i in range(8)]
    max_watched = 0
    batch: list[MockOp] = []
    for i in range(1_000_000):
        op = MockOp(30_000)
        p.try_complete_else_watch(op, (keys[i % 8], keys[(i + 1) % 8]))
        batch.append(op)
        if len(batch) == 100:  # 100 pending at a time, then completed outside
            for done in batch:
                done.force_complete()
            batch.clear()
            max_watched = max(max_watched, p.watched)
    stats = p.statistics()
    assert stats.completed_early == 1_000_000 and p.num_delayed == 0
    # at most purge_interval completed operations (2 entries each) plus the pending ones
    assert max_watched <= 2 * (purge_interval + 100)
    assert stats.purges >= 1_000_000 // (purge_interval + 100)
    assert len(p.timer) == 0
    p._check_invariants()


def test_purge_runs_after_the_walk_that_triggered_it(clock: ManualClock) -> None:
    p = manual_purgatory(clock, purge_interval=2)
    ops = [MockOp(1000, f"op{i}") for i in range(6)]
    for op in ops:
        p.try_complete_else_watch(op, ["a", "b"])
    for op in ops:
        op.completable = True
    assert p.check_and_complete("a") == 6  # purge deferred until the walk ends
    assert p.watched == 0 and p.watched_keys() == []
    assert p.statistics().purges == 1
    p._check_invariants()


def test_bad_purge_interval(clock: ManualClock) -> None:
    with pytest.raises(ValueError, match="purge_interval"):
        DelayedOperationPurgatory("p", purge_interval=-1)


def test_reentrant_watch_during_check(clock: ManualClock) -> None:
    p = manual_purgatory(clock)
    spawned: list[MockOp] = []

    class Spawner(MockOp):
        def on_complete(self) -> str:
            child = MockOp(1000, "child")
            p.try_complete_else_watch(child, ["k"])  # same key, during the walk
            spawned.append(child)
            return super().on_complete()

    parent = Spawner(1000, "parent")
    other = MockOp(1000, "other")
    p.try_complete_else_watch(parent, ["k"])
    p.try_complete_else_watch(other, ["k"])
    parent.completable = True
    assert p.check_and_complete("k") == 1
    assert p.watched == 2  # other and the child
    spawned[0].completable = other.completable = True
    assert p.check_and_complete("k") == 2
    p._check_invariants()


def test_timer_disabled_means_no_expiry(clock: ManualClock) -> None:

    timer = SystemTimer(clock=clock)
    p = DelayedOperationPurgatory[MockOp](
        "p", timer=timer, timer_enabled=False, reaper_enabled=False
    )
    op = MockOp(5)
    p.try_complete_else_watch(op, ["k"])
    clock.advance(100)
    timer.poll()
    assert not op.is_done and p.num_delayed == 0 and len(timer) == 0


def test_repr_and_histogram_quantiles() -> None:
    from purgatory.core.histogram import Histogram

    h = Histogram()
    for v in [*range(100), 1000, 5000, -3]:
        h.record(v)
    h._check_invariants()
    assert h.count == 103 and h.max == 5000
    assert h.quantile(0.5) == 50
    assert 1000 <= h.quantile(0.99) <= 1000 * 1.125
    with pytest.raises(ValueError):
        h.quantile(1.5)
    assert "watched=0" in repr(DelayedOperationPurgatory("x"))


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
    assert isinstance(p.timer, WheelTimer)
    p.timer._check_invariants()
    p._check_invariants()
    p.timer.poll()
    assert after.is_completed and after.result() == "after:expired"
    assert p.num_delayed == 0
    p._check_invariants()


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


@pytest.mark.parametrize(
    "change", ["cancel the key", "complete the key's last", "watch the key anew", "purge"]
)
def test_a_try_complete_that_changes_the_keys_list_leaves_the_operation_in_the_live_one(
    clock: ManualClock, change: str
) -> None:
    """The one key's list is looked up before ``try_complete`` (one hash per
    submission); a callback that replaces or drops that list must not leave the
    operation in a list the purgatory no longer holds."""
    p = manual_purgatory(clock, purge_interval=0)
    other = MockOp(100, "other")
    if change != "watch the key anew":
        p.try_complete_else_watch(other, ["k"])
    op = Hostile(100)

    def act() -> object:
        if change == "cancel the key":
            return p.cancel_for_key("k")
        if change == "watch the key anew":
            return p.try_complete_else_watch(other, ["k"])
        other.completable = True
        if change == "purge":
            return other.force_complete()  # purge_interval 0: purged at once
        return p.check_and_complete("k")

    op.action = act
    assert not p.try_complete_else_watch(op, ["k"])
    p._check_invariants()
    assert op in p.cancel_for_key("k")  # found in the key's live list
    p._check_invariants()


def _nothing_changed(p: Purgatory) -> None:
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


@pytest.mark.parametrize("keys", [[["b"]], ["a", ["b"]]], ids=["one key", "two keys"])
def test_an_unhashable_key_changes_nothing(clock: ManualClock, keys: list[object]) -> None:
    p = manual_purgatory(clock)
    op = MockOp(100)
    with pytest.raises(TypeError, match=r"^keys must be hashable: unhashable type: 'list'$"):
        p.try_complete_else_watch(op, keys)
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
    assert task.deadline_ms == clock.now_ms() + 3


def test_keys_given_twice_are_watched_once(clock: ManualClock) -> None:
    p = manual_purgatory(clock)
    op = MockOp(100)
    p.try_complete_else_watch(op, iter(["a", "b", "a"]))
    assert p.watched == 2
    p._check_invariants()


def test_operations_only_ever_cancelled_are_purged(clock: ManualClock) -> None:
    p = manual_purgatory(clock, purge_interval=10)
    for i in range(1000):
        p.try_complete_else_watch(MockOp(60_000, f"op{i}"), [f"own{i}", "shared"])
        assert len(p.cancel_for_key(f"own{i}")) == 1
        assert p.watched <= 10 + 1  # the shared list holds only what awaits the purge
    stats = p.statistics()
    assert stats.cancelled == 1000 and stats.purges >= 90
    p._check_invariants()


def test_a_delay_beyond_the_limit_changes_nothing(clock: ManualClock) -> None:
    p = manual_purgatory(clock)
    op = MockOp(2**40 + 1)
    with pytest.raises(ValueError, match="delay_ms must be within"):
        p.try_complete_else_watch(op, ["a", "b"])
    _nothing_changed(p)
    op.delay_ms = 5
    assert not p.try_complete_else_watch(op, ["a", "b"])  # may be given again
    p._check_invariants()


def test_try_complete_runs_once_per_submission(clock: ManualClock) -> None:
    p = manual_purgatory(clock)
    op = MockOp(100)
    assert not p.try_complete_else_watch(op, ["a", "b"])
    assert op.tries == 1  # one thread: a second try could not see anything new
    assert p.watched == 2 and p.num_delayed == 1
