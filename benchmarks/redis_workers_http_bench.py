"""The watch service over real HTTP: one process against four worker processes sharing a
port through Redis (examples/watch_aiohttp.py, examples/watch_aiohttp_workers.py), in
one run.

Usage: python benchmarks/redis_workers_http_bench.py [--rounds 500] [--polls 8]
       [--flood 20000] [--workers 4]

Three servers, one after the other, each started here and stopped by its pid (SIGTERM,
SIGKILL after SHUTDOWN_S), with one ``redis-server`` (no persistence, 127.0.0.1, a free
port, emptied between servers) for all of them:

* ``memory, 1 process``: ``examples/watch_aiohttp.py``, the store a dict, no Redis;
* ``Redis, 1 worker``: ``examples/watch_aiohttp_workers.py --workers 1``: the store in
  Redis, a put is the Lua script (INCR, HSET, PUBLISH), the bridge refreshes and checks;
* ``Redis, N workers``: the same with ``--workers`` processes on one port (SO_REUSEPORT).

This process is the client (asyncio, aiohttp), on keep-alive connections each pinned to
one worker (the kernel picks the worker when a connection is made; ``/whoami`` tells
which): ``--polls`` poll connections spread evenly over the workers, and one control
connection per worker. A round: a new key; every poll connection sends
``GET /watch/{key}?after=0``; the control connections read ``/metrics`` until every
worker holds its polls pending; then ``POST /put/{key}`` on the control connection of
one worker (the workers in turn), and each poll's latency is poll answered - put
answered (client clock; it can be below 0 when a poll is answered before the put's own
reply arrives: a worker that receives the event answers its polls while the put's worker
is still writing its reply), and poll answered - put sent (the put's round trip
included, never below 0). Latencies are split into polls on the put's worker and polls
on the others (the cross-process wakes). CPU per round: each server process's utime + stime
(``/proc/PID/stat``) over the rounds, divided by the rounds (HTTP included).

Then, for the Redis servers, a flood: one poll per worker waits on a key whose entry is
in Redis already, ``--flood`` key events for keys nobody watches are published
(pipelined), then the event of that key. Pub/sub keeps the order, so a worker answers
its poll once it has handled every flood event: events/s = flood / (flood start -> poll
answered), CPU per event = the worker's CPU over the flood / flood. With the example's
``refresh`` each event costs the worker one HMGET round trip to Redis.

The machine is named (``nproc``, CPU model, load average). On a shared machine compare
the columns of one run (ratios), not runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import redis.asyncio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _machine import cpu_model  # noqa: E402
from redis_bridge_bench import Redis, proc_cpu_s, quantile  # noqa: E402

from purgatory.contrib.redis import encode_key  # noqa: E402

EXAMPLES = ROOT / "examples"
CHANNEL = "bench:watch"
SHUTDOWN_S = 30.0
DEADLINE_S = 600  # the whole run, at most
MAX_CONNECTS = 400  # connections tried while pinning them to workers
MAX_PROBES = 2000  # /metrics reads while waiting for polls to be pending
POLL_TIMEOUT_MS = 30_000
WARMUP_ROUNDS = 20


@dataclass
class Server:
    """One server configuration's process and what the client learned of it."""

    name: str
    workers: int
    uses_redis: bool
    proc: subprocess.Popen[str] | None = None
    port: int = 0
    pids: list[int] = field(default_factory=list)

    def start(self, redis_url: str) -> None:
        if self.uses_redis:
            command = [
                str(EXAMPLES / "watch_aiohttp_workers.py"),
                *("--port", "0", "--workers", str(self.workers)),
                *("--redis-url", redis_url, "--channel", CHANNEL),
            ]
        else:
            command = [str(EXAMPLES / "watch_aiohttp.py"), "--port", "0"]
        self.proc = subprocess.Popen(
            [sys.executable, *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
        )
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()  # "listening on HOST:PORT[ with workers P...]"
        if "listening on" not in first:
            raise RuntimeError(f"{self.name}: unexpected first line {first!r}")
        address, _, workers = first.split("listening on ", 1)[1].partition(" with workers")
        self.port = int(address.rsplit(":", 1)[1])
        self.pids = [int(p) for p in workers.split()] if workers else [self.proc.pid]

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=SHUTDOWN_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        for pid in self.pids:  # gone with the parent normally
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@dataclass
class Connection:
    """One keep-alive connection (a session of one), pinned to the worker ``pid``."""

    session: aiohttp.ClientSession
    pid: int


@dataclass
class Result:
    same: list[float] = field(default_factory=list)  # polls on the put's worker
    other: list[float] = field(default_factory=list)  # polls on the other workers
    from_sent: list[float] = field(default_factory=list)  # poll answered - put sent
    cpu_per_round_us: dict[int, float] = field(default_factory=dict)
    redis_cpu_per_round_us: float = math.nan
    flood_rates: list[float] = field(default_factory=list)
    flood_cpu_us: list[float] = field(default_factory=list)
    flood_publish_s: float = math.nan

    @property
    def all(self) -> list[float]:
        return self.same + self.other


async def _pid_of(connection: aiohttp.ClientSession, base: str, server: Server) -> int:
    if not server.uses_redis:
        return server.pids[0]
    async with connection.get(base + "/whoami") as response:
        response.raise_for_status()
        pid: int = (await response.json())["pid"]
        return pid


async def _pending(connection: Connection, base: str) -> int:
    async with connection.session.get(base + "/metrics") as response:
        text = await response.text()
    for line in text.splitlines():
        if line.startswith("purgatory_delayed"):
            return int(float(line.rsplit(" ", 1)[1]))
    raise RuntimeError("no purgatory_delayed in /metrics")


async def pin(server: Server, base: str, per_worker: int) -> dict[int, list[Connection]]:
    """``per_worker`` connections on each worker, opened until the kernel gave each
    worker enough (surplus ones closed); at most MAX_CONNECTS tries."""
    pinned: dict[int, list[Connection]] = {pid: [] for pid in server.pids}
    for _ in range(MAX_CONNECTS):
        if all(len(c) >= per_worker for c in pinned.values()):
            return pinned
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1))
        try:
            pid = await _pid_of(session, base, server)
        except aiohttp.ClientConnectionError:
            await session.close()
            await asyncio.sleep(0.01)  # the workers start listening one by one
            continue
        if len(pinned.setdefault(pid, [])) < per_worker:
            pinned[pid].append(Connection(session, pid))
        else:
            await session.close()
    raise RuntimeError(f"{server.name}: could not pin {per_worker} connections per worker")


