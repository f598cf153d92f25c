"""The figures of a trace, as Spark aggregations over the valid rows.

What is computed (the groups, quantiles, windows and histogram edges) is
defined once in :mod:`.figures`, which the exact reference
(:mod:`purgatory.analytics.exact`) reads too. Every figure is a ``groupBy``
(after an ``explode`` for per-key figures, a ``window`` for time figures) whose
result is small: one row per group, never per operation. The columns:

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
* histograms: counts per bucket ``[lo_ms, hi_ms)`` (:data:`.figures.HISTOGRAMS`),
  the bucket computed in Spark by a balanced CASE tree that mirrors
  :func:`.figures.bucket_index`: O(log buckets) comparisons per row, exact on
  integers. The first bucket also holds anything below its edge, the last
  anything above.

Cost: each figure is one job reading the needed columns of the trace, O(rows)
work spread over the executors and O(groups x A) memory for the percentile
summaries. Each result comes as one sorted partition (``coalesce(1)`` then
``sortWithinPartitions``): small, in order, and without the extra sampling
job a global ``orderBy`` costs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .figures import BY_KIND, BY_PARTITION, LATENESS_QUANTILES, WINDOWS, Summary

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = [
    "DEFAULT_ACCURACY",
    "by_kind",
    "by_partition",
    "error_codes",
    "histogram",
    "prepare",
    "windows",
]

#: percentile_approx's accuracy: rank error at most rows / accuracy
DEFAULT_ACCURACY = 10_000


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


def _latency_lateness(accuracy: int, summary: Summary) -> list[Column]:
    from pyspark.sql import functions as F

    return [
        *_percentiles("latency_ms", "latency", summary.latency_quantiles, accuracy),
        F.max("latency_ms").alias("latency_max_ms"),
        *_percentiles("lateness_ms", "lateness", LATENESS_QUANTILES, accuracy),
        F.max("lateness_ms").alias("lateness_max_ms"),
    ]


def _finish(frame: DataFrame, summary: Summary) -> DataFrame:
    latency_qs = summary.latency_quantiles
    frame = _split(_split(frame, "latency", latency_qs), "lateness", LATENESS_QUANTILES)
    order = list(summary.keys)
    first = [*order, "operations", "completed", "expired", "cancelled"]
    latency = [f"latency_{q}_ms" for q in latency_qs] + ["latency_max_ms"]
    lateness = [f"lateness_{q}_ms" for q in LATENESS_QUANTILES] + ["lateness_max_ms"]
    rest = [c for c in frame.columns if c not in {*first, *latency, *lateness}]
    return _sorted(frame.select(*first, *latency, *lateness, *rest), order)


def _sorted(frame: DataFrame, order: list[str]) -> DataFrame:
    """One partition, sorted: a small result in order without the sampling job
    a global ``orderBy`` runs to range-partition its input."""
    return frame.coalesce(1).sortWithinPartitions(*order)


def by_kind(prepared: DataFrame, accuracy: int = DEFAULT_ACCURACY) -> DataFrame:
    """Per (purgatory, kind): counts, latency p50/p99/p999/max, lateness p50/p99/max,
    bytes, key watches, operations with an error."""
    from pyspark.sql import functions as F

    has_error = F.exists("error_codes", lambda c: c != 0).cast("long")
    frame = prepared.groupBy(*BY_KIND.keys).agg(
        *_counts(),
        *_latency_lateness(accuracy, BY_KIND),
        F.sum(F.size("keys").cast("long")).alias("key_watches"),
        F.sum(has_error).alias("with_error"),
    )
    return _finish(frame, BY_KIND)


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
    frame = pairs.groupBy(*BY_PARTITION.keys).agg(
        *_counts(),
        *_latency_lateness(accuracy, BY_PARTITION),
        F.sum((F.col("code") != 0).cast("long")).alias("errors"),
    )
    return _finish(frame, BY_PARTITION)


def windows(prepared: DataFrame, window_ms: int, accuracy: int = DEFAULT_ACCURACY) -> DataFrame:
    """Per tumbling window of ``window_ms`` over ``created_ms`` (aligned to 0, as
    :func:`.figures.window_start_ms`) and (purgatory, kind): counts, latency
    p50/p99/max, lateness p50/p99/max, bytes."""
    from pyspark.sql import functions as F

    if window_ms <= 0:
        raise ValueError(f"window_ms must be positive, not {window_ms}")
    window = F.window(F.timestamp_millis(F.col("created_ms")), f"{window_ms} milliseconds")
    frame = prepared.groupBy(window.alias("w"), "purgatory", "kind").agg(
        *_counts(), *_latency_lateness(accuracy, WINDOWS)
    )
    frame = frame.select(
        F.unix_millis(F.col("w.start")).alias("window_start_ms"),
        F.unix_millis(F.col("w.end")).alias("window_end_ms"),
        *[c for c in frame.columns if c != "w"],
    )
    return _finish(frame, WINDOWS)


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
    frame = frame.select(
        "purgatory",
        "kind",
        "error_code",
        F.coalesce(names[F.col("error_code").cast("int")], F.lit("other")).alias("error_name"),
        "results",
    )
    return _sorted(frame, ["purgatory", "kind", "error_code"])


def bucket_index(value: Column, edges: tuple[int, ...]) -> Column:
    """The bucket of ``value`` as :func:`.figures.bucket_index` defines it: the
    number of edges <= value, minus one, clamped to [0, len(edges) - 1]. A
    balanced tree of comparisons: O(log len(edges)) per row."""
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
    frame = frame.select(
        "purgatory",
        "kind",
        "bucket",
        F.element_at(lows, F.col("bucket") + 1).cast("long").alias("lo_ms"),
        F.element_at(highs, F.col("bucket") + 1).cast("long").alias("hi_ms"),
        "count",
    )
    return _sorted(frame, ["purgatory", "kind", "bucket"])
