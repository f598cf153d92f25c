"""A broker under load: producers, consumers, lagging followers, a stall, a leader change.

The simulation runs one :class:`~.broker.Broker` leading ``partitions``
partitions of topic ``sim``, each replicated to ``followers`` simulated
followers, in real time on one event loop:

* producers: open-loop, exponential inter-arrival times (``produce_rate`` requests
  per second in total), one batch of ``records_per_batch`` records to a random
  partition per request, acks=-1 (DelayedProduce, ``produce_timeout_ms``);
* followers: one task each, fetching every partition in a loop
  (DelayedFetch with ``min_bytes=1``), sleeping ``follower_lag_ms`` between
  fetches; the last follower stalls at ``stall_at`` of the run for ``stall_ms``,
  so the ISR shrinks after ``replica_lag_time_max_ms`` and grows again when it
  catches up;
* consumers: long-polling DelayedFetches (``fetch_min_bytes``, ``fetch_max_wait_ms``)
  up to the high watermark, partitions split between them;
* an ISR task calling ``maybe_shrink_isr`` every ``replica_lag_time_max_ms / 2``;
* one leadership change: partition 0 is given up at ``leader_change_at`` of the
  run and led again ``leader_change_ms`` later with a new epoch.

Every acknowledged batch is in its partition's file before the produce is
answered (the broker writes through); ``flush_messages`` / ``flush_ms`` set
Kafka's flush policy (``fsync``), off by default. The followers keep no data,
so acks=-1 adds no durability here: what survives a machine crash is what was
flushed. The summary counts the flushes (``log_flushes``) and the bytes that
log recovery cut, when the broker opened the logs and when the read-back
reopened them (``recovery_truncated_bytes``; a clean run cuts nothing, and a
cut is also a read-back problem).

At the end, producers stop, in-flight produces are awaited, the other tasks
finish their current fetch, the broker closes, and every partition log is
*reopened from disk* and read from the start: every record acknowledged with
NONE must be there, at its acknowledged offset, with its value, and each
producer's acknowledged records in each partition must appear in the order it
sent them. The trace of every delayed operation goes to ``trace_path`` (Parquet).

:func:`run` returns a flat summary dict (see :data:`SUMMARY_KEYS`) so a sweep can
call it with many configurations.
"""

from __future__ import annotations

import asyncio
import random
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from .. import TopicPartition
from ..core import DEFAULT_TICK_MS, DEFAULT_WHEEL_SIZE, exact_quantile
from ..tracing import TraceWriter
from .broker import Broker
from .delayed import DelayedProduce, FetchPartitionStatus
from .errors import ErrorCode
from .followers import Followers
from .storage.log import PartitionLog
from .storage.records import (
    CorruptRecordError,
    RecordBatchHeader,
    build_batch,
    iter_batches,
    iter_records,
)

__all__ = [
    "SUMMARY_KEYS",
    "ReadBackError",
    "SimulationConfig",
    "format_summary",
    "run",
    "run_async",
]

TOPIC = "sim"


class ReadBackError(AssertionError):
    """An acknowledged record is missing, changed or out of order in the log."""


