"""Operation: the lifecycle and its waiters, with no event loop."""

from __future__ import annotations

import pytest

from purgatory import OperationCancelledError
from purgatory.testing import ManualClock

from ..purgatory_kit import MockOp, manual_purgatory


def test_an_unawaited_operation_has_no_future(clock: ManualClock) -> None:
    p = manual_purgatory(clock)
    op = MockOp(5)
    p.try_complete_else_watch(op, ["k"])
    clock.advance(5)
    p.timer.poll()
    assert op.is_completed and op._waiters is None
    assert op.result() == "op:expired"


class _Waiter:
    """A waiter that records what it was given."""

    def __init__(self) -> None:
        self.got: list[tuple[str, object]] = []

    def done(self) -> bool:
        return bool(self.got)

    def set_result(self, result: object) -> None:
        self.got.append(("result", result))

    def set_exception(self, exception: BaseException) -> None:
        self.got.append(("error", exception))


def test_waiters_get_the_outcome_once_and_removed_ones_nothing() -> None:
    op = MockOp(5, "w")
    first, removed, last = _Waiter(), _Waiter(), _Waiter()
    for waiter in (first, removed, last):
        op.add_waiter(waiter)
    op.remove_waiter(removed)
    op.remove_waiter(_Waiter())  # unknown: a no-op
    assert op.force_complete()
    assert first.got == last.got == [("result", "w:done")] and removed.got == []
    assert op._waiters is None and op._waiter is None
    with pytest.raises(RuntimeError, match="the operation is done"):
        op.add_waiter(_Waiter())
    op.remove_waiter(first)  # settled: a no-op


def test_a_single_waiter_is_kept_without_a_list() -> None:
    """Most awaited operations have one awaiter: it is held in ``_waiter``, no list
    (one allocation and one object for the cyclic GC less); a second one moves both
    to the list. Removal, settling, and a done single waiter behave as with a list."""
    op = MockOp(5, "w")
    only = _Waiter()
    op.add_waiter(only)
    assert stores(op) == (only, None)
    op.remove_waiter(_Waiter())  # unknown: a no-op
    assert stores(op) == (only, None)
    op.remove_waiter(only)
    assert stores(op) == (None, None)
    first, second = _Waiter(), _Waiter()
    op.add_waiter(first)
    op.add_waiter(second)
    assert stores(op) == (None, [first, second])
    assert op.force_complete()
    assert first.got == second.got == [("result", "w:done")]
    assert stores(op) == (None, None)

    failed, done = MockOp(5), MockOp(5)
    waiting, gone = _Waiter(), _Waiter()
    failed.add_waiter(waiting)
    done.add_waiter(gone)
    gone.got.append(("cancelled", None))  # its party gave up before the outcome
    assert failed.cancel() and done.force_complete()
    [(kind, error)] = waiting.got
    assert kind == "error" and isinstance(error, OperationCancelledError)
    assert gone.got == [("cancelled", None)]
    assert stores(failed) == stores(done) == (None, None)


def stores(op: MockOp) -> tuple[object, object]:
    """Where ``op`` keeps its waiters: (the only one, the list)."""
    return op._waiter, op._waiters


def test_a_waiter_already_done_is_skipped_and_errors_reach_the_others(
    clock: ManualClock,
) -> None:
    p = manual_purgatory(clock)
    op = MockOp(100)
    p.try_complete_else_watch(op, ["k"])
    gone, waiting = _Waiter(), _Waiter()
    op.add_waiter(gone)
    op.add_waiter(waiting)
    gone.got.append(("cancelled", None))  # its party gave up before the outcome
    assert p.cancel_for_key("k") == [op]
    assert gone.got == [("cancelled", None)]
    [(kind, error)] = waiting.got
    assert kind == "error" and isinstance(error, OperationCancelledError)


def test_awaiting_needs_the_async_shell_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The core imports no event loop: ``await op`` goes through two hooks that
    purgatory.aio sets on import; without them, a TypeError says so."""
    from purgatory.core import operation

    monkeypatch.setattr(operation, "_running_loop", operation._no_loop)
    monkeypatch.setattr(operation, "_await_otherwise", operation._not_awaitable)
    with pytest.raises(TypeError, match=r"needs purgatory\.aio"):
        MockOp(5).__await__()
