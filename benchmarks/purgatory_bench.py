"""The purgatory benchmark (after Confluent's/Kafka's TestPurgatoryPerformance), adapted.

Usage: python benchmarks/purgatory_bench.py [--requests N] [--mix low|high|both]
           [--pending 100000] [--impl purgatory|pure|naive|driver|all] [--repeat 3]
           [--pin CPU] [--peer NAME=COMMAND ...]

Workload, as in Kafka's benchmark: requests arrive as fast as the loop accepts
them (the sustained enqueue rate is the result), each with a 200 ms timeout,
watched under one of 100 topic-partitions. Each request's completion latency is
drawn from a log-normal distribution fitted to two quantiles: low-timeout mix
p50 20 ms / p75 60 ms; high-timeout mix p50 200 ms / p75 400 ms. A completer
completes the request once that moment has passed (``force_complete``, outside
the purgatory, as Kafka's completion thread does; from a ring of 1 ms slots, in
the first loop turn after the slot's millisecond) if it is shorter than the
timeout; the others expire through the timer. The keys and latencies are drawn (seeded) before the
clock starts, so the rate measures the implementations, not ``random``.

Each implementation runs in its own process (so peak memory is its own), on
uvloop:

* ``purgatory``: DelayedOperationPurgatory (nobody awaits: no futures), the core
  as installed (compiled when it could be built: see ``purgatory.compiled``);
* ``pure``: the same with ``PURGATORY_NO_EXTENSIONS=1``, the pure-Python core;
* ``naive``: what an asyncio user would otherwise write: one future and one
  ``loop.call_later`` per request, and a dict of per-key waiter sets;
* ``driver``: the benchmark's own work alone (reading the draws, the completer's
  schedule, the loop), what the other rates include and cannot go faster than.

``--peer NAME=COMMAND`` adds an implementation that is not Python: COMMAND is
run with ``--mix M --pending N --requests R --seed S`` appended and must print
the same JSON line as a child here (for example a harness running Apache
Kafka's own Java DelayedOperationPurgatory under this workload; none is
shipped). Every implementation and peer runs in turn within each round.
``--pin CPU`` pins each Python child to one CPU (a peer pins itself).

``--pending N`` first fills the implementation with N requests that wait 10
minutes (never completed during the run), to measure at that many pending.
Reported: enqueue rate, CPU per request and the part of it spent in the garbage
collector, expiry lateness p50/p99/max, peak RSS, and memory per pending request
(RSS growth while filling the N). ``--repeat R`` runs every implementation R times,
interleaved, and shows each one's median run and the purgatory/naive throughput
ratio of every round.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import platform
import random
import resource
import shlex
import statistics
import subprocess
import sys
import time
from array import array
from typing import Any

import uvloop
from _cli import Parser, integer

from purgatory import DelayedOperation, DelayedOperationPurgatory, TopicPartition
from purgatory.core import exact_quantile

TIMEOUT_MS = 200
KEYS = [TopicPartition("bench", i) for i in range(100)]
MIXES = {"low": (20.0, 60.0), "high": (200.0, 400.0)}
Z75 = 0.6744897501960817  # the standard normal's 75th percentile
#: the completer's ring of 1 ms slots: a power of two over TIMEOUT_MS, so a slot is
#: never reused while a request in it waits
COMPLETION_SLOTS = 1024
SLOT_MASK = COMPLETION_SLOTS - 1


def lognormal_params(p50: float, p75: float) -> tuple[float, float]:
    mu = math.log(p50)
    return mu, (math.log(p75) - mu) / Z75


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class GcTimer:
    """A ``gc.callbacks`` hook adding up the time spent in garbage collection."""

    def __init__(self) -> None:
        self.total_s = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.total_s += time.perf_counter() - self._start


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


def draw(rng: random.Random, mix: str, requests: int) -> tuple[array[int], array[float]]:
    """Each request's key index and completion latency, drawn before the clock starts."""
    mu, sigma = lognormal_params(*MIXES[mix])
    # arrays filled from generators: 9 bytes a request, no list of objects on the way
    keys = array("B", (rng.randrange(len(KEYS)) for _ in range(requests)))
    latencies = array("d", (rng.lognormvariate(mu, sigma) for _ in range(requests)))
    return keys, latencies


