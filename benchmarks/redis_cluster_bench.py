"""The ceiling of key events through Redis: one channel (``KeyEvents`` on one Redis) vs
sharded channels (``ClusterKeyEvents`` on a Redis Cluster of 1, 2 and 3 primaries), with
4 and 8 worker processes; what subscribing to some shards saves; what subscription churn
costs; and the model for more workers.

Usage: python benchmarks/redis_cluster_bench.py [--workers 4 8] [--primaries 1 2 3]
       [--events 40000] [--shards 48] [--keys 20000]

Everything runs on this machine and is stopped by its pid (and dies with this process):
``redis-server`` processes on 127.0.0.1 free ports in a temporary directory (one plain
Redis; then clusters of 1, 2, 3 primaries without replicas, slots split evenly as
``redis-cli --cluster create`` splits them), and ``--workers`` worker processes (``--worker``,
same file), each a ``DelayedOperationPurgatory`` and a bridge on asyncio that counts the
``check_and_complete`` calls it makes (no key is watched: the cost measured is what every
event costs every worker that receives it).

Each run: once every worker is subscribed, the driver floods ``--events`` key events
(``PUBLISH`` on the channel, or ``SPUBLISH`` on each key's shard channel to its primary)
from pre-encoded commands written on raw sockets, a pipeline per primary, so the driver is
no limit. Per worker: events received / (last - first event) and its CPU per event; for the
deployment, ``events / (last event anywhere - first event anywhere)``: the rate at which
every worker had every event (what the deployment carries); per Redis node its CPU per
event (``/proc``). With ``subset`` runs, each worker subscribes to ``shards / workers`` of
the shards (requests routed by ``shard_of_key``) and receives only their events.

Churn: on one primary, pipelined ``SSUBSCRIBE`` + ``SUNSUBSCRIBE`` pairs (Redis CPU per pair)
and the round trip of one ``SSUBSCRIBE`` until its confirmation (what a worker would wait
before a newly watched shard is covered).

The machine is shared and small (``nproc`` cores for Redis, the workers and the driver at
once): the figures are costs per event and ratios, and the model scales them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _machine import cpu_model  # noqa: E402

from purgatory import DelayedOperation, DelayedOperationPurgatory  # noqa: E402
from purgatory.contrib.redis import (  # noqa: E402  # noqa: E402
    SLOTS,
    ClusterKeyEvents,
    KeyEvents,
    encode_key,
    key_slot,
    shard_channels,
    shard_of_key,
)

CHANNEL = "bench:keys"
CHUNK = 2000  # commands per write of the flood
IDLE_S = 5.0  # a worker that receives nothing for this long reports what it has


def resp(*args: str | bytes) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg.encode() if isinstance(arg, str) else arg
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


# -- Redis processes ----------------------------------------------------------------------


class Server:
    """One redis-server (cluster mode or not), stopped by its pid."""

    def __init__(self, directory: Path, cluster: bool) -> None:
        self.port = free_port()
        self.bus_port = free_port()
        directory.mkdir()
        args = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        if cluster:
            args += ["--cluster-enabled", "yes", "--cluster-port", str(self.bus_port)]
        self.proc = subprocess.Popen(
            ["redis-server", *args, "--dir", str(directory)],
            stdout=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,  # noqa: PLW1509
        )
        while True:
            with contextlib.suppress(OSError):
                if self.call("PING").startswith(b"+PONG"):
                    return
            time.sleep(0.02)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def call(self, *args: str) -> bytes:
        """One command; its reply's bytes (enough for the short replies used here)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            sock.sendall(resp(*args))
            time.sleep(0.005)
            return sock.recv(1 << 16)

    def cpu_s(self) -> float:
        """Redis's CPU (``INFO cpu``: user + sys, to the microsecond)."""
        fields = dict(
            line.split(":", 1)
            for line in self.call("INFO", "cpu").decode().splitlines()
            if line.startswith("used_cpu_")
        )
        return float(fields["used_cpu_user"]) + float(fields["used_cpu_sys"])

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def start_cluster(directory: Path, primaries: int) -> list[Server]:
    """``primaries`` cluster nodes, no replicas, slots split evenly, met and serving."""
    nodes = [Server(directory / f"node{i}", cluster=True) for i in range(primaries)]
    for i, node in enumerate(nodes):
        start, end = i * SLOTS // primaries, (i + 1) * SLOTS // primaries - 1
        node.call("CLUSTER", "ADDSLOTSRANGE", str(start), str(end))
    for node in nodes[1:]:
        nodes[0].call("CLUSTER", "MEET", "127.0.0.1", str(node.port), str(node.bus_port))
    while not all(b"cluster_state:ok" in node.call("CLUSTER", "INFO") for node in nodes):
        time.sleep(0.05)
    return nodes


