"""What one awaited wait costs: ``await op`` against its peers and the loop's floor.

Usage: python benchmarks/await_bench.py [--waits 20000] [--rounds 5] [--loops asyncio,uvloop]

Each variant runs ``--waits`` tasks, each waiting once with a timeout of 10 s
(woken: a driver wakes every waiter after they all wait) or of 1 ms (expired:
nothing wakes them), and reports the process CPU per wait (task creation,
the wait, the wake-up, the task's end), the best of ``--rounds``:

* ``tasks``: the tasks alone, waiting for nothing (every variant pays this);
* ``floor``: the loop's own minimum: each task awaits a bare future, the
  driver resolves it (woken: key by key, as the other drivers wake their waiters,
  see :func:`resolve_by_key`) or a ``loop.call_later`` handle does (expired);
  woken, it has no timeout at all (nothing is scheduled or unscheduled);
* ``floor+timer``: the loop's minimum for a wait *with a timeout*: the same
  future plus a ``loop.call_later`` handle that would resolve it, which the task
  cancels once woken (what ``asyncio.timeout`` does, without its context
  manager); expired, the same as ``floor``;
* ``purgatory``: a ``DelayedOperation`` watched under one key of 1,000;
  ``await op``; the driver's ``check_and_complete(key)`` wakes it, or the
  timing wheel expires it (tick 1 ms);
* ``unawaited``: the purgatory's work alone: the same operations made, watched
  and completed (or expired) by tasks that do not await them; ``purgatory``
  minus ``unawaited`` is what awaiting costs, beside ``floor`` minus ``tasks``;
* ``event+timeout``: an ``asyncio.Event`` per key, ``async with
  asyncio.timeout(t): await event.wait()``, the driver sets the events;
* ``wait_for``: ``await asyncio.wait_for(event.wait(), t)``;
* ``anyio``: ``with anyio.fail_after(t): await event.wait()`` on an anyio Event.

Ratios are taken in one run, variant beside variant, so the machine's speed of
the moment cancels out; figures in BENCHMARKS.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

import anyio
import uvloop
from _cli import Parser, integer
from _machine import cpu_model

from purgatory import DelayedOperation, DelayedOperationPurgatory, SystemTimer, compiled

KEYS = 1000
WOKEN_TIMEOUT_MS = 10_000
EXPIRED_TIMEOUT_MS = 1


class Wait(DelayedOperation[bool]):
    __slots__ = ("ready",)

    def __init__(self, timeout_ms: int) -> None:
        super().__init__(timeout_ms)
        self.ready = False

    def try_complete(self) -> bool:
        return self.ready and self.force_complete()

    def on_complete(self) -> bool:
        return self.ready


Run = Callable[[int, bool], Awaitable[None]]


def resolve_by_key(futures: list[asyncio.Future[None]]) -> None:
    """Resolve the futures key by key (future i is on key i % KEYS), the order in which
    the purgatory's and the events' drivers wake their waiters: tasks woken far apart
    in memory cost more than tasks woken in the order they were made (measured: about
    1 µs a wait on uvloop), so the floor pays the same order as its peers."""
    for key in range(KEYS):
        for fut in futures[key::KEYS]:
            fut.set_result(None)


async def floor(waits: int, woken: bool) -> None:
    loop = asyncio.get_running_loop()
    futures = [loop.create_future() for _ in range(waits)]

    async def one(fut: asyncio.Future[None]) -> None:
        if not woken:
            loop.call_later(EXPIRED_TIMEOUT_MS / 1000, fut.set_result, None)
        await fut

    tasks = [loop.create_task(one(f)) for f in futures]
    await asyncio.sleep(0)
    if woken:
        resolve_by_key(futures)
    await asyncio.gather(*tasks)


async def floor_timer(waits: int, woken: bool) -> None:
    loop = asyncio.get_running_loop()
    futures = [loop.create_future() for _ in range(waits)]
    timeout_s = (WOKEN_TIMEOUT_MS if woken else EXPIRED_TIMEOUT_MS) / 1000

    async def one(fut: asyncio.Future[None]) -> None:
        handle = loop.call_later(timeout_s, fut.set_result, None)
        await fut
        handle.cancel()

    tasks = [loop.create_task(one(f)) for f in futures]
    await asyncio.sleep(0)
    if woken:
        resolve_by_key(futures)
    await asyncio.gather(*tasks)


async def bare_tasks(waits: int, woken: bool) -> None:
    """Only the tasks, which wait for nothing: what every variant pays besides its wait."""
    loop = asyncio.get_running_loop()

    async def one() -> None:
        pass

    tasks = [loop.create_task(one()) for _ in range(waits)]
    await asyncio.sleep(0)
    await asyncio.gather(*tasks)


async def purgatory(waits: int, woken: bool, *, awaited: bool = True) -> None:
    loop = asyncio.get_running_loop()
    timeout_ms = WOKEN_TIMEOUT_MS if woken else EXPIRED_TIMEOUT_MS
    async with DelayedOperationPurgatory[Wait]("bench", timer=SystemTimer("bench")) as p:
        ops: list[Wait] = []

        async def one(key: int) -> None:
            op = Wait(timeout_ms)
            if not p.try_complete_else_watch(op, (key,)):
                if awaited:
                    await op
                else:
                    ops.append(op)

        tasks = [loop.create_task(one(i % KEYS)) for i in range(waits)]
        await asyncio.sleep(0)
        if woken:
            for key in range(KEYS):
                for op in p._watchers.get(key, ()):
                    op.ready = True  # type: ignore[attr-defined]
                p.check_and_complete(key)
        await asyncio.gather(*tasks)
        while not all(op.is_done for op in ops):  # not awaited: expiring meanwhile
            await asyncio.sleep(EXPIRED_TIMEOUT_MS / 1000)


async def purgatory_unawaited(waits: int, woken: bool) -> None:
    """The purgatory's work without the awaits: operations made, watched, completed
    or expired, by tasks that do not wait for them."""
    await purgatory(waits, woken, awaited=False)


class _Event(Protocol):
    def set(self) -> None: ...


async def _event_waits(
    waits: int,
    woken: bool,
    make: Callable[[], _Event],
    wait_one: Callable[[Any, float], Coroutine[Any, Any, None]],
) -> None:
    """``waits`` tasks each ``wait_one(event, timeout_s)`` on one of KEYS events."""
    loop = asyncio.get_running_loop()
    events = [make() for _ in range(KEYS)]
    timeout_s = (WOKEN_TIMEOUT_MS if woken else EXPIRED_TIMEOUT_MS) / 1000
    tasks = [loop.create_task(wait_one(events[i % KEYS], timeout_s)) for i in range(waits)]
    await asyncio.sleep(0)
    if woken:
        for event in events:
            event.set()
    await asyncio.gather(*tasks)


async def _timeout_wait(event: asyncio.Event, timeout_s: float) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await event.wait()


async def _wait_for_wait(event: asyncio.Event, timeout_s: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), timeout_s)


async def _anyio_wait(event: anyio.Event, timeout_s: float) -> None:
    with contextlib.suppress(TimeoutError), anyio.fail_after(timeout_s):
        await event.wait()


async def event_timeout(waits: int, woken: bool) -> None:
    await _event_waits(waits, woken, asyncio.Event, _timeout_wait)


async def wait_for(waits: int, woken: bool) -> None:
    await _event_waits(waits, woken, asyncio.Event, _wait_for_wait)


async def anyio_fail_after(waits: int, woken: bool) -> None:
    await _event_waits(waits, woken, anyio.Event, _anyio_wait)


VARIANTS: dict[str, Run] = {
    "tasks": bare_tasks,
    "floor": floor,
    "floor+timer": floor_timer,
    "unawaited": purgatory_unawaited,
    "purgatory": purgatory,
    "event+timeout": event_timeout,
    "wait_for": wait_for,
    "anyio": anyio_fail_after,
}


def measure(loop_name: str, run: Run, waits: int, woken: bool, rounds: int) -> float:
    """Best CPU µs per wait over ``rounds`` fresh loops."""
    best = float("inf")
    for _ in range(rounds):
        factory = uvloop.new_event_loop if loop_name == "uvloop" else asyncio.new_event_loop
        with asyncio.Runner(loop_factory=factory) as runner:
            gc.collect()
            start = time.process_time()
            runner.run(run(waits, woken))  # type: ignore[arg-type]
            best = min(best, (time.process_time() - start) / waits * 1e6)
    return best


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--waits", type=integer(1), default=20_000)
    parser.add_argument("--rounds", type=integer(1), default=5)
    parser.add_argument("--loops", default="asyncio,uvloop")
    args = parser.parse_args()
    print(f"CPU: {cpu_model()}; purgatory compiled: {compiled}; {args.waits} waits, best of")
    print(f"{args.rounds} rounds; CPU µs per awaited wait (task included)\n")
    print(f"{'loop':8} {'mode':8} " + " ".join(f"{n:>14}" for n in VARIANTS) + "  purgatory/floor")
    for loop_name in args.loops.split(","):
        for woken in (True, False):
            row = {
                n: measure(loop_name, r, args.waits, woken, args.rounds)
                for n, r in VARIANTS.items()
            }
            mode = "woken" if woken else "expired"
            cells = " ".join(f"{row[n]:14.2f}" for n in VARIANTS)
            ratio = row["purgatory"] / row["floor"]
            timed = row["purgatory"] / row["floor+timer"]
            vs_event = row["event+timeout"] / row["purgatory"]
            awaiting = row["purgatory"] - row["unawaited"]
            bare = row["floor"] - row["tasks"]
            print(
                f"{loop_name:8} {mode:8} {cells}  {ratio:5.2f}x; /floor+timer {timed:.2f}x; "
                f"event+timeout/purgatory "
                f"{vs_event:.2f}x; an await {awaiting:.2f} vs a bare future's {bare:.2f}"
            )


if __name__ == "__main__":
    main()
