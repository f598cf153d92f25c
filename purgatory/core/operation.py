"""Operation: a request that waits and completes exactly once (the synchronous core
of :class:`purgatory.DelayedOperation`, which adds ``await``).

An operation is a :class:`~.timer_list.TimerTask` with a lifecycle, its state
readable as :attr:`Operation.outcome` (an :class:`Outcome`)::

    PENDING --force_complete()------> COMPLETED   (early: try_complete, or directly)
    PENDING --the timer runs it-----> EXPIRED     (force_complete from run())
    PENDING --cancel()--------------> CANCELLED   (this one; or cancel_for_key, close)

``is_completed`` is True in COMPLETED and EXPIRED (Kafka's ``isCompleted``: an
expired operation completed too, by its timeout); ``expired`` only in EXPIRED.

Cancelling one operation (:meth:`Operation.cancel`: its client went away, its
request was aborted) takes it out of the timer, tells its purgatory (which
counts it as cancelled, no longer delayed, and notes its watcher entries for
the purge) and fails its awaiters at once with
:class:`~purgatory.OperationCancelledError`. No callback runs. The timer's own
unscheduling of a task is :meth:`~.timer_list.TimerTask._unlink`, which an
operation does not override.

Subclasses implement three callbacks, as in Kafka:

* ``try_complete()``: check the condition; if it holds, call ``force_complete()``
  and return its result. Called by the purgatory when an event on a watched key
  may have made the condition true.
* ``on_complete()``: build the outcome. Runs exactly once, in the caller that won
  ``force_complete()``; its return value is what ``await op`` gives.
* ``on_expiration()``: runs after ``on_complete()`` when the timeout completed
  the operation (the timer runs the task: ``force_complete()`` then, if it won,
  ``on_expiration()``).

Exactly once: ``force_complete()`` moves the state to COMPLETED *before* running
any callback, so a second caller (a re-entrant ``try_complete``, the timer, a
completer on another key) sees it completed and returns False. The winner cancels
the timer task, then runs ``on_complete()``.

Waiters. Whoever wants the outcome registers a *waiter* (:class:`Waiter`:
``done``, ``set_result``, ``set_exception``; an ``asyncio.Future`` is one) with
:meth:`Operation.add_waiter`, and takes it back with
:meth:`Operation.remove_waiter` if it stops waiting. When the operation settles
(completed, or cancelled by the purgatory) every waiter not yet done gets the
outcome or the error, once. Waiting is lazy: an operation nobody waits for never
allocates a waiter. The async shell (:mod:`purgatory.aio.operation`) makes
one waiter per ``await``, so cancelling one awaiting task ends only that wait.
``Operation.__await__`` is here, so that the compiled core runs it in C, through
two hooks that the async shell's :mod:`purgatory.aio.operation` (which defines the
awaitable operation) sets with :func:`set_await_hooks`: this module imports no
event loop.

An operation never given to a purgatory can be awaited too: nothing watches or
times it, so it completes only when someone calls ``force_complete()`` (its
awaiters then get ``on_complete``'s value) and otherwise waits for ever; give it
to a purgatory (``try_complete_else_watch``) for a timeout. Its ``delay_ms`` means
nothing until then.

Exceptions: an exception raised by ``on_complete()`` propagates to whoever called
``force_complete()``; the operation is COMPLETED all the same, and its awaiters
raise that exception. (The purgatory and the timer, which run callbacks for many
operations in one pass, catch it per operation and report it; see
:mod:`.purgatory`.)

The fields ``_purgatory``, ``_keys``, ``_nkeys`` and ``_expiring`` are the purgatory's
bookkeeping (:mod:`.purgatory`; the two classes are one unit, as Kafka's
``DelayedOperation.scala`` holds both), read and written by nothing else.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Generator
from enum import Enum
from typing import Any, Protocol, TypeVar

from ._signature import init_doc
from .errors import OperationCancelledError
from .timer_list import TimerTask

__all__ = ["CompletionListener", "Operation", "Outcome", "Waiter", "set_await_hooks"]

T_contra = TypeVar("T_contra", contravariant=True)


class Waiter(Protocol[T_contra]):
    """One party waiting for an operation's outcome (an ``asyncio.Future`` is one)."""

    def done(self) -> bool: ...

    def set_result(self, result: T_contra, /) -> None: ...

    def set_exception(self, exception: BaseException, /) -> None: ...


