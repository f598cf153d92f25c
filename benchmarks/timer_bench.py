"""SystemTimer versus loop.call_later: schedule+cancel and schedule+fire, per operation.

Usage: python benchmarks/timer_bench.py [--pending 10000,100000,1000000] [--ops N]
       python benchmarks/timer_bench.py --lateness N

For each event loop (asyncio, uvloop) and each number of pending timers, the
loop is first filled with ``pending`` timers far in the future (delays uniform
over 10..600 s), both in a SystemTimer (with its reaper running) and as
``call_later`` handles. Then, side by side in the same process:

* schedule+cancel: ``ops`` times, create a timer with a delay drawn like the
  pending ones and cancel it at once; the loop gets a turn every 1000 ops (so
  asyncio can drop cancelled handles as it does in a server). A new TimerTask is
  allocated per op, as ``call_later`` allocates a handle: nothing is reused.
* schedule+fire: ``ops`` timers with delays uniform over 0..50 ms, then wait
  until all have fired; CPU time (process_time) per op, the waiting included.
  Beside it, its floor with no timer: the same tasks created, then each one's
  ``run`` called from C in the order a timer runs them; the ``timer`` column is
  the share of schedule+fire's time that the floor does not account for.

With ``--lateness N``, instead: how late timer tasks fire on a real loop, the
figure the test suite does not assert (it depends on the machine's load; the
tests check never early, exactly once and in order, and on time to the tick on a
manual clock). N tasks with delays uniform over 1..500 ms are added to a
SystemTimer with its reaper running, and each notes ``ran - due`` in the timer's
clock; reported per loop: p50, p99 and max lateness in ms, and how many ran early
(always 0: never early is a property of the code, and a test).

Reported: ns per op and the ratio call_later / SystemTimer (above 1: the
SystemTimer is faster), and for schedule+fire the floor and the timer's share.
Timings are medians of ``--repeat`` runs (with ``--best``, the fastest run: on a
shared machine, the least disturbed). Each measurement (a loop, a number
pending, one of the five kinds) runs in a fresh process (``--pin CPU`` pins
it), so none inherits the heap another left: the
same schedule+cancel loop measured 162 ns first in a uvloop process and 333-359
ns after a round of uvloop's ``call_later`` + ``cancel`` and the fire runs had
run in it. Every process fills both the timer and the loop with the pending
timers, so each kind is measured with the same state around it. The core is the
one installed (compiled or, with ``PURGATORY_NO_EXTENSIONS=1``, pure Python).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import operator
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from array import array
from collections.abc import Callable, Coroutine
from typing import Any

import uvloop
from _cli import Parser, integer

import purgatory
from purgatory import SystemTimer, TimerTask


class Noop(TimerTask):
    __slots__ = ()

    def run(self) -> None:
        pass


class Counted(TimerTask):
    __slots__ = ("box",)

    def __init__(self, delay_ms: int, box: list[int]) -> None:
        super().__init__(delay_ms)
        self.box = box

    def run(self) -> None:
        self.box[0] += 1


class Late(TimerTask):
    """Notes how late it ran (ms, the timer's clock; negative: early)."""

    __slots__ = ("due_ms", "late", "timer")

    def __init__(self, delay_ms: int, timer: SystemTimer, late: list[int]) -> None:
        super().__init__(delay_ms)
        self.timer = timer
        self.late = late
        self.due_ms = timer.now_ms() + delay_ms

    def run(self) -> None:
        self.late.append(self.timer.now_ms() - self.due_ms)


RUN = operator.methodcaller("run")  # a task's run, called from C as the timer calls it


def _noop() -> None:
    pass


async def measure_lateness(tasks: int, seed: int) -> list[int]:
    """The lateness (ms) of ``tasks`` timer tasks due over 1..500 ms, sorted."""
    rng = random.Random(seed)
    late: list[int] = []
    async with SystemTimer("lateness") as timer:
        for _ in range(tasks):
            timer.add(Late(rng.randint(1, 500), timer, late))
        while len(late) < tasks:
            await asyncio.sleep(0.005)
    return sorted(late)


def report_lateness(tasks: int, seed: int) -> None:
    core = "compiled" if purgatory.compiled else "pure Python"
    print(f"lateness of {tasks} timer tasks due over 1..500 ms (ms, the timer's clock); {core}")
    print(f"{'loop':8} {'p50':>5} {'p99':>5} {'max':>5} {'early':>6}")
    for loop_name in ("asyncio", "uvloop"):
        runner = uvloop.run if loop_name == "uvloop" else asyncio.run
        late = runner(measure_lateness(tasks, seed))
        p50, p99 = late[len(late) // 2], late[min(len(late) - 1, len(late) * 99 // 100)]
        early = sum(1 for x in late if x < 0)
        print(f"{loop_name:8} {p50:>5} {p99:>5} {late[-1]:>5} {early:>6}", flush=True)


async def bench_cancel_wheel(timer: SystemTimer, delays_ms: list[int]) -> float:
    add = timer.add
    start = time.perf_counter()
    for i in range(0, len(delays_ms), 1000):
        for d in delays_ms[i : i + 1000]:
            task = Noop(d)
            add(task)
            task.cancel()
        await asyncio.sleep(0)
    return time.perf_counter() - start


async def bench_cancel_loop(delays_ms: list[int]) -> float:
    call_later = asyncio.get_running_loop().call_later
    start = time.perf_counter()
    for i in range(0, len(delays_ms), 1000):
        for d in delays_ms[i : i + 1000]:
            call_later(d / 1000, _noop).cancel()
        await asyncio.sleep(0)
    return time.perf_counter() - start


async def bench_fire_wheel(timer: SystemTimer, delays_ms: list[int]) -> float:
    box = [0]
    add = timer.add
    start = time.process_time()
    for d in delays_ms:
        add(Counted(d, box))
    while box[0] < len(delays_ms):
        await asyncio.sleep(0.005)
    return time.process_time() - start


async def bench_fire_floor(delays_ms: list[int]) -> float:
    """schedule+fire with no timer, its floor: the same tasks created, then each one's
    ``run`` called from C in the order a timer runs them (by delay), then freed."""
    # an array, not a list of ints: reading an index then touches no object
    order = array("q", sorted(range(len(delays_ms)), key=delays_ms.__getitem__))
    box = [0]
    start = time.process_time()
    kept = [Counted(d, box) for d in delays_ms]
    for _ in map(RUN, map(kept.__getitem__, order)):  # each task touched once, in C
        pass
    del kept
    return time.process_time() - start


async def bench_fire_loop(delays_ms: list[int]) -> float:
    box = [0]

    def hit() -> None:
        box[0] += 1

    call_later = asyncio.get_running_loop().call_later
    start = time.process_time()
    for d in delays_ms:
        call_later(d / 1000, hit)
    while box[0] < len(delays_ms):
        await asyncio.sleep(0.005)
    return time.process_time() - start


# cancel: wheel, call_later; fire: wheel, call_later, no timer (the floor)
KINDS = ("cw", "cl", "fw", "fl", "ff")


async def run_case(
    pending: int, ops: int, repeat: int, seed: int, kind: str, *, best: bool
) -> float:
    """ns per op of one kind, the median (or the best) of ``repeat`` runs."""
    rng = random.Random(seed)
    loop = asyncio.get_running_loop()
    far_ms = [rng.randint(10_000, 600_000) for _ in range(pending)]
    cancel_ms = [rng.randint(10_000, 600_000) for _ in range(ops)]
    fire_ms = [rng.randint(0, 50) for _ in range(ops)]
    runs: list[float] = []
    async with SystemTimer("bench") as timer:
        handles = [loop.call_later(d / 1000, _noop) for d in far_ms]
        keep = [Noop(d) for d in far_ms]
        for task in keep:
            timer.add(task)
        gc.collect()
        gc.disable()
        try:
            for _ in range(repeat):
                if kind == "cw":
                    runs.append(await bench_cancel_wheel(timer, cancel_ms))
                elif kind == "cl":
                    runs.append(await bench_cancel_loop(cancel_ms))
                elif kind == "fw":
                    runs.append(await bench_fire_wheel(timer, fire_ms))
                elif kind == "ff":
                    runs.append(await bench_fire_floor(fire_ms))
                else:
                    runs.append(await bench_fire_loop(fire_ms))
        finally:
            gc.enable()
        assert len(timer) == pending
        for h in handles:
            h.cancel()
        for task in keep:
            task.cancel()
    return (min(runs) if best else statistics.median(runs)) / ops * 1e9


def run_on(loop_name: str, coro: Coroutine[Any, Any, float]) -> float:
    runner: Callable[[Coroutine[Any, Any, float]], float]
    runner = uvloop.run if loop_name == "uvloop" else asyncio.run
    return runner(coro)


def child(args: argparse.Namespace) -> None:
    """One measurement in this fresh process: ns per op as a JSON line."""
    if args.pin is not None:
        os.sched_setaffinity(0, {args.pin})
    coro = run_case(int(args.pending), args.ops, args.repeat, args.seed, args.kind, best=args.best)
    print(json.dumps(run_on(args.child, coro)))


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", default="10000,100000,1000000")
    parser.add_argument("--ops", type=integer(1), default=100_000)
    parser.add_argument("--repeat", type=integer(1), default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pin", type=int, default=None, help="pin each case to this CPU")
    parser.add_argument("--best", action="store_true", help="the fastest run, not the median")
    parser.add_argument(
        "--lateness", type=int, default=None, metavar="N", help="measure lateness only"
    )
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--kind", default="cw", choices=KINDS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args)
        return
    if args.lateness is not None:
        report_lateness(args.lateness, args.seed)
        return
    print(
        f"python {platform.python_version()} on {platform.machine()}; ops={args.ops};"
        f" core: {'compiled' if purgatory.compiled else 'pure Python'};"
        f" {'best' if args.best else 'median'} of {args.repeat}"
    )
    header = (
        f"{'loop':8} {'pending':>9} | {'cancel wheel':>12} {'call_later':>10} {'ratio':>6}"
        f" | {'fire wheel':>10} {'call_later':>10} {'ratio':>6} | {'no timer':>8} {'timer':>5}"
    )
    print(header)
    print("-" * len(header))
    for loop_name in ("asyncio", "uvloop"):
        for pending in (int(p) for p in args.pending.split(",")):
            # a fresh process per measurement: one run after another measured up to
            # 2x slower (the first one's objects freed, the heap left behind)
            r: dict[str, float] = {}
            for kind in KINDS:
                cmd = [sys.executable, __file__, "--child", loop_name, "--kind", kind]
                cmd += ["--pending", str(pending), "--ops", str(args.ops)]
                cmd += ["--repeat", str(args.repeat), "--seed", str(args.seed)]
                if args.best:
                    cmd.append("--best")
                if args.pin is not None:
                    cmd += ["--pin", str(args.pin)]
                done = subprocess.run(cmd, check=False, capture_output=True, text=True)
                if done.returncode:
                    sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr}")
                r[kind] = json.loads(done.stdout.strip().splitlines()[-1])
            print(
                f"{loop_name:8} {pending:>9} | {r['cw']:>10.0f}ns {r['cl']:>8.0f}ns"
                f" {r['cl'] / r['cw']:>5.2f}x | {r['fw']:>8.0f}ns {r['fl']:>8.0f}ns"
                f" {r['fl'] / r['fw']:>5.2f}x | {r['ff']:>6.0f}ns {1 - r['ff'] / r['fw']:>5.0%}",
                flush=True,
            )


if __name__ == "__main__":
    main()
