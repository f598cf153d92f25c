"""Key events across processes through Redis (purgatory.contrib.redis): wake latency,
events per second, CPU per event, and what a Redis restart costs the watchers.

Usage: python benchmarks/redis_bridge_bench.py [--workers 4] [--waiters 250] [--keys 1000]
       [--puts-per-s 500] [--duration-s 6] [--flood 100000] [--recheck-keys 10000]
       [--pause-s 3]

Everything runs on this machine and is stopped by its pid at the end (SIGKILL after the
run's deadline at the latest): one ``redis-server`` (no persistence, a free port on
127.0.0.1, a temporary directory) and ``--workers`` worker processes
(``--worker``, same file), each with a ``DelayedOperationPurgatory`` and a ``KeyEvents``
bridge, asyncio loop, and ``--waiters`` long-poll-like operations on random keys of
``--keys`` (one waiter completes once its key's version passes the one it saw, and is
re-armed on a random key: the pollers poll again). The state is shared through a file every
process maps (``mmap``): per key a version and the ``time.monotonic()`` of its last put.

Phases, one after the other:

1. ``steady``: this process (the driver, a :class:`KeyPublisher`) puts random keys at
   ``--puts-per-s`` for ``--duration-s``: bump the version, stamp the time, publish. Each
   completion in a worker records completion time - put time (publish -> waiter completed,
   across processes; CLOCK_MONOTONIC is one clock for the machine). CPU per event: each
   worker's process time over the phase / the events it received; Redis's too.
2. ``restart``, ``pause``, ``client kill``: the same, with a disruption at half time:
   Redis killed (SIGKILL) and started again on the same port 1 s later; Redis stopped
   (SIGSTOP) for ``--pause-s`` then resumed (SIGCONT); ``CLIENT KILL TYPE pubsub`` (every
   subscriber's connection dropped, Redis up). Each worker notes when each subscription is
   confirmed (the bridge calls ``watched_keys()`` first thing after a ``subscribe``
   reply), so the wait splits in two: the reconnect (Redis serving again -> subscribed
   again: the backoff, the connect, the subscribe) and subscribed again -> answered, for
   every waiter whose put came before that subscription and that was answered after it
   (the re-check; goal: at most 100 ms). Nothing may stay pending whose condition holds
   (``stuck``, checked by each worker at the end) and nothing may complete twice.
3. ``flood``: the driver publishes ``--flood`` events for keys nobody watches, pipelined as
   fast as it can; per worker the events it received per second and its CPU per event (one
   dictionary lookup in the purgatory each, the rest is redis-py and the bridge).
4. ``local``: in this process, no Redis: the same waiters woken by ``check_and_complete``
   called directly (CPU per call), ``check_and_complete`` on an unwatched key, and the
   re-check a reconnect runs (``--recheck-keys`` watched keys, one waiter each).

Figures: the machine is named (``nproc``, CPU model, load average); on a machine shared
with other jobs the latencies are the scheduler's as much as ours.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import mmap
import os
import random
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Hashable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _machine import cpu_model  # noqa: E402

from purgatory import DelayedOperation, DelayedOperationPurgatory  # noqa: E402
from purgatory.contrib.redis import KeyEvents, KeyPublisher, Watchers, encode_key  # noqa: E402

CHANNEL = "bench:keys"
DEADLINE_S = 300  # the whole run, at most; then everything is killed


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def proc_cpu_s(pid: int) -> float:
    """utime + stime of another process, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class State:
    """Per key: a version (int64) and the monotonic time of its last put (float64)."""

    def __init__(self, path: Path, keys: int, create: bool) -> None:
        if create:
            path.write_bytes(bytes(16 * keys))
        self._file = open(path, "r+b")  # noqa: SIM115 - closed in close()
        self._map = mmap.mmap(self._file.fileno(), 16 * keys)
        view = memoryview(self._map)
        self.versions = view[: 8 * keys].cast("q")
        self.stamps = view[8 * keys :].cast("d")
        self._view = view

    def close(self) -> None:
        self.versions.release()
        self.stamps.release()
        self._view.release()
        self._map.close()
        self._file.close()


