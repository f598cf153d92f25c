"""DelayedOperationPurgatory: operations watched under keys, completed early or on timeout.

Each key (a :class:`~purgatory.TopicPartition`, or any hashable) has a *watcher
list* of the operations waiting on it. An operation may wait on several keys.

``try_complete_else_watch(op, keys)`` (Kafka's order):

1. try to complete it: done if it completes now;
2. append it to each key's watcher list, stopping early if it completed meanwhile;
3. count it once in the purge estimate;
4. try once more; if still pending, add it to the timer, which expires it after
   ``op.delay_ms`` unless it completes first.

``check_and_complete(key)``, called when something happened on ``key``, walks the
key's list: operations already completed elsewhere are dropped (not counted),
the others are tried; completed ones leave the list, an emptied key is removed.
The list is detached while its callbacks run, so a callback may watch new
operations on the same key or complete others without corrupting the walk.

Lazy deletion and the purge. An operation completed through one key (or by the
timer, or directly) still sits in its other keys' lists. Like Kafka, those
entries are removed lazily: by a later ``check_and_complete`` on that key, or by
the *purge*: when the estimate of watched operations minus ``num_delayed``
exceeds ``purge_interval``, the estimate is reset to ``num_delayed`` and the
completed operations leave every list. Kafka checks this in a reaper thread that
wakes every 200 ms; here the check is O(1) bookkeeping on every completion of a
watched operation (deferred to the end of the running purgatory call, if any), so
the memory held by completed operations stays bounded by about ``purge_interval``
operations even when the timer never wakes.

Kafka's purge scans every watcher list: O(watched) per purge, which with 100k
pending operations costs more than the operations themselves (measured:
benchmarks/purgatory_bench.py). Here a watcher list is an insertion-ordered dict
(O(1) removal of any operation), each completed or cancelled watched operation is
noted in a list as it completes (O(1)), and the purge removes exactly those from
their own keys: O(completed x keys), independent of how many are pending.

Example, ``purge_interval=1``: r1 on [t1], r2 on [t1, t2], r3 on [t1, t2, t3]:
watched 6, estimate 3, num_delayed 3. Completing r2 and r3 directly: num_delayed
1, estimate - num_delayed = 2 > 1: purge: t1 [r1], t2 gone, t3 gone; watched 1.

Callbacks and exceptions. An exception raised by an operation's callback while
the purgatory walks many operations (``check_and_complete``, the purge, expiry
by the timer) is caught for that operation and sent to the running loop's
exception handler (on trio: logged on the ``"purgatory"`` logger, see
:mod:`purgatory._loop`; with no loop running: raised after the walk, one
exception as itself, several as an ExceptionGroup); the other operations proceed, and the
failing operation is left consistent: pending and watched if ``try_complete``
raised, completed (its awaiters raising the exception) if ``on_complete`` did.
In ``try_complete_else_watch`` the exception goes to the caller, after the
operation has been added to the timer if it was already being watched.

Threads. All methods must run on the event loop's thread. Code on another thread
(a replication thread, a blocking I/O pool) uses :meth:`call_threadsafe`, e.g.
``p.call_threadsafe(p.check_and_complete, key)``, which runs the call on the
purgatory's loop (asyncio: ``loop.call_soon_threadsafe``; trio: the run's
``TrioToken.run_sync_soon``) and returns a ``concurrent.futures.Future`` of its
result.

Backends. ``async with purgatory`` binds it to the running library: an asyncio
loop (asyncio, uvloop, anyio on asyncio) or a trio run (trio, anyio on trio); the
purgatory itself is synchronous and the same on both. See :mod:`purgatory._reaper`
for the reaper's task on each and :mod:`purgatory._operation` for awaiting.

Closing. Leaving ``async with`` (or :meth:`close`) cancels every pending
operation: its timer task is removed and its awaiters raise
:class:`~purgatory.PurgatoryClosedError`, on every backend; then the reaper stops.
Operations are not expired at close: a caller that wants a timeout answer at
shutdown can catch the error. The exception that ended the block comes out of
``async with`` as itself, on trio too (the reaper's nursery does not wrap it).
If the block is cancelled (``task.cancel()``, an anyio or trio cancel scope),
the exit still cancels the pending operations before the cancellation goes on.
On asyncio :meth:`close` also waits for the reaper's task to end; on trio the
reaper's nursery can only close in the block that opened it, so there ``close()``
stops the reaper (it polls no more) and leaving ``async with`` closes the nursery:
on trio, use ``async with``, not ``__aenter__`` and ``close()``.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, TypeVar

from ._errors import OperationCancelledError, PurgatoryClosedError
from ._histogram import Histogram
from ._loop import in_trio_run, raise_collected, report_exception, running_loop
from ._operation import DelayedOperation
from ._timer import SystemTimer, coerce_delay

__all__ = ["DelayedOperationPurgatory", "PurgatoryStatistics"]

Op = TypeVar("Op", bound=DelayedOperation[Any])
R = TypeVar("R")

#: Kafka's default: purge once this many completed operations may be watched.
DEFAULT_PURGE_INTERVAL = 1000


@dataclass(frozen=True, slots=True)
class PurgatoryStatistics:
    """A snapshot of a purgatory's counters (see :meth:`DelayedOperationPurgatory.statistics`)."""

    name: str
    watched: int  #: sum of watcher-list lengths (Kafka's PurgatorySize)
    num_delayed: int  #: operations pending in the timer (NumDelayedOperations)
    keys: int  #: keys with a watcher list
    completed_early: int  #: completed before their deadline
    expired: int  #: completed by the timer
    cancelled: int  #: cancelled (cancel_for_key, close)
    purged: int  #: completed operations removed from watcher lists by purges
    purges: int  #: purges run
    lateness_count: int  #: expirations measured
    lateness_max_ms: int  #: how long after its deadline the latest expiry ran
    lateness_p50_ms: int  #: median expiry lateness (log-linear histogram, <12.5% over)
    lateness_p99_ms: int  #: 99th percentile expiry lateness


