"""Test helpers: clocks that move only when the test (or an idle loop) says so.

Two tools, one per kind of test.

:class:`ManualClock`, for code driven without a loop. Injected into a
:class:`~purgatory.SystemTimer`, time is whatever the test says it is, and
``timer.poll()`` runs exactly the tasks due at that instant, with no event loop and
no sleeping::

    clock = ManualClock(start_ms=0)
    timer = SystemTimer(clock=clock)
    timer.add(task)          # task.delay_ms == 10
    clock.advance(10); timer.poll()   # 0 ran: never early, filed at the next tick
    clock.advance(1); timer.poll()    # 1 ran

:class:`VirtualTimeLoop`, for asyncio code as it runs: an event loop whose clock
(``loop.time()``) is virtual and jumps ahead whenever the loop is idle, as trio's
``MockClock(autojump_threshold=0)`` does. Everything that reads ``loop.time()``
follows it: ``asyncio.sleep``, ``call_later``, ``wait_for`` and ``asyncio.timeout``,
and the library's default clock (:class:`~purgatory.LoopClock`) with the reapers that
sleep on it. So an hour-long sleep returns at once, with ``loop.time()`` an hour
further, and a purgatory operation expires at its virtual deadline.

How it jumps. An asyncio loop turns by asking its selector for I/O events, with a
timeout that reaches its earliest timer (zero when callbacks are ready, none when no
timer is set). The virtual loop's selector first looks at the I/O without waiting
(or for ``autojump_threshold_s`` of real time); if nothing is ready and the loop
would have slept, the clock moves forward by that timeout instead: the loop then
runs the timer as if the sleep had happened. A worked example, from ``loop.time()``
0 with ``sleep(5)`` in one task and ``sleep(2)`` in another:

=====  ==================  ================  ================================
turn   earliest timer      selector timeout  then
=====  ==================  ================  ================================
1      2.0 (sleep 2)       2.0               no I/O: time 0 -> 2, sleep(2) ends
2      5.0 (sleep 5)       3.0               no I/O: time 2 -> 5, sleep(5) ends
=====  ==================  ================  ================================

What takes virtual time is only waiting for a timer; running code takes none (unless
it calls :meth:`VirtualTimeLoop.advance`, to model work that takes time). So a run
is determined by its inputs: the same program sees the same times in the same order.

Real I/O works as usual: sockets and pipes registered with the loop are polled at
every turn, and files written synchronously are written. Jumping only happens when
none is ready, so a peer that answers *later* in real time (another process, a
remote server) may find its timeouts already fired in virtual time: give such tests
an ``autojump_threshold_s``, the real time the loop waits for I/O before it jumps.

Threads. A job handed to an executor (``loop.run_in_executor``, hence
``asyncio.to_thread`` and ``getaddrinfo``) takes no virtual time: while one is running
the loop does not jump, it waits in real time (on its selector, without a timeout)
until the job is done and its result delivered, so timeouts around the job cannot
fire early. A job whose future is cancelled stops holding the clock. Other threads
that call ``call_soon_threadsafe`` are not known to the loop: it jumps past them as if
they were not there.
"""

from __future__ import annotations

import asyncio
import math
import selectors
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, TypeVar, TypeVarTuple

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

