"""How soon the Redis bridge (purgatory.contrib.redis) is back after an outage: a single
Redis killed and restarted after 0.2, 1 and 10 s, and a Sentinel primary killed (the
replica promoted); with the probes (``probe_ms`` 50, the default) and without them
(``probe_ms`` = ``reconnect_max_ms``: no wait is longer, none is probed).

Usage: python benchmarks/redis_reconnect_bench.py [--outages 0.2,1,10] [--runs 3]
       [--bridges 4] [--sentinel-runs 3]

One process, one asyncio loop, ``--bridges`` purgatories each with a ``KeyEvents`` bridge
and one watcher per run. A run: every bridge subscribed for 1 s (so the first retry
comes at once, as in production); Redis SIGKILLed; during the outage the watchers'
condition becomes true and a ``KeyPublisher`` publishes the key (kept until Redis is
back); Redis started again on the same port (from a thread: the loop runs on), and the
moment it first answers ``PING`` (polled every 1 ms) is "Redis back". Per bridge: Redis
back -> subscribed again (the bridge calls ``watched_keys()`` first thing after the
``subscribe`` reply) and -> its watcher answered. The goal: answered within 100 ms of
Redis back. The process's CPU time during the outage, per second and per side (a
subscriber or a publisher retrying), is what the retries and probes cost.

Sentinel (``--sentinel-runs``; tests/contrib/sentinel_kit.py's deployment: a primary, a
replica, three sentinels with ``down-after-milliseconds`` 300): the primary SIGKILLed,
"the promotion" is the first ``+switch-master`` a sentinel announces; per bridge:
promotion -> subscribed again (to the promoted replica) and -> answered.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import resource
import sys
import tempfile
import time
from collections.abc import Hashable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis.asyncio  # noqa: E402
from _machine import cpu_model  # noqa: E402
from redis.exceptions import RedisError  # noqa: E402
from redis_bridge_bench import Redis, Subscriptions, quantile  # noqa: E402

from purgatory import DelayedOperation, DelayedOperationPurgatory  # noqa: E402
from purgatory.contrib.redis import KeyEvents, KeyPublisher  # noqa: E402

CHANNEL = "bench:reconnect"
MAX_MS = 500  # the bridge's default reconnect_max_ms
PROBE_MS = {"probes": 50, "no probes": MAX_MS}


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Ready(DelayedOperation[None]):
    """Completes once its key is in ``ready``; notes when (monotonic time)."""

    def __init__(self, ready: set[Hashable], key: str) -> None:
        super().__init__(600_000)
        self.ready, self.key = ready, key
        self.at = 0.0

    def try_complete(self) -> bool:
        return self.key in self.ready and self.force_complete()

    def on_complete(self) -> None:
        self.at = time.monotonic()


class Bridges:
    """``count`` purgatories, each with a bridge on ``url``, and a publisher."""

    def __init__(self, url: str, count: int, probe_ms: int) -> None:
        self.url, self.count, self.probe_ms = url, count, probe_ms
        self.ready: set[Hashable] = set()
        self.purgatories: list[DelayedOperationPurgatory[Ready]] = []
        self.noted: list[Subscriptions] = []  # each purgatory, noting its subscriptions
        self.events: list[KeyEvents] = []
        self.publisher = KeyPublisher(url, channel=CHANNEL, probe_ms=probe_ms)

    async def __aenter__(self) -> Bridges:
        for i in range(self.count):
            purgatory = DelayedOperationPurgatory[Ready](f"bench{i}")
            await purgatory.__aenter__()
            noted = Subscriptions(purgatory)
            events = KeyEvents(noted, self.url, channel=CHANNEL, probe_ms=self.probe_ms)
            await events.start()
            self.purgatories.append(purgatory)
            self.noted.append(noted)
            self.events.append(events)
        await self.publisher.start()
        for events in self.events:
            await events.wait_subscribed(20_000)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.publisher.close()
        for events, purgatory in zip(self.events, self.purgatories, strict=True):
            await events.close()
            await purgatory.__aexit__(None, None, None)

    def watch(self, key: str) -> list[Ready]:
        ops = [Ready(self.ready, key) for _ in self.purgatories]
        for op, purgatory in zip(ops, self.purgatories, strict=True):
            assert not purgatory.try_complete_else_watch(op, [key])
        return ops

    async def back(self, since: float, ops: list[Ready]) -> list[tuple[float, float]]:
        """Per bridge, (subscribed again, answered) in ms after ``since``."""
        async with asyncio.timeout(60):
            await asyncio.gather(*ops)
            while not all(e.subscribed for e in self.events):
                await asyncio.sleep(0.005)
        return [
            (1000 * (min(t for t in n.confirmed_at if t >= since) - since), 1000 * (op.at - since))
            for n, op in zip(self.noted, ops, strict=True)
        ]


async def single_redis_run(
    redis: Redis, bridges: Bridges, outage_s: float, run: int
) -> tuple[list[tuple[float, float]], float]:
    """One outage; per bridge (subscribed, answered) after Redis back, and the CPU ms
    per second of outage per side."""
    ops = bridges.watch(f"r{run}")
    await asyncio.sleep(1.0)  # the connections have worked for reconnect_max_ms
    redis.kill()
    cpu_before, began = cpu_s(), time.monotonic()
    await asyncio.sleep(outage_s / 2)
    bridges.ready.add(f"r{run}")
    bridges.publisher.publish(f"r{run}")
    await asyncio.sleep(outage_s / 2)
    cpu_ms = 1000 * (cpu_s() - cpu_before) / (time.monotonic() - began)
    back_at = await asyncio.to_thread(redis.start)
    return await bridges.back(back_at, ops), cpu_ms / (2 * bridges.count + 1)


async def single_redis(args: argparse.Namespace) -> None:
    print("\nsingle Redis, SIGKILL then restart on the same port (ms after Redis back):")
    for mode, probe_ms in PROBE_MS.items():
        for outage_s in args.outages:
            with tempfile.TemporaryDirectory() as directory:
                redis = Redis(Path(directory))
                redis.start()
                try:
                    async with Bridges(redis.url, args.bridges, probe_ms) as bridges:
                        figures = [
                            await single_redis_run(redis, bridges, outage_s, run)
                            for run in range(args.runs)
                        ]
                finally:
                    redis.kill()
            pairs = [pair for per_bridge, _ in figures for pair in per_bridge]
            cpu = [cost for _, cost in figures]
            report(f"{mode:9} outage {outage_s:4g} s", pairs, cpu)


async def switch_master(ports: Sequence[int]) -> float:
    """Monotonic time of the first ``+switch-master`` a sentinel announces."""
    import redis.asyncio  # the bridge's dependency

    clients = [redis.asyncio.Redis(port=port) for port in ports]
    pubsubs = [client.pubsub() for client in clients]
    for pubsub in pubsubs:
        await pubsub.subscribe("+switch-master")
        await pubsub.get_message(timeout=1.0)
    try:
        while True:
            for pubsub in pubsubs:
                message = await pubsub.get_message(timeout=0.002)
                if message is not None and message["type"] == "message":
                    return time.monotonic()
    finally:
        for pubsub, client in zip(pubsubs, clients, strict=True):
            await pubsub.aclose()  # type: ignore[no-untyped-call]
            await client.aclose()


async def sentinel_run(count: int, probe_ms: int) -> tuple[float, list[tuple[float, float]]]:
    """One failover: how long it took (kill -> +switch-master, ms), and per bridge
    (subscribed, answered) in ms after the promotion."""
    from tests.contrib.sentinel_kit import SentinelDeployment

    with (
        tempfile.TemporaryDirectory() as directory,
        SentinelDeployment(Path(directory)) as deployment,
    ):
        async with Bridges(deployment.url, count, probe_ms) as bridges:
            ops = bridges.watch("s")
            ports = [sentinel.port for sentinel in deployment.sentinels]
            switched = asyncio.create_task(switch_master(ports))
            await asyncio.sleep(1.0)
            deployment.server_at(deployment.primary_port()).kill()
            killed_at = time.monotonic()
            await asyncio.sleep(0.1)
            bridges.ready.add("s")
            bridges.publisher.publish("s")
            promoted_at = await switched
            return 1000 * (promoted_at - killed_at), await bridges.back(promoted_at, ops)


async def sentinel(args: argparse.Namespace) -> None:
    print("\nSentinel, the primary SIGKILLed (ms after the promotion, +switch-master):")
    for mode, probe_ms in PROBE_MS.items():
        failovers: list[float] = []
        pairs: list[tuple[float, float]] = []
        for _ in range(args.sentinel_runs):
            failover_ms, per_bridge = await sentinel_run(args.bridges, probe_ms)
            failovers.append(failover_ms)
            pairs.extend(per_bridge)
        report(f"{mode:9} failover {min(failovers):.0f}-{max(failovers):.0f} ms", pairs, [])


def report(label: str, pairs: list[tuple[float, float]], cpu: list[float]) -> None:
    subscribed = [s for s, _ in pairs]
    answered = [a for _, a in pairs]
    cost = f"; CPU {min(cpu):.2f}-{max(cpu):.2f} ms/s per side" if cpu else ""
    print(
        f"  {label}: subscribed p50 {quantile(subscribed, 0.5):.0f} max {max(subscribed):.0f}; "
        f"answered p50 {quantile(answered, 0.5):.0f} max {max(answered):.0f} "
        f"({sum(a <= 100 for a in answered)}/{len(answered)} within 100){cost}"
    )


async def _refused(port: int) -> None:
    """What a probe of a Redis that is down costs: a connect refused by the kernel."""
    with contextlib.suppress(OSError):
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.close()


async def probe_cost(count: int = 2000) -> None:
    """CPU per probe of a closed port on this host (a refused connect, through the public
    surface only), and per attempt there (a client, a pubsub, a refused connect: what the
    backoff spaces out)."""
    with tempfile.TemporaryDirectory() as directory:
        port = Redis(Path(directory)).port  # a free port: nothing listens
    before = cpu_s()
    for _ in range(count):
        await _refused(port)
    probe_us = 1e6 * (cpu_s() - before) / count
    before = cpu_s()
    for _ in range(count // 10):
        client = redis.asyncio.Redis.from_url(
            f"redis://127.0.0.1:{port}/0", socket_connect_timeout=0.05
        )
        pubsub = client.pubsub()
        with contextlib.suppress(RedisError, OSError):
            await pubsub.subscribe("x")
        await pubsub.aclose()  # type: ignore[no-untyped-call]
        await client.aclose()
    attempt_us = 1e6 * (cpu_s() - before) / (count // 10)
    print(
        f"a probe of a closed port: {probe_us:.0f} us of CPU (every 50 ms: "
        f"{probe_us * 20 / 1000:.1f} ms per second of outage per side); "
        f"an attempt: {attempt_us:.0f} us"
    )


async def main(args: argparse.Namespace) -> None:
    logging.getLogger("purgatory.contrib.redis").setLevel(logging.ERROR)  # outages: expected
    print(
        f"machine: {os.cpu_count()} CPUs, {cpu_model()}, load average "
        + " ".join(f"{x:.2f}" for x in os.getloadavg())
    )
    print(f"{args.bridges} bridges in one process, {args.runs} runs each, asyncio")
    await probe_cost()
    await single_redis(args)
    if args.sentinel_runs:
        await sentinel(args)
    print("load average after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outages", default="0.2,1,10", help="seconds, comma-separated")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--bridges", type=int, default=4)
    parser.add_argument("--sentinel-runs", type=int, default=3)
    args = parser.parse_args(argv)
    args.outages = [float(x) for x in args.outages.split(",")]
    return args


if __name__ == "__main__":
    asyncio.run(main(parse()))
