"""A broker under load: producers, consumers, lagging followers, a stall, a leader change.

The run drives one :class:`~purgatory_broker.broker.Broker` leading ``partitions``
partitions of topic ``sim``, each replicated to ``followers`` simulated
followers, on one event loop, through the broker's public API:

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

Phases. :meth:`_Simulation.main` runs four, each a method returning what it
found (:mod:`.result`): *setup* (the partitions, what opening their logs cut),
*load* (the clients and the scenario until the duration ends or a signal),
*drain* (below), *summary* (after the broker closed: figures, read-back, trace).

Time. The run reads one clock, a :class:`~purgatory.LoopClock` it shares with the
broker: the running loop's ``loop.time()`` in milliseconds (the load's and the
drain's durations, the scenario's moments, the progress line). The producers'
arrivals, drawn with sub-millisecond times, read ``loop.time()`` itself
(:func:`.clients.run_producers`), the same time base. Everything waits with
``asyncio.sleep`` and the loop's timers. So the loop decides what time it is: on
asyncio's or uvloop's loop the run is in real time (the main job); with
``virtual_time`` it runs on :class:`purgatory.testing.VirtualTimeLoop`, whose clock
jumps to the next timer whenever the loop is idle, so the run is determined by
its settings and seed (the same trace and summary every time, as fast as the CPU
goes) and its CPU figures, which virtual time says nothing about, are None.

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
hook, O(1), no timer; :func:`.hooks.survivors_frozen`): every collection is a young
one, over what was made since the previous one, with the usual thresholds, and the
older generations stay empty. At saturation that took the collector from 3.5-3.8
to 1.0-1.4 us of CPU per request (an earlier version froze every 100 ms, by a
timer: generation 1 and 2 collections still walked up to 100 ms of survivors;
BENCHMARKS.md). When the run ends the objects are unfrozen and collected once.
Freezing does not keep anything alive: a frozen object is freed by its reference
count like any other; only cyclic garbage that was still reachable at a collection
waits for the end (the run makes next to none), so memory stays what the run keeps
anyway.

Interrupting. With ``handle_signals`` (the command line), SIGINT (Ctrl-C) and
SIGTERM end the load at once and start the drain; a second signal cuts it. The
summary of what ran is returned as usual, with ``interrupted`` naming the
signal; the process's own handlers are back afterwards
(:func:`.hooks.signals_handled`). Output paths are checked before anything starts
(:func:`.paths.check_output_paths`).

:func:`run` returns the flat summary dict (see
:data:`~.summary.SUMMARY_KEYS`), so a sweep can call it with many settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from purgatory import Clock, LoopClock, TopicPartition
from purgatory_broker.broker import Broker, Followers
from purgatory_broker.tracing import TraceWriter

from .clients import Consumer, Producer, run_producers, wall_clock_ms
from .config import SimulationConfig
from .hooks import signals_handled, survivors_frozen
from .paths import check_output_paths
from .progress import ProgressState, format_progress
from .readback import read_back
from .result import DrainResult, LoadResult, RunResult
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


async def _cancel_and_wait(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and wait until each has ended. O(tasks)."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class _Simulation:
    """One run: the broker, its clients and followers, the scenario; see module doc.

    ``clock`` is the run's one clock (shared with the broker); ``cpu_s`` reads the
    process's CPU time, None when it is not measured (virtual time); ``timestamp_ms``
    stamps the producers' batches (the wall clock, or ``clock`` in virtual time).
    """

    def __init__(
        self,
        config: SimulationConfig,
        data_dir: Path,
        out: TextIO | None,
        *,
        clock: Clock,
        cpu_s: Callable[[], float] | None,
        timestamp_ms: Callable[[], int],
    ) -> None:
        self.config = config
        self.data_dir = data_dir
        self.out = out
        self.clock = clock
        self.cpu_s = cpu_s
        self.writer = TraceWriter()
        self.broker = Broker(
            data_dir,
            clock=clock,
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
            Producer(self.broker, config, pid, self.tps, timestamp_ms=timestamp_ms)
            for pid in range(config.producers)
        ]
        self.consumers = [  # partition i goes to consumer i % consumers
            Consumer(self.broker, config, self.tps[cid :: config.consumers])
            for cid in range(config.consumers)
        ]
        self.stopping = False  # producers stop
        self.finished = False  # then, once in-flight produces are answered, the rest
        self.start_ms = 0  # the clock when the load started
        self.leader_changes = 0
        self.stall_replica = self.follower_ids[-1] if self.follower_ids else None
        self.interrupted: str | None = None  # the first signal's name
        self.draining = False
        self._stop_load = asyncio.Event()  # a signal ends the load now
        self._cut_drain = asyncio.Event()  # a second signal ends the drain now
        # the tasks of the load, by role: each is ended by its phase (or by _end_every_task)
        self._producer_tasks: list[asyncio.Task[Any]] = []
        self._scenario_tasks: list[asyncio.Task[Any]] = []
        self._client_tasks: list[asyncio.Task[Any]] = []  # consumers and progress

    def is_stopping(self) -> bool:  # a call, so type checkers do not narrow it
        return self.stopping

    def is_finished(self) -> bool:
        return self.finished

    def elapsed_s(self) -> float:
        """Seconds on the run's clock since the load started. O(1)."""
        return (self.clock.now_ms() - self.start_ms) / 1000

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

    async def wait_for_in_flight(self) -> bool:
        """Wait for the produces in flight, at most :func:`drain_bound_s`; whether the
        wait was cut (bound reached, or a second signal). O(in flight) per poll."""
        pending = [op for p in self.producers for op in p.pending()]
        deadline_s = self.elapsed_s() + drain_bound_s(self.config)
        while pending:
            if self._cut_drain.is_set() or self.elapsed_s() >= deadline_s:
                return True
            await asyncio.sleep(_DRAIN_POLL_S)
            pending = [op for op in pending if not op.is_done]
        return False

    # -- the phases ----------------------------------------------------------------

    async def main(self, handle_signals: bool) -> RunResult:
        """Run the phases (module doc): setup, then load and drain with the broker
        open (and the signals handled, if asked), then the summary."""
        opened_truncated_bytes = self.setup()
        loop = asyncio.get_running_loop()
        signals = (
            signals_handled(loop, _SIGNALS, self.on_signal)
            if handle_signals
            else contextlib.nullcontext()
        )
        cpu0_s = self.cpu_s() if self.cpu_s is not None else 0.0
        with signals:
            self.start_ms = self.clock.now_ms()
            async with self.broker:
                load, drain = await self.load_and_drain()
        # after close: the broker's figures are final
        wall_s = self.elapsed_s()
        cpu_s = self.cpu_s() - cpu0_s if self.cpu_s is not None else None
        return self.summarize(opened_truncated_bytes, load, drain, wall_s=wall_s, cpu_s=cpu_s)

    def setup(self) -> int:
        """Create (open) the partitions; the bytes that opening their logs cut."""
        cfg = self.config
        for tp in self.tps:
            self.broker.create_partition(
                tp,
                self.follower_ids,
                min_insync_replicas=cfg.min_insync_replicas,
                replica_lag_time_max_ms=cfg.replica_lag_time_max_ms,
            )
        return sum(p.log.recovery.truncated_bytes for p in self.broker.partitions.values())

    async def load_and_drain(self) -> tuple[LoadResult, DrainResult]:
        """The load, then the drain; on an error or a cancellation, end every task
        first: nothing may outlive the broker."""
        try:
            load = await self.load()
            return load, await self.drain()
        except BaseException:
            await self._end_every_task()
            raise

    async def load(self) -> LoadResult:
        """Start the clients, followers and scenario; stop the producers and the
        scenario when the duration is over (or a signal came)."""
        cfg = self.config
        arrivals = run_producers(
            self.producers, self.start_ms / 1000, self.is_stopping, linger_s=cfg.linger_ms / 1000
        )
        self._producer_tasks.append(asyncio.create_task(arrivals))
        self.followers.follow(self.tps)
        self._client_tasks += [asyncio.create_task(c.run(self.is_finished)) for c in self.consumers]
        self._client_tasks.append(asyncio.create_task(self.progress()))
        self._scenario_tasks += [
            asyncio.create_task(self.stall()),
            asyncio.create_task(self.leader_change()),
        ]
        with contextlib.suppress(TimeoutError):  # the duration is over
            await asyncio.wait_for(self._stop_load.wait(), cfg.duration_s)
        self.stopping = True
        load_s = self.elapsed_s()
        await _cancel_and_wait(self._producer_tasks)  # it waits for the next arrival
        await _cancel_and_wait(self._scenario_tasks)
        if not self.broker.partitions[self.tps[0]].is_leader:
            self.broker.become_leader(self.tps[0])
            self.leader_changes += 1
        return LoadResult(
            load_s=load_s,
            sent=sum(p.sent for p in self.producers),
            behind_s=max(p.behind_s for p in self.producers),
        )

    async def drain(self) -> DrainResult:
        """Wait for the produces in flight (bounded), then let the followers and
        consumers end their round (cut: cancel the followers)."""
        start_s = self.elapsed_s()
        self.draining = True
        cut = await self.wait_for_in_flight()  # followers still replicate meanwhile
        drain_s = self.elapsed_s() - start_s
        self.finished = True
        if cut:
            await self.followers.close()
        else:
            await self.followers.stop()
        await asyncio.gather(*self._client_tasks)
        return DrainResult(
            drain_s=drain_s,
            cut=cut,
            produce=self.broker.produce_purgatory.statistics(),
            fetch=self.broker.fetch_purgatory.statistics(),
        )

    async def _end_every_task(self) -> None:
        """End every task of the run now (an error or a cancellation)."""
        self.finished = True
        await self.followers.close()
        await _cancel_and_wait([*self._producer_tasks, *self._client_tasks, *self._scenario_tasks])

    def summarize(
        self,
        opened_truncated_bytes: int,
        load: LoadResult,
        drain: DrainResult,
        *,
        wall_s: float,
        cpu_s: float | None,
    ) -> RunResult:
        """After the broker closed: the figures, the read-back, the trace."""
        for producer in self.producers:
            producer.settle_all()
        loop = asyncio.get_running_loop()
        figures = summarize(
            self.broker,
            self.writer,
            wall_s=wall_s,
            cpu_s=cpu_s,
            uvloop=type(loop).__module__.startswith("uvloop"),
            produce=drain.produce,
            fetch=drain.fetch,
            leader_changes=self.leader_changes,
            consumed_records=sum(c.consumed_records for c in self.consumers),
        )
        acks = [ack for p in self.producers for ack in p.acks]
        checked = read_back(acks, self.data_dir, self.tps, opened_truncated_bytes)
        trace_path, trace_error = self.write_trace()
        return RunResult(
            figures=figures,
            offered_produce_rate=self.config.produce_rate,
            load=load,
            drain=drain,
            interrupted=self.interrupted,
            unanswered_produces=sum(p.unanswered for p in self.producers),
            # after close: a flush policy flushes each log once more when it closes
            log_flushes=self.broker.log_flushes,
            read_back=checked,
            trace_path=trace_path,
            trace_error=trace_error,
        )

    def write_trace(self) -> tuple[str | None, str | None]:
        """Write the trace if asked: (its path, None), or (None, why it failed)."""
        path = self.config.trace_path
        if path is None:
            return None, None
        try:
            return str(self.writer.write(path)), None
        except OSError as exc:  # checked before the run; the disk may still fill up
            return None, f"{path}: {exc.strerror or exc}"


