"""The purgatory's async shell on asyncio, uvloop and trio, under anyio (issue #8).

Usage: python benchmarks/backends_bench.py [--ops N] [--repeat R] [--backends ...]

Two cases per backend, the same code for all three (anyio task groups and sleeps):

* await: ``ops`` operations watched on one of 100 keys, each awaited by its own
  task; once every awaiter waits, all are completed through ``check_and_complete``;
  wall time per operation from the first completion to the last awaiter's return
  (completion, settling the awaiter, waking its task, the task's exit). Spawning
  the tasks is left out: anyio's ``start_soon`` alone costs ~19 us a task at 50k.
* expire: ``ops`` operations with timeouts uniform over 0..50 ms, nobody awaiting;
  CPU time (process_time) per operation until the timer has expired them all,
  the reaper's sleeps and wake-ups included.

Reported: the median of ``--repeat`` runs in ns per operation, the garbage
collector off while measuring (as in timer_bench).
"""

from __future__ import annotations

import argparse
import gc
import platform
import random
import statistics
import time
from typing import Any

import anyio
from _cli import Parser, integer

from purgatory import DelayedOperation, DelayedOperationPurgatory, TopicPartition


class Op(DelayedOperation[int]):
    __slots__ = ("ready",)

    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.ready = False

    def try_complete(self) -> bool:
        return self.ready and self.force_complete()

    def on_complete(self) -> int:
        return 1

    def on_expiration(self) -> None:
        pass


async def bench_await(ops: int) -> float:
    keys = [TopicPartition("t", i) for i in range(100)]
    total = [0]

    async def awaiter(op: Op) -> None:
        outcome = await op
        total[0] += outcome

    async with DelayedOperationPurgatory[Op]("await") as p, anyio.create_task_group() as tg:
        batch = [Op(60_000) for _ in range(ops)]
        for i, op in enumerate(batch):
            p.try_complete_else_watch(op, [keys[i % 100]])
            tg.start_soon(awaiter, op)
        await anyio.wait_all_tasks_blocked()  # every awaiter is waiting on its operation
        start = time.perf_counter()
        for op in batch:
            op.ready = True
        for key in keys:
            p.check_and_complete(key)
    elapsed = time.perf_counter() - start
    assert total[0] == ops, (total[0], ops)
    return elapsed / ops * 1e9


async def bench_expire(ops: int, seed: int) -> float:
    rng = random.Random(seed)
    delays = [rng.randrange(0, 51) for _ in range(ops)]
    start = time.process_time()
    async with DelayedOperationPurgatory[Op]("expire") as p:
        key = [TopicPartition("t", 0)]
        for i in range(0, ops, 1000):
            for d in delays[i : i + 1000]:
                p.try_complete_else_watch(Op(d), key)
            await anyio.sleep(0)
        while p.num_delayed:
            await anyio.sleep(0.005)
        assert p.statistics().expired == ops
    return (time.process_time() - start) / ops * 1e9


def run(backend: str, options: dict[str, Any], args: argparse.Namespace) -> tuple[float, float]:
    awaits, expires = [], []
    for r in range(args.repeat):
        gc.collect()
        gc.disable()  # as in timer_bench: measure the code, not the collector
        try:
            awaits.append(
                anyio.run(bench_await, args.ops, backend=backend, backend_options=options)
            )
            expires.append(
                anyio.run(bench_expire, args.ops, r, backend=backend, backend_options=options)
            )
        finally:
            gc.enable()
    return statistics.median(awaits), statistics.median(expires)


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=integer(1), default=50_000)
    parser.add_argument("--repeat", type=integer(1), default=3)
    parser.add_argument("--backends", default="asyncio,uvloop,trio")
    args = parser.parse_args()
    backends: dict[str, tuple[str, dict[str, Any]]] = {
        "asyncio": ("asyncio", {}),
        "uvloop": ("asyncio", {"use_uvloop": True}),
        "trio": ("trio", {}),
    }
    print(f"python {platform.python_version()} on {platform.machine()}; ops={args.ops}")
    print("| backend | await: ns/op | expire: CPU ns/op |")
    print("|---|---:|---:|")
    for name in args.backends.split(","):
        backend, options = backends[name]
        await_ns, expire_ns = run(backend, options, args)
        print(f"| {name} | {await_ns:.0f} | {expire_ns:.0f} |", flush=True)


if __name__ == "__main__":
    main()
