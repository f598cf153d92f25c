"""Per-packet cost of idle-connection tracking, IdleTracker versus the asyncio idioms.

Usage: python benchmarks/idle_bench.py [--keys N] [--touches N] [--repeat N]

Every variant tracks ``--keys`` connections (100,000 by default) with a 30 s idle
timeout, then touches random connections ``--touches`` times, yielding to the
event loop every 1,000 touches as a server does between reads (so asyncio can
purge its cancelled timer handles, a cost of the idiom that must be counted).
The figure is the best of ``--repeat`` runs, in ns per touch, on asyncio and on
uvloop in the same process. With 100,000 connections most touches miss the CPU's
caches (the map's slot and the key's task are cold), so one more row touches a
single tracked key again and again: the tracker's own cost per touch, cache-hot.
``purgatory.compiled`` tells which core ran (``PURGATORY_NO_EXTENSIONS=1`` for the
pure one). Memory per tracked connection is measured with
tracemalloc: everything allocated to track the connections (the map from
connection to its handle included), divided by their number.

Variants:

* ``IdleTracker (lazy)``: the package's tracker; a touch records the time only.
* ``IdleTracker (move)``: design (a), defined here: every touch re-adds the
  key's task, which the timer moves in O(1).
* ``cancel + call_later``: ``handle.cancel(); loop.call_later(...)`` per packet.
* ``timeout.reschedule``: one entered ``asyncio.timeout`` per connection,
  ``cm.reschedule(loop.time() + timeout)`` per packet.
"""

from __future__ import annotations

import asyncio
import gc
import os
import platform
import random
import time
import tracemalloc
from collections.abc import Callable, Coroutine
from importlib.metadata import version
from typing import Any

import uvloop
from _cli import Parser, integer
from _machine import cpu_model

import purgatory
from purgatory import IdleTracker, SystemTimer, TimerTask
from purgatory.testing import ManualClock

TIMEOUT_MS = 30_000
BATCH = 1_000  # touches between two yields to the loop
HOT = "IdleTracker (lazy), one key again and again"

Touch = Callable[[object], None]


