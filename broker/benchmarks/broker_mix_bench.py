"""The broker's per-request work at saturation, without the event loop: one request mix,
synchronous and deterministic, timed or counted.

The simulation's saturated run (``simulation_bench.py --scenario saturation``) spends
its CPU on the broker core and the simulated clients, plus the event loop's turns and
whatever the machine does meanwhile; timed, it moves by 10 % between two runs of the
same code on this shared machine. This script runs the same per-request work in a
plain loop, on a :class:`~purgatory.testing.ManualClock`, so a change to the broker
core can be judged by instruction counts (``valgrind --tool=callgrind``), which do not
depend on the machine's load, or by best-of-N timings.

The mix is the simulation's default configuration at saturation: 4 partitions, 2
followers, min.insync.replicas 2, producers sending one batch of 5 records of 100
bytes per acks=-1 request to a random partition (:class:`purgatory_broker.sim.Producer`,
whose ``send`` builds the batch, produces and keeps the answers as ``Ack`` rows),
every produce traced. Every ``--round`` produces (default 260, what 26,000 requests/s
make in the followers' 10 ms lag) both followers fetch every partition (``min_bytes``
1: at once, there is data) and the high watermark moves, completing the waiting
produces; both consumers long-poll (``min_bytes`` 16 KiB, 200 ms) and are answered as
data arrives, as in the simulation. The clock advances 1 ms every ``round / 10``
produces. The collector runs as in the simulation: each run is inside
:func:`purgatory_broker.sim.hooks.survivors_frozen`, which freezes what survives every
collection (before 2026-12-03 this script froze every 10 rounds instead, and its counts
were 2-3 % higher: BENCHMARKS.md).

Usage::

    python broker/benchmarks/broker_mix_bench.py [--requests 20000] [--repeat 5]
    valgrind --tool=callgrind python broker/benchmarks/broker_mix_bench.py --requests 0 --repeat 1
    valgrind --tool=callgrind python broker/benchmarks/broker_mix_bench.py \
        --requests 20000 --repeat 1

Instructions per produce = (second count - first count) / 20000: everything but the
set-up (imports, the broker's directories, the warm-up round).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import tempfile
import time
from pathlib import Path

from purgatory_broker.broker import Broker, DelayedFetch, FetchPartitionStatus
from purgatory_broker.broker.storage.records import next_offset
from purgatory_broker.sim import SimulationConfig
from purgatory_broker.sim.clients import Producer
from purgatory_broker.sim.hooks import survivors_frozen
from purgatory_broker.tracing import TraceWriter

from purgatory import TopicPartition
from purgatory.testing import ManualClock

TOPIC = "mix"
FOLLOWERS = (1, 2)


class Mix:
    """One broker with its followers' and consumers' positions, driven by hand."""

    def __init__(self, data_dir: Path, round_requests: int) -> None:
        self.config = SimulationConfig()
        self.clock = ManualClock()
        self.writer = TraceWriter()
        self.broker = Broker(data_dir, clock=self.clock, reaper_enabled=False, recorder=self.writer)
        self.tps = [TopicPartition(TOPIC, p) for p in range(self.config.partitions)]
        for tp in self.tps:
            self.broker.create_partition(
                tp, FOLLOWERS, min_insync_replicas=self.config.min_insync_replicas
            )
        self.producers = [
            Producer(self.broker, self.config, i, self.tps) for i in range(self.config.producers)
        ]
        self.follower_offsets = {rid: dict.fromkeys(self.tps, 0) for rid in FOLLOWERS}
        halves = (self.tps[0::2], self.tps[1::2])
        self.consumer_offsets = [dict.fromkeys(half, 0) for half in halves]
        self.consumer_ops = [self._consumer_fetch(i) for i in range(len(halves))]
        self.round_requests = round_requests
        self.tick_every = max(1, round_requests // 10)
        self.sent = 0

    def _consumer_fetch(self, i: int) -> DelayedFetch:
        cfg = self.config
        return self.broker.fetch(
            {
                tp: FetchPartitionStatus(offset, cfg.fetch_max_bytes)
                for tp, offset in self.consumer_offsets[i].items()
            },
            min_bytes=cfg.fetch_min_bytes,
            max_wait_ms=cfg.fetch_max_wait_ms,
        )

    def _follow(self, rid: int) -> None:
        offsets = self.follower_offsets[rid]
        op = self.broker.fetch(
            {tp: FetchPartitionStatus(offset) for tp, offset in offsets.items()},
            min_bytes=1,
            max_wait_ms=self.config.follower_max_wait_ms,
            replica_id=rid,
        )
        if not op.is_done:
            return
        for tp, data in op.result().items():
            if data.records:
                offset = next_offset(data.records)
                if offset is not None:
                    offsets[tp] = offset

    def _serve_consumers(self) -> None:
        for i, op in enumerate(self.consumer_ops):
            if op.is_done:
                for tp, data in op.result().items():
                    if data.records:
                        offset = next_offset(data.records)
                        if offset is not None:
                            self.consumer_offsets[i][tp] = offset
                self.consumer_ops[i] = self._consumer_fetch(i)

    def run(self, requests: int) -> None:
        """Send ``requests`` produces with their share of follower and consumer work."""
        producers = self.producers
        nproducers = len(producers)
        for _ in range(requests):
            producers[self.sent % nproducers].send()
            self.sent += 1
            if self.sent % self.tick_every == 0:
                self.clock.advance(1)
                self.broker.produce_purgatory.timer.poll()
                self.broker.fetch_purgatory.timer.poll()
            if self.sent % self.round_requests == 0:
                for rid in FOLLOWERS:
                    self._follow(rid)
                for rid in FOLLOWERS:  # the second fetch reports the new log ends
                    self._follow(rid)
                self._serve_consumers()


async def measure(requests: int, repeat: int, round_requests: int) -> list[float]:
    """ns per produce of each of ``repeat`` runs (a fresh broker each)."""
    results = []
    for _ in range(repeat):
        with survivors_frozen(), tempfile.TemporaryDirectory(prefix="purgatory-mix-") as tmp:
            mix = Mix(Path(tmp), round_requests)
            async with mix.broker:
                mix.run(round_requests)  # warm-up: one round
                gc.collect()
                start = time.perf_counter_ns()
                mix.run(requests)
                elapsed = time.perf_counter_ns() - start
                for producer in mix.producers:
                    producer.settle_all()
            results.append(elapsed / max(1, requests))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000, help="produces per run")
    parser.add_argument("--repeat", type=int, default=5, help="runs; the best is shown")
    parser.add_argument(
        "--round", type=int, default=260, help="produces per follower round (saturation: 260)"
    )
    args = parser.parse_args()
    runs = asyncio.run(measure(args.requests, args.repeat, args.round))
    if args.requests:
        shown = ", ".join(f"{ns / 1000:.2f}" for ns in runs)
        print(f"us per produce: best {min(runs) / 1000:.2f} (runs: {shown})")


if __name__ == "__main__":
    main()
