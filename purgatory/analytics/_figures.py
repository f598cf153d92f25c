"""The figures of a trace, as Spark aggregations over the valid rows.

Every figure is a ``groupBy`` (after an ``explode`` for per-key figures, a
``window`` for time figures) whose result is small: one row per group, never
per operation. Definitions, shared by the reference implementation in
:mod:`purgatory.analytics.exact`:

* ``operations``: rows; ``completed`` (early), ``expired``, ``cancelled`` by outcome;
* ``latency_*_ms``: ``completed_ms - created_ms`` of operations that completed
  early (expired operations wait their timeout; their lateness is the figure);
* ``lateness_*_ms``: ``completed_ms - deadline_ms`` of expired operations
  (negative when a coarse tick fires a bucket before the exact deadline);
* percentiles are ``percentile_approx`` with accuracy ``A`` (default 10 000):
  the value returned has a rank within ``n / A`` of the exact rank (Spark's
  documented relative error ``1 / A``), and it is always a value of the data;
* ``bytes``: the sum of ``bytes``; per key, an operation's bytes count for each
  key it watches (a trace has no per-key split);
* ``error_codes``: counts of (operation, key) results per Kafka error code,
  named by :data:`purgatory.broker.errors.ERROR_NAMES` (``other`` if unknown);
* histograms: counts per bucket ``[lo_ms, hi_ms)`` of fixed, roughly
  logarithmic edges (1-1.2-1.5-2-2.5-3-4-5-6-8 per decade), computed in Spark by
  a balanced CASE tree: O(log buckets) comparisons per row, exact on integers.
  The first bucket also holds anything below its edge, the last anything above.

Cost: each figure is one job reading the needed columns of the trace, O(rows)
work spread over the executors and O(groups x A) memory for the percentile
summaries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = [
    "DEFAULT_ACCURACY",
    "LATENCY_EDGES_MS",
    "LATENESS_EDGES_MS",
    "by_kind",
    "by_partition",
    "error_codes",
    "histogram",
    "prepare",
    "windows",
]

#: percentile_approx's accuracy: rank error at most rows / accuracy
DEFAULT_ACCURACY = 10_000

_MANTISSAS = (10, 12, 15, 20, 25, 30, 40, 50, 60, 80)
#: histogram edges for latency, in ms: 0..8 one by one-ish, then 10 per decade to 10^7
LATENCY_EDGES_MS: tuple[int, ...] = (
    0,
    1,
    2,
    3,
    4,
    5,
    6,
    8,
    *(m * 10**d for d in range(6) for m in _MANTISSAS),
    10_000_000,
)
#: signed edges for lateness, in ms: the latency edges mirrored below zero
LATENESS_EDGES_MS: tuple[int, ...] = (
    *(-e for e in reversed(LATENCY_EDGES_MS[1:])),
    *LATENCY_EDGES_MS,
)


def prepare(valid: DataFrame) -> DataFrame:
    """Add ``latency_ms`` (early completions), ``lateness_ms`` (expiries), ``errors``."""
    from pyspark.sql import functions as F

    outcome = F.col("outcome")
    return valid.select(
        "purgatory",
        "kind",
        "keys",
        "error_codes",
        "created_ms",
        "outcome",
        "bytes",
        F.when(outcome == "completed", F.col("completed_ms") - F.col("created_ms")).alias(
            "latency_ms"
        ),
        F.when(outcome == "expired", F.col("completed_ms") - F.col("deadline_ms")).alias(
            "lateness_ms"
        ),
    )


def _counts() -> list[Column]:
    from pyspark.sql import functions as F

    def count_of(outcome: str) -> Column:
        return F.sum((F.col("outcome") == outcome).cast("long")).alias(outcome)

    return [
        F.count(F.lit(1)).alias("operations"),
        count_of("completed"),
        count_of("expired"),
        count_of("cancelled"),
        F.sum("bytes").alias("bytes"),
    ]


def _percentiles(column: str, prefix: str, qs: dict[str, float], accuracy: int) -> list[Column]:
    """percentile_approx aggregates, one array per column, split by the caller."""
    from pyspark.sql import functions as F

    return [F.percentile_approx(column, list(qs.values()), accuracy).alias(f"_{prefix}")]


def _split(frame: DataFrame, prefix: str, qs: dict[str, float]) -> DataFrame:
    from pyspark.sql import functions as F

    cols = [
        F.col(f"_{prefix}").getItem(i).alias(f"{prefix}_{name}_ms") for i, name in enumerate(qs)
    ]
    return frame.select("*", *cols).drop(f"_{prefix}")


_LATENCY_QS = {"p50": 0.5, "p99": 0.99, "p999": 0.999}
_LATENESS_QS = {"p50": 0.5, "p99": 0.99}


def _latency_lateness(accuracy: int, latency_qs: dict[str, float]) -> list[Column]:
    from pyspark.sql import functions as F

    return [
        *_percentiles("latency_ms", "latency", latency_qs, accuracy),
        F.max("latency_ms").alias("latency_max_ms"),
        *_percentiles("lateness_ms", "lateness", _LATENESS_QS, accuracy),
        F.max("lateness_ms").alias("lateness_max_ms"),
    ]


def _finish(frame: DataFrame, latency_qs: dict[str, float], order: list[str]) -> DataFrame:
    frame = _split(_split(frame, "latency", latency_qs), "lateness", _LATENESS_QS)
    first = [*order, "operations", "completed", "expired", "cancelled"]
    latency = [f"latency_{q}_ms" for q in latency_qs] + ["latency_max_ms"]
    lateness = [f"lateness_{q}_ms" for q in _LATENESS_QS] + ["lateness_max_ms"]
    rest = [c for c in frame.columns if c not in {*first, *latency, *lateness}]
    return frame.select(*first, *latency, *lateness, *rest).orderBy(*order)


def by_kind(prepared: DataFrame, accuracy: int = DEFAULT_ACCURACY) -> DataFrame:
    """Per (purgatory, kind): counts, latency p50/p99/p999/max, lateness p50/p99/max,
    bytes, key watches, operations with an error."""
    from pyspark.sql import functions as F

    has_error = F.exists("error_codes", lambda c: c != 0).cast("long")
    frame = prepared.groupBy("purgatory", "kind").agg(
        *_counts(),
        *_latency_lateness(accuracy, _LATENCY_QS),
        F.sum(F.size("keys").cast("long")).alias("key_watches"),
        F.sum(has_error).alias("with_error"),
    )
    return _finish(frame, _LATENCY_QS, ["purgatory", "kind"])


def by_partition(prepared: DataFrame, accuracy: int = DEFAULT_ACCURACY) -> DataFrame:
    """Per (purgatory, key): each operation once per key it watches; ``errors`` counts
    the keys answered with a non-zero code."""
    from pyspark.sql import functions as F

    pairs = prepared.select(
        "purgatory",
        "outcome",
        "bytes",
        "latency_ms",
        "lateness_ms",
        F.explode(F.arrays_zip("keys", "error_codes")).alias("kc"),
    ).select("*", F.col("kc.keys").alias("key"), F.col("kc.error_codes").alias("code"))
    frame = pairs.groupBy("purgatory", "key").agg(
        *_counts(),
        *_latency_lateness(accuracy, _LATENCY_QS),
        F.sum((F.col("code") != 0).cast("long")).alias("errors"),
    )
    return _finish(frame, _LATENCY_QS, ["purgatory", "key"])


def windows(prepared: DataFrame, window_ms: int, accuracy: int = DEFAULT_ACCURACY) -> DataFrame:
    """Per tumbling window of ``window_ms`` over ``created_ms`` (aligned to 0) and
    (purgatory, kind): counts, latency p50/p99/max, lateness p50/p99/max, bytes."""
    from pyspark.sql import functions as F

    if window_ms <= 0:
        raise ValueError(f"window_ms must be positive, not {window_ms}")
    qs = {"p50": 0.5, "p99": 0.99}
    window = F.window(F.timestamp_millis(F.col("created_ms")), f"{window_ms} milliseconds")
    frame = prepared.groupBy(window.alias("w"), "purgatory", "kind").agg(
        *_counts(), *_latency_lateness(accuracy, qs)
    )
    frame = frame.select(
        F.unix_millis(F.col("w.start")).alias("window_start_ms"),
        F.unix_millis(F.col("w.end")).alias("window_end_ms"),
        *[c for c in frame.columns if c != "w"],
    )
    return _finish(frame, qs, ["window_start_ms", "window_end_ms", "purgatory", "kind"])


def error_codes(prepared: DataFrame) -> DataFrame:
    """Per (purgatory, kind, error_code): (operation, key) results with that code, named."""
    from pyspark.sql import functions as F

    from purgatory.broker.errors import ERROR_NAMES

    names = F.create_map(*[x for c, n in ERROR_NAMES.items() for x in (F.lit(c), F.lit(n))])
    frame = (
        prepared.select("purgatory", "kind", F.explode("error_codes").alias("error_code"))
        .groupBy("purgatory", "kind", "error_code")
        .agg(F.count(F.lit(1)).alias("results"))
    )
    return frame.select(
        "purgatory",
        "kind",
        "error_code",
        F.coalesce(names[F.col("error_code").cast("int")], F.lit("other")).alias("error_name"),
        "results",
    ).orderBy("purgatory", "kind", "error_code")


def bucket_index(value: Column, edges: tuple[int, ...]) -> Column:
    """The bucket of ``value``: the number of edges <= value, minus one, clamped to
    [0, len(edges) - 1]. A balanced tree of comparisons: O(log len(edges)) per row."""
    from pyspark.sql import functions as F

    def count_le(lo: int, hi: int) -> Column:
        # edges[:lo] are known <= value and edges[hi:] known > value
        if lo == hi:
            return F.lit(max(lo - 1, 0))
        mid = (lo + hi) // 2
        return F.when(value < F.lit(edges[mid]), count_le(lo, mid)).otherwise(count_le(mid + 1, hi))

    return count_le(0, len(edges))


def histogram(prepared: DataFrame, column: str, edges: tuple[int, ...]) -> DataFrame:
    """Per (purgatory, kind, bucket) of ``column`` (nulls skipped): lo_ms, hi_ms, count."""
    from pyspark.sql import functions as F

    lows = F.array(*[F.lit(e) for e in edges])
    highs = F.array(*[F.lit(e) for e in edges[1:]], F.lit(None).cast("long"))
    frame = (
        prepared.where(F.col(column).isNotNull())
        .select("purgatory", "kind", bucket_index(F.col(column), edges).alias("bucket"))
        .groupBy("purgatory", "kind", "bucket")
        .agg(F.count(F.lit(1)).alias("count"))
    )
    return frame.select(
        "purgatory",
        "kind",
        "bucket",
        F.element_at(lows, F.col("bucket") + 1).cast("long").alias("lo_ms"),
        F.element_at(highs, F.col("bucket") + 1).cast("long").alias("hi_ms"),
        "count",
    ).orderBy("purgatory", "kind", "bucket")
