"""A broker under load: producers, consumers, lagging followers, a stall, a leader change.

The run drives one :class:`~purgatory_broker.broker.Broker` leading ``partitions``
partitions of topic ``sim``, each replicated to ``followers`` simulated
followers, in real time on one event loop, through the broker's public API:

* producers and consumers (:mod:`.clients`): open-loop acks=-1 produces with
  exponential arrivals (DelayedProduce), sent by one sender with Kafka's
  ``linger_ms`` (5 ms), long-polling fetches up to the high watermark
  (DelayedFetch);
* the followers and the ISR check (:class:`~purgatory_broker.broker.Followers`): every
  follower fetches all partitions in one request (a DelayedFetch with
  ``min_bytes=1``) and waits ``follower_lag_ms`` between fetches;
* the scenario: at ``stall_at`` of the run the last follower is paused for
  ``stall_ms``, so the ISR shrinks after ``replica_lag_time_max_ms`` and grows
  again when it catches up; at ``leader_change_at`` partition 0 is given up and
  led again ``leader_change_ms`` later with a new epoch.

Timeline of the default run (20 s)::

    0 s        producers, consumers, followers start
    6 s        follower 2 pauses; ~7 s it leaves the ISR (the HW moves on without it)
    9 s        follower 2 resumes, catches up, rejoins the ISR
    14 s       partition 0: not leader (its produces and fetches answer error 6)
    14.5 s     partition 0 led again, leader epoch 1
    20 s       producers stop; in-flight produces are awaited (the drain), the rest
               ends its round

Every acknowledged batch is in its partition's file before the produce is
answered (the broker writes through); ``flush_messages`` / ``flush_ms`` set
Kafka's flush policy (``fsync``), off by default. The followers keep no data,
so acks=-1 adds no durability here: what survives a machine crash is what was
flushed. Then the broker closes, the summary is taken (:mod:`.summary`), every
acknowledged record is read back from the reopened logs (:mod:`.readback`), and
the trace of every delayed operation is written to ``trace_path`` (Parquet,
:mod:`purgatory_broker.tracing`).

Ending. The load lasts ``duration_s``; then the drain waits for the produces
still in flight, at most :func:`drain_bound_s` (their timeout plus
:data:`DRAIN_MARGIN_S`: they expire by then unless the loop is starved). A drain
that hits its bound is cut: the broker closes, the requests still waiting count
as ``unanswered_produces`` and the summary says ``drain_cut``. So a run ends
within ``duration_s`` plus the drain bound plus one round of the followers and
consumers (their ``max_wait_ms``), then the read-back and the trace.

Garbage collection. A run makes millions of small objects that live until its
end (trace rows, answers, the operations in flight). CPython's generational
collector would scan the survivors again and again as they pile up (a quarter
of the CPU at saturation, and pauses of hundreds of milliseconds when the older
generations are collected). So during the run whatever survives a collection is
frozen out of the collector right after it (``gc.freeze`` from a ``gc.callbacks``
hook, O(1), no timer): every collection is a young one, over what was made since
the previous one, with the usual thresholds, and the older generations stay
empty. At saturation that took the collector from 3.5-3.8 to 1.0-1.4 us of CPU
per request (an earlier version froze every 100 ms, by a timer: generation 1 and
2 collections still walked up to 100 ms of survivors; BENCHMARKS.md). When the
run ends the objects are unfrozen and collected once. Freezing does not keep
anything alive: a frozen object is freed by its reference count like any other;
only cyclic garbage that was still reachable at a collection waits for the end
(the run makes next to none), so memory stays what the run keeps anyway.

Interrupting. With ``handle_signals`` (the command line), SIGINT (Ctrl-C) and
SIGTERM end the load at once and start the drain; a second signal cuts it. The
summary of what ran is returned as usual, with ``interrupted`` naming the
signal. Output paths are checked before anything starts
(:func:`.paths.check_output_paths`).

:func:`run` returns the flat summary dict (see
:data:`~.summary.SUMMARY_KEYS`), so a sweep can call it with many settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from purgatory import TopicPartition
from purgatory_broker.broker import Broker, Followers
from purgatory_broker.tracing import TraceWriter

from .clients import Consumer, Producer, run_producers
from .config import SimulationConfig
from .paths import check_output_paths
from .progress import ProgressState, format_progress
from .readback import read_back
from .summary import summarize

__all__ = [
    "DRAIN_MARGIN_S",
    "PROGRESS_INTERVAL_S",
    "TOPIC",
    "drain_bound_s",
    "run",
    "run_async",
]

#: the topic whose partitions the broker leads
TOPIC = "sim"
#: how often the progress bar is redrawn
PROGRESS_INTERVAL_S = 0.2
#: the drain's bound past the produce timeout (see the module doc)
DRAIN_MARGIN_S = 1.0
#: how often the drain looks at the produces in flight
_DRAIN_POLL_S = 0.01
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def drain_bound_s(config: SimulationConfig) -> float:
    """How long the drain waits for produces in flight at most. O(1)."""
    return config.produce_timeout_ms / 1000 + DRAIN_MARGIN_S


def _freeze_after_collection(phase: str, info: dict[str, int]) -> None:
    """A ``gc.callbacks`` hook: freeze what survived each collection (module doc)."""
    if phase == "stop":
        gc.freeze()


@contextlib.contextmanager
def _survivors_frozen() -> Iterator[None]:
    """Freeze the survivors of every collection while the run lasts; unfreeze and
    collect once when it ends (see the module doc)."""
    gc.callbacks.append(_freeze_after_collection)
    try:
        yield
    finally:
        gc.callbacks.remove(_freeze_after_collection)
        gc.unfreeze()
        gc.collect()


class _Simulation:
    """One run: the broker, its clients and followers, the scenario; see module doc."""

    def __init__(self, config: SimulationConfig, data_dir: Path, out: TextIO | None) -> None:
        self.config = config
        self.data_dir = data_dir
        self.out = out
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
        # every follower fetches all partitions in one request, and waits its usual
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
        self.producers = [
            Producer(self.broker, config, pid, self.tps) for pid in range(config.producers)
        ]
        self.consumers = [
            Consumer(
                self.broker,
                config,
                [tp for i, tp in enumerate(self.tps) if i % config.consumers == cid],
            )
            for cid in range(config.consumers)
        ]
        self.stopping = False  # producers stop
        self.finished = False  # then, once in-flight produces are answered, the rest
        self.start_s = 0.0
        self.leader_changes = 0
        self.stall_replica = self.follower_ids[-1] if self.follower_ids else None
        self.interrupted: str | None = None  # the first signal's name
        self.draining = False
        self._stop_load = asyncio.Event()  # a signal ends the load now
        self._cut_drain = asyncio.Event()  # a second signal ends the drain now

    def is_stopping(self) -> bool:  # a call, so type checkers do not narrow it
        return self.stopping

    def is_finished(self) -> bool:
        return self.finished

    def elapsed_s(self) -> float:
        return time.monotonic() - self.start_s

    def on_signal(self, signum: int) -> None:
        """SIGINT/SIGTERM: end the load; a second one cuts the drain. O(1)."""
        name = signal.Signals(signum).name
        if self.interrupted is None:
            self.interrupted = name
            self._stop_load.set()
            if self.out is not None:
                self.out.write("\r\x1b[K")  # clear the progress line
            print(
                f"simulate: {name}: stopping; waiting up to {drain_bound_s(self.config):g} s "
                "for produces in flight (again to cut that short)",
                file=sys.stderr,
            )
        else:
            self._cut_drain.set()

    # -- the scenario ------------------------------------------------------------

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

    async def leader_change(self) -> None:
        """Partition 0 loses leadership at ``leader_change_at`` of the run for
        ``leader_change_ms``, then is led again with a new epoch."""
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

    def progress_state(self) -> ProgressState:
        """What the progress bar shows now. O(partitions)."""
        broker = self.broker
        partitions = broker.partitions.values()
        return ProgressState(
            elapsed_s=self.elapsed_s(),
            duration_s=self.config.duration_s,
            produce_requests=broker.counters.produce_requests,
            waiting_produces=broker.produce_purgatory.statistics().num_delayed,
            waiting_fetches=broker.fetch_purgatory.statistics().num_delayed,
            smallest_isr=min((len(p.isr) for p in partitions), default=0),
            replicas=len(self.follower_ids) + 1,
            draining=self.draining,
        )

    async def progress(self) -> None:
        """Redraw the one-line progress bar on ``out`` until the run finishes; it fits
        the terminal's width, read at every redraw."""
        out = self.out
        if out is None:
            return
        while not self.finished:
            width = shutil.get_terminal_size().columns
            out.write("\r" + format_progress(self.progress_state(), width) + "\x1b[K")
            out.flush()
            await asyncio.sleep(PROGRESS_INTERVAL_S)
        out.write("\r\x1b[K")
        out.flush()

    async def drain(self) -> bool:
        """Wait for the produces in flight, at most :func:`drain_bound_s`; whether the
        drain was cut (bound reached, or a second signal). O(in flight) per poll."""
        pending = [op for p in self.producers for op in p.pending()]
        deadline = time.monotonic() + drain_bound_s(self.config)
        while pending:
            if self._cut_drain.is_set() or time.monotonic() >= deadline:
                return True
            await asyncio.sleep(_DRAIN_POLL_S)
            pending = [op for op in pending if not op.is_done]
        return False

    # -- the run -----------------------------------------------------------------

    async def main(self, handle_signals: bool) -> dict[str, Any]:
        cfg = self.config
        broker = self.broker
        for tp in self.tps:
            broker.create_partition(
                tp,
                self.follower_ids,
                min_insync_replicas=cfg.min_insync_replicas,
                replica_lag_time_max_ms=cfg.replica_lag_time_max_ms,
            )
        opened_truncated_bytes = sum(
            p.log.recovery.truncated_bytes for p in broker.partitions.values()
        )
        loop = asyncio.get_running_loop()
        if handle_signals:
            for signum in _SIGNALS:
                loop.add_signal_handler(signum, self.on_signal, signum)
        wall0 = time.perf_counter()
        cpu0 = time.process_time()
        self.start_s = time.monotonic()
        try:
            async with broker:
                tasks: list[asyncio.Task[Any]] = []
                try:
                    producers: list[asyncio.Task[Any]] = [
                        asyncio.create_task(
                            run_producers(
                                self.producers,
                                self.start_s,
                                self.is_stopping,
                                linger_s=cfg.linger_ms / 1000,
                            )
                        )
                    ]
                    self.followers.follow(self.tps)
                    others = [asyncio.create_task(c.run(self.is_finished)) for c in self.consumers]
                    others.append(asyncio.create_task(self.progress()))
                    scenario = [
                        asyncio.create_task(self.stall()),
                        asyncio.create_task(self.leader_change()),
                    ]
                    tasks += [*producers, *others, *scenario]
                    with contextlib.suppress(TimeoutError):  # the duration is over
                        await asyncio.wait_for(self._stop_load.wait(), cfg.duration_s)
                    self.stopping = True
                    load_s = self.elapsed_s()
                    for task in producers:  # it waits for the next arrival: end that
                        task.cancel()
                    await asyncio.gather(*producers, return_exceptions=True)
                    for task in scenario:
                        task.cancel()
                    await asyncio.gather(*scenario, return_exceptions=True)
                    if not broker.partitions[self.tps[0]].is_leader:
                        broker.become_leader(self.tps[0])
                        self.leader_changes += 1
                    drain0 = time.monotonic()
                    self.draining = True
                    drain_cut = await self.drain()  # followers still replicate meanwhile
                    drain_s = time.monotonic() - drain0
                    self.finished = True
                    if drain_cut:
                        await self.followers.close()
                    else:
                        await self.followers.stop()
                    await asyncio.gather(*others)
                    stats_p = broker.produce_purgatory.statistics()
                    stats_f = broker.fetch_purgatory.statistics()
                except BaseException:  # a bug or a cancellation: nothing may outlive the broker
                    self.finished = True
                    await self.followers.close()
                    for task in tasks:
                        task.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
                    raise
        finally:
            if handle_signals:
                for signum in _SIGNALS:
                    loop.remove_signal_handler(signum)
        # after close: a flush policy flushes each log once more when it closes
        log_flushes = broker.log_flushes
        wall_s = time.perf_counter() - wall0
        cpu_s = time.process_time() - cpu0
        for producer in self.producers:
            producer.settle_all()
        summary = summarize(
            broker,
            self.writer,
            wall_s=wall_s,
            cpu_s=cpu_s,
            uvloop=type(loop).__module__.startswith("uvloop"),
            produce=stats_p,
            fetch=stats_f,
            leader_changes=self.leader_changes,
            consumed_records=sum(c.consumed_records for c in self.consumers),
        )
        sent = sum(p.sent for p in self.producers)
        summary.update(
            load_s=round(load_s, 2),
            offered_produce_rate=cfg.produce_rate,
            achieved_produce_rate=round(sent / max(load_s, 1e-9), 1),
            produce_behind_schedule_s=round(max(p.behind_s for p in self.producers), 2),
            drain_s=round(drain_s, 2),
            drain_cut=drain_cut,
            interrupted=self.interrupted,
            unanswered_produces=sum(p.unanswered for p in self.producers),
            log_flushes=log_flushes,
        )
        acks = [ack for p in self.producers for ack in p.acks]
        summary.update(read_back(acks, self.data_dir, self.tps, opened_truncated_bytes))
        if cfg.trace_path is not None:
            try:
                summary["trace_path"] = str(self.writer.write(cfg.trace_path))
            except OSError as exc:  # checked before the run; the disk may still fill up
                summary["trace_error"] = f"{cfg.trace_path}: {exc.strerror or exc}"
        return summary