async def _poll(connection: Connection, url: str) -> float:
    async with connection.session.get(url) as response:
        await response.read()
        answered = time.monotonic()
    if response.status != 200:
        raise RuntimeError(f"poll answered {response.status}")
    return answered


async def _until_pending(controls: dict[int, Connection], base: str, want: dict[int, int]) -> None:
    for _ in range(MAX_PROBES):
        counts = [await _pending(c, base) for c in controls.values()]
        if counts == [want[pid] for pid in controls]:
            return
        await asyncio.sleep(0.001)
    raise RuntimeError("the polls did not all arrive")


async def rounds(
    server: Server, base: str, polls: list[Connection], controls: dict[int, Connection], n: int
) -> Result:
    result = Result()
    want = {pid: sum(1 for p in polls if p.pid == pid) for pid in controls}
    put_pids = list(controls)
    cpu0: dict[int, float] = {}
    for index in range(-WARMUP_ROUNDS, n):
        if index == 0:
            cpu0 = {pid: proc_cpu_s(pid) for pid in server.pids}
        key = f"r{index + WARMUP_ROUNDS}-{random.randrange(1 << 30)}"
        url = f"{base}/watch/{key}?after=0&timeout_ms={POLL_TIMEOUT_MS}"
        tasks = [asyncio.ensure_future(_poll(p, url)) for p in polls]
        await _until_pending(controls, base, want)
        put_pid = put_pids[index % len(put_pids)]
        put_sent = time.monotonic()
        async with controls[put_pid].session.post(f"{base}/put/{key}", data=b"v") as response:
            await response.read()
            put_answered = time.monotonic()
            response.raise_for_status()
        answered = await asyncio.gather(*tasks)
        if index < 0:
            continue
        result.from_sent += [done - put_sent for done in answered]
        for connection, done in zip(polls, answered, strict=True):
            (result.same if connection.pid == put_pid else result.other).append(done - put_answered)
    result.cpu_per_round_us = {pid: (proc_cpu_s(pid) - cpu0[pid]) / n * 1e6 for pid in server.pids}
    return result