# The states, as small ints (the hot paths test ``_state`` for zero: pending). Bit 0
# set means completed (on_complete ran or raised): early (1) or by expiry (3).
_PENDING = 0
_COMPLETED = 1
_CANCELLED = 2
_EXPIRED = 3


class Outcome(Enum):
    """How an operation ended, or that it has not: :attr:`Operation.outcome`."""

    #: waiting: not completed, not expired, not cancelled
    PENDING = _PENDING
    #: completed before its deadline (``try_complete`` or ``force_complete``)
    COMPLETED = _COMPLETED
    #: completed by its timeout: the timer ran it (then ``on_expiration`` ran)
    EXPIRED = _EXPIRED
    #: cancelled: ``cancel()``, ``cancel_for_key`` or the purgatory closing; no callback ran
    CANCELLED = _CANCELLED


#: a waiter list is first pruned of done waiters at this length (add_waiter)
_FIRST_PRUNE = 8

_OUTCOMES = (Outcome.PENDING, Outcome.COMPLETED, Outcome.CANCELLED, Outcome.EXPIRED)


def _no_loop() -> None:
    return None


def _not_awaitable(op: Operation) -> Generator[Any, None, Any]:
    raise TypeError(f"awaiting {op!r} needs purgatory.aio (import purgatory)")


# ``await op``'s two hooks (see set_await_hooks): the running asyncio loop or None, and
# every other wait (a done operation, trio)
_running_loop: Callable[[], Any] = _no_loop
_await_otherwise: Callable[[Operation], Generator[Any, None, Any]] = _not_awaitable


def set_await_hooks(
    running_loop: Callable[[], Any],
    otherwise: Callable[[Operation], Generator[Any, None, Any]],
) -> None:
    """How ``await op`` reaches an event loop, which this module does not import. O(1).

    ``running_loop()`` returns the running asyncio loop or None; a pending operation
    awaited under a loop waits on one future of it. ``otherwise(op)`` is every other
    wait: a done operation, or another library (trio). Their one owner is the async
    shell's :mod:`purgatory.aio.operation`, which sets both where it defines
    ``DelayedOperation``; until then, awaiting an operation raises ``TypeError``.
    """
    global _running_loop, _await_otherwise
    _running_loop = running_loop
    _await_otherwise = otherwise


class CompletionListener:
    """What an operation tells of its completion: the purgatory watching it.

    An interface of one method, so that this module needs nothing of the
    purgatory's (a compiled core calls it directly, in C).
    """

    __slots__ = ()

    def _operation_completed(self, op: Operation, from_timer: bool) -> None:
        """``op`` just won ``force_complete``; ``from_timer``: it was in the timer."""
        raise NotImplementedError

    def _operation_cancelled(self, op: Operation, from_timer: bool) -> None:
        """``op`` was just cancelled; ``from_timer``: it was in the timer."""
        raise NotImplementedError