def owner_of(nodes: Sequence[Server], slot: int) -> Server:
    """The node serving ``slot`` (the even split of :func:`start_cluster`)."""
    return nodes[slot * len(nodes) // SLOTS]


# -- a worker process ---------------------------------------------------------------------


class Counting:
    """The purgatory as the bridge sees it, counting and timing the events it gets."""

    def __init__(self, purgatory: DelayedOperationPurgatory[Any], expected: int) -> None:
        self.purgatory = purgatory
        self.expected = expected
        self.events = 0
        self.first = self.last = 0.0
        self.cpu_first = self.cpu_last = 0.0
        self.done = asyncio.Event()

    def check_and_complete(self, key: Hashable) -> int:
        self.events += 1
        if self.events == 1:
            self.first, self.cpu_first = time.monotonic(), time.process_time()
        self.last = time.monotonic()
        if self.events == self.expected:
            self.cpu_last = time.process_time()
            self.done.set()
        return self.purgatory.check_and_complete(key)

    def watched_keys(self) -> list[Hashable]:
        return self.purgatory.watched_keys()


async def run_worker(spec: dict[str, Any]) -> None:
    async with DelayedOperationPurgatory[DelayedOperation[None]]("bench") as purgatory:
        counting = Counting(purgatory, spec["expected"])
        bridge: KeyEvents
        if spec["mode"] == "single":
            bridge = KeyEvents(counting, spec["urls"][0], channel=CHANNEL)
        else:
            bridge = ClusterKeyEvents(
                counting,
                spec["urls"],
                channel=CHANNEL,
                shards=spec["shards"],
                subscribe_shards=spec["subset"],
            )
        async with bridge:
            await bridge.wait_subscribed()
            print("ready", flush=True)
            seen = -1
            while not counting.done.is_set() and counting.events != seen:
                seen = counting.events
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(counting.done.wait(), IDLE_S)
        if not counting.cpu_last:
            counting.cpu_last = time.process_time()
        report = {
            "events": counting.events,
            "first": counting.first,
            "last": counting.last,
            "cpu_s": counting.cpu_last - counting.cpu_first,
        }
        print(json.dumps(report), flush=True)


# -- the driver ---------------------------------------------------------------------------


@dataclass
class Run:
    """One configuration: mode (single/cluster), workers, primaries, subset or not."""

    label: str
    workers: int
    primaries: int
    subset: bool = False


def flood_commands(
    nodes: Sequence[Server], mode: str, events: int, keys: int, shards: int
) -> dict[int, list[bytes]]:
    """Per node's port, its pre-encoded commands: ``events`` events over ``keys`` keys."""
    per_node: dict[int, list[bytes]] = {node.port: [] for node in nodes}
    channels = shard_channels(CHANNEL, shards)
    slots = [key_slot(name.encode()) for name in channels]
    for i in range(events):
        key = f"k{i % keys}"
        message = encode_key(key)
        if mode == "single":
            per_node[nodes[0].port].append(resp("PUBLISH", CHANNEL, message))
            continue
        shard = shard_of_key(key, shards)
        node = owner_of(nodes, slots[shard])
        per_node[node.port].append(resp("SPUBLISH", channels[shard], message))
    return per_node


async def send_all(port: int, commands: list[bytes]) -> None:
    """Write ``commands`` in chunks, reading every reply (one CRLF each: integers)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for start in range(0, len(commands), CHUNK):
        chunk = commands[start : start + CHUNK]
        writer.write(b"".join(chunk))
        await writer.drain()
        got = 0
        while got < len(chunk):
            got += (await reader.read(1 << 16)).count(b"\r\n")
    writer.close()


def worker_specs(
    run: Run, nodes: Sequence[Server], events: int, keys: int, shards: int
) -> list[dict[str, Any]]:
    mode = "single" if run.primaries == 0 else "cluster"
    counts = [0] * shards
    for i in range(events):
        counts[shard_of_key(f"k{i % keys}", shards)] += 1
    specs = []
    for w in range(run.workers):
        subset = list(range(w, shards, run.workers)) if run.subset else None
        expected = events if subset is None else sum(counts[s] for s in subset)
        specs.append(
            {
                "mode": mode,
                "urls": [node.url for node in nodes],
                "shards": shards,
                "subset": subset,
                "expected": expected,
            }
        )
    return specs


async def one_run(run: Run, nodes: Sequence[Server], args: argparse.Namespace) -> dict[str, Any]:
    specs = worker_specs(run, nodes, args.events, args.keys, args.shards)
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--worker",
            json.dumps(spec),
            stdout=asyncio.subprocess.PIPE,
            preexec_fn=_die_with_parent,
        )
        for spec in specs
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert (await proc.stdout.readline()).strip() == b"ready"
    mode = "single" if run.primaries == 0 else "cluster"
    commands = flood_commands(nodes, mode, args.events, args.keys, args.shards)
    cpu_before = [node.cpu_s() for node in nodes]
    began = time.monotonic()
    await asyncio.gather(*(send_all(port, cmds) for port, cmds in commands.items()))
    sent_s = time.monotonic() - began
    reports = []
    for proc in procs:
        assert proc.stdout is not None
        reports.append(json.loads(await proc.stdout.readline()))
        await proc.wait()
    redis_cpu = [node.cpu_s() - before for node, before in zip(nodes, cpu_before, strict=True)]
    return summarize(
        run, specs=specs, reports=reports, redis_cpu=redis_cpu, sent_s=sent_s, events=args.events
    )


def summarize(
    run: Run,
    *,
    specs: list[dict[str, Any]],
    reports: list[dict[str, Any]],
    redis_cpu: list[float],
    sent_s: float,
    events: int,
) -> dict[str, Any]:
    lost = sum(spec["expected"] - r["events"] for spec, r in zip(specs, reports, strict=True))
    span = max(r["last"] for r in reports) - min(r["first"] for r in reports)
    received = sum(r["events"] for r in reports)
    rates = [r["events"] / max(r["last"] - r["first"], 1e-9) for r in reports]
    return {
        "run": run.label,
        "workers": run.workers,
        "primaries": run.primaries,
        "carried_per_s": events / span,
        "worker_rate_min": min(rates),
        "worker_rate_max": max(rates),
        "events_per_worker": received / run.workers,
        "worker_cpu_us": 1e6 * sum(r["cpu_s"] for r in reports) / received,
        "redis_cpu_us_per_event": [1e6 * cpu / events for cpu in redis_cpu],
        "driver_sent_per_s": events / sent_s,
        "lost": lost,
    }


def churn(nodes: Sequence[Server], pairs: int) -> dict[str, float]:
    """SSUBSCRIBE + SUNSUBSCRIBE pairs on the first node: its CPU per pair, and the
    round trip of one SSUBSCRIBE to its confirmation (median of 200)."""
    node = nodes[0]
    names = [
        c for c in shard_channels(CHANNEL, 48) if owner_of(nodes, key_slot(c.encode())) is node
    ]
    channel = names[0]
    with socket.create_connection(("127.0.0.1", node.port)) as sock:
        cpu = node.cpu_s()
        payload = (resp("SSUBSCRIBE", channel) + resp("SUNSUBSCRIBE", channel)) * 1000
        for _ in range(pairs // 1000):
            sock.sendall(payload)
            want, got = 2000, 0
            while got < want:
                got += sock.recv(1 << 20).count(b"*3\r\n")
        cpu_per_pair = (node.cpu_s() - cpu) / pairs
        trips = []
        for _ in range(200):
            began = time.perf_counter()
            sock.sendall(resp("SSUBSCRIBE", channel))
            while b"*3\r\n" not in sock.recv(4096):
                pass
            trips.append(time.perf_counter() - began)
            sock.sendall(resp("SUNSUBSCRIBE", channel))
            sock.recv(4096)
    trips.sort()
    return {"redis_us_per_pair": 1e6 * cpu_per_pair, "ssubscribe_rtt_us_p50": 1e6 * trips[100]}


def model(results: list[dict[str, Any]], churn_figures: dict[str, float]) -> list[str]:
    """The ceiling for more workers, from the measured costs (see docs/how-to/redis.md)."""
    sharded = [r for r in results if r["primaries"] >= 1 and r["run"].startswith("all")]
    worker_us = min(r["worker_cpu_us"] for r in sharded)
    by_workers = {
        r["workers"]: max(r["redis_cpu_us_per_event"]) for r in sharded if r["primaries"] == 1
    }
    if len(by_workers) < 2:
        return ["model: needs one primary at two worker counts (--primaries 1, --workers 4 8)"]
    (w1, c1), (w2, c2) = sorted(by_workers.items())[:2]
    per_subscriber = max((c2 - c1) / (w2 - w1), 0.01)
    base = max(c1 - per_subscriber * w1, 0.01)
    lines = [
        f"model: a worker decodes an event in {worker_us:.1f} us; Redis spends {base:.2f} us "
        f"+ {per_subscriber:.2f} us per subscriber on it (one primary's work)",
    ]
    for workers in (4, 16, 64):
        worker_cap = 1e6 / worker_us
        redis_one = 1e6 / (base + per_subscriber * workers)
        lines.append(
            f"  {workers:2d} workers: every worker every event -> min(worker {worker_cap:,.0f}, "
            f"one Redis {redis_one:,.0f}, 3 primaries {3 * redis_one:,.0f}) events/s; "
            f"shards split over workers -> each worker decodes 1/{workers}: worker cap "
            f"{workers * worker_cap:,.0f}, Redis per primary {1e6 / (base + per_subscriber):,.0f}; "
            f"saved per worker {(1 - 1 / workers) * 100:.0f} % of its event CPU"
        )
    lines.append(
        f"churn: SSUBSCRIBE+SUNSUBSCRIBE {churn_figures['redis_us_per_pair']:.2f} us of Redis "
        f"CPU per pair; a new shard covered after {churn_figures['ssubscribe_rtt_us_p50']:.0f} us "
        "(one round trip, then a re-check)"
    )
    return lines


async def main(args: argparse.Namespace) -> None:
    print(f"machine: {os.cpu_count()} cores, {cpu_model()}, load {os.getloadavg()}")
    most = max(args.primaries)
    runs: list[Run] = []
    for workers in args.workers:
        runs.append(Run(f"all single w{workers}", workers, 0))
        runs.extend(Run(f"all p{p} w{workers}", workers, p) for p in args.primaries)
        runs.append(Run(f"subset p{most} w{workers}", workers, most, subset=True))
    results = []
    churn_figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n, run in enumerate(runs):
            primaries = run.primaries
            directory = Path(tmp) / f"run{n}"
            directory.mkdir()
            if primaries == 0:
                nodes = [Server(directory / "single", cluster=False)]
            else:
                nodes = start_cluster(directory, primaries)
            try:
                result = await one_run(run, nodes, args)
                if primaries == max(args.primaries) and not churn_figures:
                    churn_figures = churn(nodes, 20_000)
            finally:
                for node in nodes:
                    node.stop()
            results.append(result)
            print(json.dumps(result), flush=True)
    print(f"load after: {os.getloadavg()}")
    for line in model(results, churn_figures):
        print(line)


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--primaries", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--events", type=int, default=40_000)
    parser.add_argument("--shards", type=int, default=48)
    parser.add_argument("--keys", type=int, default=20_000)
    return parser.parse_args(argv)


if __name__ == "__main__":
    options = parse()
    if options.worker:
        asyncio.run(run_worker(json.loads(options.worker)))
    else:
        asyncio.run(main(options))