async def flood(
    redis_url: str, base: str, pinned: dict[int, list[Connection]], count: int, result: Result
) -> None:
    """See the module doc: ``count`` unwatched events, then one watched, per worker."""
    key = f"flood-{random.randrange(1 << 30)}"
    url = f"{base}/watch/{key}?after=0&timeout_ms={POLL_TIMEOUT_MS}"
    tasks = {pid: asyncio.ensure_future(_poll(group[1], url)) for pid, group in pinned.items()}
    await _until_pending(
        {pid: group[0] for pid, group in pinned.items()}, base, dict.fromkeys(pinned, 1)
    )
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        # the entry the polls wait for, in the example's layout; its event comes last
        await client.hset("watch:entries", key, b"999999999:v")
        cpu0 = {pid: proc_cpu_s(pid) for pid in pinned}
        start = time.monotonic()
        for base_index in range(0, count, 1000):
            pipe = client.pipeline(transaction=False)
            for i in range(base_index, min(count, base_index + 1000)):
                pipe.publish(CHANNEL, encode_key(f"u{i}"))
            await pipe.execute()
        await client.publish(CHANNEL, encode_key(key))
        result.flood_publish_s = time.monotonic() - start
        for pid, task in tasks.items():
            done = await asyncio.wait_for(task, POLL_TIMEOUT_MS / 1000)
            result.flood_rates.append(count / (done - start))
            result.flood_cpu_us.append((proc_cpu_s(pid) - cpu0[pid]) / count * 1e6)
    finally:
        await client.aclose()


async def measure(server: Server, redis_server: Redis, args: argparse.Namespace) -> Result:
    server.start(redis_server.url)
    base = f"http://127.0.0.1:{server.port}"
    connections: list[Connection] = []
    try:
        per_worker = math.ceil(args.polls / server.workers)
        pinned = await pin(server, base, per_worker + 1)
        connections = [c for group in pinned.values() for c in group]
        if server.uses_redis:  # every bridge subscribed before the first round
            for group in pinned.values():
                for _ in range(MAX_PROBES):
                    async with group[0].session.get(base + "/whoami") as response:
                        if (await response.json())["subscribed"]:
                            break
                    await asyncio.sleep(0.01)
        controls = {pid: group[0] for pid, group in pinned.items()}
        spare = [c for group in pinned.values() for c in group[1:]]
        polls = spare[: args.polls]
        assert redis_server.proc is not None
        redis_cpu0 = proc_cpu_s(redis_server.proc.pid)
        result = await rounds(server, base, polls, controls, args.rounds)
        redis_cpu = proc_cpu_s(redis_server.proc.pid) - redis_cpu0
        if server.uses_redis:
            result.redis_cpu_per_round_us = redis_cpu / args.rounds * 1e6
            await flood(redis_server.url, base, pinned, args.flood, result)
        return result
    finally:
        for connection in connections:
            await connection.session.close()
        server.stop()
        with contextlib.suppress(OSError):
            redis_server.command("FLUSHALL")


def _ms(values: Sequence[float], q: float) -> str:
    return f"{quantile(values, q) * 1e3:.2f}" if values else "-"


