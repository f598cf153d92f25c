"""Command line: ``purgatory-broker-analytics {report,sweep,synthetic} ...`` (the console
script), or ``python -m purgatory_broker.analytics ...``.

``report`` analyses traces into Parquet tables and one HTML page; ``sweep`` runs
a grid of timer configurations as Spark tasks; ``synthetic`` writes a made-up
trace to try the report on. Every command prints where its output went and
exits 0, or prints the problem and exits 2 (bad input) or 1 (failed sweep
configurations).

:func:`main` leaves the process as it found it: the SIGINT handler,
``sys.unraisablehook`` and the logging it changes while a command runs are
installed by owners that put back what was there (:mod:`._hooks`), and what a
command raises becomes its line and exit status in one place (:func:`_failure`).
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from purgatory_broker.analytics._hooks import InterruptGuard, quiet_logging
from purgatory_broker.analytics._session import DEFAULT_MASTER, Progress
from purgatory_broker.analytics.figures import DEFAULT_WINDOW_MS
from purgatory_broker.analytics.report import DEFAULT_TOP_KEYS
from purgatory_broker.analytics.sweep import DEFAULT_GRID, DEFAULT_TASK
from purgatory_broker.cli import Parser, int_at_least, program_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from purgatory_broker.analytics._out import Output

__all__ = ["main"]

#: what ``python -m`` runs; the usage and error lines name the program as it was started
MODULE = "purgatory_broker.analytics"

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
  %(prog)s --grid tick_ms=1,5 wheel_size=20,64 \\
      --set mix=high operations=4000 --out sweep-out
settings of the default workload (purgatory_broker.analytics.workload):
  tick_ms, wheel_size, operations, rate_per_s, timeout_ms, mix (low|high),
  p50_ms, p75_ms, seed, loop (asyncio|uvloop)
output:
  DIR/summaries.parquet      one row per configuration: settings and measurements
  DIR/sweep.html             ranking and charts per workload
"""


#: an option of a command: its flags (a positional's name), then add_argument's keywords
_Option = tuple[tuple[str, ...], dict[str, Any]]

#: the options of the commands that start Spark, after their own
_SPARK_OPTIONS: tuple[_Option, ...] = (
    (
        ("--master",),
        {
            "metavar": "URL",
            "help": "Spark master: local[N], spark://host:7077, yarn, k8s://URL (default "
            f"{DEFAULT_MASTER}, every local core; under spark-submit, the submitted one)",
        },
    ),
    (
        ("--driver-memory",),
        {
            "metavar": "SIZE",
            "help": "Spark driver memory, e.g. 2g (local mode runs everything in the driver; "
            "default: Spark's 1g)",
        },
    ),
    (
        ("--conf",),
        {
            "action": "append",
            "default": [],
            "metavar": "KEY=VALUE",
            "help": "any Spark setting, repeatable, e.g. spark.pyspark.python=/usr/bin/python3 "
            "(the executors' Python on a cluster) or spark.executor.memory=2g (default: none)",
        },
    ),
    (
        ("--quiet",),
        {"action": "store_true", "help": "no progress lines on stderr (default: shown)"},
    ),
)

_REPORT_OPTIONS: tuple[_Option, ...] = (
    (
        ("traces",),
        {"nargs": "+", "metavar": "TRACE", "help": "Parquet trace files or folders of them"},
    ),
    (
        ("--out",),
        {
            "required": True,
            "metavar": "DIR|URL",
            "help": "output folder (created; required): a local path or file: URL, or any URL "
            "Spark writes to (hdfs://, s3a://); tables are written by Spark, report.html by "
            "the driver (through Hadoop's FileSystem for a URL)",
        },
    ),
    (
        ("--window-ms",),
        {
            "type": int_at_least(1),
            "default": DEFAULT_WINDOW_MS,
            "metavar": "N",
            "help": "size of the time windows over created_ms, in ms "
            f"(default {DEFAULT_WINDOW_MS})",
        },
    ),
    (
        ("--top-keys",),
        {
            "type": int_at_least(1),
            "default": DEFAULT_TOP_KEYS,
            "metavar": "K",
            "help": "how many of the busiest topic-partitions the report lists "
            f"(default {DEFAULT_TOP_KEYS})",
        },
    ),
    *_SPARK_OPTIONS,
)

#: the sweep's default grid as it is typed: tick_ms=1,5 wheel_size=20,64
_GRID = [f"{name}={','.join(map(str, values))}" for name, values in DEFAULT_GRID.items()]