class Conn:
    """A stand-in for a connection object (hashed by identity, like a transport)."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n


# -- design (a): move per touch ----------------------------------------------


class _MoveTask(TimerTask):
    __slots__ = ("tracker", "key")

    def __init__(self, tracker: MovingIdleTracker, key: object) -> None:
        super().__init__(tracker.timeout_ms)
        self.tracker = tracker
        self.key = key

    def run(self) -> None:
        self.tracker._expire(self)


class MovingIdleTracker:
    """Design (a): every touch re-adds the key's task; the timer moves it. Never early,
    at most a tick late (the timer's rule); exact on Kafka's filing at ``tick_ms == 1``."""

    __slots__ = ("timeout_ms", "_on_idle", "_add", "_tasks")

    def __init__(
        self, timeout_ms: int, on_idle: Callable[[object], object], *, timer: SystemTimer
    ) -> None:
        self.timeout_ms = timeout_ms
        self._on_idle = on_idle
        self._add = timer.add
        self._tasks: dict[object, _MoveTask] = {}

    def touch(self, key: object) -> None:
        try:
            task = self._tasks[key]
        except KeyError:
            task = self._tasks[key] = _MoveTask(self, key)
        self._add(task)

    def forget(self, key: object) -> None:
        task = self._tasks.pop(key, None)
        if task is not None:
            task.cancel()

    def _expire(self, task: _MoveTask) -> None:
        del self._tasks[task.key]
        self._on_idle(task.key)

    def __len__(self) -> int:
        return len(self._tasks)


# -- the variants: set up N keys, return (touch, teardown) ---------------------

Setup = Callable[[list[Conn]], Coroutine[Any, Any, tuple[Touch, Callable[[], Any]]]]


def _ignore(key: object) -> None:
    return None


async def setup_lazy(keys: list[Conn]) -> tuple[Touch, Callable[[], Any]]:
    timer = SystemTimer("bench-lazy")
    await timer.__aenter__()
    tracker: IdleTracker[object] = IdleTracker(TIMEOUT_MS, _ignore, timer=timer)
    for key in keys:
        tracker.touch(key)

    async def teardown() -> None:
        tracker.clear()
        await timer.__aexit__(None, None, None)

    return tracker.touch, teardown


async def setup_move(keys: list[Conn]) -> tuple[Touch, Callable[[], Any]]:
    timer = SystemTimer("bench-move")
    await timer.__aenter__()
    tracker = MovingIdleTracker(TIMEOUT_MS, _ignore, timer=timer)
    for key in keys:
        tracker.touch(key)

    async def teardown() -> None:
        for key in keys:
            tracker.forget(key)
        await timer.__aexit__(None, None, None)

    return tracker.touch, teardown


async def setup_call_later(keys: list[Conn]) -> tuple[Touch, Callable[[], Any]]:
    later = asyncio.get_running_loop().call_later
    timeout_s = TIMEOUT_MS / 1000
    handles: dict[object, asyncio.TimerHandle] = {}
    for key in keys:
        handles[key] = later(timeout_s, _ignore, key)

    def touch(key: object) -> None:
        handles[key].cancel()
        handles[key] = later(timeout_s, _ignore, key)

    async def teardown() -> None:
        for handle in handles.values():
            handle.cancel()
        handles.clear()

    return touch, teardown


async def setup_reschedule(keys: list[Conn]) -> tuple[Touch, Callable[[], Any]]:
    clock = asyncio.get_running_loop().time
    timeout_s = TIMEOUT_MS / 1000
    scopes: dict[object, asyncio.Timeout] = {}
    for key in keys:
        cm = asyncio.timeout(timeout_s)
        await cm.__aenter__()  # entered in this task; never expires during the run
        scopes[key] = cm

    def touch(key: object) -> None:
        scopes[key].reschedule(clock() + timeout_s)

    async def teardown() -> None:
        for cm in reversed(scopes.values()):
            await cm.__aexit__(None, None, None)
        scopes.clear()

    return touch, teardown


VARIANTS: dict[str, Setup] = {
    "IdleTracker (lazy)": setup_lazy,
    "IdleTracker (move)": setup_move,
    "cancel + call_later": setup_call_later,
    "timeout.reschedule": setup_reschedule,
}


# -- measurement ----------------------------------------------------------------


async def touch_all_ns(touch: Touch, order: list[Conn]) -> float:
    """ns per touch over one run of ``order``, yielding to the loop every BATCH touches."""
    start = time.perf_counter_ns()
    for lo in range(0, len(order), BATCH):
        for key in order[lo : lo + BATCH]:
            touch(key)
        await asyncio.sleep(0)
    return (time.perf_counter_ns() - start) / len(order)


async def time_touches(setup: Setup, keys: list[Conn], order: list[Conn]) -> float:
    """ns per touch over one run, yields to the loop included."""
    touch, teardown = await setup(keys)
    try:
        gc.collect()
        return await touch_all_ns(touch, order)
    finally:
        await teardown()


async def memory_per_key(setup: Setup, keys: list[Conn]) -> float:
    """Bytes allocated per tracked key (tracemalloc), after one touch of each."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        touch, teardown = await setup(keys)
        for key in keys:
            touch(key)
        await asyncio.sleep(0)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    await teardown()
    return (after - before) / len(keys)


async def loop_overhead_ns(order: list[Conn]) -> float:
    """The measuring loop itself (calling a no-op): subtract nothing, just report it."""
    return await touch_all_ns(_ignore, order)


async def bench_loop(
    n_keys: int, n_touches: int, repeat: int, seed: int
) -> tuple[dict[str, float], dict[str, float], float]:
    rng = random.Random(seed)
    keys = [Conn(i) for i in range(n_keys)]
    order = [keys[rng.randrange(n_keys)] for _ in range(n_touches)]
    ns = dict.fromkeys(VARIANTS, float("inf"))
    for _ in range(repeat):  # round robin, so a busy moment of the machine hits every variant
        for name, setup in VARIANTS.items():
            ns[name] = min(ns[name], await time_touches(setup, keys, order))
    # one tracked key touched again and again: the touch's own cost, cache-hot (what
    # a timeit of ``touch`` measures), next to the 100k-connection figure above
    hot = [keys[0]] * n_touches
    ns[HOT] = float("inf")
    for _ in range(repeat):
        ns[HOT] = min(ns[HOT], await time_touches(setup_lazy, keys, hot))
    mem = {name: await memory_per_key(setup, keys) for name, setup in VARIANTS.items()}
    return ns, mem, await loop_overhead_ns(order)


def _reaped_by(design: type[IdleTracker[object]] | type[MovingIdleTracker]) -> list[str]:
    clock = ManualClock()
    timer = SystemTimer("check", clock=clock, may_expire_early=True)  # exact at tick 1
    reaped: list[str] = []

    def on_idle(key: object) -> None:
        reaped.append(f"{clock.now_ms()}:{key}")

    tracker = design(50, on_idle, timer=timer)
    rng = random.Random(7)
    for _ in range(2_000):
        tracker.touch(rng.randrange(40))
        clock.advance(rng.randrange(4))
        timer.poll()
    clock.advance(100)
    timer.poll()
    assert len(tracker) == 0
    return sorted(reaped)


def check_designs() -> None:
    """Both designs must reap the same keys at the same times (tick 1, manual clock,
    Kafka's exact filing: on the default one each design adds its own tick of padding)."""
    assert _reaped_by(IdleTracker) == _reaped_by(MovingIdleTracker), "the designs disagree"


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=integer(1), default=100_000, help="tracked connections")
    parser.add_argument("--touches", type=integer(1), default=500_000, help="touches per run")
    parser.add_argument("--repeat", type=integer(1), default=3, help="runs per variant (best kept)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    check_designs()

    loops: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
        "asyncio": asyncio.new_event_loop,
        "uvloop": uvloop.new_event_loop,
    }
    ns: dict[str, dict[str, float]] = {}
    mem: dict[str, dict[str, float]] = {}
    overhead: dict[str, float] = {}
    for loop_name, factory in loops.items():
        with asyncio.Runner(loop_factory=factory) as runner:
            ns[loop_name], mem[loop_name], overhead[loop_name] = runner.run(
                bench_loop(args.keys, args.touches, args.repeat, args.seed)
            )

    print(
        f"Python {platform.python_version()}, uvloop {version('uvloop')}, "
        f"nproc {os.cpu_count()}, CPU: {cpu_model()}, "
        f"core: {'compiled' if purgatory.compiled else 'pure Python'}"
    )
    print(
        f"{args.keys:,} tracked connections, {args.touches:,} random touches per run, "
        f"best of {args.repeat}; timeout {TIMEOUT_MS} ms\n"
    )
    print("| variant | asyncio ns/touch | uvloop ns/touch | asyncio B/conn | uvloop B/conn |")
    print("|---|---:|---:|---:|---:|")
    for name in VARIANTS:
        print(
            f"| {name} | {ns['asyncio'][name]:.0f} | {ns['uvloop'][name]:.0f} | "
            f"{mem['asyncio'][name]:.0f} | {mem['uvloop'][name]:.0f} |"
        )
    print(f"| {HOT} | {ns['asyncio'][HOT]:.0f} | {ns['uvloop'][HOT]:.0f} | | |")
    print(
        f"| (measuring loop, no-op touch) | {overhead['asyncio']:.0f} | "
        f"{overhead['uvloop']:.0f} | | |"
    )
    base = ns["asyncio"]["cancel + call_later"]
    lazy = ns["asyncio"]["IdleTracker (lazy)"]
    print(
        f"\nasyncio: IdleTracker (lazy) is {base / lazy:.1f}x cheaper per touch than "
        "cancel + call_later (goal: 2x)"
    )
    base_uv = ns["uvloop"]["cancel + call_later"]
    lazy_uv = ns["uvloop"]["IdleTracker (lazy)"]
    print(
        f"uvloop:  IdleTracker (lazy) is {base_uv / lazy_uv:.1f}x cheaper per touch than "
        "cancel + call_later"
    )


if __name__ == "__main__":
    main()