async def run(impl: str, mix: str, requests: int, pending: int, seed: int) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    key_indexes, latencies = draw(random.Random(seed), mix, requests)
    is_purgatory = impl == "purgatory"
    is_naive = impl == "naive"
    p: DelayedOperationPurgatory[BenchOp] = DelayedOperationPurgatory("bench")
    naive = Naive(loop)
    keep: list[object] = []
    async with p:
        gc.collect()
        rss0 = rss_kib()
        for i in range(pending):
            if is_purgatory:
                op = BenchOp(600_000)
                p.try_complete_else_watch(op, (KEYS[i % 100],))
                keep.append(op)
            elif is_naive:
                keep.append(naive.watch(KEYS[i % 100], 600_000))
        gc.collect()
        per_pending_bytes = (rss_kib() - rss0) * 1024 / pending if pending else 0.0
        # the completer's schedule: a ring of 1 ms slots (a request completes in the
        # slot of its due millisecond; every due time is under TIMEOUT_MS ahead, far
        # inside the ring), O(1) a request where a heap costs O(log n) comparisons
        ring: list[list[Any]] = [[] for _ in range(COMPLETION_SLOTS)]
        waiting = 0  # requests in the ring
        done_ms = int(loop.time() * 1000) - 1  # the slots up to this one are completed
        batch = 200
        submitted = 0
        gc_timer = GcTimer()
        gc.callbacks.append(gc_timer)
        start_wall = time.perf_counter()
        start_cpu = time.process_time()

        def complete_due(now: float) -> None:
            nonlocal done_ms, waiting
            now_ms = int(now * 1000) - 1  # the slots wholly in the past: never early
            while done_ms < now_ms:
                done_ms += 1
                slot = ring[done_ms & SLOT_MASK]
                if slot:
                    waiting -= len(slot)
                    for op in slot:
                        if is_purgatory:
                            op.force_complete()
                        elif is_naive:
                            naive.complete(op)
                    slot.clear()

        while submitted < requests:
            now = loop.time()
            complete_due(now)
            now_ms = now * 1000
            end = min(submitted + batch, requests)
            for i in range(submitted, end):
                new: BenchOp | NaiveOp | None
                if is_purgatory:
                    new = BenchOp(TIMEOUT_MS)
                    p.try_complete_else_watch(new, (KEYS[key_indexes[i]],))
                elif is_naive:
                    new = naive.watch(KEYS[key_indexes[i]], TIMEOUT_MS)
                else:
                    new = None  # "driver": the benchmark's own work alone
                latency_ms = latencies[i]
                if latency_ms < TIMEOUT_MS:
                    # the slot of the millisecond it falls in; completed once it has passed
                    ring[int(now_ms + latency_ms) & SLOT_MASK].append(new)
                    waiting += 1
            submitted = end
            await asyncio.sleep(0)
        enqueue_s = time.perf_counter() - start_wall
        # drain: let the remaining completions and expirations happen
        while waiting:
            await asyncio.sleep(0.001)
            complete_due(loop.time())
        await asyncio.sleep((TIMEOUT_MS + 50) / 1000)
        cpu_s = time.process_time() - start_cpu
        gc.callbacks.remove(gc_timer)
        late: tuple[float, float, float]
        if impl == "purgatory":
            stats = p.statistics()
            late = (stats.lateness_p50_ms, stats.lateness_p99_ms, stats.lateness_max_ms)
            expired = stats.expired
        else:
            lat = sorted(naive.lateness_ms)
            late = (
                exact_quantile(lat, 0.5) if lat else 0,
                exact_quantile(lat, 0.99) if lat else 0,
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
        "gc_us_per_request": gc_timer.total_s / requests * 1e6,
        "lateness_ms": late,
        "expired": expired,
        "peak_rss_mib": peak_kib / 1024,
        "bytes_per_pending": per_pending_bytes,
    }


def child(args: argparse.Namespace) -> None:
    if args.pin is not None:
        os.sched_setaffinity(0, {args.pin})
    import purgatory

    impl = "purgatory" if args.impl == "pure" else args.impl
    result = uvloop.run(run(impl, args.mix, args.requests, args.pending, args.seed))
    result["impl"] = args.impl
    result["compiled"] = purgatory.compiled
    print(json.dumps(result))