@dataclass(frozen=True, slots=True)
class SimulationConfig:
    """Every knob of the simulation; the CLI exposes each one."""

    seed: int = 1
    duration_s: float = 20.0
    partitions: int = 4
    followers: int = 2
    min_insync_replicas: int = 2
    produce_rate: float = 1500.0  # requests per second, all producers together
    producers: int = 4
    records_per_batch: int = 5
    record_bytes: int = 100
    produce_timeout_ms: int = 1000
    consumers: int = 2
    fetch_min_bytes: int = 16384
    fetch_max_wait_ms: int = 200
    fetch_max_bytes: int = 1024 * 1024
    follower_lag_ms: int = 10
    follower_max_wait_ms: int = 500
    replica_lag_time_max_ms: int = 1000
    stall_at: float = 0.3  # fraction of the run; negative disables the stall
    stall_ms: int = 3000
    leader_change_at: float = 0.7  # fraction of the run; negative disables it
    leader_change_ms: int = 500
    tick_ms: int = DEFAULT_TICK_MS
    wheel_size: int = DEFAULT_WHEEL_SIZE
    flush_messages: int | None = None  # Kafka's flush.messages; None: never
    flush_ms: int | None = None  # Kafka's flush.ms; None: never
    use_uvloop: bool = True
    data_dir: str | None = None  # None: a temporary directory, removed at the end
    trace_path: str | None = "out/trace.parquet"  # None: no trace written
    progress: bool = False  # a progress bar on stderr (run() only, if out is None)

    def validate(self) -> None:
        """Raise ValueError naming the first bad option."""
        checks: list[tuple[bool, str]] = [
            (self.duration_s > 0, "duration_s must be > 0"),
            (self.partitions >= 1, "partitions must be >= 1"),
            (self.followers >= 0, "followers must be >= 0"),
            (
                1 <= self.min_insync_replicas <= self.followers + 1,
                "min_insync_replicas must be in [1, followers + 1]",
            ),
            (self.produce_rate > 0, "produce_rate must be > 0"),
            (self.producers >= 1, "producers must be >= 1"),
            (self.records_per_batch >= 1, "records_per_batch must be >= 1"),
            (self.record_bytes >= 16, "record_bytes must be >= 16"),
            (self.produce_timeout_ms >= 1, "produce_timeout_ms must be >= 1"),
            (self.consumers >= 0, "consumers must be >= 0"),
            (self.fetch_min_bytes >= 0, "fetch_min_bytes must be >= 0"),
            (self.fetch_max_wait_ms >= 0, "fetch_max_wait_ms must be >= 0"),
            (self.fetch_max_bytes >= 1, "fetch_max_bytes must be >= 1"),
            (self.follower_lag_ms >= 0, "follower_lag_ms must be >= 0"),
            (self.follower_max_wait_ms >= 0, "follower_max_wait_ms must be >= 0"),
            (self.replica_lag_time_max_ms >= 1, "replica_lag_time_max_ms must be >= 1"),
            (self.stall_ms >= 0, "stall_ms must be >= 0"),
            (self.leader_change_ms >= 0, "leader_change_ms must be >= 0"),
            (self.tick_ms >= 1, "tick_ms must be >= 1"),
            (self.wheel_size >= 2, "wheel_size must be >= 2"),
            (
                self.flush_messages is None or self.flush_messages >= 1,
                "flush_messages must be >= 1 (or None)",
            ),
            (self.flush_ms is None or self.flush_ms >= 1, "flush_ms must be >= 1 (or None)"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)


#: The keys of :func:`run`'s summary, in table order.
SUMMARY_KEYS = (
    "wall_s",
    "cpu_s",
    "uvloop",
    "produce_requests",
    "fetch_requests",
    "requests_per_s",
    "delayed_ops",
    "delayed_ops_per_s",
    "cpu_us_per_request",
    "produce_completed",
    "produce_expired",
    "produce_cancelled",
    "produce_latency_p50_ms",
    "produce_latency_p99_ms",
    "produce_latency_max_ms",
    "produce_lateness_p50_ms",
    "produce_lateness_p99_ms",
    "produce_lateness_max_ms",
    "fetch_completed",
    "fetch_expired",
    "fetch_cancelled",
    "fetch_latency_p50_ms",
    "fetch_latency_p99_ms",
    "fetch_latency_max_ms",
    "fetch_lateness_p50_ms",
    "fetch_lateness_p99_ms",
    "fetch_lateness_max_ms",
    "isr_shrinks",
    "isr_expands",
    "leader_changes",
    "bytes_in",
    "bytes_out",
    "log_flushes",
    "recovery_truncated_bytes",
    "acked_records",
    "failed_produces",
    "consumed_records",
    "read_back_records",
    "read_back_ok",
    "trace_rows",
    "trace_path",
)


@dataclass(slots=True)
class _Ack:
    tp: TopicPartition
    producer: int
    seq: int
    values: list[bytes]
    op: DelayedProduce


class _Simulation:
    def __init__(self, config: SimulationConfig, data_dir: Path, out: TextIO | None) -> None:
        self.config = config
        self.data_dir = data_dir
        self.out = out
        self.rng = random.Random(config.seed)
        self.writer = TraceWriter()
        self.broker = Broker(
            data_dir,
            tick_ms=config.tick_ms,
            wheel_size=config.wheel_size,
            recorder=self.writer,
            flush_messages=config.flush_messages,
            flush_ms=config.flush_ms,
        )
        self.tps = [TopicPartition(TOPIC, p) for p in range(config.partitions)]
        self.follower_ids = list(range(1, config.followers + 1))
        # the followers fetch every partition in one request, and wait their usual
        # lag after an error (partition 0 during the leader change)
        self.followers = Followers(
            self.broker,
            self.follower_ids,
            lag_ms=config.follower_lag_ms,
            max_wait_ms=config.follower_max_wait_ms,
            fetch_max_bytes=config.fetch_max_bytes,
            replica_lag_time_max_ms=config.replica_lag_time_max_ms,
            error_backoff_ms=config.follower_lag_ms,
        )
        self.stopping = False  # producers stop
        self.finished = False  # then, once in-flight produces are answered, the rest
        self.start_s = 0.0
        self.inflight: list[_Ack] = []
        self.consumed_records = 0
        self.leader_changes = 0
        self.stall_replica = self.follower_ids[-1] if self.follower_ids else None

    # -- the actors ------------------------------------------------------------

    def is_stopping(self) -> bool:  # a call, so type checkers do not narrow it
        return self.stopping

    def elapsed_s(self) -> float:
        return time.monotonic() - self.start_s

    async def producer(self, pid: int) -> None:
        cfg = self.config
        rng = random.Random(cfg.seed * 1000 + pid)
        rate = cfg.produce_rate / cfg.producers
        seq = 0
        next_s = self.start_s
        while not self.stopping:
            next_s += rng.expovariate(rate)
            delay = next_s - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            if self.is_stopping():
                break
            tp = self.tps[rng.randrange(len(self.tps))]
            values = [
                f"p{pid}:s{seq}:r{i}:".encode().ljust(cfg.record_bytes, b".")
                for i in range(cfg.records_per_batch)
            ]
            batch = build_batch(values)
            op = self.broker.produce({tp: batch}, acks=-1, timeout_ms=cfg.produce_timeout_ms)
            self.inflight.append(_Ack(tp, pid, seq, values, op))
            seq += 1

    async def stall(self) -> None:
        """The last follower stops fetching at ``stall_at`` of the run for ``stall_ms``."""
        cfg = self.config
        rid = self.stall_replica
        if cfg.stall_at < 0 or rid is None:
            return
        await asyncio.sleep(max(0.0, cfg.stall_at * cfg.duration_s - self.elapsed_s()))
        self.followers.pause(rid)
        try:
            await asyncio.sleep(cfg.stall_ms / 1000)
        finally:
            self.followers.resume(rid)

    async def consumer(self, cid: int) -> None:
        cfg = self.config
        mine = [tp for i, tp in enumerate(self.tps) if i % cfg.consumers == cid]
        if not mine:
            return
        offsets = dict.fromkeys(mine, 0)
        while not self.finished:
            requests = {
                tp: FetchPartitionStatus(offset, cfg.fetch_max_bytes)
                for tp, offset in offsets.items()
            }
            op = self.broker.fetch(
                requests, min_bytes=cfg.fetch_min_bytes, max_wait_ms=cfg.fetch_max_wait_ms
            )
            response = await op
            errored = False
            for tp, data in response.items():
                if data.error_code != ErrorCode.NONE:
                    errored = True
                elif data.records:
                    for batch in iter_batches(data.records, check_crc=False):
                        header = RecordBatchHeader.parse(batch)
                        self.consumed_records += header.records_count
                        offsets[tp] = header.next_offset
            if errored:
                await asyncio.sleep(0.01)

    async def leader_change(self) -> None:
        cfg = self.config
        if cfg.leader_change_at < 0:
            return
        await asyncio.sleep(max(0.0, cfg.leader_change_at * cfg.duration_s - self.elapsed_s()))
        if self.is_stopping():
            return
        tp = self.tps[0]
        self.broker.become_follower(tp)
        await asyncio.sleep(cfg.leader_change_ms / 1000)
        self.broker.become_leader(tp)
        self.leader_changes += 1

    async def progress(self) -> None:
        out = self.out
        if out is None:
            return
        width = 30
        duration = self.config.duration_s
        while not self.finished:
            elapsed = self.elapsed_s()
            frac = min(1.0, elapsed / duration)
            filled = int(frac * width)
            isr = min((len(p.isr) for p in self.broker.partitions.values()), default=0)
            stats_p = self.broker.produce_purgatory.statistics()
            stats_f = self.broker.fetch_purgatory.statistics()
            out.write(
                f"\r[{'#' * filled}{'.' * (width - filled)}] {elapsed:5.1f}/{duration:g}s "
                f"produce {self.broker.counters.produce_requests:7d} "
                f"waiting {stats_p.num_delayed:4d}/{stats_f.num_delayed:3d} min-ISR {isr} "
            )
            out.flush()
            await asyncio.sleep(0.2)
        out.write("\r" + " " * 100 + "\r")
        out.flush()

    # -- the run ---------------------------------------------------------------

    async def main(self) -> dict[str, Any]:
        cfg = self.config
        broker = self.broker
        for tp in self.tps:
            broker.create_partition(
                tp,
                self.follower_ids,
                min_insync_replicas=cfg.min_insync_replicas,
                replica_lag_time_max_ms=cfg.replica_lag_time_max_ms,
            )
        wall0 = time.perf_counter()
        cpu0 = time.process_time()
        self.start_s = time.monotonic()
        async with broker:
            producers = [asyncio.create_task(self.producer(i)) for i in range(cfg.producers)]
            self.followers.follow(self.tps)
            others = [asyncio.create_task(self.consumer(c)) for c in range(cfg.consumers)]
            others.append(asyncio.create_task(self.progress()))
            scenario = [
                asyncio.create_task(self.stall()),
                asyncio.create_task(self.leader_change()),
            ]
            await asyncio.sleep(cfg.duration_s)
            self.stopping = True
            await asyncio.gather(*producers)
            for task in scenario:
                task.cancel()
            await asyncio.gather(*scenario, return_exceptions=True)
            if not broker.partitions[self.tps[0]].is_leader:
                broker.become_leader(self.tps[0])
                self.leader_changes += 1
            for ack in self.inflight:  # followers still replicate meanwhile
                if not ack.op.is_done:
                    await ack.op
            self.finished = True
            await self.followers.stop()
            await asyncio.gather(*others)
            stats_p = broker.produce_purgatory.statistics()
            stats_f = broker.fetch_purgatory.statistics()
        # after close: a flush policy flushes each log once more when it closes
        log_flushes = broker.log_flushes
        wall_s = time.perf_counter() - wall0
        cpu_s = time.process_time() - cpu0
        summary = self._summarize(wall_s, cpu_s, stats_p, stats_f)
        summary["log_flushes"] = log_flushes
        summary.update(self.read_back())
        if cfg.trace_path is not None:
            summary["trace_path"] = str(self.writer.write(cfg.trace_path))
        return summary

    def _summarize(self, wall_s: float, cpu_s: float, stats_p: Any, stats_f: Any) -> dict[str, Any]:
        broker = self.broker
        counters = broker.counters
        requests = counters.produce_requests + counters.fetch_requests
        latencies: dict[str, list[int]] = defaultdict(list)
        for row in self.writer.rows:
            if row.outcome == "completed":
                latencies[row.purgatory].append(row.completed_ms - row.created_ms)
        summary: dict[str, Any] = {
            "wall_s": round(wall_s, 2),
            "cpu_s": round(cpu_s, 2),
            "uvloop": type(asyncio.get_running_loop()).__module__.startswith("uvloop"),
            "produce_requests": counters.produce_requests,
            "fetch_requests": counters.fetch_requests,
            "requests_per_s": round(requests / wall_s, 1),
            "delayed_ops": len(self.writer),
            "delayed_ops_per_s": round(len(self.writer) / wall_s, 1),
            "cpu_us_per_request": round(cpu_s / max(1, requests) * 1e6, 1),
        }
        for name, stats in (("produce", stats_p), ("fetch", stats_f)):
            values = sorted(latencies[name])
            summary[f"{name}_completed"] = stats.completed_early
            summary[f"{name}_expired"] = stats.expired
            summary[f"{name}_cancelled"] = stats.cancelled
            summary[f"{name}_latency_p50_ms"] = exact_quantile(values, 0.5) if values else 0
            summary[f"{name}_latency_p99_ms"] = exact_quantile(values, 0.99) if values else 0
            summary[f"{name}_latency_max_ms"] = values[-1] if values else 0
            summary[f"{name}_lateness_p50_ms"] = stats.lateness_p50_ms
            summary[f"{name}_lateness_p99_ms"] = stats.lateness_p99_ms
            summary[f"{name}_lateness_max_ms"] = stats.lateness_max_ms
        parts = broker.partitions.values()
        summary["isr_shrinks"] = sum(p.isr_shrinks for p in parts)
        summary["isr_expands"] = sum(p.isr_expands for p in parts)
        summary["leader_changes"] = self.leader_changes
        summary["bytes_in"] = counters.bytes_in
        summary["bytes_out"] = counters.bytes_out
        summary["consumed_records"] = self.consumed_records
        summary["trace_rows"] = len(self.writer)
        summary["trace_path"] = None
        return summary

    def read_back(self) -> dict[str, Any]:
        """Reopen every log and check the acknowledged records; see module doc."""
        acked: dict[TopicPartition, list[tuple[int, bytes]]] = defaultdict(list)
        last_seen: dict[tuple[int, TopicPartition], tuple[int, int]] = {}
        failed = 0
        problems: list[str] = []
        for ack in self.inflight:
            response = ack.op.result()[ack.tp]
            if response.error_code != ErrorCode.NONE:
                failed += 1
                continue
            key = (ack.producer, ack.tp)
            previous = last_seen.get(key)
            if previous is not None and previous[1] >= response.base_offset:
                problems.append(
                    f"producer {ack.producer} seq {ack.seq} at offset {response.base_offset} "
                    f"in {ack.tp} is not after seq {previous[0]} at {previous[1]}"
                )
            last_seen[key] = (ack.seq, response.base_offset)
            for i, value in enumerate(ack.values):
                acked[ack.tp].append((response.base_offset + i, value))
        total = sum(len(v) for v in acked.values())
        checked = 0
        truncated = sum(p.log.recovery.truncated_bytes for p in self.broker.partitions.values())
        for tp in self.tps:
            expected = sorted(acked.get(tp, []))
            position = 0
            log = PartitionLog(self.data_dir / str(tp))
            if log.recovery.truncated_bytes:
                truncated += log.recovery.truncated_bytes
                problems.append(
                    f"{tp}: reopening cut {log.recovery.truncated_bytes} bytes at offset "
                    f"{log.recovery.truncated_at_offset}"
                )
            try:
                offset = log.log_start_offset
                while position < len(expected) and offset < log.log_end_offset:
                    data = log.read(offset, 1 << 20)
                    for batch in iter_batches(data):
                        for record in iter_records(batch):
                            while (
                                position < len(expected) and expected[position][0] < record.offset
                            ):
                                problems.append(f"{tp} offset {expected[position][0]} missing")
                                position += 1
                            if position < len(expected) and expected[position][0] == record.offset:
                                if record.value != expected[position][1]:
                                    problems.append(f"{tp} offset {record.offset}: wrong value")
                                position += 1
                                checked += 1
                        offset = RecordBatchHeader.parse(batch).next_offset
            except (CorruptRecordError, OSError) as exc:
                problems.append(f"{tp}: cannot read at offset {offset}: {exc}")
            finally:
                log.close()
            problems.extend(f"{tp} offset {o} missing" for o, _ in expected[position:])
        return {
            "acked_records": total,
            "failed_produces": failed,
            "read_back_records": checked,
            "read_back_ok": not problems and checked == total,
            "recovery_truncated_bytes": truncated,
            "read_back_problems": problems[:20],
        }


async def run_async(config: SimulationConfig, *, out: TextIO | None = None) -> dict[str, Any]:
    """Run the simulation on the running loop; return the summary (see :func:`run`)."""
    config.validate()
    if config.data_dir is not None:
        data_dir = Path(config.data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        if any(data_dir.iterdir()):
            raise ValueError(f"data dir {data_dir} is not empty")
        return await _Simulation(config, data_dir, out).main()
    with tempfile.TemporaryDirectory(prefix="purgatory-sim-") as tmp:
        return await _Simulation(config, Path(tmp), out).main()


def run(config: SimulationConfig, *, out: TextIO | None = None) -> dict[str, Any]:
    """Run the simulation on a new loop (uvloop if asked and installed); return the summary.

    The summary holds :data:`SUMMARY_KEYS` plus ``read_back_problems`` (up to 20
    messages). ``out`` gets the progress bar (None: no bar).
    """
    if out is None and config.progress:
        out = sys.stderr
    factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop
    if config.use_uvloop:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(run_async(config, out=out))


def format_summary(summary: dict[str, Any]) -> str:
    """The summary as a two-column table."""
    width = max(len(k) for k in SUMMARY_KEYS)
    lines = [f"{'metric':<{width}}  value", f"{'-' * width}  {'-' * 20}"]
    lines += [f"{key:<{width}}  {summary.get(key)}" for key in SUMMARY_KEYS]
    return "\n".join(lines)
