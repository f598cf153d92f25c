"""Purgatory: operations watched under keys, completed early or on timeout (the
synchronous core of :class:`purgatory.DelayedOperationPurgatory`, which adds
``async with``, ``close()`` and ``call_threadsafe``).

Each key (a :class:`~purgatory.TopicPartition`, or any hashable) has a *watcher
list* of the operations waiting on it. An operation may wait on several keys.

``try_complete_else_watch(op, keys)``:

1. try to complete it: done if it completes now;
2. add it to the timer, which expires it after ``op.delay_ms`` unless it
   completes first (a delay the timer refuses raises here, before anything
   is watched);
3. append it to each key's watcher list;
4. count it once in the purge estimate.

Kafka watches first and then tries a second time, under the operation's lock:
another thread may make the condition true between its first try and the
watching, and the second try catches that. Here everything runs on one thread
and no other code runs between the try and the watching, so a second try
would only repeat the first: it is left out (one user callback less per
operation, measured in BENCHMARKS.md).

``check_and_complete(key)``, called when something happened on ``key``, walks the
key's list: operations already completed elsewhere are dropped (not counted),
the others are tried; completed ones leave the list, an emptied key is removed.
The walk goes over a copy of the list while the list stays where it is, and
every removal is "pop it if it is still there", counted only when it was: so a
callback may call the purgatory re-entrantly, on the walked key too, and each
call does what it says. A nested ``check_and_complete(key)`` completes what is
ready (the outer walk then finds those done and skips them);
``cancel_for_key(key)`` cancels the key's pending operations (it empties the
list in place, so the outer walk finds nothing left to remove); a purge removes
done operations in place; a newly watched operation joins the live list and
waits for the next walk.

Lazy deletion and the purge. An operation completed through one key (or by the
timer, or directly) still sits in its other keys' lists. Like Kafka, those
entries are removed lazily: by a later ``check_and_complete`` on that key, or by
the *purge*: when the estimate of watched operations minus ``num_delayed``
exceeds ``purge_interval``, the estimate is reset to ``num_delayed`` and the
completed (and cancelled) operations leave every list. Kafka checks this in a
reaper thread that wakes every 200 ms; here the check is O(1) bookkeeping on
every completion or cancellation of a watched operation (a cancellation leaves
the timer like a completion, so it moves the estimate the same way: operations
only ever cancelled are purged too; deferred to the end of the running purgatory call, if any), so
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
the purgatory walks many operations (``check_and_complete``, expiry by the
timer) is caught for that operation and handed to ``report_exception`` (the
core: raised after the walk, one exception as itself, several as an
ExceptionGroup, see :mod:`.report`; the async shell: the running loop's
exception handler, on trio the ``"purgatory"`` logger); the other operations
proceed, and the failing operation is left consistent: pending and watched if
``try_complete`` raised, completed (its awaiters raising the exception) if
``on_complete`` did. That covers every ``BaseException`` (a ``CancelledError``,
``trio.Cancelled`` or ``GeneratorExit`` raised by a callback is its bug) but
``KeyboardInterrupt`` and ``SystemExit``, which propagate at once: the walk
stops, the operations it did not reach stay pending and watched, and
``_check_invariants()`` holds. In ``try_complete_else_watch`` the exception
goes to the caller, after the operation has been added to the timer if it was
already being watched (if the first ``try_complete`` raised, nothing was
watched and the operation may be given again).

Validation. ``try_complete_else_watch`` checks everything before it changes
anything: the keys (at least one, each hashable: TypeError names the first
unhashable one), the delay (what the timer's ``add`` accepts: an ``int``, any
integer with ``__index__`` such as NumPy's, or a finite float rounded up; bool,
NaN, infinities and strings are refused, see :func:`.timer.coerce_delay`), and
the operation (not done, not in any purgatory: it is claimed before its first
``try_complete``, so handing it again from its own ``try_complete`` is refused
too). On any of these errors nothing is watched, timed or counted.

Threads and loops. The purgatory is synchronous and single-threaded: all its
methods run on one thread, the event loop's under the async shell. It never
awaits; it runs callbacks, and the timer it is given runs its expiries.
Closing (:meth:`Purgatory.shutdown`) cancels every pending operation (its
awaiters raise :class:`~.errors.PurgatoryClosedError`) and refuses new ones; the
async shell's ``close()`` and ``async with`` exit call it, then stop the reaper.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from ._signature import InitSignature, init_doc
from .errors import OperationCancelledError, PurgatoryClosedError
from .histogram import Histogram
from .operation import CompletionListener, Operation
from .report import collect_exception, raise_collected
from .timer import Timer, WheelTimer, coerce_delay

try:
    import cython
except ImportError:  # the pure-Python core, with Cython not installed
    from . import _cython_shim as cython

if not cython.compiled:  # the compiled core cimports CPython's own (purgatory.pxd)

    def gc_untrack(obj: object) -> None:
        """Take ``obj`` out of the cyclic garbage collector (compiled core only)."""

    def gc_is_tracked(obj: object) -> bool:
        """Whether the cyclic garbage collector tracks ``obj`` (compiled core only)."""
        return True  # the pure core untracks nothing

    def gc_track(obj: object) -> None:
        """Hand ``obj`` back to the cyclic garbage collector (compiled core only)."""


__all__ = ["BUILD", "DEFAULT_PURGE_INTERVAL", "Purgatory", "PurgatoryStatistics"]

#: which build this module is, as reprs show it (see timer.BUILD)
BUILD = "compiled" if cython.compiled else "pure"

#: Kafka's default: purge once this many completed operations may be watched.
DEFAULT_PURGE_INTERVAL = 1000


@dataclass(frozen=True, slots=True)
class PurgatoryStatistics:
    """A snapshot of a purgatory's counters (see :meth:`Purgatory.statistics`)."""

    name: str
    watched: int  #: sum of watcher-list lengths (Kafka's PurgatorySize)
    num_delayed: int  #: operations pending in the timer (NumDelayedOperations)
    keys: int  #: keys with a watcher list
    completed_early: int  #: completed before their deadline
    expired: int  #: completed by the timer
    #: expired before their deadline by the timer's clock (only a timer made with
    #: ``may_expire_early=True`` does that; lateness counts them as 0)
    expired_early: int
    cancelled: int  #: cancelled (cancel_for_key, close)
    purged: int  #: completed operations removed from watcher lists by purges
    purges: int  #: purges run
    lateness_count: int  #: expirations measured
    lateness_max_ms: int  #: how long after its deadline (now + timeout) the latest expiry ran
    lateness_p50_ms: int  #: median expiry lateness (log-linear histogram, <12.5% over)
    lateness_p99_ms: int  #: 99th percentile expiry lateness