__all__ = ["ManualClock", "VirtualTimeLoop", "run_in_virtual_time"]

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class ManualClock:
    """A monotonic clock in integer milliseconds that moves only by :meth:`advance`."""

    __slots__ = ("_now_ms",)

    def __init__(self, start_ms: int = 0) -> None:
        if type(start_ms) is not int:
            raise TypeError(f"start_ms must be an int, not {type(start_ms).__name__}")
        self._now_ms = start_ms  # invariant: never decreases

    def now_ms(self) -> int:
        """The current time. O(1)."""
        return self._now_ms

    def advance(self, ms: int) -> int:
        """Move the clock forward by ``ms`` (>= 0) and return the new time. O(1)."""
        if type(ms) is not int:
            raise TypeError(f"ms must be an int, not {type(ms).__name__}")
        if ms < 0:
            raise ValueError(f"a clock never goes back: advance({ms})")
        self._now_ms += ms
        return self._now_ms

    def __repr__(self) -> str:
        return f"ManualClock(now_ms={self._now_ms})"


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio event loop in virtual time: ``time()`` starts at ``start_s`` and
    jumps to the earliest timer whenever the loop would otherwise sleep (see the
    module doc).

    ``autojump_threshold_s`` is the real time the loop waits for I/O before it jumps
    (0: jump at once). Use it as any loop: ``asyncio.Runner(loop_factory=
    VirtualTimeLoop)``, ``asyncio.run(main(), loop_factory=VirtualTimeLoop)`` on
    Python 3.12+, or pytest-asyncio's ``pytest_asyncio_loop_factories`` hook. Each
    turn of the loop costs what asyncio's selector loop costs, plus one poll of the
    selector without waiting when it jumps.
    """

    def __init__(self, *, start_s: float = 0.0, autojump_threshold_s: float = 0.0) -> None:
        self._now_s = float(start_s)  # invariant: never decreases
        self._autojump_threshold_s = autojump_threshold_s
        self._executor_jobs = 0  # invariant: futures of run_in_executor not yet done
        super().__init__(_VirtualSelector(self))
        problem = _settings_problem(start_s, autojump_threshold_s)
        if problem:  # checked once the loop exists, so that it can be closed
            self.close()
            raise ValueError(problem)

    def time(self) -> float:
        """The virtual time, in seconds. O(1)."""
        return self._now_s

    def advance(self, seconds: float) -> float:
        """Move the clock forward by ``seconds`` (>= 0) now, as if the code running
        took that long; timers due by then run at the loop's next turn. Returns the
        new time. O(1)."""
        if not 0 <= seconds < math.inf:
            raise ValueError(f"a clock never goes back: advance({seconds})")
        self._now_s += seconds
        return self._now_s

    def run_in_executor(
        self, executor: Executor | None, func: Callable[[*Ts], T], *args: *Ts
    ) -> asyncio.Future[T]:
        """asyncio's ``run_in_executor``; the clock stands still until the job's
        future is done (see the module doc). O(1) besides the job."""
        future = super().run_in_executor(executor, func, *args)
        self._executor_jobs += 1
        future.add_done_callback(self._executor_job_done)
        return future

    def _executor_job_done(self, future: asyncio.Future[Any]) -> None:
        self._executor_jobs -= 1

    def _wait(
        self, selector: selectors.BaseSelector, timeout: float | None
    ) -> list[tuple[selectors.SelectorKey, int]]:
        """The selector's ``select(timeout)`` in virtual time (module doc): poll the
        I/O, and jump the clock by ``timeout`` where the loop would have slept."""
        if timeout is not None and timeout <= 0:
            return selector.select(0)  # callbacks are ready: a plain poll
        if timeout is None or self._executor_jobs:
            return selector.select(None)  # nothing to jump to, or a job runs: real time
        events = selector.select(min(timeout, self._autojump_threshold_s))
        if not events:
            self._now_s += timeout
        return events

    def __repr__(self) -> str:
        return f"<VirtualTimeLoop time={self._now_s!r} closed={self.is_closed()}>"


def run_in_virtual_time(
    main: Coroutine[Any, Any, T], *, start_s: float = 0.0, autojump_threshold_s: float = 0.0
) -> T:
    """Run ``main`` on a new :class:`VirtualTimeLoop` and return its result, as
    ``asyncio.run`` does (the loop is closed after, its executor shut down)."""

    def new_loop() -> VirtualTimeLoop:
        return VirtualTimeLoop(start_s=start_s, autojump_threshold_s=autojump_threshold_s)

    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(main)


def _settings_problem(start_s: float, autojump_threshold_s: float) -> str:
    """What is wrong with a loop's settings ('' if nothing). O(1)."""
    if not math.isfinite(start_s):
        return f"start_s must be finite, not {start_s}"
    if not 0 <= autojump_threshold_s < math.inf:
        return f"autojump_threshold_s must be >= 0 and finite, not {autojump_threshold_s}"
    return ""


class _VirtualSelector(selectors.BaseSelector):
    """The loop's selector: the platform's own, whose ``select`` waits in virtual time
    (:meth:`VirtualTimeLoop._wait`)."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self._selector = selectors.DefaultSelector()
        self._loop = loop

    def register(
        self, fileobj: FileDescriptorLike, events: int, data: Any = None
    ) -> selectors.SelectorKey:
        return self._selector.register(fileobj, events, data)

    def unregister(self, fileobj: FileDescriptorLike) -> selectors.SelectorKey:
        return self._selector.unregister(fileobj)

    def modify(
        self, fileobj: FileDescriptorLike, events: int, data: Any = None
    ) -> selectors.SelectorKey:
        return self._selector.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        return self._loop._wait(self._selector, timeout)

    def close(self) -> None:
        self._selector.close()

    def get_key(self, fileobj: FileDescriptorLike) -> selectors.SelectorKey:
        return self._selector.get_key(fileobj)

    def get_map(self) -> Mapping[FileDescriptorLike, selectors.SelectorKey]:
        return self._selector.get_map()
