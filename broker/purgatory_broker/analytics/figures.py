"""What the trace report computes, defined once: the figures, their quantiles,
time windows and histogram edges.

Two implementations compute these figures: the Spark job (Spark folds the
rows into cells, :mod:`._spark_figures`, and the driver computes the figures
from them, :mod:`._fold`) and its reference on one machine (:mod:`.exact`,
from the rows). Both are exact, percentiles included, and read every
choice from here, so they cannot drift apart; the tests compare their results.

* Summary figures (:data:`SUMMARIES`): one row per group, with operation
  counts, bytes, latency quantiles (of early completions) and lateness
  quantiles (of expiries). ``by_kind`` and ``by_partition`` report latency
  p50/p99/p99.9, the time windows p50/p99 (one row per window: fewer is
  enough); lateness is p50/p99 everywhere, and both have their max.
* Time windows: tumbling windows of ``window_ms`` over ``created_ms``, aligned
  to 0, so an operation created at ``t`` is in
  ``[t // window_ms * window_ms, ... + window_ms)`` (:func:`window_start_ms`).
* Histograms (:data:`HISTOGRAMS`): counts per bucket ``[lo_ms, hi_ms)`` of
  fixed, roughly logarithmic edges (1-1.2-1.5-2-2.5-3-4-5-6-8 per decade),
  lateness signed; a value's bucket is the number of edges at or below it,
  minus one, clamped to the first and last bucket (:func:`bucket_index`).

Standard library only: importing it costs nothing.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

__all__ = [
    "BY_KIND",
    "BY_PARTITION",
    "DEFAULT_WINDOW_MS",
    "HISTOGRAMS",
    "LATENCY_EDGES_MS",
    "LATENCY_QUANTILES",
    "LATENESS_EDGES_MS",
    "LATENESS_QUANTILES",
    "SUMMARIES",
    "WINDOWS",
    "WINDOW_LATENCY_QUANTILES",
    "Histogram",
    "Summary",
    "bucket_index",
    "window_start_ms",
]

#: the default width of the time windows
DEFAULT_WINDOW_MS = 1_000

#: latency quantiles of the per-kind and per-partition figures: column suffix -> q
LATENCY_QUANTILES: dict[str, float] = {"p50": 0.5, "p99": 0.99, "p999": 0.999}
#: latency quantiles of the time windows
WINDOW_LATENCY_QUANTILES: dict[str, float] = {"p50": 0.5, "p99": 0.99}
#: lateness quantiles of every summary figure
LATENESS_QUANTILES: dict[str, float] = {"p50": 0.5, "p99": 0.99}

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


@dataclass(frozen=True, slots=True)
class Summary:
    """A summary figure: its table name, its label, the columns it groups by (also
    its sort order) and its latency quantiles."""

    name: str
    label: str
    keys: tuple[str, ...]
    latency_quantiles: dict[str, float]


BY_KIND = Summary("by_kind", "per purgatory and kind", ("purgatory", "kind"), LATENCY_QUANTILES)
BY_PARTITION = Summary(
    "by_partition", "per topic-partition", ("purgatory", "key"), LATENCY_QUANTILES
)
WINDOWS = Summary(
    "windows",
    "time windows",
    ("window_start_ms", "window_end_ms", "purgatory", "kind"),
    WINDOW_LATENCY_QUANTILES,
)
#: the summary figures, in report order
SUMMARIES = (BY_KIND, BY_PARTITION, WINDOWS)


@dataclass(frozen=True, slots=True)
class Histogram:
    """A histogram figure: its table name, its label, the column it counts and the
    bucket edges."""

    name: str
    label: str
    column: str
    edges: tuple[int, ...]


#: the histogram figures, in report order
HISTOGRAMS = (
    Histogram("latency_histogram", "latency histogram", "latency_ms", LATENCY_EDGES_MS),
    Histogram("lateness_histogram", "lateness histogram", "lateness_ms", LATENESS_EDGES_MS),
)


def window_start_ms(created_ms: int, window_ms: int) -> int:
    """The start of the window holding ``created_ms``. O(1)."""
    return created_ms // window_ms * window_ms


def bucket_index(value: int, edges: tuple[int, ...]) -> int:
    """The bucket of ``value``: edges at or below it, minus one, clamped to
    ``[0, len(edges) - 1]``. O(log len(edges))."""
    return min(max(bisect.bisect_right(edges, value) - 1, 0), len(edges) - 1)
