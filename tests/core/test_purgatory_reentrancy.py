"""A seeded fuzz of the purgatory under re-entrant callbacks.

Random top-level actions (``try_complete_else_watch`` on 1-3 keys,
``check_and_complete``, ``force_complete``, cancelling one operation,
``cancel_for_key``, ``purge_completed``, timer polls on a ``ManualClock``); the
operations' own ``try_complete``, ``on_complete`` and ``on_expiration`` run
further random actions re-entrantly (bounded depth). After every top-level step
``_check_invariants()`` holds and the counters agree with the operations'
states: ``num_delayed`` is the number of pending operations given to the
purgatory, and every done operation is counted once as completed early, expired
or cancelled. It runs on both builds (the suite runs once per build).
"""

from __future__ import annotations

import random

import pytest

from purgatory import DelayedOperation, PurgatoryClosedError
from purgatory.core import Purgatory
from purgatory.testing import ManualClock

from ..purgatory_kit import MockOp, manual_purgatory

KEYS = ("a", "b", "c", "d", "e")
SEEDS = range(64)
STEPS = 300
MAX_DEPTH = 3


class Fuzz:
    """The purgatory, its operations and the random source they share."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.clock = ManualClock(0)
        self.purgatory: Purgatory = manual_purgatory(
            self.clock, purge_interval=self.rng.choice([0, 1, 2, 5, 1000]), tick_ms=1, wheel_size=4
        )
        self.ops: list[ReentrantOp] = []
        self.given: list[ReentrantOp] = []  # handed to the purgatory (counted by it)
        self.depth = 0

    def act(self) -> None:
        """One random action, possibly from inside a callback."""
        if self.depth >= MAX_DEPTH:
            return
        self.depth += 1
        try:
            self._act()
        finally:
            self.depth -= 1

    def _act(self) -> None:
        rng, p = self.rng, self.purgatory
        kind = rng.randrange(8)
        if kind <= 1:
            op = ReentrantOp(self, rng.randrange(1, 30))
            keys = rng.sample(KEYS, rng.randint(1, 3))
            self.ops.append(op)
            if not p.closed:
                self.given.append(op)
                p.try_complete_else_watch(op, keys)
        elif kind == 2:
            p.check_and_complete(rng.choice(KEYS))
        elif kind == 3 and self.ops:
            rng.choice(self.ops).completable = True
        elif kind == 4 and self.ops:
            rng.choice(self.ops).force_complete()
        elif kind == 5 and self.ops:
            rng.choice(self.ops).cancel()
        elif kind == 6:
            p.cancel_for_key(rng.choice(KEYS))
        elif kind == 7:
            p.purge_completed()

    def step(self) -> None:
        """A top-level step: an action, or time passing."""
        if self.rng.random() < 0.2:
            self.clock.advance(self.rng.randrange(1, 8))
            self.purgatory.timer.poll()
        else:
            self.act()

    def check(self) -> None:
        p = self.purgatory
        p._check_invariants()
        pending = [op for op in self.given if not op.is_done]
        assert p.num_delayed == len(pending)
        stats = p.statistics()
        done = [op for op in self.given if op.is_done]
        assert stats.completed_early + stats.expired + stats.cancelled == len(done)
        assert stats.expired == sum(op.expired for op in done)
        assert stats.cancelled == sum(op.is_cancelled for op in done)
        for op in self.ops:
            assert op.completions == (1 if op.is_completed else 0)
            assert op.expirations == (1 if op.expired else 0)


class ReentrantOp(DelayedOperation[None]):
    """Each callback may run random actions on the purgatory first."""

    def __init__(self, fuzz: Fuzz, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.fuzz = fuzz
        self.completable = fuzz.rng.random() < 0.3
        self.completions = 0
        self.expirations = 0

    def _maybe_reenter(self) -> None:
        while self.fuzz.rng.random() < 0.4:
            self.fuzz.act()

    def try_complete(self) -> bool:
        self._maybe_reenter()
        return self.completable and self.force_complete()

    def on_complete(self) -> None:
        self.completions += 1
        self._maybe_reenter()

    def on_expiration(self) -> None:
        self.expirations += 1
        self._maybe_reenter()


@pytest.mark.parametrize("seed", SEEDS)
def test_reentrant_callbacks_keep_the_accounting(seed: int) -> None:
    fuzz = Fuzz(seed)
    for _ in range(STEPS):
        fuzz.step()
        fuzz.check()
    fuzz.purgatory.shutdown()
    fuzz.check()
    assert fuzz.purgatory.num_delayed == 0
    assert fuzz.purgatory.watched == 0


def test_an_operation_done_by_its_own_first_try_is_neither_timed_nor_watched() -> None:
    """Its ``try_complete`` completes it through another path and returns False."""
    clock = ManualClock(0)
    p = manual_purgatory(clock)

    class SelfCompleting(DelayedOperation[None]):
        def try_complete(self) -> bool:
            self.force_complete()  # say, through another operation's callback
            return False

        def on_complete(self) -> None:
            pass

    op = SelfCompleting(10)
    assert p.try_complete_else_watch(op, ["a", "b"]) is False
    assert op.is_completed
    assert (p.num_delayed, p.watched, len(p.timer)) == (0, 0, 0)
    assert p.statistics().completed_early == 1
    p._check_invariants()


def test_an_operation_whose_first_try_closes_the_purgatory_is_cancelled_as_closing_does() -> None:
    """Its ``try_complete`` shuts the purgatory down and returns False: the operation,
    pending and not yet watched when ``shutdown`` cancelled the others, is cancelled
    with the same error, neither timed nor watched (it was timed, counted as watched
    and listed in the lists ``shutdown`` had just dropped: pending for ever)."""
    clock = ManualClock(0)
    p = manual_purgatory(clock)
    waiting = MockOp(10)
    p.try_complete_else_watch(waiting, ["a"])

    class Closing(DelayedOperation[None]):
        def try_complete(self) -> bool:
            p.shutdown()
            return False

        def on_complete(self) -> None:
            pass

    op = Closing(10)
    assert p.try_complete_else_watch(op, ["a"]) is False
    assert op.is_cancelled and waiting.is_cancelled
    with pytest.raises(PurgatoryClosedError, match="closed"):
        op.result()
    assert (p.num_delayed, p.watched, len(p.timer), p.watched_keys()) == (0, 0, 0, [])
    assert p.statistics().cancelled == 2
    p._check_invariants()
