"""The trace report: read, check, aggregate with Spark, write Parquet and one HTML page.

:func:`build_report` runs these stages, printing a progress line after each:

1. read the trace (Parquet files or folders): local inputs are checked on the
   driver (:func:`._trace.check_local_trace`, footers only) and read with the
   trace's schema given, so no Spark job runs here;
2. count impossible rows per reason in one job, which also fills the cache:
   the trace's rows are persisted (memory, spilling to disk) as that job reads
   them, so the Parquet is read once for the whole report;
3. to 8. each figure of :mod:`.figures` (per kind, per partition, time windows,
   error codes, latency and lateness histograms; the Spark code is
   :mod:`._spark_figures`) computed from the cached valid rows and written as
   Parquet under ``OUT/tables/<figure>/``; up to
   :data:`CONCURRENT_FIGURES_MAX_ROWS` rows the six figures run as concurrent
   Spark jobs (one driver thread each), so small traces do not wait on six
   rounds of job latency; larger traces run them one after another (each job
   already keeps every core busy, and holds its aggregation buffers alone). Each figure is
   one job; its small result is kept in memory, so reading it back for the
   page costs no pass over the data;
9. render ``OUT/report.html`` (written by the driver: see :mod:`._out`).

Jobs: one for the row check, then per figure one write and one collect of
the cached result; the rows are read from Parquet once. Only aggregates
reach the driver: the row-check counts, the per-kind table, the busiest keys
(top N), the windows (at most :data:`MAX_CHART_ROWS`) and the histograms.
Raw rows never do.

The output layout::

    OUT/report.html                     the report, self-contained
    OUT/tables/row_checks/              reason, meaning, rows
    OUT/tables/by_kind/                 per (purgatory, kind)
    OUT/tables/by_partition/            per (purgatory, topic-partition)
    OUT/tables/windows/                 per (window, purgatory, kind)
    OUT/tables/error_codes/             per (purgatory, kind, error code)
    OUT/tables/latency_histogram/       per (purgatory, kind, bucket)
    OUT/tables/lateness_histogram/      per (purgatory, kind, bucket)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from . import _spark_figures as spark_figures
from ._html import TraceReportData, render_trace_report
from ._out import Output
from ._session import Progress
from ._trace import REASONS, RowCheck, check_rows, read_trace
from .figures import BY_KIND, BY_PARTITION, DEFAULT_WINDOW_MS, HISTOGRAMS, WINDOWS

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["DEFAULT_WINDOW_MS", "MAX_CHART_ROWS", "ReportResult", "build_report"]

DEFAULT_TOP_KEYS = 20
#: rows of the windows table (window x purgatory x kind) collected for the
#: charts, in window order; the Parquet has all
MAX_CHART_ROWS = 20_000

_STAGES = 9
#: up to this many rows the figure jobs run concurrently
CONCURRENT_FIGURES_MAX_ROWS = 1_000_000


@dataclass(frozen=True)
class ReportResult:
    """Where the report went (paths or URLs) and what the row check found."""

    html: str
    tables: dict[str, str]
    rows: RowCheck
    elapsed_s: float


def build_report(
    spark: SparkSession,
    traces: Sequence[str | Path],
    out_dir: str | Path | Output,
    *,
    window_ms: int = DEFAULT_WINDOW_MS,
    accuracy: int = spark_figures.DEFAULT_ACCURACY,
    top_keys: int = DEFAULT_TOP_KEYS,
    cache: bool = True,
    progress: bool = True,
    stream: TextIO | None = None,
    first_stage: int = 0,
) -> ReportResult:
    """Analyse ``traces`` and write the report and its tables under ``out_dir``
    (a local folder or a URL: :class:`._out.Output`).

    ``window_ms`` sizes the time windows; ``accuracy`` is percentile_approx's
    (rank error at most n / accuracy); ``top_keys`` how many busiest keys the
    HTML lists; ``cache`` keeps the rows (memory, spilling to disk) after the
    row check reads them, instead of re-reading the Parquet for every figure.
    ``first_stage`` numbers the progress lines after the caller's own
    (the CLI counts starting Spark as a stage). O(rows) work per figure,
    spread over the cluster; raises :class:`~purgatory.analytics.TraceSchemaError`
    for a bad trace.
    """
    from pyspark import StorageLevel

    if window_ms <= 0:
        raise ValueError(f"window_ms must be positive, not {window_ms}")
    if not 1 <= accuracy <= 2**31 - 1:
        raise ValueError(f"accuracy must be a positive int, not {accuracy}")
    if top_keys <= 0:
        raise ValueError(f"top_keys must be positive, not {top_keys}")
    started = time.perf_counter()
    out = out_dir if isinstance(out_dir, Output) else Output(out_dir)
    steps = Progress(
        "report", _STAGES + first_stage, stream=stream, enabled=progress, done=first_stage
    )

    with steps.stage("trace read, schema checked"):
        trace = read_trace(spark, traces)
    out.create()
    if cache:
        trace = trace.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        with steps.stage("rows checked" + (", rows cached" if cache else "")):
            valid, rows = check_rows(trace)
            tables = {"row_checks": _write(_row_checks(spark, rows), out, "row_checks")}
        prepared = spark_figures.prepare(valid)
        figures: list[tuple[str, str, Callable[[], DataFrame]]] = [
            (BY_KIND.name, BY_KIND.label, lambda: spark_figures.by_kind(prepared, accuracy)),
            (
                BY_PARTITION.name,
                BY_PARTITION.label,
                lambda: spark_figures.by_partition(prepared, accuracy),
            ),
            (
                WINDOWS.name,
                WINDOWS.label,
                lambda: spark_figures.windows(prepared, window_ms, accuracy),
            ),
            ("error_codes", "error codes", lambda: spark_figures.error_codes(prepared)),
            *(
                (h.name, h.label, partial(spark_figures.histogram, prepared, h.column, h.edges))
                for h in HISTOGRAMS
            ),
        ]
        limits = {BY_PARTITION.name: top_keys, WINDOWS.name: MAX_CHART_ROWS + 1}

        def figure(name: str, label: str, build: Callable[[], DataFrame]) -> pd.DataFrame:
            with steps.stage(label):
                frame = build().persist(StorageLevel.MEMORY_AND_DISK)  # small: one row per group
                try:
                    tables[name] = _write(frame, out, name)
                    return _collect(frame, name, limits.get(name))
                finally:
                    frame.unpersist()

        # small traces: all figures at once (job latency dominates); large ones one
        # after another (each job already uses every core; fewer buffers at once)
        threads = len(figures) if rows.total <= CONCURRENT_FIGURES_MAX_ROWS else 1
        with ThreadPoolExecutor(max_workers=threads) as pool:
            futures = {name: pool.submit(figure, name, label, f) for name, label, f in figures}
            collected = {name: future.result() for name, future in futures.items()}
    finally:
        if cache:
            trace.unpersist()

    with steps.stage("HTML report"):
        windows = collected[WINDOWS.name]
        data = TraceReportData(
            inputs=[str(t) for t in traces],
            rows=rows,
            window_ms=window_ms,
            accuracy=accuracy,
            by_kind=collected[BY_KIND.name],
            busiest=collected[BY_PARTITION.name],
            windows=windows.head(MAX_CHART_ROWS),
            windows_truncated=len(windows) > MAX_CHART_ROWS,
            error_codes=collected["error_codes"],
            latency_histogram=collected["latency_histogram"],
            lateness_histogram=collected["lateness_histogram"],
            tables=dict(tables),
            elapsed_s=time.perf_counter() - started,
        )
        html = out.write_bytes(spark, "report.html", render_trace_report(data).encode())
    return ReportResult(
        html=html, tables=tables, rows=rows, elapsed_s=time.perf_counter() - started
    )


def _row_checks(spark: SparkSession, rows: RowCheck) -> DataFrame:
    """The row-check counts as a one-partition table, built in the JVM (no Python worker)."""
    from pyspark.sql import functions as F

    entries = [
        F.struct(
            F.lit(reason).alias("reason"),
            F.lit(meaning).alias("meaning"),
            F.lit(rows.reasons[reason]).cast("long").alias("rows"),
        )
        for reason, meaning in REASONS.items()
    ]
    return spark.range(1, numPartitions=1).select(F.inline(F.array(*entries))).coalesce(1)


def _collect(frame: DataFrame, name: str, limit: int | None) -> pd.DataFrame:
    """A figure's (cached) rows on the driver; the busiest keys first for by_partition."""
    from pyspark.sql import functions as F

    if name == BY_PARTITION.name:
        frame = frame.orderBy(F.desc("operations"), "purgatory", "key")
    if limit is not None:
        frame = frame.limit(limit)
    return frame.toPandas()


def _write(frame: DataFrame, out: Output, name: str) -> str:
    """Write a small figure (one partition) as Parquet under ``OUT/tables/name``."""
    path = out.url(f"tables/{name}")
    frame.write.mode("overwrite").parquet(path)
    return path
