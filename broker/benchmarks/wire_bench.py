"""The Kafka-wire example broker under a real client: acks=all throughput and latency.

    python broker/benchmarks/wire_bench.py                       # about half a minute
    python broker/benchmarks/wire_bench.py --messages 20000 --latency-messages 200 --uvloop

The broker (``python -m purgatory_broker.wire``) runs in its own process, so the
client and the broker do not share a GIL; the client is aiokafka with
``acks="all"`` and idempotence, on one partition of a topic with ``--followers``
simulated followers lagging ``--follower-lag-ms``.

* latency: one message at a time (``send_and_wait``), so each produce request
  waits alone in the DelayedProduce. An acks=all answer cannot come before the
  followers' next fetch, about ``follower_lag_ms`` after the append, so the table
  also shows the latency *minus the lag*: the cost of the wire, the broker, the
  purgatory and the client;
* throughput: ``--messages`` of ``--record-bytes`` each sent without waiting;
  aiokafka batches them (up to 16 KiB per batch) and every produce request
  still waits in the DelayedProduce until the followers have replicated it.

Prints one table; the figures in BENCHMARKS.md come from this script.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from _machine import cpu_model

from purgatory.core import exact_quantile

ROOT = Path(__file__).resolve().parent.parent


def quantile(values: Sequence[float], q: float) -> float:
    """The exact ``q``-quantile (nearest rank, :func:`purgatory.core.exact_quantile`)."""
    return exact_quantile(sorted(values), q)


def start_broker(args: argparse.Namespace) -> tuple[subprocess.Popen[str], str]:
    command = [
        sys.executable,
        "-m",
        "purgatory_broker.wire",
        "--port",
        "0",
        "--partitions",
        "1",
        "--followers",
        str(args.followers),
        "--follower-lag-ms",
        str(args.follower_lag_ms),
    ]
    if args.uvloop:
        command.append("--uvloop")
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"listening on (\S+)", line)
    if match is None:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"the broker did not start: {line!r}")
    return proc, match.group(1)


async def measure(bootstrap: str, args: argparse.Namespace) -> dict[str, float]:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        request_timeout_ms=30_000,
    )
    await producer.start()
    try:
        payload = b"x" * args.record_bytes
        await producer.send_and_wait("bench", payload)  # metadata, producer id, warm-up
        latencies_ms: list[float] = []
        for _ in range(args.latency_messages):
            started = time.perf_counter()
            await producer.send_and_wait("bench", payload)
            latencies_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        futures = [await producer.send("bench", payload) for _ in range(args.messages)]
        await asyncio.gather(*futures)
        elapsed_s = time.perf_counter() - started
    finally:
        await producer.stop()
    lag = args.follower_lag_ms
    return {
        "p50_ms": quantile(latencies_ms, 0.5),
        "p90_ms": quantile(latencies_ms, 0.90),
        "p99_ms": quantile(latencies_ms, 0.99),
        "p50_minus_lag_ms": quantile(latencies_ms, 0.5) - lag,
        "p99_minus_lag_ms": quantile(latencies_ms, 0.99) - lag,
        "msgs_per_s": args.messages / elapsed_s,
        "mb_per_s": args.messages * args.record_bytes / elapsed_s / 1e6,
    }


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--messages", type=int, default=50_000, help="throughput phase")
    p.add_argument("--latency-messages", type=int, default=500, help="latency phase")
    p.add_argument("--record-bytes", type=int, default=100)
    p.add_argument("--followers", type=int, default=2)
    p.add_argument("--follower-lag-ms", type=int, default=20)
    p.add_argument("--uvloop", action="store_true", help="the broker runs on uvloop")
    args = p.parse_args(argv)
    proc, bootstrap = start_broker(args)
    try:
        result = asyncio.run(measure(bootstrap, args))
    finally:
        proc.terminate()
        proc.wait(10)
    print(f"# nproc {os.cpu_count()}, {cpu_model()}, Python {platform.python_version()}")
    print(
        f"# broker loop {'uvloop' if args.uvloop else 'asyncio'}, {args.followers} followers "
        f"lagging {args.follower_lag_ms} ms, {args.record_bytes}-byte records, client aiokafka"
    )
    print("| metric | value |")
    print("|---|---:|")
    print(f"| acks=all latency p50 | {result['p50_ms']:.2f} ms |")
    print(f"| acks=all latency p90 | {result['p90_ms']:.2f} ms |")
    print(f"| acks=all latency p99 | {result['p99_ms']:.2f} ms |")
    print(f"| p50 minus follower lag | {result['p50_minus_lag_ms']:.2f} ms |")
    print(f"| p99 minus follower lag | {result['p99_minus_lag_ms']:.2f} ms |")
    print(f"| throughput ({args.messages} messages) | {result['msgs_per_s']:,.0f} msg/s |")
    print(f"| throughput | {result['mb_per_s']:.2f} MB/s |")


if __name__ == "__main__":
    main()
