"""Run the broker simulation: producers, consumers and followers around the purgatory.

    python examples/simulate.py                  # the default run, about 20 s
    python examples/simulate.py --duration 5 --quiet --trace out/short.parquet

Prints a live progress bar on stderr (when it is a terminal), then a summary
table; writes the trace of every delayed operation as Parquet; reads every
acknowledged record back from the reopened logs and exits with status 1, loudly,
if one is missing, changed or out of order. See
:mod:`purgatory.broker.simulation` for what runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from purgatory.broker.simulation import SimulationConfig, format_summary, run

_D = SimulationConfig()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=(
            "Simulate a Kafka broker's produce and fetch purgatories: producers with "
            "exponential arrivals (acks=-1), long-polling consumers, followers "
            "replicating with lag, one follower stalling and recovering (the ISR "
            "shrinks and grows), one leadership change. Ends with a summary table, "
            "a Parquet trace and a read-back check of every acknowledged record."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    a = p.add_argument
    a("--seed", type=int, default=_D.seed, help="random seed for arrivals and partition choice")
    a("--duration", type=float, default=_D.duration_s, help="seconds of load (real time)")
    a("--partitions", type=int, default=_D.partitions, help="partitions of topic 'sim'")
    a("--followers", type=int, default=_D.followers, help="simulated followers per partition")
    a("--min-isr", type=int, default=_D.min_insync_replicas, help="min.insync.replicas")
    a(
        "--produce-rate",
        type=float,
        default=_D.produce_rate,
        help="produce requests per second, all producers together (Poisson arrivals)",
    )
    a("--producers", type=int, default=_D.producers, help="producer tasks")
    a(
        "--records-per-batch",
        type=int,
        default=_D.records_per_batch,
        help="records in each produce request's batch",
    )
    a("--record-bytes", type=int, default=_D.record_bytes, help="bytes per record value")
    a(
        "--produce-timeout-ms",
        type=int,
        default=_D.produce_timeout_ms,
        help="DelayedProduce timeout (acks=-1)",
    )
    a("--consumers", type=int, default=_D.consumers, help="consumer tasks (partitions split)")
    a("--fetch-min-bytes", type=int, default=_D.fetch_min_bytes, help="consumer fetch min_bytes")
    a(
        "--fetch-max-wait-ms",
        type=int,
        default=_D.fetch_max_wait_ms,
        help="consumer fetch max_wait_ms (DelayedFetch timeout)",
    )
    a(
        "--fetch-max-bytes",
        type=int,
        default=_D.fetch_max_bytes,
        help="per-partition max bytes of every fetch",
    )
    a(
        "--follower-lag-ms",
        type=int,
        default=_D.follower_lag_ms,
        help="pause of each follower between two fetches (replication lag)",
    )
    a(
        "--follower-max-wait-ms",
        type=int,
        default=_D.follower_max_wait_ms,
        help="follower fetch max_wait_ms",
    )
    a(
        "--replica-lag-time-max-ms",
        type=int,
        default=_D.replica_lag_time_max_ms,
        help="a follower not caught up for this long leaves the ISR",
    )
    a(
        "--stall-at",
        type=float,
        default=_D.stall_at,
        help="when the last follower stalls, as a fraction of the run (negative: never)",
    )
    a("--stall-ms", type=int, default=_D.stall_ms, help="how long the stall lasts")
    a(
        "--leader-change-at",
        type=float,
        default=_D.leader_change_at,
        help="when partition 0 loses leadership, as a fraction of the run (negative: never)",
    )
    a(
        "--leader-change-ms",
        type=int,
        default=_D.leader_change_ms,
        help="how long until it leads again (new leader epoch)",
    )
    a("--tick-ms", type=int, default=_D.tick_ms, help="timing wheel tick of both purgatories")
    a("--wheel-size", type=int, default=_D.wheel_size, help="buckets per timing wheel level")
    a(
        "--flush-messages",
        type=int,
        default=_D.flush_messages,
        help="fsync a partition's log after this many records (Kafka's flush.messages; "
        "default: never, appends still reach the OS before they are acknowledged)",
    )
    a(
        "--flush-ms",
        type=int,
        default=_D.flush_ms,
        help="fsync a partition's log this long after its first unflushed write "
        "(Kafka's flush.ms; default: never)",
    )
    a(
        "--uvloop",
        action=argparse.BooleanOptionalAction,
        default=_D.use_uvloop,
        help="run on uvloop when it is installed",
    )
    a(
        "--data-dir",
        default=None,
        help="directory for the partition logs (must be empty; default: a temporary "
        "directory removed at the end)",
    )
    a("--trace", default=_D.trace_path, help="Parquet trace of every delayed operation")
    a("--no-trace", action="store_true", help="do not write the trace")
    a("--quiet", action="store_true", help="no progress bar")
    return p.parse_args(argv)


def config_from(args: argparse.Namespace) -> SimulationConfig:
    return SimulationConfig(
        seed=args.seed,
        duration_s=args.duration,
        partitions=args.partitions,
        followers=args.followers,
        min_insync_replicas=args.min_isr,
        produce_rate=args.produce_rate,
        producers=args.producers,
        records_per_batch=args.records_per_batch,
        record_bytes=args.record_bytes,
        produce_timeout_ms=args.produce_timeout_ms,
        consumers=args.consumers,
        fetch_min_bytes=args.fetch_min_bytes,
        fetch_max_wait_ms=args.fetch_max_wait_ms,
        fetch_max_bytes=args.fetch_max_bytes,
        follower_lag_ms=args.follower_lag_ms,
        follower_max_wait_ms=args.follower_max_wait_ms,
        replica_lag_time_max_ms=args.replica_lag_time_max_ms,
        stall_at=args.stall_at,
        stall_ms=args.stall_ms,
        leader_change_at=args.leader_change_at,
        leader_change_ms=args.leader_change_ms,
        tick_ms=args.tick_ms,
        wheel_size=args.wheel_size,
        flush_messages=args.flush_messages,
        flush_ms=args.flush_ms,
        use_uvloop=args.uvloop,
        data_dir=args.data_dir,
        trace_path=None if args.no_trace else args.trace,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        config = config_from(args)
        config.validate()
    except ValueError as exc:
        print(f"simulate: {exc}", file=sys.stderr)
        return 2
    show_bar = not args.quiet and sys.stderr.isatty()
    summary = run(config, out=sys.stderr if show_bar else None)
    print(format_summary(summary))
    if summary["trace_path"]:
        print(f"\ntrace: {summary['trace_rows']} delayed operations -> {summary['trace_path']}")
    if not summary["read_back_ok"]:
        print(
            f"\nFAILED: read-back found {summary['read_back_records']} of "
            f"{summary['acked_records']} acknowledged records; problems:",
            file=sys.stderr,
        )
        for problem in summary["read_back_problems"]:
            print(f"  {problem}", file=sys.stderr)
        return 1
    print(
        f"read-back OK: all {summary['acked_records']} acknowledged records are in the logs, "
        "at their offsets, in order"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
