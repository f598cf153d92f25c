"""The partition log's cost per append and per read: write-through, verified reads.

Appends: ``PartitionLog.append`` in a loop, one batch per call, for three batch
sizes (one 100-byte record, five, 160), into one segment (no rolls), timed with
``perf_counter`` with the garbage collector off; the best of ``--repeat`` runs
(the machine is shared: the minimum is the figure least inflated by other load).
Reads: ``PartitionLog.read`` of the newest batch (a reader at the tail) and of
1 MiB from the middle of an older, rolled segment (a reader catching up).
``--fsync`` adds a row with ``flush_messages=1`` (an fsync per append, where the
installed version has a flush policy).

The script uses only the public ``PartitionLog`` API, so it runs against an
older checkout too: ``PYTHONPATH=/path/to/old/tree python broker/benchmarks/log_bench.py``
(that is how BENCHMARKS.md compares before and after).

Run: ``python broker/benchmarks/log_bench.py`` (``--help`` for the options); ~20 s.
"""

from __future__ import annotations

import argparse
import gc
import platform
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _machine import cpu_model
from purgatory_broker.broker import PartitionLog, build_batch

import purgatory

RECORD_BYTES = 100


def batch_of(records: int) -> bytes:
    return build_batch([b"r" * RECORD_BYTES] * records, base_timestamp_ms=0)


def best_us(run: Callable[[], int], repeat: int) -> float:
    """The minimum over ``repeat`` runs of (seconds / operations), in microseconds."""
    results = []
    for _ in range(repeat):
        gc.disable()
        try:
            started = time.perf_counter()
            ops = run()
            elapsed = time.perf_counter() - started
        finally:
            gc.enable()
        results.append(elapsed / ops * 1e6)
    return min(results)


def bench_appends(directory: Path, records: int, appends: int, repeat: int, **log: Any) -> float:
    data = batch_of(records)
    runs = iter(range(repeat))

    def run() -> int:
        with PartitionLog(directory / f"append-{records}-{next(runs)}", **log) as plog:
            append = plog.append
            for _ in range(appends):
                append(data)
        return appends

    return best_us(run, repeat)


def bench_reads(directory: Path, reads: int, repeat: int) -> tuple[float, float]:
    """(tail read of one batch, 1 MiB read from a rolled segment), us per read."""
    data = batch_of(5)
    with PartitionLog(directory / "reads", segment_bytes=8 << 20) as plog:
        while plog.segment_count < 3:
            plog.append(data)
        tail = plog.log_end_offset - 1
        middle = plog.segments[0].next_offset // 2

        def tail_reads() -> int:
            for _ in range(reads):
                plog.read(tail, 1 << 20)
            return reads

        def catch_up_reads() -> int:
            n = max(1, reads // 50)
            for _ in range(n):
                plog.read(middle, 1 << 20)
            return n

        return best_us(tail_reads, repeat), best_us(catch_up_reads, repeat)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--appends", type=int, default=50_000, help="appends per run")
    p.add_argument("--reads", type=int, default=20_000, help="tail reads per run")
    p.add_argument("--repeat", type=int, default=7, help="runs per figure (the best)")
    p.add_argument("--fsync", action="store_true", help="also flush_messages=1")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    print(f"purgatory from {Path(purgatory.__file__).parent}")
    print(f"{cpu_model()}, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="log-bench-") as tmp:
        directory = Path(tmp)
        print(f"{'operation':<44} {'us/op':>8}")
        for records in (1, 5, 160):
            size = len(batch_of(records))
            us = bench_appends(directory, records, args.appends, args.repeat)
            print(f"{f'append, {records} records ({size} bytes)':<44} {us:8.2f}")
        if args.fsync:
            us = bench_appends(
                directory, 5, max(1, args.appends // 50), args.repeat, flush_messages=1
            )
            print(f"{'append + fsync (flush_messages=1), 5 records':<44} {us:8.2f}")
        tail_us, catch_up_us = bench_reads(directory, args.reads, args.repeat)
        print(f"{'read at the tail (one 606-byte batch)':<44} {tail_us:8.2f}")
        print(f"{'read 1 MiB from a rolled segment':<44} {catch_up_us:8.2f}")


if __name__ == "__main__":
    main()