def run_one(impl: str, args: argparse.Namespace, mix: str, peers: dict[str, str]) -> dict[str, Any]:
    """One run of ``impl`` (or of a peer) in its own process; its JSON result."""
    env = dict(os.environ)
    if impl in peers:
        cmd = shlex.split(peers[impl])
        cmd += ["--mix", mix, "--pending", str(args.pending), "--requests", str(args.requests)]
        cmd += ["--seed", str(args.seed)]
    else:
        cmd = [sys.executable, __file__, "--child", "--impl", impl, "--mix", mix]
        cmd += ["--requests", str(args.requests), "--pending", str(args.pending)]
        cmd += ["--seed", str(args.seed)]
        if args.pin is not None:
            cmd += ["--pin", str(args.pin)]
        if impl == "pure":
            env["PURGATORY_NO_EXTENSIONS"] = "1"
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result["impl"] = impl
    return result


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=integer(1), default=1_000_000)
    parser.add_argument("--mix", default="both", choices=["low", "high", "both"])
    parser.add_argument(
        "--impl", default="all", choices=["purgatory", "pure", "naive", "driver", "all"]
    )
    parser.add_argument("--pending", type=int, default=0)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--repeat", type=integer(1), default=1, help="runs per implementation; the median is shown"
    )
    parser.add_argument("--pin", type=int, default=None, help="pin each Python child to this CPU")
    parser.add_argument(
        "--peer",
        action="append",
        default=[],
        metavar="NAME=COMMAND",
        help="an outside implementation printing a child's JSON line (run in every round)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    peers = dict(p.split("=", 1) for p in args.peer)
    if args.child:
        child(args)
        return
    print(f"python {platform.python_version()} {platform.machine()}, uvloop")
    print(
        f"{'impl':10} {'mix':5} {'pending':>8} {'enqueue/s':>10} {'CPU us/req':>10}"
        f" {'GC us/req':>9} {'late p50/p99/max ms':>20} {'expired':>8}"
        f" {'peak MiB':>9} {'B/pending':>9}"
    )
    mixes = ["low", "high"] if args.mix == "both" else [args.mix]
    impls = ["purgatory", "pure", "naive", "driver"] if args.impl == "all" else [args.impl]
    impls += list(peers)
    for mix in mixes:
        runs: dict[str, list[dict[str, Any]]] = {impl: [] for impl in impls}
        for _ in range(args.repeat):  # interleaved, so machine noise spreads over all
            for impl in impls:
                runs[impl].append(run_one(impl, args, mix, peers))
        for impl in impls:
            r = sorted(runs[impl], key=lambda run: run["enqueue_per_s"])[len(runs[impl]) // 2]
            late = "/".join(f"{x:.0f}" for x in r["lateness_ms"])
            print(
                f"{impl:10} {mix:5} {r['pending']:>8} {r['enqueue_per_s']:>10.0f}"
                f" {r['cpu_us_per_request']:>10.2f} {r['gc_us_per_request']:>9.2f}"
                f" {late:>20} {r['expired']:>8}"
                f" {r['peak_rss_mib']:>9.0f} {r['bytes_per_pending']:>9.0f}",
                flush=True,
            )
        if "purgatory" in runs:
            for other in (impl for impl in impls if impl not in ("purgatory", "driver")):
                rounds = list(zip(runs["purgatory"], runs[other], strict=True))
                speed = [a["enqueue_per_s"] / b["enqueue_per_s"] for a, b in rounds]
                cpu = [a["cpu_us_per_request"] / b["cpu_us_per_request"] for a, b in rounds]
                print(
                    f"{mix} mix: purgatory/{other} throughput median"
                    f" {statistics.median(speed):.2f}x"
                    f" ({', '.join(f'{x:.2f}x' for x in speed)}); CPU per request median"
                    f" {statistics.median(cpu):.2f}x ({', '.join(f'{x:.2f}x' for x in cpu)})",
                    flush=True,
                )


if __name__ == "__main__":
    main()
