"""DelayedOperationPurgatory: the purgatory with a lifecycle on the running event loop.

:class:`DelayedOperationPurgatory` is the core's
:class:`~purgatory.core.purgatory.Purgatory` (watchers, purge, statistics: see
there) plus what needs a loop.

Backends. ``async with purgatory`` binds it to the running library: an asyncio
loop (asyncio, uvloop, anyio on asyncio) or a trio run (trio, anyio on trio),
and starts its timer's reaper (``timer.start_reaper()``) if ``reaper_enabled``
and none runs. Inside the block the compiled core keeps operations out of the
cyclic garbage collector from when they wait in the timer until the purgatory lets
go of them (``untrack_pending``: the purge after they are done, or the exit's
shutdown, hands them back). The purgatory itself is synchronous and the same on both. See
:mod:`.reaper` for the reaper's task on each and :mod:`.operation` for awaiting.
Callback errors met while it walks many operations go to the running library
(the loop's exception handler; on trio the ``"purgatory"`` logger).

Threads. All methods must run on the event loop's thread. Code on another thread
(a replication thread, a blocking I/O pool) uses :meth:`call_threadsafe`, e.g.
``p.call_threadsafe(p.check_and_complete, key)``, which runs the call on the
purgatory's loop (asyncio: ``loop.call_soon_threadsafe``; trio: the run's
``TrioToken.run_sync_soon``) and returns a ``concurrent.futures.Future`` of its
result.

Closing. Leaving ``async with`` (or :meth:`close`) cancels every pending
operation (``shutdown``): its timer task is removed and its awaiters raise
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
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..core.errors import PurgatoryClosedError
from ..core.purgatory import DEFAULT_PURGE_INTERVAL, Purgatory
from .backends import report_to_running_library, require_backend
from .operation import DelayedOperation
from .reaper import ExcInfo, Reaper
from .timer import SystemTimer

__all__ = ["DelayedOperationPurgatory"]

R = TypeVar("R")
Op = TypeVar("Op", bound=DelayedOperation[Any])


class DelayedOperationPurgatory(Purgatory, Generic[Op]):
    """Holds delayed operations under keys until they complete or expire; see the
    module docs here and of :mod:`purgatory.core.purgatory`.

    ``timer=None`` makes a ``SystemTimer(name)``. With ``reaper_enabled``,
    ``async with`` runs the timer's reaper; with ``timer_enabled=False``
    operations are never added to the timer (they complete only through keys).
    """

    timer: SystemTimer

    if TYPE_CHECKING:  # the core's methods, typed with the operation type

        def try_complete_else_watch(  # type: ignore[override]
            self, operation: Op, keys: Iterable[Hashable]
        ) -> bool:
            """See Purgatory.try_complete_else_watch."""

        def cancel_for_key(self, key: Hashable) -> list[Op]:  # type: ignore[override]
            """See Purgatory.cancel_for_key."""

    def __init__(
        self,
        name: str = "purgatory",
        *,
        timer: SystemTimer | None = None,
        purge_interval: int = DEFAULT_PURGE_INTERVAL,
        reaper_enabled: bool = True,
        timer_enabled: bool = True,
    ) -> None:
        super().__init__(
            name,
            timer=SystemTimer(name) if timer is None else timer,
            purge_interval=purge_interval,
            timer_enabled=timer_enabled,
        )
        self.reaper_enabled = reaper_enabled
        # set while entered: how another thread schedules a call on our loop or run
        self._call_soon_threadsafe: Callable[[Callable[[], None]], object] | None = None
        self._on_trio = False
        self._reaper: Reaper | None = None  # the timer's reaper, if we started it

    #: to the running library (see the module doc); with none, the core's rule
    report_exception = report_to_running_library

    def call_threadsafe(self, fn: Callable[..., R], *args: Any) -> concurrent.futures.Future[R]:
        """Run ``fn(*args)`` on the purgatory's loop from any thread; a future of its result.

        The loop is the one the purgatory was entered on (``async with``): asyncio's
        ``loop.call_soon_threadsafe``, or on trio ``TrioToken.run_sync_soon`` (as
        ``trio.from_thread.run_sync`` does, without blocking the calling thread).
        PurgatoryClosedError once closed; RuntimeError if it was never entered.
        """
        schedule = self._call_soon_threadsafe
        if schedule is None:
            if self.closed:
                raise PurgatoryClosedError(f"purgatory {self.name!r} is closed")
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

    async def __aenter__(self) -> DelayedOperationPurgatory[Op]:
        """Bind to the running asyncio loop or trio run; start the timer's reaper
        (if ``reaper_enabled`` and none runs). PurgatoryClosedError once closed: a
        closed purgatory cannot be entered again."""
        if self.closed:
            raise PurgatoryClosedError(f"purgatory {self.name!r} is closed: it cannot be entered")
        backend = require_backend("a purgatory")
        self.untrack_pending()  # the exit shuts down, which tracks them again
        self._call_soon_threadsafe = backend.threadsafe_scheduler()
        self._on_trio = backend.name == "trio"
        if self.reaper_enabled and self.timer.reaper is None:
            self._reaper = await self.timer.start_reaper()
        return self

    async def __aexit__(self, *exc_info: *ExcInfo) -> None:
        """:meth:`close`, then release the reaper; the block's exception goes on as itself
        (nothing is swallowed, so a type checker sees a ``return`` inside the block as
        final)."""
        self._call_soon_threadsafe = None
        owned, self._reaper = self._reaper, None
        try:
            self.shutdown()
        finally:
            if owned is not None:
                await self.timer.stop_reaper(*exc_info)

    async def close(self) -> None:
        """Cancel every pending operation (awaiters raise PurgatoryClosedError) and
        stop the reaper if this purgatory started it. Idempotent.

        asyncio: the reaper's task has ended when this returns. trio: the reaper
        polls no more; its nursery closes when the ``async with`` block exits
        (a nursery must close in the block that opened it), so on trio use
        ``async with`` rather than ``__aenter__`` + ``close()``.
        """
        self.shutdown()
        self._call_soon_threadsafe = None
        reaper = self._reaper
        if reaper is not None:
            if reaper.stops_fully:
                self._reaper = None
                await self.timer.stop_reaper()
            else:
                reaper.request_stop()