_SWEEP_OPTIONS: tuple[_Option, ...] = (
    (
        ("--grid",),
        {
            "nargs": "+",
            "default": _GRID,
            "metavar": "NAME=V1,V2",
            "help": f"settings to sweep, each with its values (default: {' '.join(_GRID)})",
        },
    ),
    (
        ("--set",),
        {
            "nargs": "+",
            "default": [],
            "metavar": "NAME=V",
            "help": "fixed settings for every configuration, e.g. mix=high rate_per_s=5000 "
            "(default: none, the task's own defaults)",
        },
    ),
    (
        ("--task",),
        {
            "default": DEFAULT_TASK,
            "metavar": "MODULE:FUNCTION",
            "help": "the function each task runs, (config: dict) -> dict "
            f"(default: {DEFAULT_TASK})",
        },
    ),
    (
        ("--out",),
        {
            "required": True,
            "metavar": "DIR|URL",
            "help": "output folder (created; required): a local path, or a URL written through "
            "Hadoop's FileSystem (hdfs://, s3a://)",
        },
    ),
    *_SPARK_OPTIONS,
)

_SYNTHETIC_OPTIONS: tuple[_Option, ...] = (
    (
        ("out",),
        {
            "metavar": "DIR",
            "help": "folder for the Parquet files: new or empty (a folder holding files is "
            "refused, so old part files never mix with new ones)",
        },
    ),
    (
        ("--rows",),
        {"type": int_at_least(1), "default": 100_000, "help": "operations (default 100000)"},
    ),
    (("--seed",), {"type": int, "default": 0, "help": "random seed (default 0)"}),
    (
        ("--rows-per-file",),
        {
            "type": int_at_least(1),
            "default": 1_000_000,
            "metavar": "N",
            "help": "rows per Parquet file (default 1000000)",
        },
    ),
)


