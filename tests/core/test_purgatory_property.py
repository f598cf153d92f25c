"""Random watch / check / force-complete / cancel-one / cancel-for-key / expire /
purge / close sequences against a simple model.

The model knows, per operation, its keys, its deadline, whether it may complete,
and its state. Checked after every step: each operation completes at most once
(exactly once by the end, unless cancelled); ``check_and_complete`` returns
exactly the number of pending, completable operations watched on the key;
``cancel()`` and ``cancel_for_key`` cancel exactly the pending operations the
model says; an operation expires at the first poll at or after its deadline
(tick 1); the counters (``num_delayed``, completed early, expired, cancelled)
agree with the model; after a purge ``watched`` and ``keys`` are exactly the
pending operations' entries; the purgatory's invariants hold. Two drivers: a
hypothesis search (shrinks a failure to a short sequence) and a seeded run of
100,000 steps (the long tail: purges at every interval, many operations).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from purgatory import Outcome, PurgatoryClosedError
from purgatory.testing import ManualClock

from ..purgatory_kit import MockOp, manual_purgatory

KEYS = ["a", "b", "c", "d"]


class Model:
    """The purgatory as a table of operations, beside the real one."""

    def __init__(self, purge_interval: int) -> None:
        self.clock = ManualClock(0)
        self.p = manual_purgatory(self.clock, purge_interval=purge_interval)
        self.ops: list[MockOp] = []
        self.keys_of: list[set[str]] = []
        self.deadline: list[int] = []
        self.state: list[Outcome] = []
        self.closed = False
        self.retired = dict.fromkeys(Outcome, 0)  # outcomes of operations forgotten by retire()

    def pending_on(self, key: str) -> list[int]:
        return [
            i for i, ks in enumerate(self.keys_of) if key in ks and self.state[i] is Outcome.PENDING
        ]

    def watch(self, delay_ms: int, keys: list[str], ready: bool) -> None:
        op = MockOp(delay_ms, f"op{len(self.ops)}")
        op.completable = ready
        if self.closed:
            with pytest.raises(PurgatoryClosedError):
                self.p.try_complete_else_watch(op, keys)
            return
        self.ops.append(op)
        assert self.p.try_complete_else_watch(op, keys) == ready
        self.state.append(Outcome.COMPLETED if ready else Outcome.PENDING)
        self.keys_of.append(set() if ready else set(keys))
        self.deadline.append(self.clock.now_ms() + delay_ms)

    def allow(self, index: int) -> None:
        if self.ops:
            self.ops[index % len(self.ops)].completable = True

    def check(self, key: str) -> None:
        expected = [i for i in self.pending_on(key) if self.ops[i].completable]
        assert self.p.check_and_complete(key) == len(expected)
        for i in expected:
            self.state[i] = Outcome.COMPLETED

    def force(self, index: int) -> None:
        if self.ops:
            i = index % len(self.ops)
            pending = self.state[i] is Outcome.PENDING
            assert self.ops[i].force_complete() == pending
            if pending:
                self.state[i] = Outcome.COMPLETED

    def cancel_one(self, index: int) -> None:
        if self.ops:
            i = index % len(self.ops)
            pending = self.state[i] is Outcome.PENDING
            assert self.ops[i].cancel() == pending
            if pending:
                self.state[i] = Outcome.CANCELLED

    def cancel_key(self, key: str) -> None:
        to_cancel = set(self.pending_on(key))
        cancelled = self.p.cancel_for_key(key)
        assert {self.ops.index(op) for op in cancelled if isinstance(op, MockOp)} == to_cancel
        assert len(cancelled) == len(to_cancel)
        for i in to_cancel:
            self.state[i] = Outcome.CANCELLED
        for ks in self.keys_of:
            ks.discard(key)

    def tick(self, ms: int) -> None:
        for _ in range(ms):
            self.clock.advance(1)
            self.p.timer.poll()
            for i, state in enumerate(self.state):
                if state is Outcome.PENDING and self.deadline[i] <= self.clock.now_ms():
                    self.state[i] = Outcome.EXPIRED

    def purge(self) -> None:
        self.p.purge_completed()
        pending = [i for i, s in enumerate(self.state) if s is Outcome.PENDING]
        assert self.p.watched == sum(len(self.keys_of[i]) for i in pending)
        assert set(self.p.watched_keys()) == set().union(*(self.keys_of[i] for i in pending))

    def close(self) -> None:
        self.p.shutdown()
        self.closed = True
        for i, state in enumerate(self.state):
            if state is Outcome.PENDING:
                self.state[i] = Outcome.CANCELLED
                with pytest.raises(PurgatoryClosedError):
                    self.ops[i].result()
        assert self.p.watched == 0 and self.p.watched_keys() == []

    def retire(self) -> None:
        """Let every deadline pass, purge, and forget the (all done) operations but
        their outcome counts: keeps the model's scans short on long runs."""
        self.tick(41)
        self.purge()
        for state in self.state:
            self.retired[state] += 1
        self.ops, self.keys_of, self.deadline, self.state = [], [], [], []

    def verify(self, *, full: bool = True) -> None:
        """The counters against the model; with ``full``, each operation and the lists."""
        p = self.p
        assert p.num_delayed == self.state.count(Outcome.PENDING)
        stats = p.statistics()
        count = {o: self.retired[o] + self.state.count(o) for o in Outcome}
        assert stats.completed_early == count[Outcome.COMPLETED]
        assert stats.expired == count[Outcome.EXPIRED]
        assert stats.cancelled == count[Outcome.CANCELLED]
        assert stats.lateness_max_ms == 0  # tick 1, polled every millisecond
        if not full:
            return
        p._check_invariants()
        for i, op in enumerate(self.ops):
            state = self.state[i]
            assert op.outcome is state, i
            assert op.expired == (state is Outcome.EXPIRED)
            assert op.completions == (1 if op.is_completed else 0), i
            assert op.expirations == (1 if state is Outcome.EXPIRED else 0), i
            assert op.is_cancelled == (state is Outcome.CANCELLED)


STEPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("watch"),
            st.integers(1, 40),
            st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True),
            st.booleans(),
        ),
        st.tuples(st.just("allow"), st.integers(0, 1000)),
        st.tuples(st.just("check"), st.sampled_from(KEYS)),
        st.tuples(st.just("force"), st.integers(0, 1000)),
        st.tuples(st.just("cancel_one"), st.integers(0, 1000)),
        st.tuples(st.just("cancel_key"), st.sampled_from(KEYS)),
        st.tuples(st.just("tick"), st.integers(0, 15)),
        st.tuples(st.just("purge")),
        st.tuples(st.just("close")),
    ),
    max_size=80,
)


def apply(model: Model, step: tuple[object, ...]) -> None:
    kind, *args = step
    if kind == "watch":
        delay, keys, ready = args
        assert isinstance(delay, int) and isinstance(keys, list)
        model.watch(delay, [str(k) for k in keys], bool(ready))
    elif kind == "close":
        model.close()
    elif kind == "purge":
        model.purge()
    elif kind in ("check", "cancel_key"):
        getattr(model, str(kind))(str(args[0]))
    else:
        getattr(model, str(kind))(args[0])


@settings(max_examples=300, derandomize=True, deadline=None)
@given(steps=STEPS, purge_interval=st.sampled_from([0, 1, 3, 1000]))
def test_purgatory_matches_a_model(steps: list[tuple[object, ...]], purge_interval: int) -> None:
    model = Model(purge_interval)
    for step in steps:
        apply(model, step)
        model.verify()
    model.tick(41)  # every pending operation's deadline passes
    model.verify()
    assert all(op.is_done for op in model.ops)


def random_step(rng: random.Random) -> tuple[object, ...]:
    kind = rng.choices(
        ["watch", "allow", "check", "force", "cancel_one", "cancel_key", "tick", "purge"],
        weights=[30, 10, 15, 8, 10, 3, 20, 4],
    )[0]
    if kind == "watch":
        keys = rng.sample(KEYS, rng.randint(1, 3))
        return ("watch", rng.randint(1, 40), keys, rng.random() < 0.2)
    if kind in ("check", "cancel_key"):
        return (kind, rng.choice(KEYS))
    if kind == "tick":
        return ("tick", rng.randint(0, 6))
    if kind == "purge":
        return ("purge",)
    return (kind, rng.randrange(1_000_000))


@pytest.mark.parametrize("purge_interval", [0, 1, 7, 100])
def test_no_counter_drift_over_a_long_seeded_run(purge_interval: int) -> None:
    """25,000 steps for each of four purge intervals: 100,000 on each build."""
    rng = random.Random(purge_interval)
    model = Model(purge_interval)
    for n in range(25_000):
        apply(model, random_step(rng))
        model.verify(full=n % 500 == 0)
        if len(model.ops) > 400:
            model.verify()
            model.retire()
    model.close()
    model.verify()