# -- a worker process ---------------------------------------------------------------------


class Poll(DelayedOperation[None]):
    """Completes once key ``index``'s version passes ``after``; records the wake."""

    def __init__(self, worker: Worker, index: int, after: int) -> None:
        super().__init__(60_000)
        self.worker = worker
        self.index = index
        self.after = after

    def try_complete(self) -> bool:
        return self.worker.state.versions[self.index] > self.after and self.force_complete()

    def on_complete(self) -> None:
        worker = self.worker
        if self not in worker.live:  # completed before: the purgatory broke exactly-once
            worker.duplicates += 1
        worker.live.discard(self)
        if worker.recording:
            worker.wakes.append((time.monotonic(), worker.state.stamps[self.index]))
        worker.loop.call_soon(worker.arm)


class Worker:
    def __init__(self, url: str, state: State, waiters: int, keys: int) -> None:
        self.url = url
        self.state = state
        self.waiters = waiters
        self.keys = keys
        self.loop = asyncio.get_running_loop()
        self.purgatory: DelayedOperationPurgatory[Poll] = DelayedOperationPurgatory("bench")
        self.wakes: list[tuple[float, float]] = []
        self.recording = False
        self.live: set[Poll] = set()
        self.duplicates = 0

    def arm(self) -> None:
        if self.purgatory.closed:
            return
        index = random.randrange(self.keys)
        op = Poll(self, index, self.state.versions[index])
        self.live.add(op)
        self.purgatory.try_complete_else_watch(op, [f"k{index}"])

    def stuck(self) -> int:
        """Pending waiters whose key's version passed what they saw: each would wait for
        its timeout (the bridge missed them). O(waiters)."""
        versions = self.state.versions
        return sum(1 for op in self.live if versions[op.index] > op.after)


class Subscriptions:
    """The purgatory as the bridge sees it, noting when each subscription was confirmed:
    the bridge calls ``watched_keys()`` first thing after every ``subscribe`` reply."""

    def __init__(self, purgatory: Watchers) -> None:
        self.purgatory = purgatory
        self.confirmed_at: list[float] = []

    def check_and_complete(self, key: Hashable) -> int:
        return self.purgatory.check_and_complete(key)

    def watched_keys(self) -> list[Hashable]:
        self.confirmed_at.append(time.monotonic())
        return self.purgatory.watched_keys()


async def run_worker(url: str, state_path: str, waiters: int, keys: int) -> None:
    state = State(Path(state_path), keys, create=False)
    worker = Worker(url, state, waiters, keys)
    reader = asyncio.StreamReader()
    await worker.loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0, "rb", buffering=0)
    )

    def say(**fields: Any) -> None:
        sys.stdout.write(json.dumps(fields) + "\n")
        sys.stdout.flush()

    subscriptions = Subscriptions(worker.purgatory)
    async with worker.purgatory, KeyEvents(subscriptions, url, channel=CHANNEL) as events:
        for _ in range(waiters):
            worker.arm()
        await events.wait_subscribed(30_000)
        say(ready=True)
        while line := (await reader.readline()).decode().strip():
            command = line.split()
            if command[0] == "start":
                worker.wakes.clear()
                worker.recording = True
                start = (cpu_s(), events.statistics().events)
                say(started=True)
            elif command[0] == "stop":
                worker.recording = False
                cpu, received = cpu_s() - start[0], events.statistics().events - start[1]
                stats = events.statistics()
                say(
                    wakes=worker.wakes,
                    cpu_s=cpu,
                    events=received,
                    stuck=worker.stuck(),
                    duplicates=worker.duplicates,
                    outages=stats.outages,
                    subscriptions=stats.subscriptions,
                    rechecked_keys=stats.rechecked_keys,
                    confirmed_at=subscriptions.confirmed_at,
                )
            elif command[0] == "flood":
                expected = int(command[1])
                first = events.statistics().events
                start_cpu = cpu_s()
                say(flooding=True)
                began: float | None = None
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    got = events.statistics().events - first
                    if got and began is None:
                        began = time.monotonic()
                    if got >= expected:
                        break
                    await asyncio.sleep(0.001)
                ended = time.monotonic()
                got = events.statistics().events - first
                say(
                    events=got,
                    seconds=ended - (began or ended),
                    cpu_s=cpu_s() - start_cpu,
                )
            elif command[0] == "quit":
                break
    state.close()