class Operation(TimerTask):
    """An operation that completes early via ``try_complete`` or on timeout; see module doc.

    Not generic itself, so that a compiled core can make it an extension type (whose
    bases cannot include ``typing.Generic``); :class:`purgatory.DelayedOperation`
    adds the type parameter of the outcome.

    ``delay_ms`` is the timeout. ``force_complete``, ``is_completed`` and the state
    checks are O(1); waiters are allocated only for operations someone waits for.
    """

    __slots__ = (
        "_state",
        "_expiring",
        "_nkeys",
        "_outcome",
        "_error",
        "_waiter",
        "_waiters",
        "_prune_at",
        "_purgatory",
        "_keys",
    )

    def __init__(self, delay_ms: int) -> None:
        "__init__(self, delay_ms)\n--\n\nAn operation that times out ``delay_ms`` once watched."
        self.delay_ms = delay_ms  # TimerTask.__init__, inlined: one frame less per operation
        self._list = None
        # invariant: moves once, from PENDING to COMPLETED, EXPIRED or CANCELLED
        self._state = _PENDING
        self._outcome: Any = None  # on_complete's value, once COMPLETED
        self._error: BaseException | None = None  # what awaiters raise instead
        # invariant: both None until first awaited while pending, and again once
        # settled; at most one is not None: _waiter holds the only waiter (most
        # awaited operations have one: no list allocated), _waiters the list once a
        # second one comes
        self._waiter: Waiter[Any] | None = None
        self._waiters: list[Waiter[Any]] | None = None
        # (_prune_at: set with the waiter list; it is pruned of done waiters when
        # it grows this long, see add_waiter)
        # the purgatory watching it (set by try_complete_else_watch), for bookkeeping
        self._purgatory: CompletionListener | None = None
        # the keys it is watched under: none (_nkeys 0), the one key itself (1: the
        # common case keeps no tuple alive), or a tuple of them (_nkeys > 1)
        self._nkeys = 0
        self._keys: Any = None
        self._expiring = False  # True while the timer is completing it

    # -- to implement --------------------------------------------------------

    @abstractmethod
    def try_complete(self) -> bool:
        """If the condition holds, ``return self.force_complete()``; else return False."""

    @abstractmethod
    def on_complete(self) -> Any:
        """Build and return the outcome; runs exactly once."""

    def on_expiration(self) -> None:
        """Runs after ``on_complete`` when the operation expired. Optional: does nothing
        unless overridden."""

    # -- lifecycle -----------------------------------------------------------

    def force_complete(self) -> bool:
        """Complete now if still pending: True for exactly one caller ever. O(1) + callbacks.

        The winner cancels the timer task, then runs ``on_complete()``.
        """
        if self._state != _PENDING:
            return False
        self._state = _EXPIRED if self._expiring else _COMPLETED
        was_scheduled = self._list is not None
        if was_scheduled:
            self._unlink()  # the timer task; O(1)
        purgatory = self._purgatory
        if purgatory is not None:
            purgatory._operation_completed(self, was_scheduled or self._expiring)
        try:
            outcome = self.on_complete()
        except BaseException as exc:
            self._error = exc
            self._settle()
            raise
        self._outcome = outcome
        if self._waiter is not None or self._waiters is not None:  # most: nobody awaits
            self._settle()
        return True

    def run(self) -> None:
        """The timer's callback: complete by expiry, then ``on_expiration()``."""
        self._expiring = True
        try:
            if self.force_complete():
                self.on_expiration()
        finally:
            self._expiring = False

    def cancel(self) -> bool:
        """Cancel this operation if it is pending: True if this call cancelled it. O(1) +
        awaiters.

        For one operation whose client went away: it leaves the timer, its purgatory
        counts it as cancelled (``statistics().cancelled``), no longer in
        ``num_delayed``, and drops its watcher entries at the next purge; its
        awaiters raise :class:`~purgatory.OperationCancelledError` at once. No
        callback runs. False (and nothing changes) if it is already done.
        """
        return self._cancel_with(OperationCancelledError(f"cancelled: {self!r}"))

    def _cancel_with(self, error: OperationCancelledError) -> bool:
        """Move a pending operation to CANCELLED, tell its purgatory, and fail its
        awaiters with ``error``. Returns False if it was not pending. O(1) + awaiters.
        """
        if self._state != _PENDING:
            return False
        self._state = _CANCELLED
        was_scheduled = self._list is not None
        if was_scheduled:
            self._unlink()
        purgatory = self._purgatory
        if purgatory is not None:
            purgatory._operation_cancelled(self, was_scheduled)
        self._error = error
        self._settle()
        return True

    def _settle(self) -> None:
        error = self._error
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():  # else its awaiter was cancelled
                if error is not None:
                    waiter.set_exception(error)
                else:
                    waiter.set_result(self._outcome)
            return
        waiters = self._waiters
        if waiters is None:
            return
        self._waiters = None
        for fut in waiters:
            if fut.done():  # its awaiter was cancelled
                continue
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(self._outcome)

    # -- state ---------------------------------------------------------------

    @property
    def is_completed(self) -> bool:
        """True once ``force_complete`` succeeded (early or by expiry). O(1)."""
        return bool(self._state & 1)

    @property
    def expired(self) -> bool:
        """True if the timeout completed the operation (``on_expiration`` ran). O(1)."""
        return self._state == _EXPIRED

    @property
    def outcome(self) -> Outcome:
        """How the operation ended (or ``Outcome.PENDING``); read it after ``await``. O(1)."""
        return _OUTCOMES[self._state]

    @property
    def is_cancelled(self) -> bool:
        """True if the operation was cancelled and will never complete. O(1)."""
        return self._state == _CANCELLED

    @property
    def is_done(self) -> bool:
        """Completed or cancelled: ``await`` returns (or raises) at once. O(1)."""
        return self._state != _PENDING

    def result(self) -> Any:
        """The outcome of a completed operation; raises what awaiters would raise.

        Raises ``RuntimeError`` while pending. O(1).
        """
        if self._state == _PENDING:
            raise RuntimeError("the operation is still pending")
        if self._error is not None:
            raise self._error
        return self._outcome

    def __await__(self) -> Generator[Any, None, Any]:
        """Wait for the outcome (see :mod:`purgatory.aio.operation`). O(1).

        Pending, on asyncio: one future from the running loop, registered as the
        waiter, whose own iterator the task then runs (no frame of ours stays
        between them); otherwise the async shell's hook.
        """
        if self._state == _PENDING:
            loop = _running_loop()
            if loop is not None:
                fut = loop.create_future()
                self.add_waiter(fut)
                return fut.__await__()  # type: ignore[no-any-return]
        return _await_otherwise(self)

    def add_waiter(self, waiter: Waiter[Any]) -> None:
        """Register ``waiter`` for the outcome of a pending operation. O(1) amortised.

        Waiters already done (their party stopped waiting without
        :meth:`remove_waiter`, as a cancelled asyncio awaiter does) are dropped once
        the list reaches twice what the last pruning left (8 at least), so they
        never outnumber the live ones by more than that, and each pruning's O(n)
        is paid for by the n/2 additions before it.
        RuntimeError if the operation is done: read :meth:`result` instead.
        """
        if self._state != _PENDING:
            raise RuntimeError("the operation is done: read its result")
        waiters = self._waiters
        if waiters is None:
            first = self._waiter
            if first is None:
                self._waiter = waiter  # the only one: no list
                return
            self._waiter = None
            self._waiters = [first, waiter]
            self._prune_at = _FIRST_PRUNE
            return
        if len(waiters) >= self._prune_at:
            waiters[:] = [w for w in waiters if not w.done()]
            self._prune_at = max(_FIRST_PRUNE, 2 * len(waiters))
        waiters.append(waiter)

    def remove_waiter(self, waiter: Waiter[Any]) -> None:
        """Forget ``waiter`` (its party stopped waiting); no-op once settled or if
        unknown. O(waiters)."""
        first = self._waiter
        if first is not None and (first is waiter or first == waiter):
            self._waiter = None
            return
        waiters = self._waiters
        if waiters is not None and waiter in waiters:
            waiters.remove(waiter)

    def __repr__(self) -> str:
        state = _OUTCOMES[self._state].name.lower()
        return f"<{type(self).__name__} delay_ms={self.delay_ms!r} {state}>"


init_doc(Operation)  # the text signature is for the compiled core only