def _parser() -> argparse.ArgumentParser:
    parser = Parser(
        module=MODULE,
        description="The purgatory data pipeline on Apache Spark: trace reports and sweeps. "
        "Each command's options, with their defaults: %(prog)s COMMAND --help.",
        epilog=_EPILOG_MAIN,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in _COMMANDS.items():
        texts: dict[str, Any] = {"help": command.help, "description": command.description}
        if command.epilog is not None:
            texts |= {
                "epilog": command.epilog,
                "formatter_class": argparse.RawDescriptionHelpFormatter,
            }
        sub = commands.add_parser(name, **texts)
        for flags, keywords in command.options:
            # each parser its own default lists: a Namespace hands them out as they are
            sub.add_argument(*flags, **copy.deepcopy(keywords))
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


@dataclass(frozen=True)
class _Run:
    """What a command gets: its options, where Spark's log goes, the Ctrl-C guard."""

    args: argparse.Namespace
    jvm_log: Path  # the JVM's stderr; named in the line of a failure
    interrupts: InterruptGuard


#: local inputs up to this size count as small (see build_session's small_input)
SMALL_INPUT_BYTES = 64 * 2**20


def _start_spark(run: _Run, steps: Progress, small_input: bool = False) -> SparkSession:
    """Start Spark as the first stage; its log goes to ``run.jvm_log``."""
    from purgatory_broker.analytics._session import SparkStartError, build_session

    args = run.args
    where = args.master or ("spark-submit's master" if _submitted() else DEFAULT_MASTER)
    steps.announce(f"starting Spark ({where}) ...")
    try:
        with steps.stage("Spark started"):
            return build_session(
                args.master,
                driver_memory=args.driver_memory,
                conf=_conf(args.conf),
                jvm_log=run.jvm_log,
                small_input=small_input,
                class_archive=True,
            )
    except SparkStartError as exc:
        raise _RuntimeFailure(f"{exc} (Spark's log: {run.jvm_log})") from None
    finally:
        # a SparkContext that starts installs pyspark's SIGINT handler: the guard's again
        run.interrupts.claim()


def _submitted() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _checked_out(args: argparse.Namespace) -> Output:
    """The output of a Spark command, refused (ValueError) before the JVM starts
    when it or a Spark option is bad."""
    from purgatory_broker.analytics._out import Output
    from purgatory_broker.analytics._session import check_spark_options

    out = Output(args.out)
    check_spark_options(args.master, args.driver_memory)
    out.check()
    _conf(args.conf)
    return out


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


@contextmanager
def _discarded_on_failure(out: Output) -> Iterator[None]:
    """Remove what the body wrote under ``out`` if it raises (a Ctrl-C too)."""
    try:
        yield
    except BaseException:
        out.discard()
        raise


def _report(run: _Run) -> int:
    from purgatory_broker.analytics._trace import TraceSchemaError, check_local_trace

    args = run.args
    out = _checked_out(args)
    problems = check_local_trace(args.traces)
    if problems:
        raise _UsageError("; ".join(problems))
    _need_spark()
    from purgatory_broker.analytics.report import build_report

    steps = Progress("report", 6, enabled=not args.quiet)
    small = _local_bytes(args.traces) <= SMALL_INPUT_BYTES
    spark = _start_spark(run, steps, small_input=small)
    try:
        with _discarded_on_failure(out):
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
        raise _UsageError(str(exc)) from None
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


def _sweep_grid(args: argparse.Namespace) -> tuple[list[str], list[dict[str, Any]]]:
    """The swept settings and every configuration; bad input raises _UsageError."""
    from purgatory_broker.analytics.sweep import (
        check_settings,
        expand_grid,
        parse_assignments,
        resolve_task,
    )

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
    return list(grid), configs


def _sweep(run: _Run) -> int:
    from purgatory_broker.analytics._ship import ship
    from purgatory_broker.analytics.sweep import run_sweep

    args = run.args
    out = _checked_out(args)
    swept, configs = _sweep_grid(args)
    _need_spark()
    steps = Progress("sweep", 3, enabled=not args.quiet)
    spark = _start_spark(run, steps)
    with _discarded_on_failure(out):
        ship(spark.sparkContext, args.task.partition(":")[0] if ":" in args.task else None)
        result = run_sweep(
            spark,
            configs,
            out,
            task=args.task,
            progress=not args.quiet,
            first_stage=1,
            swept=swept,
        )
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


def _synthetic(run: _Run) -> int:
    from purgatory_broker.analytics._out import Output

    args = run.args
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
    with _discarded_on_failure(out):
        files = write_synthetic_trace(
            out.local, args.rows, seed=args.seed, rows_per_file=args.rows_per_file
        )
    print(f"synthetic trace: {args.out} ({len(files)} files, {args.rows:,} operations)")
    return 0


@dataclass(frozen=True)
class _Command:
    """A command: what runs it, its texts and its options."""

    run: Callable[[_Run], int]
    help: str
    description: str
    options: tuple[_Option, ...]
    epilog: str | None = None  # laid out by hand: printed as it is written


_COMMANDS = {
    "report": _Command(
        _report,
        help="analyse traces into Parquet tables and an HTML report",
        description="Analyse delayed-operation traces (Parquet) with Spark.",
        options=_REPORT_OPTIONS,
        epilog=_EPILOG_REPORT,
    ),
    "sweep": _Command(
        _sweep,
        help="run a grid of timer configurations as Spark tasks",
        description="Run every combination of a grid as one Spark task each and rank them.",
        options=_SWEEP_OPTIONS,
        epilog=_EPILOG_SWEEP,
    ),
    "synthetic": _Command(
        _synthetic,
        help="write a synthetic trace (made-up data) to try the report on",
        description="Write a SYNTHETIC trace: random operations with the trace schema.",
        options=_SYNTHETIC_OPTIONS,
    ),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Bad input: one line on stderr, status 2, nothing written. A failure at run
    time (Spark did not start, a job failed, sweep configurations failed): one
    line, status 1. Ctrl-C: ``interrupted``, status 130, no traceback. Spark's
    own log goes to a file named in those lines (kept only when something failed).
    The SIGINT handler, ``sys.unraisablehook`` and the logging it changes while
    it runs are put back when it returns or raises (:mod:`._hooks`).
    """
    import tempfile

    args = _parser().parse_args(argv)
    jvm_log = Path(tempfile.gettempdir()) / f"purgatory-analytics-spark-{os.getpid()}.log"
    with InterruptGuard() as interrupts, quiet_logging():
        try:
            status = _COMMANDS[args.command].run(_Run(args, jvm_log, interrupts))
        except KeyboardInterrupt:
            status = _fail("interrupted", 130)
        except Exception as exc:  # noqa: BLE001 - every failure: one line, not pages
            status = _fail(*_failure(exc, interrupted=interrupts.seen, jvm_log=jvm_log))
    if status == 0 and jvm_log.exists():
        jvm_log.unlink()
    return status


def _failure(exc: Exception, *, interrupted: bool, jvm_log: Path) -> tuple[str, int]:
    """What a command raised -> (its line, the exit status): the one place that maps them.

    Bad input is status 2 (a ValueError too, unless it is one of Spark's own); a
    failure after Ctrl-C is the interruption (130); any other failure is told
    by :func:`._failures.failure_line`, with status 1.
    """
    from purgatory_broker.analytics._failures import failure_line, is_spark_error

    if isinstance(exc, _UsageError) or (isinstance(exc, ValueError) and not is_spark_error(exc)):
        return str(exc), 2
    if isinstance(exc, ModuleNotFoundError):
        return _missing_extra(exc), 2
    if isinstance(exc, _RuntimeFailure):
        return str(exc), 1
    if interrupted:
        return "interrupted", 130
    where = f" (Spark's log: {jvm_log})" if jvm_log.exists() else ""
    return f"failed: {failure_line(exc)}{where}", 1


def _fail(message: str, status: int) -> int:
    """Print ``PROG: error: MESSAGE`` (the parser's own form); return ``status``."""
    print(f"{program_name(MODULE)}: error: {message}", file=sys.stderr, flush=True)
    return status


if __name__ == "__main__":
    # spark-submit runs this file as a script (no package): absolute imports only
    _status = main()
    if _status == 130:  # Ctrl-C: skip the exit handlers that talk to a dying JVM
        sys.stdout.flush()
        os._exit(_status)
    sys.exit(_status)
