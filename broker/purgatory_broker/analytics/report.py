"""The trace report: read, check, fold with Spark, write Parquet and one HTML page.

:func:`build_report` runs these stages, printing a progress line after each:

1. read the trace (Parquet files or folders): local inputs are checked on the
   driver (:func:`._trace.check_local_trace`, footers only) and read with the
   trace's schema given, so no Spark job runs here;
2. fold the rows into cells (:mod:`._spark_figures`): two concurrent jobs,
   each reading the Parquet once, one folding the operations (and counting the
   impossible rows per reason, :mod:`._trace`), one folding the valid rows'
   (operation, key) pairs; only the cells reach the driver, and nothing is
   cached;
3. compute every figure of :mod:`.figures` from the cells on the driver,
   exactly (:mod:`._fold`: counts, bytes, maxima, histogram buckets, and
   percentiles by rank from the cells' running counts);
4. write each figure as Parquet under ``OUT/tables/<figure>/`` (Spark writes
   them, wherever it can write: one small job per table, concurrently);
5. render ``OUT/report.html`` (written by the driver: see :mod:`._out`).

Jobs: two folds over the rows, then one write per table. Only aggregates
reach the driver: the cells (bounded by the distinct (group, outcome, value)
combinations, not by the rows) and nothing else. Raw rows never do.

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
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from . import _spark_figures as spark_figures
from ._html import TraceReportData, render_trace_report
from ._out import Output
from ._session import Progress
from ._trace import REASONS, RowCheck, read_trace
from .figures import BY_KIND, BY_PARTITION, DEFAULT_WINDOW_MS, WINDOWS

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["DEFAULT_WINDOW_MS", "MAX_CHART_ROWS", "ReportResult", "build_report"]

DEFAULT_TOP_KEYS = 20
#: rows of the windows table (window x purgatory x kind) collected for the
#: charts, in window order; the Parquet has all
MAX_CHART_ROWS = 20_000

_STAGES = 5


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
    top_keys: int = DEFAULT_TOP_KEYS,
    progress: bool = True,
    stream: TextIO | None = None,
    first_stage: int = 0,
) -> ReportResult:
    """Analyse ``traces`` and write the report and its tables under ``out_dir``
    (a local folder or a URL: :class:`._out.Output`).

    ``window_ms`` sizes the time windows; ``top_keys`` how many busiest keys the
    HTML lists. ``first_stage`` numbers the progress lines after the caller's own
    (the CLI counts starting Spark as a stage). O(rows) work in two passes,
    spread over the cluster, then O(c log c) on the driver for ``c`` cells;
    raises :class:`~purgatory_broker.analytics.TraceSchemaError` for a bad trace.
    """
    from . import _fold

    if window_ms <= 0:
        raise ValueError(f"window_ms must be positive, not {window_ms}")
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
    with steps.stage("rows checked, operations and keys folded"):
        operations, pairs = _fold_cells(trace, window_ms)
        rows = _fold.row_check(operations)
    with steps.stage("figures computed"):
        figures = _fold.figures(operations, pairs, window_ms)
        del operations, pairs
    with steps.stage("tables written"):
        tables = _write_tables(spark, out, rows, figures)
    with steps.stage("HTML report"):
        data = _report_data(
            figures,
            inputs=[str(t) for t in traces],
            rows=rows,
            tables=tables,
            window_ms=window_ms,
            top_keys=top_keys,
            started=started,
        )
        html = out.write_bytes(spark, "report.html", render_trace_report(data).encode())
    return ReportResult(
        html=html, tables=tables, rows=rows, elapsed_s=time.perf_counter() - started
    )


def _fold_cells(trace: DataFrame, window_ms: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The operations' cells and the (operation, key) pairs' cells: two Spark jobs
    at once, each reading the trace once; only the cells reach the driver."""
    with ThreadPoolExecutor(2) as pool:
        folds = [
            pool.submit(cells.toPandas)
            for cells in (
                spark_figures.operation_cells(trace, window_ms),
                spark_figures.pair_cells(trace),
            )
        ]
        operations, pairs = (fold.result() for fold in folds)
    return operations, pairs


def _write_tables(
    spark: SparkSession, out: Output, rows: RowCheck, figures: dict[str, pd.DataFrame]
) -> dict[str, str]:
    """Write the row checks and every figure as Parquet, one small job each, all
    at once; returns where each table went."""
    from . import _fold

    frames = {"row_checks": _row_checks(spark, rows)}
    frames |= {
        name: spark.createDataFrame(table, schema=_fold.table_schema(table)).coalesce(1)
        for name, table in figures.items()
    }
    with ThreadPoolExecutor(len(frames)) as pool:
        written = {name: pool.submit(_write, frame, out, name) for name, frame in frames.items()}
        return {name: path.result() for name, path in written.items()}


def _report_data(
    figures: dict[str, pd.DataFrame],
    *,
    inputs: list[str],
    rows: RowCheck,
    tables: dict[str, str],
    window_ms: int,
    top_keys: int,
    started: float,
) -> TraceReportData:
    """What the HTML shows: the figures as their Parquet reads back, the busiest
    keys first, the windows cut at MAX_CHART_ROWS."""
    shown = {name: _as_collected(table) for name, table in figures.items()}
    busiest = shown[BY_PARTITION.name].sort_values(
        ["operations", "purgatory", "key"], ascending=[False, True, True], kind="stable"
    )
    windows = shown[WINDOWS.name]
    return TraceReportData(
        inputs=inputs,
        rows=rows,
        window_ms=window_ms,
        by_kind=shown[BY_KIND.name],
        busiest=busiest.head(top_keys).reset_index(drop=True),
        windows=windows.head(MAX_CHART_ROWS),
        windows_truncated=len(windows) > MAX_CHART_ROWS,
        error_codes=shown["error_codes"],
        latency_histogram=shown["latency_histogram"],
        lateness_histogram=shown["lateness_histogram"],
        tables=dict(tables),
        elapsed_s=time.perf_counter() - started,
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


def _as_collected(table: pd.DataFrame) -> pd.DataFrame:
    """A figure table as reading its Parquet back would give it (Arrow's types:
    a count column with nulls as float64), for the page."""
    import pyarrow as pa

    converted: pd.DataFrame = pa.Table.from_pandas(table, preserve_index=False).to_pandas(
        ignore_metadata=True
    )
    return converted


def _write(frame: DataFrame, out: Output, name: str) -> str:
    """Write a small figure (one partition) as Parquet under ``OUT/tables/name``."""
    path = out.url(f"tables/{name}")
    frame.write.mode("overwrite").parquet(path)
    return path