async def run_async(
    config: SimulationConfig, *, out: TextIO | None = None, handle_signals: bool = False
) -> dict[str, Any]:
    """Run the simulation on the running loop; return the summary (see :func:`run`).

    Raises ValueError for a bad setting or output path (nothing is created then).
    """
    config.validate()
    check_output_paths(config)
    with _survivors_frozen():
        if config.data_dir is not None:
            data_dir = Path(config.data_dir)
            data_dir.mkdir(parents=True, exist_ok=True)
            return await _Simulation(config, data_dir, out).main(handle_signals)
        with tempfile.TemporaryDirectory(prefix="purgatory-sim-") as tmp:
            return await _Simulation(config, Path(tmp), out).main(handle_signals)


def run(
    config: SimulationConfig, *, out: TextIO | None = None, handle_signals: bool = False
) -> dict[str, Any]:
    """Run the simulation on a new loop (uvloop if asked and installed); return the summary.

    The summary holds :data:`~.summary.SUMMARY_KEYS` plus ``read_back_problems``
    (up to 20 messages, and ``trace_error`` if the trace could not be written).
    ``out`` gets the progress bar (None: none, or stderr when ``config.progress``
    is set). ``handle_signals`` makes SIGINT and SIGTERM stop the run early (see
    the module doc; main thread only). Raises ValueError for a bad setting or
    output path. Cost: ``duration_s`` of wall time, plus the drain (bounded), the
    read-back and the trace.
    """
    if out is None and config.progress:
        out = sys.stderr
    factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop
    if config.uvloop:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(run_async(config, out=out, handle_signals=handle_signals))
