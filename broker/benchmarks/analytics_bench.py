"""The trace report on 10 million operations: Spark (local mode) against pandas/pyarrow.

Usage::

    python broker/benchmarks/analytics_bench.py [--rows 10000000] [--trace DIR]
                                         [--master local[2]] [--driver-memory 2g]

1. Writes a SYNTHETIC trace of ``--rows`` operations (purgatory_broker.analytics.synthetic)
   to ``--trace`` (default: ``$TMPDIR/purgatory-bench-trace-<rows>``) unless a
   complete one is already there (``_COMPLETE`` marker), so reruns skip it.
2. In a child process: starts Spark, runs :func:`purgatory_broker.analytics.build_report`
   (every figure, Parquet tables, the HTML), and measures the report's wall
   time, the driver's peak RSS (``ru_maxrss``) and the JVM's peak RSS
   (``VmHWM`` of the java child, read from /proc just before stopping).
3. In another child process: the same figures computed exactly on one machine
   with pyarrow, numpy and pandas (:mod:`purgatory_broker.analytics.exact`), written
   as Parquet; measures wall time and peak RSS (``ru_maxrss``).
4. Prints both, with rows per second, and checks that the per-kind counts agree.

Each side runs in a fresh process so peak memory is its own. Bounded: about
four minutes on a 2-core machine for 10 million rows.

``--small TRACE [--before ROOT] [--repeat N]``: the report as a user runs it on a
small trace (the main job's ~30k rows), wall time including the JVM's start:
``python -m purgatory_broker.analytics report TRACE`` in a child process. With
``--before ROOT``, the same command from another checkout (its ``.venv``) runs
alternately with this one, N times each, so both see the same machine load.
Besides wall time it reports CPU time of the command and its JVM (on Linux the
benchmark adopts the JVM, which exits after the command, to count it): on a
shared machine CPU time moves less with the other sessions' load than wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _machine import cpu_model

DEFAULT_ROWS = 10_000_000


def _ru_maxrss_mib(who: int = resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # Linux reports KiB


def _java_children() -> list[int]:
    """PIDs of java processes whose parent is this process."""
    found = []
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = stat[stat.rindex(")") + 2 :].split()[1]
        if ppid == me and comm == "java":
            found.append(int(entry.name))
    return found


def _vm_hwm_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def ensure_trace(directory: Path, rows: int) -> float:
    """Write the synthetic trace unless complete; return seconds spent (0 if reused)."""
    from purgatory_broker.analytics import write_synthetic_trace

    marker = directory / "_COMPLETE"
    if marker.exists() and marker.read_text().strip() == str(rows):
        return 0.0
    start = time.perf_counter()
    for old in directory.glob("part-*.parquet"):
        old.unlink()
    write_synthetic_trace(directory, rows, seed=2024, rows_per_file=1_000_000)
    marker.write_text(str(rows))
    return time.perf_counter() - start


def run_spark(trace: Path, out: Path, master: str, driver_memory: str) -> dict[str, Any]:
    from purgatory_broker.analytics import build_report, build_session

    start = time.perf_counter()
    spark = build_session(master, driver_memory=driver_memory)
    started = time.perf_counter() - start
    result = build_report(spark, [trace], out)
    by_kind: Any = spark.read.parquet(str(result.tables["by_kind"])).toPandas()
    jvm = _java_children()
    jvm_peak = max((_vm_hwm_mib(pid) for pid in jvm), default=float("nan"))
    spark.stop()
    return {
        "session_start_s": started,
        "report_s": result.elapsed_s,
        "rows": result.rows.total,
        "driver_python_peak_mib": _ru_maxrss_mib(),
        "jvm_peak_mib": jvm_peak,
        "children_peak_mib": _ru_maxrss_mib(resource.RUSAGE_CHILDREN),
        "by_kind": by_kind[["purgatory", "kind", "operations", "expired", "latency_p99_ms"]]
        .astype({"operations": int, "expired": int})
        .to_dict("records"),
    }


def run_pandas(trace: Path, out: Path) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from purgatory_broker.analytics import exact

    start = time.perf_counter()
    table = exact.load_trace([trace])
    valid, check = exact.check_rows(table)
    del table
    figures = exact.figures(valid, window_ms=1_000)
    out.mkdir(parents=True, exist_ok=True)
    for name, frame in figures.items():
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), out / f"{name}.parquet")
    elapsed = time.perf_counter() - start
    by_kind = figures["by_kind"]
    return {
        "report_s": elapsed,
        "rows": check.total,
        "peak_mib": _ru_maxrss_mib(),
        "by_kind": by_kind[["purgatory", "kind", "operations", "expired", "latency_p99_ms"]]
        .astype({"operations": int, "expired": int})
        .to_dict("records"),
    }


def _child(args: list[str]) -> dict[str, Any]:
    process = subprocess.run(
        [sys.executable, __file__, *args], check=True, stdout=subprocess.PIPE, text=True
    )
    result: dict[str, Any] = json.loads(process.stdout.strip().splitlines()[-1])
    return result


def _become_subreaper() -> bool:
    """Linux: adopt orphaned descendants (the JVM outlives the CLI by its exit), so
    their CPU time reaches this process's children's rusage. False elsewhere."""
    import ctypes

    try:
        pr_set_child_subreaper = 36
        status: int = ctypes.CDLL(None).prctl(pr_set_child_subreaper, 1, 0, 0, 0)
    except (OSError, AttributeError):
        return False
    return status == 0


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed_report(python: str, root: Path, trace: Path, out: Path) -> tuple[float, float]:
    """Wall seconds of one CLI report (until the command returns), and the CPU
    seconds of the command and its JVM (once the JVM has exited; needs
    :func:`_become_subreaper`, else the JVM's CPU is missing)."""
    cpu_before = _children_cpu_s()
    start = time.perf_counter()
    subprocess.run(
        [
            python,
            "-m",
            "purgatory_broker.analytics",
            "report",
            str(trace),
            "--out",
            str(out),
            "--quiet",
        ],
        cwd=root,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - start
    while True:  # reap the JVM, which exits after the command
        try:
            os.wait4(-1, 0)
        except ChildProcessError:
            break
    return wall, _children_cpu_s() - cpu_before


def small(trace: Path, before: Path | None, repeat: int) -> None:
    """The small-trace report, alternating with ``before`` when given."""
    import pyarrow.parquet as pq

    here = Path(__file__).resolve().parents[1]
    sides = [("this checkout", sys.executable, here)]
    if before is not None:
        sides.insert(0, ("before", str(before / ".venv" / "bin" / "python"), before))
    results: dict[str, list[float]] = {name: [] for name, _, _ in sides}
    cpus: dict[str, list[float]] = {name: [] for name, _, _ in sides}
    with_jvm = _become_subreaper()
    with tempfile.TemporaryDirectory(prefix="purgatory-bench-small-") as tmp:
        for i in range(repeat):
            for name, python, root in sides:
                out = Path(tmp) / f"{name.replace(' ', '-')}-{i}"
                wall, cpu = _timed_report(python, root, trace, out)
                results[name].append(wall)
                cpus[name].append(cpu)
                print(f"{name} run {i + 1}: {wall:.1f} s wall, {cpu:.1f} s CPU", file=sys.stderr)
    rows = sum(pq.read_metadata(f).num_rows for f in ([trace] if trace.is_file() else []))
    print(f"machine: {os.cpu_count()} cores, {cpu_model()}, load {os.getloadavg()[0]:.1f}")
    print(f"trace: {trace} ({rows:,} rows), local[*], {repeat} runs each, alternating")
    print()
    cpu_what = "CPU s (CLI + JVM)" if with_jvm else "CPU s (CLI only)"
    print(f"| checkout | wall s, median (min-max) | {cpu_what}, median (min-max) |")
    print("|---|---:|---:|")
    for name, runs in results.items():
        walls, cpu_s = sorted(runs), sorted(cpus[name])
        print(
            f"| {name} | {walls[len(walls) // 2]:.1f} ({walls[0]:.1f}-{walls[-1]:.1f}) "
            f"| {cpu_s[len(cpu_s) // 2]:.1f} ({cpu_s[0]:.1f}-{cpu_s[-1]:.1f}) |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS, help="operations in the trace")
    parser.add_argument("--trace", type=Path, default=None, help="trace folder (reused)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--driver-memory", default="2g", help="Spark driver memory (default 2g)")
    parser.add_argument(
        "--small", type=Path, default=None, metavar="TRACE", help="time the CLI on this trace"
    )
    parser.add_argument(
        "--before", type=Path, default=None, metavar="ROOT", help="with --small: compare"
    )
    parser.add_argument("--repeat", type=int, default=3, help="with --small: runs (default 3)")
    parser.add_argument("--child", choices=["spark", "pandas"], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.small is not None:
        small(args.small, args.before, args.repeat)
        return
    trace = args.trace or Path(tempfile.gettempdir()) / f"purgatory-bench-trace-{args.rows}"

    if args.child == "spark":
        result = run_spark(trace, args.out, args.master, args.driver_memory)
        print(json.dumps(result))
        return
    if args.child == "pandas":
        print(json.dumps(run_pandas(trace, args.out)))
        return

    trace.mkdir(parents=True, exist_ok=True)
    generated = ensure_trace(trace, args.rows)
    size_mib = sum(f.stat().st_size for f in trace.glob("*.parquet")) / 2**20
    print(
        f"trace: {trace} ({args.rows:,} operations, {size_mib:.0f} MiB"
        + (f", generated in {generated:.1f} s)" if generated else ", reused)"),
        file=sys.stderr,
    )
    with tempfile.TemporaryDirectory(prefix="purgatory-bench-") as tmp:
        spark_args = ["--child", "spark", "--trace", str(trace), "--out", f"{tmp}/spark"]
        spark_args += ["--master", args.master, "--driver-memory", args.driver_memory]
        spark = _child(spark_args)
        pandas = _child(["--child", "pandas", "--trace", str(trace), "--out", f"{tmp}/pandas"])

    agree = all(
        (s["purgatory"], s["kind"], s["operations"], s["expired"])
        == (p["purgatory"], p["kind"], p["operations"], p["expired"])
        for s, p in zip(spark["by_kind"], pandas["by_kind"], strict=True)
    )
    rows = spark["rows"]
    print(f"machine: {os.cpu_count()} cores, {cpu_model()}, Python {platform.python_version()}")
    print(f"trace: {rows:,} operations, {size_mib:.0f} MiB of Parquet")
    print()
    print("| engine | wall s | rows/s | peak memory |")
    print("|---|---:|---:|---|")
    print(
        f"| Spark {args.master}, driver memory {args.driver_memory} | {spark['report_s']:.1f} "
        f"(+{spark['session_start_s']:.1f} start) | {rows / spark['report_s']:,.0f} | "
        f"JVM {spark['jvm_peak_mib']:,.0f} MiB + driver Python "
        f"{spark['driver_python_peak_mib']:,.0f} MiB |"
    )
    print(
        f"| pandas + pyarrow, exact, 1 process | {pandas['report_s']:.1f} | "
        f"{rows / pandas['report_s']:,.0f} | {pandas['peak_mib']:,.0f} MiB |"
    )
    print()
    print(f"per-kind operations and expirations agree: {agree}")
    for s, p in zip(spark["by_kind"], pandas["by_kind"], strict=True):
        print(
            f"  {s['purgatory']}/{s['kind']}: latency p99 Spark {s['latency_p99_ms']} ms, "
            f"exact {p['latency_p99_ms']} ms"
        )
    if not agree:
        sys.exit(1)


if __name__ == "__main__":
    main()
