"""DelayedOperation: a request that waits, completes exactly once, and can be awaited.

An operation is a :class:`~purgatory.TimerTask` with a lifecycle::

    PENDING --force_complete()--> COMPLETED      (early, or by expiry)
    PENDING --cancelled---------> CANCELLED      (cancel_for_key, purgatory closed)

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

Awaiting is lazy: an operation nobody awaits never creates a waiter. Each
``await op`` makes its own waiter (on asyncio and uvloop an ``asyncio.Future``; on
trio a :class:`~purgatory._trio.TrioWaiter` that reschedules the task), so
cancelling one awaiting task cancels only that wait: the operation, its watchers
and its timer task are untouched, and other awaiters still get the outcome. Per
backend: on asyncio, ``task.cancel()`` (or ``asyncio.timeout``, or an anyio cancel
scope) raises ``CancelledError`` in the awaiter and its future leaves the
operation; on trio, a cancelled scope raises ``trio.Cancelled`` in the awaiter and
the abort callback of ``wait_task_rescheduled`` removes its waiter. Either way, an
operation cancelled by the purgatory (``cancel_for_key``, or ``close``: then
:class:`~purgatory.PurgatoryClosedError`) fails every awaiter with that error.

An operation never given to a purgatory can be awaited too: nothing watches or
times it, so it completes only when someone calls ``force_complete()`` (its
awaiters then get ``on_complete``'s value) and otherwise waits for ever; give it
to a purgatory (``try_complete_else_watch``) for a timeout. Its ``delay_ms`` means
nothing until then.

Exceptions: an exception raised by ``on_complete()`` propagates to whoever called
``force_complete()``; the operation is COMPLETED all the same, and its awaiters
raise that exception. (The purgatory and the timer, which run callbacks for many
operations in one pass, catch it per operation and report it; see
:mod:`purgatory._purgatory`.)
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Generator, Hashable
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from ._errors import OperationCancelledError
from ._loop import in_trio_run, running_loop
from ._timer_list import TimerTask

if TYPE_CHECKING:
    import asyncio

    from ._purgatory import DelayedOperationPurgatory

__all__ = ["DelayedOperation"]

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)


class Waiter(Protocol[T_contra]):
    """One awaiter of an operation: an ``asyncio.Future`` or a ``TrioWaiter``."""

    def done(self) -> bool: ...

    def set_result(self, result: T_contra, /) -> None: ...

    def set_exception(self, exception: BaseException, /) -> None: ...


_PENDING = 0
_COMPLETED = 1  # on_complete ran (or raised)
_CANCELLED = 2

_STATE_NAMES = {_PENDING: "pending", _COMPLETED: "completed", _CANCELLED: "cancelled"}


class DelayedOperation(TimerTask, Generic[T]):
    """An operation that completes early via ``try_complete`` or on timeout; see module doc.

    ``delay_ms`` is the timeout. ``force_complete``, ``is_completed`` and the state
    checks are O(1); ``await op`` allocates one waiter per awaiter, only if awaited.
    """

    __slots__ = ("_state", "_outcome", "_error", "_waiters", "_purgatory", "_keys", "_expiring")

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms  # TimerTask.__init__, inlined: one frame less per operation
        self._list = None
        # invariant: moves PENDING -> COMPLETED or PENDING -> CANCELLED, once
        self._state = _PENDING
        self._outcome: T | None = None  # on_complete's value, once COMPLETED
        self._error: BaseException | None = None  # what awaiters raise instead
        # invariant: None until first awaited while pending; emptied on settling
        self._waiters: list[Waiter[T]] | None = None
        # the purgatory watching it (set by try_complete_else_watch), for bookkeeping
        self._purgatory: DelayedOperationPurgatory[Any] | None = None
        self._keys: tuple[Hashable, ...] = ()  # the keys it is watched under
        self._expiring = False  # True while the timer is completing it

    # -- to implement --------------------------------------------------------

    @abstractmethod
    def try_complete(self) -> bool:
        """If the condition holds, ``return self.force_complete()``; else return False."""

    @abstractmethod
    def on_complete(self) -> T:
        """Build and return the outcome; runs exactly once."""

    @abstractmethod
    def on_expiration(self) -> None:
        """Runs after ``on_complete`` when the operation expired."""

    # -- lifecycle -----------------------------------------------------------

    def force_complete(self) -> bool:
        """Complete now if still pending: True for exactly one caller ever. O(1) + callbacks.

        The winner cancels the timer task, then runs ``on_complete()``.
        """
        if self._state != _PENDING:
            return False
        self._state = _COMPLETED
        was_scheduled = self._list is not None
        if was_scheduled:
            self.cancel()  # the timer task; O(1)
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
        if self._waiters is not None:  # nobody awaits most operations
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

    def _abandon(self, error: OperationCancelledError) -> bool:
        """Move a pending operation to CANCELLED, failing its awaiters with ``error``.

        Returns False if it was not pending. O(1) + awaiters.
        """
        if self._state != _PENDING:
            return False
        self._state = _CANCELLED
        if self._list is not None:
            self.cancel()
        self._error = error
        self._settle()
        return True

    def _settle(self) -> None:
        waiters = self._waiters
        if waiters is None:
            return
        self._waiters = None
        error = self._error
        for fut in waiters:
            if fut.done():  # its awaiter was cancelled
                continue
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(self._outcome)  # type: ignore[arg-type]

    # -- state ---------------------------------------------------------------

    @property
    def is_completed(self) -> bool:
        """True once ``force_complete`` succeeded (early or by expiry). O(1)."""
        return self._state == _COMPLETED

    @property
    def is_cancelled(self) -> bool:
        """True if the operation was cancelled and will never complete. O(1)."""
        return self._state == _CANCELLED

    @property
    def is_done(self) -> bool:
        """Completed or cancelled: ``await`` returns (or raises) at once. O(1)."""
        return self._state != _PENDING

    def result(self) -> T:
        """The outcome of a completed operation; raises what awaiters would raise.

        Raises ``RuntimeError`` while pending. O(1).
        """
        if self._state == _PENDING:
            raise RuntimeError("the operation is still pending")
        if self._error is not None:
            raise self._error
        return self._outcome  # type: ignore[return-value]

    def __await__(self) -> Generator[Any, None, T]:
        """Wait for the outcome: on_complete's value, or its exception, or
        OperationCancelledError. Needs a running asyncio loop or trio run while
        pending (see the module doc for cancellation)."""
        if self._state != _PENDING:
            return self.result()
        loop = running_loop()
        if loop is None:
            if in_trio_run():
                from ._trio import wait

                return (yield from wait(self).__await__())
            raise RuntimeError("awaiting an operation needs a running event loop")
        fut: asyncio.Future[T] = loop.create_future()
        if self._waiters is None:
            self._waiters = [fut]
        else:
            self._waiters.append(fut)
        try:
            return (yield from fut.__await__())
        finally:
            waiters = self._waiters
            if waiters is not None and fut.cancelled():
                waiters.remove(fut)  # our awaiter was cancelled: forget its future

    def __repr__(self) -> str:
        return f"<{type(self).__name__} delay_ms={self.delay_ms!r} {_STATE_NAMES[self._state]}>"