# -- the driver ------------------------------------------------------------------------------


class Proc:
    """A child with line-oriented JSON on stdout, stopped by its pid."""

    def __init__(self, args: Sequence[str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self.stdin = self.proc.stdin
        self._fd = self.proc.stdout.fileno()
        self._buffer = b""

    def send(self, line: str) -> None:
        self.stdin.write(line.encode() + b"\n")
        self.stdin.flush()

    def read(self, timeout_s: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._fd], [], [], remaining)[0]:
                raise TimeoutError("a worker did not answer")
            chunk = os.read(self._fd, 1 << 20)
            if not chunk:
                raise RuntimeError(f"a worker exited with {self.proc.wait()}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        result: dict[str, Any] = json.loads(line)
        return result

    def stop(self) -> None:
        if self.proc.poll() is None:
            with_kill = False
            try:
                self.send("quit")
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                with_kill = True
            if with_kill:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


class Redis:
    def __init__(self, directory: Path) -> None:
        program = shutil.which("redis-server")
        if program is None:
            raise SystemExit("redis-server is not installed: bash tests/contrib/install_redis.sh")
        self.program = program
        self.directory = directory
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> float:
        """Start it; the monotonic time it first answered PING (polled every 1 ms)."""
        self.proc = subprocess.Popen(
            [
                *(self.program, "--port", str(self.port), "--bind", "127.0.0.1"),
                *("--save", "", "--appendonly", "no", "--dir", str(self.directory)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return time.monotonic()
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("redis-server did not start")
            time.sleep(0.001)

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signum)

    def command(self, *args: str) -> bytes:
        """One command over a plain socket; the first line of the reply."""
        request = b"*%d\r\n" % len(args) + b"".join(
            b"$%d\r\n%s\r\n" % (len(arg.encode()), arg.encode()) for arg in args
        )
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            sock.sendall(request)
            return sock.recv(4096).split(b"\r\n", 1)[0]

    def kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, -(-int(q * len(ordered) * 1000) // 1000))
    return ordered[min(rank, len(ordered)) - 1]


#: A disruption run at half time of a phase: returns (began, ended), monotonic times:
#: when Redis stopped serving the bridges, and when it served them again.
Disruption = Callable[["Redis"], Coroutine[Any, Any, tuple[float, float]]]


async def restart(redis: Redis) -> tuple[float, float]:
    """SIGKILL, then start again on the same port 1 s later; ended = the first PONG."""
    redis.kill()
    began = time.monotonic()
    await asyncio.sleep(1.0)
    return began, await asyncio.to_thread(redis.start)


def pause(seconds: float) -> Disruption:
    async def paused(redis: Redis) -> tuple[float, float]:
        """SIGSTOP for ``seconds``, then SIGCONT; the connections stay up."""
        redis.signal(signal.SIGSTOP)
        began = time.monotonic()
        try:
            await asyncio.sleep(seconds)
        finally:
            redis.signal(signal.SIGCONT)
        return began, time.monotonic()

    return paused


async def client_kill(redis: Redis) -> tuple[float, float]:
    """CLIENT KILL TYPE pubsub: every subscriber's connection dropped, Redis up."""
    began = time.monotonic()
    reply = await asyncio.to_thread(redis.command, "CLIENT", "KILL", "TYPE", "pubsub")
    assert reply.startswith(b":"), reply
    return began, began


async def drive_puts(
    state: State,
    redis: Redis,
    keys: int,
    rate: float,
    duration_s: float,
    *,
    disruption: Disruption | None,
) -> tuple[int, float, float]:
    """Put random keys at ``rate`` for ``duration_s``; with a ``disruption``, run it at
    half time (the puts go on meanwhile). Returns (puts, began, ended) (0, 0 without)."""
    puts = 0
    disrupting: asyncio.Task[tuple[float, float]] | None = None
    async with KeyPublisher(redis.url, channel=CHANNEL) as publisher:
        start = time.monotonic()
        end = start + duration_s
        while (now := time.monotonic()) < end:
            due = int((now - start) * rate)
            while puts < due:
                index = random.randrange(keys)
                state.stamps[index] = time.monotonic()
                state.versions[index] += 1
                publisher.publish(f"k{index}")
                puts += 1
            if disruption is not None and disrupting is None and now - start >= duration_s / 2:
                disrupting = asyncio.create_task(disruption(redis))
            await asyncio.sleep(0.002)
        began, ended = (await disrupting) if disrupting is not None else (0.0, 0.0)
        await publisher.flush(30_000)
    return puts, began, ended


async def flood(url: str, count: int) -> float:
    """Publish ``count`` events for unwatched keys, pipelined; the seconds it took."""
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(url)
    try:
        start = time.monotonic()
        for base in range(0, count, 1000):
            pipe = client.pipeline(transaction=False)
            for i in range(base, min(count, base + 1000)):
                pipe.publish(CHANNEL, encode_key(f"u{i}"))
            await pipe.execute()
        return time.monotonic() - start
    finally:
        await client.aclose()


def local_figures(waiters: int, keys: int, recheck_keys: int) -> dict[str, float]:
    """check_and_complete called directly, in this process (no loop needed)."""

    class LocalPoll(DelayedOperation[None]):
        def __init__(self, versions: list[int], index: int) -> None:
            super().__init__(60_000)
            self.versions = versions
            self.index = index
            self.after = versions[index]

        def try_complete(self) -> bool:
            return self.versions[self.index] > self.after and self.force_complete()

        def on_complete(self) -> None:
            return None

    out: dict[str, float] = {}
    purgatory: DelayedOperationPurgatory[LocalPoll] = DelayedOperationPurgatory(
        "local", timer_enabled=False
    )
    versions = [0] * keys
    for _ in range(waiters):
        index = random.randrange(keys)
        purgatory.try_complete_else_watch(LocalPoll(versions, index), [f"k{index}"])
    calls = 20_000
    woken = 0
    start = cpu_s()
    for _ in range(calls):
        index = random.randrange(keys)
        versions[index] += 1
        woken_now = purgatory.check_and_complete(f"k{index}")
        woken += woken_now
        for _ in range(woken_now):  # re-arm, as the workers do
            again = random.randrange(keys)
            purgatory.try_complete_else_watch(LocalPoll(versions, again), [f"k{again}"])
    out["local_us_per_put"] = (cpu_s() - start) / calls * 1e6
    out["local_woken_per_put"] = woken / calls
    probe = "not-watched"
    start = time.perf_counter()
    for _ in range(200_000):
        purgatory.check_and_complete(probe)
    out["unwatched_ns"] = (time.perf_counter() - start) / 200_000 * 1e9
    big: DelayedOperationPurgatory[LocalPoll] = DelayedOperationPurgatory(
        "recheck", timer_enabled=False
    )
    flat = [0] * recheck_keys
    for index in range(recheck_keys):
        big.try_complete_else_watch(LocalPoll(flat, index), [f"k{index}"])
    start = time.perf_counter()
    for key in big.watched_keys():
        big.check_and_complete(key)
    out["recheck_us_per_key"] = (time.perf_counter() - start) / recheck_keys * 1e6
    purgatory.shutdown()
    big.shutdown()
    return out


async def main(args: argparse.Namespace) -> None:
    loads = os.getloadavg()
    print(
        f"machine: nproc {os.cpu_count()}, {cpu_model()}, load average "
        f"{loads[0]:.2f} {loads[1]:.2f} {loads[2]:.2f}; Python {sys.version.split()[0]}",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        redis = Redis(directory)
        state = State(directory / "state", args.keys, create=True)
        workers: list[Proc] = []
        try:
            redis.start()
            workers = [
                Proc(
                    [
                        __file__,
                        "--worker",
                        redis.url,
                        str(directory / "state"),
                        str(args.waiters),
                        str(args.keys),
                    ]
                )
                for _ in range(args.workers)
            ]
            for worker in workers:
                assert worker.read().get("ready")
            phases: list[tuple[str, Disruption | None]] = [
                ("steady", None),
                ("restart: Redis killed (SIGKILL) at half time, started again 1 s later", restart),
                (
                    f"pause: Redis stopped (SIGSTOP) at half time, SIGCONT {args.pause_s:g} s "
                    "later",
                    pause(args.pause_s),
                ),
                ("client kill: CLIENT KILL TYPE pubsub at half time", client_kill),
            ]
            for phase, disruption in phases:
                for worker in workers:
                    worker.send("start")
                for worker in workers:
                    worker.read()
                assert redis.proc is not None
                redis_pid = redis.proc.pid
                redis_cpu0 = proc_cpu_s(redis_pid)
                puts, began, ended = await drive_puts(
                    state, redis, args.keys, args.puts_per_s, args.duration_s, disruption=disruption
                )
                assert redis.proc is not None
                same = redis.proc.pid == redis_pid
                redis_cpu = proc_cpu_s(redis.proc.pid) - redis_cpu0 if same else float("nan")
                await asyncio.sleep(2.0)  # the last events land
                for worker in workers:
                    worker.send("stop")
                reports = [worker.read() for worker in workers]
                report_phase(phase, puts, reports, redis_cpu)
                if disruption is not None:
                    report_disruption(reports, began, ended)
            for worker in workers:
                worker.send(f"flood {args.flood}")
            for worker in workers:
                worker.read()
            assert redis.proc is not None
            redis_pid = redis.proc.pid
            redis_cpu0 = proc_cpu_s(redis_pid)
            seconds = await flood(redis.url, args.flood)
            floods = [worker.read(120) for worker in workers]
            redis_cpu = proc_cpu_s(redis_pid) - redis_cpu0
            print(
                f"\nflood: {args.flood} events published in {seconds:.2f} s "
                f"({args.flood / seconds:,.0f}/s, one pipelined client); "
                f"redis-server CPU {redis_cpu / args.flood * 1e6:.2f} us/event "
                f"({args.workers} subscribers)"
            )
            for i, result in enumerate(floods):
                rate = result["events"] / result["seconds"] if result["seconds"] else 0
                print(
                    f"  worker {i}: {result['events']} events in {result['seconds']:.2f} s "
                    f"({rate:,.0f}/s), CPU {result['cpu_s'] / max(1, result['events']) * 1e6:.1f}"
                    " us/event"
                )
        finally:
            for worker in workers:
                worker.stop()
            redis.kill()
            state.close()
    local = local_figures(args.waiters * args.workers, args.keys, args.recheck_keys)
    print(
        f"\nlocal (one process, check_and_complete called directly, "
        f"{args.waiters * args.workers} waiters on {args.keys} keys): "
        f"{local['local_us_per_put']:.2f} us CPU per put "
        f"({local['local_woken_per_put']:.2f} waiters woken and re-armed per put); "
        f"unwatched key {local['unwatched_ns']:.0f} ns; "
        f"re-check {local['recheck_us_per_key']:.2f} us per watched key "
        f"({args.recheck_keys} keys)"
    )


def report_phase(phase: str, puts: float, reports: list[dict[str, Any]], redis_cpu: float) -> None:
    lat = [done - put for report in reports for done, put in report["wakes"]]
    events = sum(r["events"] for r in reports)
    cpu = sum(r["cpu_s"] for r in reports)
    print(f"\n{phase}: {puts:.0f} puts, {len(lat)} wakes in {len(reports)} workers")
    print(
        f"  wake latency (put -> waiter completed, other process): p50 "
        f"{quantile(lat, 0.5) * 1e3:.2f} ms, p99 {quantile(lat, 0.99) * 1e3:.2f} ms, "
        f"max {max(lat, default=0) * 1e3:.1f} ms"
    )
    print(
        f"  worker CPU per event received: {cpu / max(1, events) * 1e6:.1f} us "
        f"({events / len(reports):.0f} events per worker)"
        + (
            f"; redis-server CPU per put {redis_cpu / max(1, puts) * 1e6:.1f} us"
            if not math.isnan(redis_cpu)
            else ""
        )
    )
    print(
        f"  stuck (pending, condition true) at the end: {sum(r['stuck'] for r in reports)}; "
        f"completed twice: {sum(r['duplicates'] for r in reports)}; outages seen "
        f"{sum(r['outages'] for r in reports)}, re-checked keys "
        f"{sum(r['rechecked_keys'] for r in reports)}"
    )


def report_disruption(reports: list[dict[str, Any]], began: float, ended: float) -> None:
    """The split: Redis serving again -> each subscriber subscribed again (the reconnect),
    then subscribed again -> the waiters of every put made before that answered."""
    reconnects: list[float] = []
    after_subscribed: list[float] = []
    kept_connection: list[float] = []
    after_back: list[float] = []
    for report in reports:
        again = [t for t in report["confirmed_at"] if t >= began]
        wakes = report["wakes"]
        after_back += [done - ended for done, put in wakes if began <= put < ended]
        if again:
            subscribed = again[0]
            reconnects.append(subscribed - ended)
            # every waiter whose condition held before the subscription and that was
            # answered after it: woken by the re-check (or by a resent event)
            after_subscribed += [
                done - subscribed for done, put in wakes if put < subscribed <= done
            ]
        else:  # the subscription survived (a pause shorter than the health check)
            kept_connection += [done - ended for done, put in wakes if began <= put < ended]
    print(f"  Redis stopped serving for {(ended - began) * 1e3:.0f} ms")
    if reconnects:
        print(
            f"  reconnect (Redis serving again -> subscribed again), {len(reconnects)} "
            f"workers: min {min(reconnects) * 1e3:.1f} ms, max {max(reconnects) * 1e3:.1f} ms"
        )
        print(
            f"  subscribed again -> answered, {len(after_subscribed)} waiters whose put came "
            f"before: p50 {quantile(after_subscribed, 0.5) * 1e3:.1f} ms, max "
            f"{max(after_subscribed, default=0) * 1e3:.1f} ms (goal: at most 100 ms)"
        )
    if kept_connection:
        print(
            f"  {len(reports) - len(reconnects)} workers kept their subscription; "
            f"{len(kept_connection)} waiters of puts made meanwhile, answered after Redis "
            f"resumed: p50 {quantile(kept_connection, 0.5) * 1e3:.1f} ms, max "
            f"{max(kept_connection) * 1e3:.1f} ms"
        )
    print(
        f"  Redis serving again -> answered (both parts), {len(after_back)} waiters of puts "
        f"made meanwhile: p50 {quantile(after_back, 0.5) * 1e3:.1f} ms, max "
        f"{max(after_back, default=0) * 1e3:.1f} ms"
    )


def deadline_reached(signum: int, frame: object) -> None:
    raise TimeoutError(f"the run passed its {DEADLINE_S} s deadline")


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--waiters", type=int, default=250, help="per worker")
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--puts-per-s", type=float, default=500)
    parser.add_argument("--duration-s", type=float, default=6)
    parser.add_argument("--flood", type=int, default=100_000)
    parser.add_argument("--recheck-keys", type=int, default=10_000)
    parser.add_argument("--pause-s", type=float, default=3.0, help="SIGSTOP for this long")
    parser.add_argument("--worker", nargs=4, metavar=("URL", "STATE", "WAITERS", "KEYS"))
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse()
    if arguments.worker:
        url, path, waiters, keys = arguments.worker
        asyncio.run(run_worker(url, path, int(waiters), int(keys)))
    else:
        signal.signal(signal.SIGALRM, deadline_reached)
        signal.alarm(DEADLINE_S)  # a bound on the run: the finally blocks stop all it started
        asyncio.run(main(arguments))