class Purgatory(CompletionListener):
    """Holds delayed operations under keys until they complete or expire; see module doc.

    Not generic itself (a compiled core makes it an extension type);
    :class:`purgatory.DelayedOperationPurgatory` adds the operation type parameter.

    ``timer`` expires them (any :class:`~.timer.Timer`; whoever owns it polls it
    or runs its reaper); with ``timer_enabled=False`` operations are never added
    to the timer (they complete only through keys).
    """

    __slots__ = (
        "_cancelled",
        "_closed",
        "_completed_early",
        "_depth",
        "_done_watched",
        "_estimated",
        "_expired",
        "_expired_early",
        "_lateness",
        "_num_delayed",
        "_purge_due",
        "_purged",
        "_purges",
        "_watchers_version",
        "_untrack",
        "_watched",
        "_watchers",
        "_wheel_timer",
        "name",
        "purge_interval",
        "timer",
        "timer_enabled",
    )

    #: the constructor's signature for ``inspect`` and ``help()`` in the compiled core too
    __signature__ = InitSignature()

    def __init__(
        self,
        name: str = "purgatory",
        *,
        timer: Timer,
        purge_interval: int = DEFAULT_PURGE_INTERVAL,
        timer_enabled: bool = True,
    ) -> None:
        "__init__(self, name='purgatory', *, timer, purge_interval=1000, timer_enabled=True)\n--\n\nA purgatory named ``name`` that times its operations on ``timer``."  # noqa: E501
        if type(purge_interval) is not int or purge_interval < 0:
            raise ValueError(f"purge_interval must be a non-negative int, not {purge_interval!r}")
        self.name = name
        self.timer = timer
        # the same timer when it is the core's own: the compiled core calls it in C
        self._wheel_timer: WheelTimer | None = timer if isinstance(timer, WheelTimer) else None
        self.purge_interval = purge_interval
        self.timer_enabled = timer_enabled
        # invariant: no empty list; each list holds operations watched on its key,
        # oldest first (a dict used as an ordered set: O(1) removal of any one)
        self._watchers: dict[Hashable, dict[Operation, None]] = {}
        # invariant: every done operation still in a watcher list is in here, and so is
        # every done one the collector does not track (untrack_pending): _let_go hands
        # each back as it leaves
        self._done_watched: list[Operation] = []
        self._watched = 0  # invariant: == sum of the lengths of the watcher lists
        # changes whenever a key gains or loses its list (or _watchers is replaced),
        # so a list looked up before a callback is known to be still current after it
        self._watchers_version = 0
        # Kafka's estimatedTotalOperations: +1 per watched operation, reset by purges
        self._estimated = 0
        self._num_delayed = 0  # invariant: this purgatory's operations in the timer
        self._depth = 0  # > 0 while a purgatory method is running callbacks
        self._purge_due = False  # a purge was asked for while _depth > 0
        self._completed_early = 0
        self._expired = 0
        self._expired_early = 0  # expiries before their deadline_ms (may_expire_early)
        self._cancelled = 0
        self._purged = 0
        self._purges = 0
        self._lateness = Histogram()
        self._closed = False
        self._untrack = False  # see untrack_pending

    # -- the API -------------------------------------------------------------

    def try_complete_else_watch(self, operation: Operation, keys: Iterable[Hashable]) -> bool:
        """Complete ``operation`` now, or watch it under ``keys`` and start its timeout.

        Returns True only if this call completed it. Everything is checked before
        anything changes (ValueError: no keys, an operation already given to a
        purgatory, this one included, or already done; TypeError: an unhashable
        key; the timer's TypeError or ValueError: a delay it would refuse;
        :class:`~purgatory.PurgatoryClosedError`, a RuntimeError: closed). A key
        given twice is watched once. Unlike Kafka it tries once, not again after
        watching: see the module doc. If the operation's ``try_complete`` returns
        False but the operation is done by then (completed or cancelled by a
        re-entrant call), it is neither timed nor watched, and False is returned;
        if it closed the purgatory, it is cancelled as closing cancels.
        O(len(keys)) + one ``try_complete`` call.
        """
        self._check_fresh(operation)
        keys = tuple(keys)
        nkeys = len(keys)
        ops = self._check_keys(keys, nkeys)
        if self.timer_enabled and type(operation.delay_ms) is not int:
            coerce_delay(operation.delay_ms)  # a type the timer refuses, before the try
        watchers_version = self._watchers_version
        operation._purgatory = self  # taken: a re-entrant submission is refused
        try:
            if operation.try_complete():
                return True  # counted by force_complete (_operation_completed)
            if operation._state:
                # its try_complete completed or cancelled it re-entrantly (say through
                # another operation's callback) and still returned False: counted by
                # then, and never watched or timed, so nothing is left to do
                return False
            if self._closed:  # its try_complete shut us down: cancelled, as shutdown cancels
                operation._cancel_with(self._closed_error())
                return False
            if self.timer_enabled:  # before watching: a delay out of range changes nothing
                self._add_to_timer(operation)
        except BaseException:
            if not operation._state:
                operation._purgatory = None  # nothing changed: it may be given again
            raise
        operation._nkeys = nkeys
        self._estimated += 1
        if nkeys == 1:
            self._watch_one(operation, keys[0], ops, watchers_version)
        else:
            self._watch_each(operation, keys)
        return False

    def _check_fresh(self, operation: Operation) -> None:
        """Refuse an operation this purgatory cannot take: closed, the operation given
        already or done. O(1)."""
        if self._closed:
            raise PurgatoryClosedError(f"purgatory {self.name!r} is closed")
        if operation._purgatory is not None:
            raise ValueError(f"{operation!r} is already in a purgatory")
        if operation._state:  # is_done, read directly: the hot path
            raise ValueError(f"{operation!r} is already done")

    def _check_keys(self, keys: tuple[Hashable, ...], nkeys: int) -> dict[Operation, None] | None:
        """Refuse no keys (ValueError) and an unhashable key (TypeError); return the
        watcher list of the only key, if there is one key and it has a list. O(nkeys)."""
        if nkeys == 1:  # the common case: the key's list, looked up once
            try:
                return self._watchers.get(keys[0])  # hashes the key, in C: check and lookup
            except TypeError as exc:
                raise TypeError(f"keys must be hashable: {exc}") from None
        if not nkeys:
            raise ValueError("an operation must be watched under at least one key")
        try:
            hash(keys)  # hashes every key, in C (dict.fromkeys measured 380 ns: 6x more)
        except TypeError as exc:
            raise TypeError(f"keys must be hashable: {exc}") from None
        return None

    def _add_to_timer(self, operation: Operation) -> None:
        """Start ``operation``'s timeout (the timer's error for a delay it refuses). O(1)."""
        wheel_timer = self._wheel_timer
        if wheel_timer is not None:
            wheel_timer.add(operation)
        else:
            self.timer.add(operation)
        self._num_delayed += 1
        if cython.compiled and self._untrack:
            gc_untrack(operation)  # see untrack_pending

    def _watch_one(
        self,
        operation: Operation,
        key: Hashable,
        ops: dict[Operation, None] | None,
        watchers_version: int,
    ) -> None:
        """Watch ``operation`` under its only key, whose list ``ops`` was looked up at
        ``watchers_version``. O(1)."""
        operation._keys = key
        if self._watchers_version != watchers_version:  # a callback gave or took a list
            ops = self._watchers.get(key)
        if ops is None:
            self._watchers[key] = {operation: None}
            self._watchers_version += 1
        else:
            # a fresh operation (it had no purgatory) is in no list yet
            ops[operation] = None
        self._watched += 1

    def _watch_each(self, operation: Operation, keys: tuple[Hashable, ...]) -> None:
        """Watch ``operation`` under each of ``keys``, once per key. O(len(keys))."""
        operation._keys = keys
        watchers = self._watchers
        for key in keys:
            ops = watchers.get(key)
            if ops is None:
                watchers[key] = {operation: None}
                self._watchers_version += 1
            elif operation not in ops:
                ops[operation] = None
            else:
                continue  # a key given twice
            self._watched += 1

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
                        self.report_exception(
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
                self._watchers_version += 1
            self._depth -= 1
            if self._purge_due and not self._depth:
                self._purge_if_deferred()
        if errors:  # the message is built only then: an f-string per call cost ~1,400 instructions
            raise_collected(f"{len(errors)} operations failed in {self.name!r}", errors)
        return completed

    def cancel_for_key(self, key: Hashable) -> list[Operation]:
        """Stop watching ``key``: cancel (not complete) its pending operations, return them.

        Cancelled operations leave the timer and their awaiters raise
        :class:`~purgatory.OperationCancelledError`; entries under other keys are
        dropped lazily, by the purge, which counts them like completed ones. An
        unknown key gives []. O(operations on the key).
        """
        ops = self._watchers.pop(key, None)
        if ops is None:
            return []
        self._watchers_version += 1
        self._watched -= len(ops)
        listed = list(ops)
        ops.clear()  # a walk of this key going on sees its list emptied
        error = OperationCancelledError(f"cancelled: key {key!r} of {self.name!r}")
        self._depth += 1  # one purge check at the end, not one per operation
        try:
            cancelled = [op for op in listed if op._cancel_with(error)]
        finally:
            self._depth -= 1
            if self._purge_due and not self._depth:
                self._purge_if_deferred()
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
            expired_early=self._expired_early,
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
        done = self._done_watched
        self._done_watched = []
        self._let_go(done)
        for op in done:
            if op._nkeys > 1:
                for key in op._keys:
                    removed += self._unwatch(op, key)
            else:  # one key, kept as itself (no tuple to build)
                removed += self._unwatch(op, op._keys)
        self._watched -= removed
        self._purged += removed
        self._purges += 1
        return removed

    def _let_go(self, done: list[Operation]) -> None:
        """Hand ``done`` operations, which this purgatory is about to stop holding, back
        to the cyclic garbage collector (see :meth:`untrack_pending`). O(len(done)) in
        the compiled core; nothing in the pure one."""
        if cython.compiled:
            for op in done:
                if not gc_is_tracked(op):
                    gc_track(op)

    def _unwatch(self, op: Operation, key: Hashable) -> int:
        """Take ``op`` out of ``key``'s list, dropping the list if that empties it;
        1 if it was there, else 0. O(1)."""
        watchers = self._watchers
        ops = watchers.get(key)
        if ops is None or ops.pop(op, 0) is not None:
            return 0
        if not ops:
            del watchers[key]
            self._watchers_version += 1
        return 1

    @property
    def closed(self) -> bool:
        """True once :meth:`shutdown` ran: the purgatory takes no more operations. O(1)."""
        return self._closed

    def untrack_pending(self) -> None:
        """Keep operations out of the cyclic garbage collector while they wait in the
        timer, from now until :meth:`shutdown`. O(1).

        In the compiled core, an operation this purgatory adds to the timer is
        untracked (``gc.is_tracked`` says False) until the purgatory lets go of it:
        at the purge after it completes, expires or is cancelled (its watcher entries
        leave then), or at :meth:`shutdown`, when it is tracked again. The collector
        stops walking every pending operation, and every done one waiting for the
        purge, at each of its passes, which cost more CPU than the operation itself
        and delayed expiries (BENCHMARKS.md). Nothing is lost: until it is tracked
        again the operation is reachable from this purgatory (its watcher lists, its
        list of done operations to purge), so the collector could not free it, nor
        anything it reaches, anyway. What it needs is that :meth:`shutdown` runs (it
        cancels every pending operation and tracks every untracked one again): a
        purgatory dropped with untracked operations and never shut down keeps itself
        and them alive. The async shell calls this on entering ``async with``, whose
        exit shuts down. The pure core tracks everything always.
        """
        self._untrack = True

    def shutdown(self) -> None:
        """Cancel every pending operation (awaiters raise
        :class:`~.errors.PurgatoryClosedError`) and refuse new ones. Idempotent.
        O(watched)."""
        if not self._closed:
            self._closed = True
            self._untrack = False
            error = self._closed_error()
            watchers = self._watchers
            self._watchers = {}
            self._watchers_version += 1
            self._watched = 0
            self._let_go(self._done_watched)
            self._done_watched = []
            for ops in watchers.values():
                listed = list(ops)
                ops.clear()  # a walk going on sees its list emptied
                for op in listed:
                    op._cancel_with(error)
            self._let_go(self._done_watched)
            self._done_watched = []  # their keys are gone with the lists

    def _closed_error(self) -> PurgatoryClosedError:
        """What the operations cancelled by closing raise."""
        return PurgatoryClosedError(f"purgatory {self.name!r} closed")

    #: where a callback's exception goes during a pass (see :mod:`.report`)
    report_exception = collect_exception

    # -- bookkeeping ---------------------------------------------------------

    def _operation_cancelled(self, op: Operation, from_timer: bool) -> None:
        """Called by ``Operation._cancel_with`` of an operation given to this purgatory
        (``op.cancel()``, ``cancel_for_key``, ``shutdown``): counters and purge. O(1)."""
        self._cancelled += 1
        if from_timer:
            self._num_delayed -= 1
        if op._nkeys:  # watched: its entries wait for the purge
            self._done_watched.append(op)
        if self._estimated - self._num_delayed > self.purge_interval:
            self._request_purge()

    def _operation_completed(self, op: Operation, from_timer: bool) -> None:
        """Called by ``force_complete`` of an operation given to this purgatory
        (watched, or in its first ``try_complete``): counters and purge. O(1)."""
        if op._nkeys:  # watched: its entries wait for the purge
            self._done_watched.append(op)
        if from_timer:
            self._num_delayed -= 1
        if op._expiring:
            self._expired += 1
            wheel = self._wheel_timer
            now_ms = wheel.poll_now_ms() if wheel is not None else self.timer.poll_now_ms()
            # from the deadline asked for, not the bucket's expiration: an early
            # expiry shows (counted, and as lateness 0)
            lateness_ms = now_ms - op.deadline_ms
            if lateness_ms < 0:
                self._expired_early += 1
            self._lateness.record(lateness_ms)
        else:
            self._completed_early += 1
        if self._estimated - self._num_delayed > self.purge_interval:
            self._request_purge()

    def _request_purge(self) -> None:
        """Purge now, or at the end of the purgatory call running callbacks."""
        if self._depth:
            self._purge_due = True
        else:
            self._purge()

    def _purge_if_deferred(self) -> None:
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
                given = op._keys if op._nkeys > 1 else (op._keys,)
                assert key in given, f"{op!r} watched under a key it was not given"
                if op.is_done:
                    assert id(op) in noted, f"done {op!r} watched but not noted for purge"
                    assert op._waiter is None and op._waiters is None, f"{op!r} done, waited"
                else:
                    assert op._waiter is None or op._waiters is None, f"{op!r}: two waiter stores"
                    # untracked by the collector only while in the timer (untrack_pending;
                    # another Timer than the core's keeps no bucket in the task to see)
                    timed = op.is_scheduled or self._wheel_timer is None
                    assert gc_is_tracked(op) or timed, f"{op!r} untracked, untimed"
        assert total == self._watched, f"watched {self._watched} but lists hold {total}"
        assert self._num_delayed >= 0
        if self.timer_enabled:
            assert self._num_delayed <= len(self.timer)
        assert self._depth == 0

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self.name!r} watched={self._watched} "
            f"num_delayed={self._num_delayed} keys={len(self._watchers)} build={BUILD}>"
        )


init_doc(Purgatory)  # the text signature is for the compiled core only
