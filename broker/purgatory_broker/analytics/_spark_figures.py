"""The Spark side of the report: fold a trace's rows into small *cells*.

A report's figures (:mod:`.figures`) are counts, sums, maxima, histogram
buckets and percentiles per group. Every one of them can be computed from the
number of rows that share a value, so Spark does not compute figures: it
folds the rows into cells, one per distinct combination of what the figures
group by and the one value they take percentiles of, and the driver computes
every figure exactly from the cells (:mod:`._fold`). Two folds, each one job
reading the Parquet once (the two jobs run concurrently):

* :func:`operation_cells`: one row per (``flags``, purgatory, kind,
  ``window_start_ms``, outcome, ``value_ms``) with the rows' count, bytes,
  key watches, operations with an error and latest ``created_ms``.
  ``flags`` is the row check's bitmask (:func:`._trace.reason_flags`): an
  impossible row keeps only its flags (every other cell column null), so the
  row check costs no job of its own. ``value_ms`` is the latency
  (``completed_ms - created_ms``) of an early completion, the lateness
  (``completed_ms - deadline_ms``, negative when a coarse tick fires early)
  of an expiry, null for a cancellation. The per-kind and per-window tables
  and both histograms come from these cells.
* :func:`pair_cells`: the valid rows' (operation, key) pairs, exploded once
  and folded into one row per (purgatory, kind, key, code, outcome,
  ``value_ms``) with the pairs' count and bytes (an operation's bytes count
  for each key it watches; a trace has no per-key split). The per-key table
  and the error codes come from these cells.

Example: three produce operations in window 0 completing after 4, 4 and
9 ms fold into two cells, ``(0, produce, produce, 0, completed, 4)`` with
count 2 and ``(..., 9)`` with count 1; the median latency is read from the
cells' running counts (rank 2 of 3 falls in the first cell: 4 ms).

Cost: O(rows) per fold, spread over the executors, with no shuffle of rows
(each task pre-aggregates its rows into cells before the exchange). The cells
are few because the values are integer milliseconds: their number is bounded
by the distinct (window, kind, outcome, value) combinations, not by the rows
(a 10-million-row synthetic trace of 500 s folds into about 0.6 million
operation cells and 0.2 million pair cells). Only the cells reach the driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._trace import reason_flags

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["OPERATION_CELL_KEYS", "PAIR_CELL_KEYS", "operation_cells", "pair_cells"]

#: what an operation cell groups by; its aggregates are rows, bytes,
#: key_watches, with_error and last_created_ms
OPERATION_CELL_KEYS = ("flags", "purgatory", "kind", "window_start_ms", "outcome", "value_ms")
#: what a pair cell groups by; its aggregates are rows and bytes
PAIR_CELL_KEYS = ("purgatory", "kind", "key", "code", "outcome", "value_ms")


def _value_ms() -> Column:
    """Latency of an early completion, lateness of an expiry, else null."""
    from pyspark.sql import functions as F

    outcome, completed = F.col("outcome"), F.col("completed_ms")
    return F.when(outcome == "completed", completed - F.col("created_ms")).when(
        outcome == "expired", completed - F.col("deadline_ms")
    )


def operation_cells(trace: DataFrame, window_ms: int) -> DataFrame:
    """The trace's rows folded into operation cells (see the module docstring);
    impossible rows keep only their flags. O(rows), one job when collected."""
    from pyspark.sql import functions as F

    if window_ms <= 0:
        raise ValueError(f"window_ms must be positive, not {window_ms}")
    flags = reason_flags()
    valid = flags == 0

    def when_valid(column: Column) -> Column:
        return F.when(valid, column)

    created = F.col("created_ms")
    has_error = F.exists("error_codes", lambda c: c != 0).cast("long")
    rows = trace.select(
        flags.alias("flags"),
        when_valid(F.col("purgatory")).alias("purgatory"),
        when_valid(F.col("kind")).alias("kind"),
        # floor to the window (pmod keeps it right for negative times too)
        when_valid(created - F.pmod(created, F.lit(window_ms))).alias("window_start_ms"),
        when_valid(F.col("outcome")).alias("outcome"),
        when_valid(_value_ms()).alias("value_ms"),
        when_valid(F.col("bytes")).alias("bytes"),
        when_valid(F.size("keys").cast("long")).alias("key_watches"),
        when_valid(has_error).alias("with_error"),
        when_valid(created).alias("created_ms"),
    )
    return rows.groupBy(*OPERATION_CELL_KEYS).agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum("bytes").alias("bytes"),
        F.sum("key_watches").alias("key_watches"),
        F.sum("with_error").alias("with_error"),
        F.max("created_ms").alias("last_created_ms"),
    )


def pair_cells(trace: DataFrame) -> DataFrame:
    """The valid rows' (operation, key) pairs folded into pair cells. O(pairs),
    one job when collected."""
    from pyspark.sql import functions as F

    pairs = trace.where(reason_flags() == 0).select(
        "purgatory",
        "kind",
        "outcome",
        _value_ms().alias("value_ms"),
        "bytes",
        F.explode(F.arrays_zip("keys", "error_codes")).alias("kc"),
    )
    pairs = pairs.select(
        "purgatory",
        "kind",
        F.col("kc.keys").alias("key"),
        F.col("kc.error_codes").alias("code"),
        "outcome",
        "value_ms",
        "bytes",
    )
    return pairs.groupBy(*PAIR_CELL_KEYS).agg(
        F.count(F.lit(1)).alias("rows"), F.sum("bytes").alias("bytes")
    )