class DelayedOperationPurgatory(Generic[Op]):
    """Holds delayed operations under keys until they complete or expire; see module doc.

    ``timer=None`` makes a ``SystemTimer(name)``. With ``reaper_enabled``,
    ``async with`` runs the timer's reaper; with ``timer_enabled=False``
    operations are never added to the timer (they complete only through keys).
    """

    def __init__(
        self,
        name: str = "purgatory",
        *,
        timer: SystemTimer | None = None,
        purge_interval: int = DEFAULT_PURGE_INTERVAL,
        reaper_enabled: bool = True,
        timer_enabled: bool = True,
    ) -> None:
        if type(purge_interval) is not int or purge_interval < 0:
            raise ValueError(f"purge_interval must be a non-negative int, not {purge_interval!r}")
        self.name = name
        self.timer = SystemTimer(name) if timer is None else timer
        self.purge_interval = purge_interval
        self.reaper_enabled = reaper_enabled
        self.timer_enabled = timer_enabled
        # invariant: no empty list; each list holds operations watched on its key,
        # oldest first (a dict used as an ordered set: O(1) removal of any one)
        self._watchers: dict[Hashable, dict[Op, None]] = {}
        # invariant: every done operation still in a watcher list is in here
        self._done_watched: list[Op] = []
        self._watched = 0  # invariant: == sum of the lengths of the watcher lists
        # Kafka's estimatedTotalOperations: +1 per watched operation, reset by purges
        self._estimated = 0
        self._num_delayed = 0  # invariant: this purgatory's operations in the timer
        self._depth = 0  # > 0 while a purgatory method is running callbacks
        self._purge_due = False  # a purge was asked for while _depth > 0
        self._completed_early = 0
        self._expired = 0
        self._cancelled = 0
        self._purged = 0
        self._purges = 0
        self._lateness = Histogram()
        # set while entered: how another thread schedules a call on our loop or run
        self._call_soon_threadsafe: Callable[[Callable[[], None]], object] | None = None
        self._on_trio = False
        self._reaper_owned = False
        self._closed = False

    # -- the API -------------------------------------------------------------

    def try_complete_else_watch(self, operation: Op, keys: Iterable[Hashable]) -> bool:
        """Complete ``operation`` now, or watch it under ``keys`` and start its timeout.

        Returns True only if this call completed it. Everything is checked before
        anything changes (ValueError: no keys, an operation already given to a
        purgatory, this one included, or already done; TypeError: an unhashable
        key; the timer's TypeError or ValueError: a delay it would refuse;
        RuntimeError: closed). A key given twice is watched once.
        O(len(keys)) + two ``try_complete`` calls.
        """
        if self._closed:
            raise RuntimeError(f"purgatory {self.name!r} is closed")
        if operation._purgatory is not None:
            raise ValueError(f"{operation!r} is already in a purgatory")
        if operation._state:  # is_done, read directly: the hot path
            raise ValueError(f"{operation!r} is already done")
        keys = tuple(keys)
        if not keys:
            raise ValueError("an operation must be watched under at least one key")
        try:
            hash(keys)  # hashes every key, in C (dict.fromkeys measured 380 ns: 6x more)
        except TypeError as exc:
            raise TypeError(f"keys must be hashable: {exc}") from None
        if self.timer_enabled and operation.delay_ms.__class__ is not int:
            coerce_delay(operation.delay_ms)  # raises what timer.add would
        operation._purgatory = self  # taken: a re-entrant submission is refused
        try:
            if operation.try_complete():
                return True  # counted by force_complete (_operation_completed)
        except BaseException:
            if not operation._state:
                operation._purgatory = None  # nothing changed: it may be given again
            raise
        operation._keys = keys
        self._depth += 1
        try:
            watchers = self._watchers
            for key in keys:
                ops = watchers.get(key)
                if ops is None:
                    watchers[key] = {operation: None}
                elif operation not in ops:
                    ops[operation] = None
                else:
                    continue  # a key given twice
                self._watched += 1
            self._estimated += 1
            try:
                if operation.try_complete():
                    return True
            finally:
                if not operation._state and self.timer_enabled:
                    self.timer.add(operation)
                    self._num_delayed += 1
            return False
        finally:
            self._depth -= 1
            if self._purge_due and not self._depth:
                self._leave()

    def check_and_complete(self, key: Hashable) -> int:
        """Try the operations watched on ``key``; return how many this call completed.

        Operations completed elsewhere are dropped without being counted; an
        emptied key is removed. The walk goes over a copy of the list, and the
        list itself stays in place, so a callback may call any method of the
        purgatory, on this key too (a nested ``check_and_complete`` completes
        what is ready, ``cancel_for_key`` cancels), and an interrupt leaves the
        list whole. O(operations on the key) + their callbacks.
        """
        ops = self._watchers.get(key)
        if ops is None:
            return 0
        completed = 0
        errors: list[BaseException] = []
        self._depth += 1
        try:
            for op in list(ops):
                if not op._state:  # pending: try it
                    try:
                        if op.try_complete():
                            completed += 1
                    except (KeyboardInterrupt, SystemExit):
                        raise
                    except BaseException as exc:  # noqa: BLE001 - reported; the walk goes on
                        report_exception(
                            f"try_complete of {op!r} in purgatory {self.name!r} failed",
                            exc,
                            errors,
                            operation=op,
                        )
                    if not op._state:
                        continue
                if ops.pop(op, 0) is None:  # done: leaves the list, unless gone already
                    self._watched -= 1
        finally:
            if not ops and self._watchers.get(key) is ops:
                del self._watchers[key]
            self._depth -= 1
            if self._purge_due and not self._depth:
                self._leave()
        raise_collected(f"{len(errors)} operations failed in {self.name!r}", errors)
        return completed

    def cancel_for_key(self, key: Hashable) -> list[Op]:
        """Stop watching ``key``: cancel (not complete) its pending operations, return them.

        Cancelled operations leave the timer and their awaiters raise
        :class:`~purgatory.OperationCancelledError`; entries under other keys are
        dropped lazily, by the purge, which counts them like completed ones. An
        unknown key gives []. O(operations on the key).
        """
        ops = self._watchers.pop(key, None)
        if ops is None:
            return []
        self._watched -= len(ops)
        listed = list(ops)
        ops.clear()  # a walk of this key going on sees its list emptied
        error = OperationCancelledError(f"cancelled: key {key!r} of {self.name!r}")
        cancelled = [op for op in listed if self._cancel(op, error)]
        self._purge_if_due()
        return cancelled

    @property
    def watched(self) -> int:
        """Sum of the watcher lists' lengths, completed but unpurged entries included. O(1)."""
        return self._watched

    @property
    def num_delayed(self) -> int:
        """This purgatory's operations pending in the timer. O(1)."""
        return self._num_delayed

    def watched_keys(self) -> list[Hashable]:
        """The keys with a watcher list. O(keys)."""
        return list(self._watchers)

    def statistics(self) -> PurgatoryStatistics:
        """A frozen snapshot of the counters and the expiry lateness. O(histogram buckets)."""
        late = self._lateness
        return PurgatoryStatistics(
            name=self.name,
            watched=self._watched,
            num_delayed=self._num_delayed,
            keys=len(self._watchers),
            completed_early=self._completed_early,
            expired=self._expired,
            cancelled=self._cancelled,
            purged=self._purged,
            purges=self._purges,
            lateness_count=late.count,
            lateness_max_ms=late.max,
            lateness_p50_ms=late.quantile(0.5),
            lateness_p99_ms=late.quantile(0.99),
        )

    def purge_completed(self) -> int:
        """Remove completed (and cancelled) operations and empty keys from every list;
        return how many entries left.

        O(operations done since the last purge x their keys), however many are
        pending. Runs by itself when the estimate crosses ``purge_interval``.
        """
        removed = 0
        watchers = self._watchers
        done = self._done_watched
        self._done_watched = []
        for op in done:
            for key in op._keys:
                ops = watchers.get(key)
                if ops is not None and ops.pop(op, 0) is None:
                    removed += 1
                    if not ops:
                        del watchers[key]
        self._watched -= removed
        self._purged += removed
        self._purges += 1
        return removed

    def call_threadsafe(self, fn: Callable[..., R], *args: Any) -> concurrent.futures.Future[R]:
        """Run ``fn(*args)`` on the purgatory's loop from any thread; a future of its result.

        The loop is the one the purgatory was entered on (``async with``): asyncio's
        ``loop.call_soon_threadsafe``, or on trio ``TrioToken.run_sync_soon`` (as
        ``trio.from_thread.run_sync`` does, without blocking the calling thread).
        """
        schedule = self._call_soon_threadsafe
        if schedule is None:
            raise RuntimeError(f"purgatory {self.name!r} is not running on a loop")
        result: concurrent.futures.Future[R] = concurrent.futures.Future()
        on_trio = self._on_trio

        def call() -> None:
            if not result.set_running_or_notify_cancel():
                return
            try:
                result.set_result(fn(*args))
            except BaseException as exc:
                result.set_exception(exc)
                # asyncio: KeyboardInterrupt & co. also stop the loop, as they would
                # from any callback; trio would turn them into TrioInternalError
                if not isinstance(exc, Exception) and not on_trio:
                    raise

        schedule(call)
        return result

    # -- lifecycle -----------------------------------------------------------

    async def __aenter__(self) -> DelayedOperationPurgatory[Op]:
        """Bind to the running asyncio loop or trio run; start the timer's reaper
        (if ``reaper_enabled`` and none runs)."""
        loop = running_loop()
        if loop is not None:
            self._call_soon_threadsafe = loop.call_soon_threadsafe
            self._on_trio = False
        elif in_trio_run():
            from ._trio import threadsafe_scheduler

            self._call_soon_threadsafe = threadsafe_scheduler()
            self._on_trio = True
        else:
            raise RuntimeError("no running event loop")
        if self.reaper_enabled and self.timer._reaper is None:
            await self.timer.__aenter__()
            self._reaper_owned = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        """:meth:`close`, then release the reaper; the block's exception goes on as itself."""
        self._call_soon_threadsafe = None
        owned, self._reaper_owned = self._reaper_owned, False
        suppress = False
        try:
            self._cancel_pending()
        finally:
            if owned:
                suppress = await self.timer.__aexit__(exc_type, exc, tb)
        return suppress

    async def close(self) -> None:
        """Cancel every pending operation (awaiters raise PurgatoryClosedError) and
        stop the reaper if this purgatory started it. Idempotent.

        asyncio: the reaper's task has ended when this returns. trio: the reaper
        polls no more; its nursery closes when the ``async with`` block exits
        (a nursery must close in the block that opened it), so on trio use
        ``async with`` rather than ``__aenter__`` + ``close()``.
        """
        self._cancel_pending()
        self._call_soon_threadsafe = None
        if self._reaper_owned:
            reaper = self.timer._reaper
            if reaper is None or reaper.stops_fully:
                self._reaper_owned = False
                await self.timer.__aexit__(None, None, None)
            else:
                reaper.request_stop()

    def _cancel_pending(self) -> None:
        """Close: cancel every pending operation, once. O(watched)."""
        if not self._closed:
            self._closed = True
            error = PurgatoryClosedError(f"purgatory {self.name!r} closed")
            watchers = self._watchers
            self._watchers = {}
            self._watched = 0
            self._done_watched = []
            for ops in watchers.values():
                listed = list(ops)
                ops.clear()  # a walk going on sees its list emptied
                for op in listed:
                    self._cancel(op, error)

    # -- bookkeeping ---------------------------------------------------------

    def _cancel(self, op: Op, error: OperationCancelledError) -> bool:
        was_scheduled = op._list is not None
        if not op._abandon(error):
            return False
        self._cancelled += 1
        if was_scheduled:
            self._num_delayed -= 1
        self._done_watched.append(op)
        return True

    def _operation_completed(self, op: DelayedOperation[Any], from_timer: bool) -> None:
        """Called by ``force_complete`` of an operation given to this purgatory
        (watched, or in its first ``try_complete``): counters and purge. O(1)."""
        if op._keys:  # watched: its entries wait for the purge
            self._done_watched.append(op)  # type: ignore[arg-type]
        if from_timer:
            self._num_delayed -= 1
        if op._expiring:
            self._expired += 1
            self._lateness.record(self.timer.poll_now_ms() - op.expiration_ms)
        else:
            self._completed_early += 1
        if self._estimated - self._num_delayed > self.purge_interval:
            self._request_purge()

    def _purge_if_due(self) -> None:
        """Purge if the estimate says more than ``purge_interval`` done operations
        may be watched (completed or cancelled alike). O(1) unless it purges."""
        if self._estimated - self._num_delayed > self.purge_interval:
            self._request_purge()

    def _request_purge(self) -> None:
        """Purge now, or at the end of the purgatory call running callbacks."""
        if self._depth:
            self._purge_due = True
        else:
            self._purge()

    def _leave(self) -> None:
        """Run the purge deferred while callbacks ran (call at depth 0)."""
        self._purge_due = False
        if self._estimated - self._num_delayed > self.purge_interval:
            self._purge()

    def _purge(self) -> None:
        self._estimated = self._num_delayed
        self.purge_completed()

    def _check_invariants(self) -> None:
        """Check the counters against the lists. O(watched)."""
        total = 0
        noted = set(map(id, self._done_watched))
        for key, ops in self._watchers.items():
            assert ops, f"empty watcher list kept for {key!r}"
            total += len(ops)
            for op in ops:
                assert op._purgatory is self, f"{op!r} watched but not ours"
                assert key in op._keys, f"{op!r} watched under a key it was not given"
                if op.is_done:
                    assert id(op) in noted, f"done {op!r} watched but not noted for purge"
        assert total == self._watched, f"watched {self._watched} but lists hold {total}"
        assert self._num_delayed >= 0
        if self.timer_enabled:
            assert self._num_delayed <= len(self.timer)
        assert self._depth == 0

    def __repr__(self) -> str:
        return (
            f"<DelayedOperationPurgatory {self.name!r} watched={self._watched} "
            f"num_delayed={self._num_delayed} keys={len(self._watchers)}>"
        )
