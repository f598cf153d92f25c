"""SystemTimer versus loop.call_later: schedule+cancel and schedule+fire, per operation.

Usage: python benchmarks/timer_bench.py [--pending 10000,100000,1000000] [--ops N]

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

Reported: ns per op and the ratio call_later / SystemTimer (above 1: the
SystemTimer is faster). Timings are medians of ``--repeat`` runs. Each (loop,
pending) case runs in a fresh process (``--pin CPU`` pins it), so no case
inherits the heap another left; the core is the one installed (compiled or, with
``PURGATORY_NO_EXTENSIONS=1``, pure Python).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

import uvloop

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


def _noop() -> None:
    pass


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


async def run_case(pending: int, ops: int, repeat: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    loop = asyncio.get_running_loop()
    far_ms = [rng.randint(10_000, 600_000) for _ in range(pending)]
    cancel_ms = [rng.randint(10_000, 600_000) for _ in range(ops)]
    fire_ms = [rng.randint(0, 50) for _ in range(ops)]
    result: dict[str, list[float]] = {k: [] for k in ("cw", "cl", "fw", "fl")}
    async with SystemTimer("bench") as timer:
        handles = [loop.call_later(d / 1000, _noop) for d in far_ms]
        keep = [Noop(d) for d in far_ms]
        for task in keep:
            timer.add(task)
        gc.collect()
        gc.disable()
        try:
            for _ in range(repeat):
                result["cw"].append(await bench_cancel_wheel(timer, cancel_ms))
                result["cl"].append(await bench_cancel_loop(cancel_ms))
                result["fw"].append(await bench_fire_wheel(timer, fire_ms))
                result["fl"].append(await bench_fire_loop(fire_ms))
        finally:
            gc.enable()
        assert len(timer) == pending
        for h in handles:
            h.cancel()
        for task in keep:
            task.cancel()
    return {k: statistics.median(v) / ops * 1e9 for k, v in result.items()}


def run_on(loop_name: str, coro: Coroutine[Any, Any, dict[str, float]]) -> dict[str, float]:
    runner: Callable[[Coroutine[Any, Any, dict[str, float]]], dict[str, float]]
    runner = uvloop.run if loop_name == "uvloop" else asyncio.run
    return runner(coro)


def child(args: argparse.Namespace) -> None:
    """One case in this fresh process: its result as a JSON line."""
    if args.pin is not None:
        os.sched_setaffinity(0, {args.pin})
    result = run_on(args.child, run_case(int(args.pending), args.ops, args.repeat, args.seed))
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", default="10000,100000,1000000")
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pin", type=int, default=None, help="pin each case to this CPU")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args)
        return
    print(
        f"python {platform.python_version()} on {platform.machine()}; ops={args.ops};"
        f" core: {'compiled' if purgatory.compiled else 'pure Python'}"
    )
    header = (
        f"{'loop':8} {'pending':>9} | {'cancel wheel':>12} {'call_later':>10} {'ratio':>6}"
        f" | {'fire wheel':>10} {'call_later':>10} {'ratio':>6}"
    )
    print(header)
    print("-" * len(header))
    for loop_name in ("asyncio", "uvloop"):
        for pending in (int(p) for p in args.pending.split(",")):
            # a fresh process per case: a case run after another measured up to 2x
            # slower (the first one's million objects freed, the heap left behind)
            cmd = [sys.executable, __file__, "--child", loop_name, "--pending", str(pending)]
            cmd += ["--ops", str(args.ops), "--repeat", str(args.repeat), "--seed", str(args.seed)]
            if args.pin is not None:
                cmd += ["--pin", str(args.pin)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            print(
                f"{loop_name:8} {pending:>9} | {r['cw']:>10.0f}ns {r['cl']:>8.0f}ns"
                f" {r['cl'] / r['cw']:>5.2f}x | {r['fw']:>8.0f}ns {r['fl']:>8.0f}ns"
                f" {r['fl'] / r['fw']:>5.2f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
