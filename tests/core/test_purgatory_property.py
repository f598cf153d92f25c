"""Random watch / complete / expire / cancel sequences against a simple model.

The model knows, per operation, its keys, its deadline, whether it may complete,
and its final state. Checked after every step: each operation completes at most
once (exactly once by the end, unless cancelled); ``check_and_complete`` returns
exactly the number of pending, completable operations watched on the key; an
operation expires at the first poll at or after its deadline (tick 1); the
counters agree with the model; the purgatory's invariants hold.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from purgatory.testing import ManualClock

from ..purgatory_kit import MockOp, manual_purgatory

KEYS = ["a", "b", "c", "d"]

STEPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("watch"),
            st.integers(1, 40),
            st.lists(st.sampled_from(KEYS), min_size=1, max_size=3),
            st.booleans(),
        ),
        st.tuples(st.just("allow"), st.integers(0, 1000)),
        st.tuples(st.just("check"), st.sampled_from(KEYS)),
        st.tuples(st.just("force"), st.integers(0, 1000)),
        st.tuples(st.just("cancel_key"), st.sampled_from(KEYS)),
        st.tuples(st.just("tick"), st.integers(0, 15)),
    ),
    max_size=80,
)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(steps=STEPS, purge_interval=st.sampled_from([0, 1, 3, 1000]))
def test_purgatory_matches_a_model(steps: list[tuple[object, ...]], purge_interval: int) -> None:
    clock = ManualClock(0)
    p = manual_purgatory(clock, purge_interval=purge_interval)
    ops: list[MockOp] = []
    keys_of: dict[int, set[str]] = {}
    deadline: dict[int, int] = {}
    state: dict[int, str] = {}  # pending / early / expired / cancelled

    def pending_on(key: str) -> list[int]:
        return [i for i, ks in keys_of.items() if key in ks and state[i] == "pending"]

    for step in steps:
        kind = step[0]
        if kind == "watch":
            delay, keys, ready = step[1], step[2], step[3]
            assert isinstance(delay, int) and isinstance(keys, list)
            op = MockOp(delay, f"op{len(ops)}")
            op.completable = bool(ready)
            i = len(ops)
            ops.append(op)
            done_now = p.try_complete_else_watch(op, keys)
            assert done_now == bool(ready)
            state[i] = "early" if ready else "pending"
            keys_of[i] = set() if ready else {str(k) for k in keys}
            deadline[i] = clock.now_ms() + delay
        elif kind == "allow" and ops:
            index = step[1]
            assert isinstance(index, int)
            ops[index % len(ops)].completable = True
        elif kind == "check":
            key = str(step[1])
            expected = [i for i in pending_on(key) if ops[i].completable]
            assert p.check_and_complete(key) == len(expected)
            for i in expected:
                state[i] = "early"
        elif kind == "force" and ops:
            index = step[1]
            assert isinstance(index, int)
            i = index % len(ops)
            assert ops[i].force_complete() == (state[i] == "pending")
            if state[i] == "pending":
                state[i] = "early"
        elif kind == "cancel_key":
            key = str(step[1])
            to_cancel = set(pending_on(key))
            cancelled = p.cancel_for_key(key)
            assert {ops.index(op) for op in cancelled if isinstance(op, MockOp)} == to_cancel
            assert len(cancelled) == len(to_cancel)
            for i in to_cancel:
                state[i] = "cancelled"
            for ks in keys_of.values():
                ks.discard(key)
        elif kind == "tick":
            step_ms = step[1]
            assert isinstance(step_ms, int)
            for _ in range(step_ms):
                clock.advance(1)
                p.timer.poll()
                for i in range(len(ops)):
                    if state[i] == "pending" and deadline[i] <= clock.now_ms():
                        state[i] = "expired"
        # after every step
        p._check_invariants()
        for i, op in enumerate(ops):
            assert op.completions == (1 if state[i] in ("early", "expired") else 0), i
            assert op.expirations == (1 if state[i] == "expired" else 0), i
            assert op.is_cancelled == (state[i] == "cancelled")
        assert p.num_delayed == sum(1 for s in state.values() if s == "pending")
        stats = p.statistics()
        assert stats.completed_early == sum(1 for s in state.values() if s == "early")
        assert stats.expired == sum(1 for s in state.values() if s == "expired")
        assert stats.lateness_max_ms == 0  # tick 1, polled every millisecond
