"""The purgatory benchmark (after Confluent's/Kafka's TestPurgatoryPerformance), adapted.

Usage: python benchmarks/purgatory_bench.py [--requests N] [--mix low|high|both]
                                           [--pending 100000] [--impl purgatory|naive|both]

Workload, as in Kafka's benchmark: requests arrive as fast as the loop accepts
them (the sustained enqueue rate is the result), each with a 200 ms timeout,
watched under one of 100 topic-partitions. Each request's completion latency is
drawn from a log-normal distribution fitted to two quantiles: low-timeout mix
p50 20 ms / p75 60 ms; high-timeout mix p50 200 ms / p75 400 ms. A completer
completes the request at that moment (``force_complete``, outside the purgatory,
as Kafka's completion thread does) if it is shorter than the timeout; the others
expire through the timer.

Two implementations run the same workload, each in its own process (so peak
memory is its own), on uvloop:

* ``purgatory``: DelayedOperationPurgatory (nobody awaits: no futures);
* ``naive``: what an asyncio user would otherwise write: one future and one
  ``loop.call_later`` per request, and a dict of per-key waiter sets.

``--pending N`` first fills the implementation with N requests that wait 10
minutes (never completed during the run), to measure at that many pending.
Reported: enqueue rate, CPU per request, expiry lateness p50/p99/max, peak RSS,
and memory per pending request (RSS growth while filling the N).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import heapq
import json
import math
import platform
import random
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

import uvloop

from purgatory import DelayedOperation, DelayedOperationPurgatory, TopicPartition

TIMEOUT_MS = 200
KEYS = [TopicPartition("bench", i) for i in range(100)]
MIXES = {"low": (20.0, 60.0), "high": (200.0, 400.0)}
Z75 = 0.6744897501960817  # the standard normal's 75th percentile


def lognormal_params(p50: float, p75: float) -> tuple[float, float]:
    mu = math.log(p50)
    return mu, (math.log(p75) - mu) / Z75


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class BenchOp(DelayedOperation[None]):
    __slots__ = ()

    def try_complete(self) -> bool:
        return False  # completed by the completer, from outside

    def on_complete(self) -> None:
        return None

    def on_expiration(self) -> None:
        return None


class NaiveOp:
    """One future and one call_later handle per request."""

    __slots__ = ("future", "handle", "key", "deadline")

    def __init__(self, loop: asyncio.AbstractEventLoop, key: TopicPartition) -> None:
        self.future: asyncio.Future[str] = loop.create_future()
        self.key = key
        self.handle: asyncio.TimerHandle | None = None
        self.deadline = 0.0


class Naive:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.waiters: dict[TopicPartition, set[NaiveOp]] = {}
        self.lateness_ms: list[float] = []

    def watch(self, key: TopicPartition, timeout_ms: int) -> NaiveOp:
        op = NaiveOp(self.loop, key)
        self.waiters.setdefault(key, set()).add(op)
        op.deadline = self.loop.time() + timeout_ms / 1000
        op.handle = self.loop.call_later(timeout_ms / 1000, self.expire, op)
        return op

    def finish(self, op: NaiveOp, outcome: str) -> None:
        if op.future.done():
            return
        op.future.set_result(outcome)
        ops = self.waiters.get(op.key)
        if ops is not None:
            ops.discard(op)
            if not ops:
                del self.waiters[op.key]

    def complete(self, op: NaiveOp) -> None:
        if not op.future.done():
            assert op.handle is not None
            op.handle.cancel()
            self.finish(op, "done")

    def expire(self, op: NaiveOp) -> None:
        self.lateness_ms.append((self.loop.time() - op.deadline) * 1000)
        self.finish(op, "expired")


async def run(impl: str, mix: str, requests: int, pending: int, seed: int) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    rng = random.Random(seed)
    mu, sigma = lognormal_params(*MIXES[mix])
    p: DelayedOperationPurgatory[BenchOp] = DelayedOperationPurgatory("bench")
    naive = Naive(loop)
    keep: list[object] = []
    async with p:
        gc.collect()
        rss0 = rss_kib()
        for i in range(pending):
            if impl == "purgatory":
                op = BenchOp(600_000)
                p.try_complete_else_watch(op, (KEYS[i % 100],))
                keep.append(op)
            else:
                keep.append(naive.watch(KEYS[i % 100], 600_000))
        gc.collect()
        per_pending_bytes = (rss_kib() - rss0) * 1024 / pending if pending else 0.0
        completions: list[tuple[float, int, Any]] = []
        batch = 200
        submitted = 0
        start_wall = time.perf_counter()
        start_cpu = time.process_time()
        seq = 0

        def complete_due(now: float) -> None:
            while completions and completions[0][0] <= now:
                _, _, op = heapq.heappop(completions)
                if impl == "purgatory":
                    op.force_complete()
                else:
                    naive.complete(op)

        while submitted < requests:
            now = loop.time()
            complete_due(now)
            for _ in range(min(batch, requests - submitted)):
                key = KEYS[rng.randrange(100)]
                latency_ms = rng.lognormvariate(mu, sigma)
                new: BenchOp | NaiveOp
                if impl == "purgatory":
                    new = BenchOp(TIMEOUT_MS)
                    p.try_complete_else_watch(new, (key,))
                else:
                    new = naive.watch(key, TIMEOUT_MS)
                if latency_ms < TIMEOUT_MS:
                    seq += 1
                    heapq.heappush(completions, (now + latency_ms / 1000, seq, new))
                submitted += 1
            await asyncio.sleep(0)
        enqueue_s = time.perf_counter() - start_wall
        # drain: let the remaining completions and expirations happen
        while completions:
            await asyncio.sleep(0.001)
            complete_due(loop.time())
        await asyncio.sleep((TIMEOUT_MS + 50) / 1000)
        cpu_s = time.process_time() - start_cpu
        late: tuple[float, float, float]
        if impl == "purgatory":
            stats = p.statistics()
            late = (stats.lateness_p50_ms, stats.lateness_p99_ms, stats.lateness_max_ms)
            expired = stats.expired
        else:
            lat = sorted(naive.lateness_ms)
            late = (
                statistics.median(lat) if lat else 0,
                lat[int(len(lat) * 0.99)] if lat else 0,
                lat[-1] if lat else 0,
            )
            expired = len(lat)
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        del keep
    return {
        "impl": impl,
        "mix": mix,
        "requests": requests,
        "pending": pending,
        "enqueue_per_s": requests / enqueue_s,
        "cpu_us_per_request": cpu_s / requests * 1e6,
        "lateness_ms": late,
        "expired": expired,
        "peak_rss_mib": peak_kib / 1024,
        "bytes_per_pending": per_pending_bytes,
    }


def child(args: argparse.Namespace) -> None:
    result = uvloop.run(run(args.impl, args.mix, args.requests, args.pending, args.seed))
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--mix", default="both", choices=["low", "high", "both"])
    parser.add_argument("--impl", default="both", choices=["purgatory", "naive", "both"])
    parser.add_argument("--pending", type=int, default=0)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    print(f"python {platform.python_version()} {platform.machine()}, uvloop")
    print(
        f"{'impl':10} {'mix':5} {'pending':>8} {'enqueue/s':>10} {'CPU us/req':>10}"
        f" {'late p50/p99/max ms':>20} {'expired':>8} {'peak MiB':>9} {'B/pending':>9}"
    )
    mixes = ["low", "high"] if args.mix == "both" else [args.mix]
    impls = ["purgatory", "naive"] if args.impl == "both" else [args.impl]
    for mix in mixes:
        for impl in impls:
            cmd = [sys.executable, __file__, "--child", "--impl", impl, "--mix", mix]
            cmd += ["--requests", str(args.requests), "--pending", str(args.pending)]
            cmd += ["--seed", str(args.seed)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            late = "/".join(f"{x:.0f}" for x in r["lateness_ms"])
            print(
                f"{impl:10} {mix:5} {r['pending']:>8} {r['enqueue_per_s']:>10.0f}"
                f" {r['cpu_us_per_request']:>10.2f} {late:>20} {r['expired']:>8}"
                f" {r['peak_rss_mib']:>9.0f} {r['bytes_per_pending']:>9.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