def _check_loop(config: SimulationConfig, loop: asyncio.AbstractEventLoop) -> None:
    """Raise ValueError unless ``loop`` keeps the time ``config`` asks for. O(1)."""
    from purgatory.testing import VirtualTimeLoop

    virtual = isinstance(loop, VirtualTimeLoop)
    if config.virtual_time and not virtual:
        raise ValueError(
            "virtual_time needs a VirtualTimeLoop (purgatory.testing): call run(), or "
            "run run_async() on that loop"
        )
    if virtual and not config.virtual_time:
        raise ValueError("the running loop is a VirtualTimeLoop: set virtual_time=True")


@contextlib.contextmanager
def _data_dir(config: SimulationConfig) -> Iterator[Path]:
    """``config.data_dir`` (made if missing), or a temporary directory removed after."""
    if config.data_dir is not None:
        data_dir = Path(config.data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        yield data_dir
        return
    with tempfile.TemporaryDirectory(prefix="purgatory-sim-") as tmp:
        yield Path(tmp)


async def run_async(
    config: SimulationConfig, *, out: TextIO | None = None, handle_signals: bool = False
) -> dict[str, Any]:
    """Run the simulation on the running loop; return the summary (see :func:`run`).

    With ``config.virtual_time`` the running loop must be a
    :class:`purgatory.testing.VirtualTimeLoop`, and without it must not be. Raises
    ValueError for a bad setting, output path or loop (nothing is created then).
    """
    config.validate()
    check_output_paths(config)
    _check_loop(config, asyncio.get_running_loop())
    clock = LoopClock()
    virtual = config.virtual_time
    with survivors_frozen(), _data_dir(config) as data_dir:
        simulation = _Simulation(
            config,
            data_dir,
            out,
            clock=clock,
            cpu_s=None if virtual else time.process_time,
            timestamp_ms=clock.now_ms if virtual else wall_clock_ms,
        )
        result = await simulation.main(handle_signals)
    return result.summary()


def _loop_factory(config: SimulationConfig) -> Callable[[], asyncio.AbstractEventLoop]:
    """The loop a run asks for: virtual time, else uvloop if asked and installed,
    else asyncio's own."""
    if config.virtual_time:
        from purgatory.testing import VirtualTimeLoop

        return VirtualTimeLoop
    if config.uvloop:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop
    return asyncio.new_event_loop


def run(
    config: SimulationConfig, *, out: TextIO | None = None, handle_signals: bool = False
) -> dict[str, Any]:
    """Run the simulation on a new loop (see :func:`_loop_factory`); return the summary.

    The summary holds :data:`~.summary.SUMMARY_KEYS` plus ``read_back_problems``
    (up to 20 messages, and ``trace_error`` if the trace could not be written).
    ``out`` gets the progress bar (None: none, or stderr when ``config.progress``
    is set). ``handle_signals`` makes SIGINT and SIGTERM stop the run early (see
    the module doc; main thread only). Raises ValueError for a bad setting or
    output path. Cost: ``duration_s`` of wall time (in virtual time, the CPU the
    simulated requests take), plus the drain (bounded), the read-back and the trace.
    """
    if out is None and config.progress:
        out = sys.stderr
    with asyncio.Runner(loop_factory=_loop_factory(config)) as runner:
        return runner.run(run_async(config, out=out, handle_signals=handle_signals))
