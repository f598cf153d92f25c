"""Command line: ``python -m purgatory.analytics {report,sweep,synthetic} ...``.

``report`` analyses traces into Parquet tables and one HTML page; ``sweep`` runs
a grid of timer configurations as Spark tasks; ``synthetic`` writes a made-up
trace to try the report on. Every command prints where its output went and
exits 0, or prints the problem and exits 2 (bad input) or 1 (failed sweep
configurations).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ._session import DEFAULT_MASTER
from ._spark_figures import DEFAULT_ACCURACY
from .figures import DEFAULT_WINDOW_MS

__all__ = ["main"]

_EPILOG_REPORT = """\
output:
  DIR/report.html            the report: open it in a browser (self-contained)
  DIR/tables/<figure>/       each figure as Parquet: row_checks, by_kind,
                             by_partition, windows, error_codes,
                             latency_histogram, lateness_histogram
The trace schema is purgatory.tracing.TRACE_COLUMNS.
"""

_EPILOG_SWEEP = """\
example:
  python -m purgatory.analytics sweep --grid tick_ms=1,5 wheel_size=20,64 \\
      --set mix=high operations=4000 --out sweep-out
settings of the default workload (purgatory.analytics.workload):
  tick_ms, wheel_size, operations, rate_per_s, timeout_ms, mix (low|high),
  p50_ms, p75_ms, seed, loop (asyncio|uvloop)
output:
  DIR/summaries.parquet      one row per configuration: settings and measurements
  DIR/sweep.html             ranking and charts per workload
"""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m purgatory.analytics",
        description="The purgatory data pipeline on Apache Spark: trace reports and sweeps.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def spark_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--master",
            default=None,
            metavar="URL",
            help=f"Spark master: {DEFAULT_MASTER} (default, every local core), local[N], "
            "spark://host:7077, yarn, ... Under spark-submit, omit it: the submitted one is used.",
        )
        sub.add_argument(
            "--driver-memory",
            default=None,
            metavar="SIZE",
            help="Spark driver memory, e.g. 2g (local mode runs everything in the driver); "
            "default: Spark's 1g",
        )
        sub.add_argument("--quiet", action="store_true", help="no progress lines on stderr")

    report = commands.add_parser(
        "report",
        help="analyse traces into Parquet tables and an HTML report",
        description="Analyse delayed-operation traces (Parquet) with Spark.",
        epilog=_EPILOG_REPORT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    report.add_argument(
        "traces", nargs="+", metavar="TRACE", help="Parquet trace files or folders of them"
    )
    report.add_argument(
        "--out", required=True, type=Path, metavar="DIR", help="output directory (created)"
    )
    report.add_argument(
        "--window-ms",
        type=_positive_int,
        default=DEFAULT_WINDOW_MS,
        metavar="N",
        help=f"size of the time windows over created_ms, in ms (default {DEFAULT_WINDOW_MS})",
    )
    report.add_argument(
        "--accuracy",
        type=_positive_int,
        default=DEFAULT_ACCURACY,
        metavar="A",
        help="percentile_approx accuracy: percentile ranks within n/A of exact "
        f"(default {DEFAULT_ACCURACY})",
    )
    report.add_argument(
        "--top-keys",
        type=_positive_int,
        default=20,
        metavar="K",
        help="how many of the busiest topic-partitions the report lists (default 20)",
    )
    report.add_argument(
        "--no-cache",
        dest="cache",
        action="store_false",
        help="re-read the Parquet for each figure instead of caching the valid rows "
        "(memory, spilling to disk) across the figure jobs",
    )
    spark_options(report)

    sweep = commands.add_parser(
        "sweep",
        help="run a grid of timer configurations as Spark tasks",
        description="Run every combination of a grid as one Spark task each and rank them.",
        epilog=_EPILOG_SWEEP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sweep.add_argument(
        "--grid",
        nargs="+",
        default=["tick_ms=1,5", "wheel_size=20,64"],
        metavar="NAME=V1,V2",
        help="settings to sweep, each with its values (default: tick_ms=1,5 wheel_size=20,64)",
    )
    sweep.add_argument(
        "--set",
        nargs="+",
        default=[],
        metavar="NAME=V",
        help="fixed settings for every configuration (e.g. mix=high rate_per_s=5000)",
    )
    sweep.add_argument(
        "--task",
        default="purgatory.analytics.workload:run_workload",
        metavar="MODULE:FUNCTION",
        help="the function each task runs, (config: dict) -> dict "
        "(default: purgatory.analytics.workload:run_workload)",
    )
    sweep.add_argument(
        "--out", required=True, type=Path, metavar="DIR", help="output directory (created)"
    )
    spark_options(sweep)

    synthetic = commands.add_parser(
        "synthetic",
        help="write a synthetic trace (made-up data) to try the report on",
        description="Write a SYNTHETIC trace: random operations with the trace schema.",
    )
    synthetic.add_argument("out", type=Path, metavar="DIR", help="folder for the Parquet files")
    synthetic.add_argument(
        "--rows", type=_positive_int, default=100_000, help="operations (default 100000)"
    )
    synthetic.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    synthetic.add_argument(
        "--rows-per-file",
        type=_positive_int,
        default=1_000_000,
        metavar="N",
        help="rows per Parquet file (default 1000000)",
    )
    return parser


def _report(args: argparse.Namespace) -> int:
    from ._session import build_session
    from ._trace import TraceSchemaError
    from .report import build_report

    try:
        spark = build_session(args.master, driver_memory=args.driver_memory)
        result = build_report(
            spark,
            args.traces,
            args.out,
            window_ms=args.window_ms,
            accuracy=args.accuracy,
            top_keys=args.top_keys,
            cache=args.cache,
            progress=not args.quiet,
        )
    except (TraceSchemaError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rows = result.rows
    print(f"report: {result.html}")
    print(f"tables: {result.html.parent / 'tables'}")
    print(
        f"{rows.total:,} operations, {rows.valid:,} valid, {rows.bad:,} excluded as impossible"
        f" ({result.elapsed_s:.1f} s)"
    )
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from ._session import build_session
    from .sweep import expand_grid, parse_assignments, run_sweep

    try:
        grid = parse_assignments(args.grid)
        fixed = {k: v[0] for k, v in parse_assignments(args.set).items()}
        overlap = sorted(set(grid) & set(fixed))
        if overlap:
            raise ValueError(f"set both in --grid and --set: {', '.join(overlap)}")
        configs = expand_grid(grid, fixed)
        spark = build_session(args.master, driver_memory=args.driver_memory)
        result = run_sweep(spark, configs, args.out, task=args.task, progress=not args.quiet)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"sweep: {result.html}")
    print(f"table: {result.parquet}")
    if result.failed:
        print(f"{result.failed} of {len(configs)} configurations failed", file=sys.stderr)
        return 1
    return 0


def _synthetic(args: argparse.Namespace) -> int:
    from .synthetic import write_synthetic_trace

    files = write_synthetic_trace(
        args.out, args.rows, seed=args.seed, rows_per_file=args.rows_per_file
    )
    print(f"synthetic trace: {args.out} ({len(files)} files, {args.rows:,} operations)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    handlers = {"report": _report, "sweep": _sweep, "synthetic": _synthetic}
    return handlers[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
