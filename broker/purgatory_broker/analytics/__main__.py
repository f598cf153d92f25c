"""Command line: ``python -m purgatory_broker.analytics {report,sweep,synthetic} ...``.

``report`` analyses traces into Parquet tables and one HTML page; ``sweep`` runs
a grid of timer configurations as Spark tasks; ``synthetic`` writes a made-up
trace to try the report on. Every command prints where its output went and
exits 0, or prints the problem and exits 2 (bad input) or 1 (failed sweep
configurations).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from purgatory_broker.analytics._session import DEFAULT_MASTER, Progress
from purgatory_broker.analytics.figures import DEFAULT_WINDOW_MS
from purgatory_broker.cli import Parser, int_at_least

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["main"]

_EPILOG_MAIN = """\
commands:
  report     analyse traces into Parquet tables and an HTML report (report --help)
  sweep      run a grid of timer configurations as Spark tasks (sweep --help)
  synthetic  write a synthetic trace to try the report on (synthetic --help)
exit status: 0 done; 2 bad input (one line on stderr, nothing written);
1 failed at run time (Spark did not start, a job or a configuration failed);
130 interrupted. Spark's own log goes to a temporary file, named when a run fails.
on a cluster (--master spark://HOST:PORT, or under spark-submit) the pipeline
ships its own code to the executors; choose their Python with
--conf spark.pyspark.python=PATH (default: the workers' python3).
"""

_EPILOG_REPORT = """\
output:
  DIR/report.html            the report: open it in a browser (self-contained)
  DIR/tables/<figure>/       each figure as Parquet: row_checks, by_kind,
                             by_partition, windows, error_codes,
                             latency_histogram, lateness_histogram
The trace schema is purgatory_broker.tracing.TRACE_COLUMNS.
"""

_EPILOG_SWEEP = """\
example:
  python -m purgatory_broker.analytics sweep --grid tick_ms=1,5 wheel_size=20,64 \\
      --set mix=high operations=4000 --out sweep-out
settings of the default workload (purgatory_broker.analytics.workload):
  tick_ms, wheel_size, operations, rate_per_s, timeout_ms, mix (low|high),
  p50_ms, p75_ms, seed, loop (asyncio|uvloop)
output:
  DIR/summaries.parquet      one row per configuration: settings and measurements
  DIR/sweep.html             ranking and charts per workload
"""


def _parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m purgatory_broker.analytics",
        description="The purgatory data pipeline on Apache Spark: trace reports and sweeps. "
        "Each command's options, with their defaults: python -m purgatory_broker.analytics "
        "COMMAND --help.",
        epilog=_EPILOG_MAIN,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def spark_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--master",
            default=None,
            metavar="URL",
            help=f"Spark master: local[N], spark://host:7077, yarn, k8s://URL (default "
            f"{DEFAULT_MASTER}, every local core; under spark-submit, the submitted one)",
        )
        sub.add_argument(
            "--driver-memory",
            default=None,
            metavar="SIZE",
            help="Spark driver memory, e.g. 2g (local mode runs everything in the driver; "
            "default: Spark's 1g)",
        )
        sub.add_argument(
            "--conf",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="any Spark setting, repeatable, e.g. spark.pyspark.python=/usr/bin/python3 "
            "(the executors' Python on a cluster) or spark.executor.memory=2g (default: none)",
        )
        sub.add_argument(
            "--quiet", action="store_true", help="no progress lines on stderr (default: shown)"
        )

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
        "--out",
        required=True,
        metavar="DIR|URL",
        help="output folder (created; required): a local path or file: URL, or any URL "
        "Spark writes to (hdfs://, s3a://); tables are written by Spark, report.html by "
        "the driver (through Hadoop's FileSystem for a URL)",
    )
    report.add_argument(
        "--window-ms",
        type=int_at_least(1),
        default=DEFAULT_WINDOW_MS,
        metavar="N",
        help=f"size of the time windows over created_ms, in ms (default {DEFAULT_WINDOW_MS})",
    )
    report.add_argument(
        "--top-keys",
        type=int_at_least(1),
        default=20,
        metavar="K",
        help="how many of the busiest topic-partitions the report lists (default 20)",
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
        help="fixed settings for every configuration, e.g. mix=high rate_per_s=5000 "
        "(default: none, the task's own defaults)",
    )
    sweep.add_argument(
        "--task",
        default="purgatory_broker.analytics.workload:run_workload",
        metavar="MODULE:FUNCTION",
        help="the function each task runs, (config: dict) -> dict "
        "(default: purgatory_broker.analytics.workload:run_workload)",
    )
    sweep.add_argument(
        "--out",
        required=True,
        metavar="DIR|URL",
        help="output folder (created; required): a local path, or a URL written through "
        "Hadoop's FileSystem (hdfs://, s3a://)",
    )
    spark_options(sweep)

    synthetic = commands.add_parser(
        "synthetic",
        help="write a synthetic trace (made-up data) to try the report on",
        description="Write a SYNTHETIC trace: random operations with the trace schema.",
    )
    synthetic.add_argument(
        "out",
        metavar="DIR",
        help="folder for the Parquet files: new or empty (a folder holding files is "
        "refused, so old part files never mix with new ones)",
    )
    synthetic.add_argument(
        "--rows", type=int_at_least(1), default=100_000, help="operations (default 100000)"
    )
    synthetic.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    synthetic.add_argument(
        "--rows-per-file",
        type=int_at_least(1),
        default=1_000_000,
        metavar="N",
        help="rows per Parquet file (default 1000000)",
    )
    return parser


#: a missing module -> the extra that installs it
_EXTRAS = {
    "pyspark": "spark",
    "py4j": "spark",
    "pandas": "spark",
    "pyarrow": "spark",
    "numpy": "spark",
    "kafka": "kafka",
    "crc32c": "sim",
    "uvloop": "uvloop",
}


class _UsageError(Exception):
    """Bad input: exit 2 with the message."""


class _RuntimeFailure(Exception):
    """The work failed: exit 1 with the message."""


def _missing_extra(exc: ModuleNotFoundError) -> str:
    top = (exc.name or "").partition(".")[0]
    extra = _EXTRAS.get(top)
    if extra is None:
        return f"missing module {exc.name!r}: {exc}"
    return f"missing module {top!r}: install purgatory-broker[{extra}]"


def _need_spark() -> None:
    """Import the spark extra's packages now, to name a missing one before any work."""
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401


def _conf(items: Sequence[str]) -> dict[str, str]:
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise _UsageError(f"--conf expects KEY=VALUE, got {item!r}")
        conf[key.strip()] = value
    return conf


#: local inputs up to this size count as small (see build_session's small_input)
SMALL_INPUT_BYTES = 64 * 2**20


def _start_spark(
    args: argparse.Namespace, steps: Progress, jvm_log: Path, small_input: bool = False
) -> SparkSession:
    """Start Spark as the first stage; its log goes to ``jvm_log``."""
    from purgatory_broker.analytics._session import SparkStartError, build_session

    where = args.master or ("spark-submit's master" if _submitted() else DEFAULT_MASTER)
    steps.announce(f"starting Spark ({where}) ...")
    try:
        with steps.stage("Spark started"):
            return build_session(
                args.master,
                driver_memory=args.driver_memory,
                conf=_conf(args.conf),
                jvm_log=jvm_log,
                small_input=small_input,
                class_archive=True,
            )
    except SparkStartError as exc:
        raise _RuntimeFailure(f"{exc} (Spark's log: {jvm_log})") from None
    finally:
        # pyspark's own SIGINT handler cancels jobs through a gateway the JVM (which
        # got the same Ctrl-C) is closing, and fails noisily: ours only stops
        _handle_interrupts()


class _Interrupted:
    """Whether Ctrl-C arrived (a failure after it is the interruption, not a bug)."""

    seen = False


def _interrupted(signum: int, frame: object) -> None:
    _Interrupted.seen = True
    raise KeyboardInterrupt


def _handle_interrupts() -> None:
    """Stop on Ctrl-C, even when it lands inside a finalizer.

    Python cannot raise out of a finalizer (a weakref callback or ``__del__``,
    which py4j uses to free Java objects): a KeyboardInterrupt raised there goes
    to ``sys.unraisablehook``, which prints "Exception ignored" and drops it, and
    the run would go on to exit 0. The hook installed here drops only that
    message and has a new thread signal the main thread again. The signal is
    handled once that thread gets the interpreter, by then outside the finalizer
    (should it land in another one, this repeats). Signalling from the hook
    itself would not do: its handler would run at once, still inside. Other
    unraisable exceptions go to the hook that was there before.
    """
    import _thread

    signal.signal(signal.SIGINT, _interrupted)
    previous = sys.unraisablehook

    def raise_again(unraisable: sys.UnraisableHookArgs) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            # not threading.Thread: its start() waits for the thread, inside the hook
            _thread.start_new_thread(_thread.interrupt_main, (signal.SIGINT,))
        else:
            previous(unraisable)

    sys.unraisablehook = raise_again


def _submitted() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _spark_failure(exc: BaseException) -> str:
    """One line for a failed Spark job: the Python or Java exception behind it."""
    import re

    text = str(exc)
    python_lines = re.findall(r"^\s*([A-Za-z_.]*(?:Error|Exception): .+)$", text, re.MULTILINE)
    meaningful = [
        line.strip()
        for line in python_lines
        if not line.strip().startswith(("py4j.", "org.apache.spark.SparkException: Job aborted"))
    ]
    if meaningful:
        return str(meaningful[-1] if "Traceback" in text else meaningful[0])
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def _finish(spark: SparkSession, quiet: bool) -> None:
    """End the run: on a first run, let the JVM save its class archive (see ``_cds``)."""
    import time

    from purgatory_broker.analytics._session import stop_session

    start = time.perf_counter()
    saved = stop_session(spark)
    if saved is not None and not quiet:
        print(
            f"saved Java's class archive for faster starts ({time.perf_counter() - start:.1f} s):"
            f" {saved}",
            file=sys.stderr,
            flush=True,
        )


def _report(args: argparse.Namespace, jvm_log: Path) -> int:
    from purgatory_broker.analytics._out import Output
    from purgatory_broker.analytics._session import check_spark_options
    from purgatory_broker.analytics._trace import TraceSchemaError, check_local_trace

    out = Output(args.out)
    check_spark_options(args.master, args.driver_memory)
    out.check()
    _conf(args.conf)
    problems = check_local_trace(args.traces)
    if problems:
        raise _UsageError("; ".join(problems))
    _need_spark()
    from purgatory_broker.analytics.report import build_report

    steps = Progress("report", 6, enabled=not args.quiet)
    small = _local_bytes(args.traces) <= SMALL_INPUT_BYTES
    spark = _start_spark(args, steps, jvm_log, small_input=small)
    try:
        result = build_report(
            spark,
            args.traces,
            out,
            window_ms=args.window_ms,
            top_keys=args.top_keys,
            progress=not args.quiet,
            first_stage=1,
        )
    except TraceSchemaError as exc:
        out.discard()
        raise _UsageError(str(exc)) from None
    except BaseException:
        out.discard()
        raise
    rows = result.rows
    print(f"report: {result.html}")
    print(f"tables: {out.url('tables')}")
    print(
        f"{rows.total:,} operations, {rows.valid:,} valid, {rows.bad:,} excluded as impossible"
        f" ({result.elapsed_s:.1f} s)"
    )
    _finish(spark, args.quiet)
    return 0


def _local_bytes(traces: Sequence[str]) -> float:
    """Bytes of the local trace files; infinite when a URL is among them."""
    from purgatory_broker.analytics._trace import trace_files

    if any("://" in t and not t.startswith("file:") for t in traces):
        return float("inf")
    return float(sum(f.stat().st_size for t in traces for f in trace_files(Path(t))))


def _sweep(args: argparse.Namespace, jvm_log: Path) -> int:
    from purgatory_broker.analytics._out import Output
    from purgatory_broker.analytics._session import check_spark_options
    from purgatory_broker.analytics._ship import ship
    from purgatory_broker.analytics.sweep import (
        check_settings,
        expand_grid,
        parse_assignments,
        resolve_task,
        run_sweep,
    )

    out = Output(args.out)
    check_spark_options(args.master, args.driver_memory)
    out.check()
    _conf(args.conf)
    try:
        grid = parse_assignments(args.grid)
        fixed = {k: v[0] for k, v in parse_assignments(args.set).items()}
        overlap = sorted(set(grid) & set(fixed))
        if overlap:
            raise ValueError(f"set both in --grid and --set: {', '.join(overlap)}")
        configs = expand_grid(grid, fixed)
        check_settings(resolve_task(args.task), [*grid, *fixed], args.task)
    except ValueError as exc:
        raise _UsageError(str(exc)) from None
    _need_spark()
    steps = Progress("sweep", 3, enabled=not args.quiet)
    spark = _start_spark(args, steps, jvm_log)
    try:
        ship(spark.sparkContext, args.task.partition(":")[0] if ":" in args.task else None)
        result = run_sweep(
            spark,
            configs,
            out,
            task=args.task,
            progress=not args.quiet,
            first_stage=1,
            swept=list(grid),
        )
    except BaseException:
        out.discard()
        raise
    print(f"sweep: {result.html}")
    print(f"table: {result.parquet}")
    if result.failed:
        raise _RuntimeFailure(
            f"{result.failed} of {len(configs)} configurations failed: "
            + "; ".join(
                f"{reason} ({count} configuration{'s' if count > 1 else ''})"
                for reason, count in result.failures.items()
            )
        )
    _finish(spark, args.quiet)
    return 0


def _synthetic(args: argparse.Namespace, jvm_log: Path) -> int:
    from purgatory_broker.analytics._out import Output

    out = Output(args.out)
    if out.local is None:
        raise _UsageError(f"synthetic writes a local folder, not {args.out}")
    out.check(must_be_empty=True)
    try:
        import numpy  # noqa: F401
        import pyarrow  # noqa: F401
    except ModuleNotFoundError as exc:
        raise _UsageError(_missing_extra(exc)) from None
    from purgatory_broker.analytics.synthetic import write_synthetic_trace

    out.create()
    try:
        files = write_synthetic_trace(
            out.local, args.rows, seed=args.seed, rows_per_file=args.rows_per_file
        )
    except BaseException:
        out.discard()
        raise
    print(f"synthetic trace: {args.out} ({len(files)} files, {args.rows:,} operations)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Bad input: one line on stderr, status 2, nothing written. A failure at run
    time (Spark did not start, a job failed, sweep configurations failed): one
    line, status 1. Ctrl-C: ``interrupted``, status 130, no traceback. Spark's
    own log goes to a file named in those lines (kept only when something failed).
    """
    import logging
    import tempfile

    args = _parser().parse_args(argv)
    handlers = {"report": _report, "sweep": _sweep, "synthetic": _synthetic}
    # py4j logs (and logging.exception()s on the root logger) what we tell in one line
    logging.getLogger("py4j").setLevel(logging.CRITICAL + 1)
    logging.getLogger().addHandler(logging.NullHandler())
    jvm_log = Path(tempfile.gettempdir()) / f"purgatory-analytics-spark-{os.getpid()}.log"
    status = 1
    try:
        status = handlers[args.command](args, jvm_log)
    except _UsageError as exc:
        status = _fail(str(exc), 2)
    except ValueError as exc:
        status = _fail(str(exc), 2)
    except ModuleNotFoundError as exc:
        status = _fail(_missing_extra(exc), 2)
    except _RuntimeFailure as exc:
        status = _fail(str(exc), 1)
    except KeyboardInterrupt:
        status = _fail("interrupted", 130)
    except Exception as exc:  # noqa: BLE001 - a Spark or I/O failure: one line, not pages
        if _Interrupted.seen:
            return _fail("interrupted", 130)
        where = f" (Spark's log: {jvm_log})" if jvm_log.exists() else ""
        status = _fail(f"failed: {_spark_failure(exc)}{where}", 1)
    if status == 0 and jvm_log.exists():
        jvm_log.unlink()
    return status


def _fail(message: str, status: int) -> int:
    print(f"error: {message}", file=sys.stderr, flush=True)
    return status


if __name__ == "__main__":
    # spark-submit runs this file as a script (no package): absolute imports only
    _status = main()
    if _status == 130:  # Ctrl-C: skip the exit handlers that talk to a dying JVM
        sys.stdout.flush()
        os._exit(_status)
    sys.exit(_status)
