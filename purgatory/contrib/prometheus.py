"""Prometheus metrics from a purgatory's :meth:`~purgatory.DelayedOperationPurgatory.statistics`.

Install with ``pip install 'aio-purgatory[prometheus]'`` (``prometheus_client``);
nothing else in the package imports it. Register one collector for any number of
purgatories; every scrape reads each purgatory's ``statistics()`` (a snapshot, O(1)
plus the lateness histogram's buckets) and nothing is counted between scrapes::

    from prometheus_client import REGISTRY, generate_latest
    from purgatory.contrib.prometheus import PurgatoryCollector

    REGISTRY.register(PurgatoryCollector(produce_purgatory, fetch_purgatory))
    text = generate_latest(REGISTRY)  # what GET /metrics answers

Each sample is labelled ``purgatory="<name>"``. The families, one a ``statistics()``
field, are :data:`FAMILIES` (the one list of them: name, Prometheus type, field, help),
each name prefixed with the ``namespace`` (``purgatory_watched``); Prometheus's client
appends ``_total`` to a counter's (``purgatory_expired_total``).

The lateness quantiles are the purgatory's own (a log-linear histogram over every
expiry since it started, measured from each operation's deadline), exported as
gauges rather than a Prometheus summary: they are not windowed. An expiry before
its deadline (a timer made with ``may_expire_early=True``) counts as lateness 0 and
in ``expired_early``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from purgatory import PurgatoryStatistics

__all__ = ["FAMILIES", "PurgatoryCollector", "StatisticsSource"]


class StatisticsSource(Protocol):
    """What the collector reads: anything with ``statistics()`` (every purgatory)."""

    def statistics(self) -> PurgatoryStatistics: ...


#: (family name without the namespace, Prometheus type, statistics field, help)
FAMILIES: tuple[tuple[str, str, str, str], ...] = (
    ("watched", "gauge", "watched", "Entries in the watcher lists, unpurged done ones included."),
    ("delayed", "gauge", "num_delayed", "Operations pending in the timer."),
    ("keys", "gauge", "keys", "Keys with a watcher list."),
    ("completed_early", "counter", "completed_early", "Completed before their deadline."),
    ("expired", "counter", "expired", "Operations completed by their timeout."),
    (
        "expired_early",
        "counter",
        "expired_early",
        "Expiries before their deadline (only timers with may_expire_early).",
    ),
    ("cancelled", "counter", "cancelled", "Cancelled (op.cancel, cancel_for_key, close)."),
    ("purged", "counter", "purged", "Done operations removed from watcher lists by purges."),
    ("purges", "counter", "purges", "Purges run."),
    ("expiry_lateness_count", "counter", "lateness_count", "Expiries whose lateness was measured."),
    ("expiry_lateness_max_ms", "gauge", "lateness_max_ms", "Latest expiry after its deadline, ms."),
    ("expiry_lateness_p50_ms", "gauge", "lateness_p50_ms", "Median expiry lateness, ms."),
    ("expiry_lateness_p99_ms", "gauge", "lateness_p99_ms", "99th percentile expiry lateness, ms."),
)


class PurgatoryCollector:
    """A ``prometheus_client`` collector of the statistics of ``purgatories``.

    Register it with a ``CollectorRegistry`` (``registry.register(collector)``).
    ``namespace`` prefixes every family name (``purgatory_watched``). Two
    purgatories with the same name would give duplicate samples: ValueError.
    """

    def __init__(self, *purgatories: StatisticsSource, namespace: str = "purgatory") -> None:
        if not purgatories:
            raise ValueError("PurgatoryCollector needs at least one purgatory")
        names = [p.statistics().name for p in purgatories]
        if len(set(names)) != len(names):
            raise ValueError(f"purgatory names must be distinct, not {names}")
        self._purgatories = purgatories
        self._prefix = f"{namespace}_" if namespace else ""

    def _families(self) -> list[GaugeMetricFamily | CounterMetricFamily]:
        families: list[GaugeMetricFamily | CounterMetricFamily] = []
        for suffix, kind, _field, doc in FAMILIES:
            name = self._prefix + suffix
            if kind == "counter":
                families.append(CounterMetricFamily(name, doc, labels=["purgatory"]))
            else:
                families.append(GaugeMetricFamily(name, doc, labels=["purgatory"]))
        return families

    def describe(self) -> Iterator[Metric]:
        """The families, without samples (what a registry checks names with)."""
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        """One sample per purgatory in each family, read from ``statistics()`` now."""
        families = self._families()
        for purgatory in self._purgatories:
            stats = purgatory.statistics()
            for family, (_suffix, _kind, field, _doc) in zip(families, FAMILIES, strict=True):
                family.add_metric([stats.name], float(getattr(stats, field)))
        yield from families