def table(servers: list[Server], results: list[Result], args: argparse.Namespace) -> None:
    names = [s.name for s in servers]
    rows: list[tuple[str, list[str]]] = [
        ("put answered -> poll answered, all polls: p50 ms", [_ms(r.all, 0.5) for r in results]),
        ("p99 ms", [_ms(r.all, 0.99) for r in results]),
        ("max ms", [_ms(r.all, 1.0) for r in results]),
        (
            "put sent -> poll answered, all polls: p50 / p99 ms",
            [f"{_ms(r.from_sent, 0.5)} / {_ms(r.from_sent, 0.99)}" for r in results],
        ),
        (
            "polls on the put's process: p50 / p99 ms",
            [f"{_ms(r.same, 0.5)} / {_ms(r.same, 0.99)}" for r in results],
        ),
        (
            "polls on other processes (through Redis): p50 / p99 ms",
            [f"{_ms(r.other, 0.5)} / {_ms(r.other, 0.99)}" if r.other else "-" for r in results],
        ),
        (
            "server CPU per round, per process (HTTP included): µs",
            ["/".join(f"{v:.0f}" for v in r.cpu_per_round_us.values()) for r in results],
        ),
        (
            "redis-server CPU per round: µs",
            [
                f"{r.redis_cpu_per_round_us:.0f}"
                if not math.isnan(r.redis_cpu_per_round_us)
                else "-"
                for r in results
            ],
        ),
        (
            f"flood of {args.flood} unwatched events: events/s per worker",
            ["/".join(f"{v:,.0f}" for v in r.flood_rates) or "-" for r in results],
        ),
        (
            "flood: published by one pipelined client at, events/s",
            [
                f"{args.flood / r.flood_publish_s:,.0f}"
                if not math.isnan(r.flood_publish_s)
                else "-"
                for r in results
            ],
        ),
        (
            "flood: worker CPU per event: µs",
            ["/".join(f"{v:.1f}" for v in r.flood_cpu_us) or "-" for r in results],
        ),
    ]
    width = max(len(label) for label, _ in rows)
    cols = [max(len(n), *(len(row[1][i]) for row in rows)) for i, n in enumerate(names)]
    print(
        "\n| "
        + "figure".ljust(width)
        + " | "
        + " | ".join(n.rjust(c) for n, c in zip(names, cols, strict=True))
        + " |"
    )
    print("|" + "-" * (width + 2) + "|" + "|".join("-" * (c + 1) + ":" for c in cols) + "|")
    for label, values in rows:
        print(
            "| "
            + label.ljust(width)
            + " | "
            + " | ".join(v.rjust(c) for v, c in zip(values, cols, strict=True))
            + " |"
        )
    base, multi = results[0], results[-1]
    if base.all and multi.other:
        print(
            f"\n{names[-1]} vs {names[0]}: cross-process p50 "
            f"{quantile(multi.other, 0.5) / quantile(base.all, 0.5):.2f}x, p99 "
            f"{quantile(multi.other, 0.99) / quantile(base.all, 0.99):.2f}x "
            f"({(quantile(multi.other, 0.99) - quantile(base.all, 0.99)) * 1e3:+.2f} ms; "
            "goal: at most +5 ms on a quiet machine)"
        )


async def main(args: argparse.Namespace) -> None:
    loads = os.getloadavg()
    print(
        f"machine: nproc {os.cpu_count()}, {cpu_model()}, load average "
        f"{loads[0]:.2f} {loads[1]:.2f} {loads[2]:.2f}; Python {sys.version.split()[0]}; "
        f"{args.rounds} rounds of {args.polls} polls and one put",
        flush=True,
    )
    servers = [
        Server("memory, 1 process", 1, uses_redis=False),
        Server("Redis, 1 worker", 1, uses_redis=True),
        Server(f"Redis, {args.workers} workers", args.workers, uses_redis=True),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        redis_server = Redis(Path(tmp))
        results: list[Result] = []
        try:
            redis_server.start()
            for server in servers:
                print(f"running {server.name} ...", flush=True)
                results.append(await measure(server, redis_server, args))
        finally:
            for server in servers:
                server.stop()
            redis_server.kill()
    table(servers, results, args)
    loads = os.getloadavg()
    print(f"\nload average at the end: {loads[0]:.2f} {loads[1]:.2f} {loads[2]:.2f}")


def deadline_reached(signum: int, frame: object) -> None:
    raise TimeoutError(f"the run passed its {DEADLINE_S} s deadline")


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--polls", type=int, default=8, help="per round, over all workers")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--flood", type=int, default=20_000)
    return parser.parse_args(argv)


if __name__ == "__main__":
    signal.signal(signal.SIGALRM, deadline_reached)
    signal.alarm(DEADLINE_S)  # a bound on the run: the finally blocks stop all it started
    asyncio.run(main(parse()))
