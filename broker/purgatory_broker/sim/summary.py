"""The simulation's summary: one flat dict of figures, and its grouped table.

:func:`summarize` reads what the run leaves behind: the broker's counters, both
purgatories' statistics (completed early, expired, cancelled), the partitions' ISR
changes, and the trace rows, from which both purgatories' completion latency
(``completed_ms - created_ms`` of the operations completed early) and expiry lateness
(``completed_ms - deadline_ms`` of the expired ones) are taken: p50 and p99 are exact
(:func:`purgatory.core.exact_quantile`: rank ``ceil(q * n)`` of the sorted values),
max is the largest. These are the rows and the rule of the analytics report
(``python -m purgatory_broker.analytics report``) for the same trace, so its percentiles and
max are the same figures (the report's are exact too, read from Spark's folded cells
by the same rank rule). (The purgatories' own statistics measure lateness too, in a
log-linear histogram whose percentiles may read up to 12.5% high, and from the timer's
expiry time rather than the trace's completion stamp: that is why they differed from
the report; the summary now takes the trace's figures.) CPU per request is the
process's CPU time over the run divided by the produce and fetch requests.

A flat dict, so a sweep can put one run per row; :data:`SUMMARY_GROUPS` orders
and explains the table (:data:`SUMMARY_KEYS` is its keys in order; the run adds
``read_back_problems``).
"""

from __future__ import annotations

import textwrap
from collections import defaultdict
from typing import Any

from purgatory import PurgatoryStatistics
from purgatory.core import exact_quantile
from purgatory_broker.broker import Broker
from purgatory_broker.tracing import TraceWriter

__all__ = ["SUMMARY_GROUPS", "SUMMARY_KEYS", "format_summary", "summarize"]


def _timing_rows(purgatory: str) -> tuple[tuple[str, str, str], ...]:
    """A purgatory's latency and lateness rows of the table."""
    return (
        (f"{purgatory}_latency_p50_ms", "ms", "created to completed, early completions"),
        (f"{purgatory}_latency_p99_ms", "ms", ""),
        (f"{purgatory}_latency_max_ms", "ms", ""),
        (f"{purgatory}_lateness_p50_ms", "ms", "fired minus deadline, expired operations"),
        (f"{purgatory}_lateness_p99_ms", "ms", ""),
        (f"{purgatory}_lateness_max_ms", "ms", ""),
    )


#: The table: (group title, [(key, unit, explanation)]), in order.
SUMMARY_GROUPS: tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...] = (
    (
        "Throughput",
        (
            ("load_s", "s", "time the producers ran (the duration, or less if interrupted)"),
            (
                "wall_s",
                "s",
                "the whole run: load, drain, the last rounds of the clients (virtual "
                "seconds in virtual time)",
            ),
            ("cpu_s", "s", "CPU time of the process over wall_s (not measured in virtual time)"),
            ("uvloop", "", "ran on uvloop"),
            ("offered_produce_rate", "req/s", "--produce-rate: the schedule's rate"),
            ("achieved_produce_rate", "req/s", "produce requests sent / load_s"),
            (
                "produce_behind_schedule_s",
                "s",
                "how far behind schedule the producers were at the end (0: kept up)",
            ),
            ("requests_per_s", "req/s", "produce and fetch requests / wall_s"),
            ("cpu_us_per_request", "us", "cpu_s / (produce + fetch requests)"),
            ("delayed_ops", "ops", "operations that waited in a purgatory"),
            ("delayed_ops_per_s", "ops/s", "delayed_ops / wall_s"),
        ),
    ),
    (
        "Produce (acks=-1, DelayedProduce)",
        (
            ("produce_requests", "req", ""),
            ("produce_completed", "ops", "answered when the high watermark reached them"),
            ("produce_expired", "ops", "answered REQUEST_TIMED_OUT at produce_timeout_ms"),
            ("produce_cancelled", "ops", "still waiting when the broker closed"),
            *_timing_rows("produce"),
            (
                "failed_produces",
                "req",
                "answered with an error: timed out, NOT_LEADER during the leader change, "
                "NOT_ENOUGH_REPLICAS while the ISR is small",
            ),
            ("unanswered_produces", "req", "never answered: the drain was cut"),
        ),
    ),
    (
        "Fetch (consumers and followers, DelayedFetch)",
        (
            ("fetch_requests", "req", ""),
            ("fetch_completed", "ops", "min_bytes reached (or a partition errored)"),
            ("fetch_expired", "ops", "answered at max_wait_ms with what there was"),
            ("fetch_cancelled", "ops", "still waiting when the broker closed"),
            *_timing_rows("fetch"),
            (
                "consumed_records",
                "records",
                "read by consumers: can exceed acked_records, since records whose produce "
                "failed (timed out) were still appended and replicated",
            ),
        ),
    ),
    (
        "Replication and ISR",
        (
            ("isr_shrinks", "", "followers dropped from an ISR (the stall)"),
            ("isr_expands", "", "followers back in an ISR"),
            ("leader_changes", "", "partition 0 given up and led again"),
        ),
    ),
    (
        "Durability",
        (
            ("bytes_in", "bytes", "appended"),
            ("bytes_out", "bytes", "returned by fetches"),
            ("log_flushes", "", "fsync rounds (flush_messages / flush_ms)"),
            ("recovery_truncated_bytes", "bytes", "cut when a log was (re)opened"),
            ("acked_records", "records", "acknowledged with NONE"),
            ("read_back_records", "records", "of those, found in the reopened logs"),
            ("read_back_ok", "", "every acknowledged record at its offset, in order"),
        ),
    ),
    (
        "Run",
        (
            ("drain_s", "s", "waiting for in-flight produces after the load"),
            ("drain_cut", "", "the drain hit its bound (or a second Ctrl-C)"),
            ("interrupted", "", "the signal that stopped the run early"),
            ("trace_rows", "rows", ""),
            ("trace_path", "", "Parquet trace (python -m purgatory_broker.analytics report PATH)"),
        ),
    ),
)

#: The keys of the run's summary, in table order.
SUMMARY_KEYS = tuple(key for _, rows in SUMMARY_GROUPS for key, _, _ in rows)


def _per_s(count: int, wall_s: float) -> float:
    """``count`` per second of ``wall_s`` (0 if the run took no time). O(1)."""
    return round(count / wall_s, 1) if wall_s > 0 else 0.0


def summarize(
    broker: Broker,
    writer: TraceWriter,
    *,
    wall_s: float,
    cpu_s: float | None,
    uvloop: bool,
    produce: PurgatoryStatistics,
    fetch: PurgatoryStatistics,
    leader_changes: int,
    consumed_records: int,
) -> dict[str, Any]:
    """The summary's figures from the run's broker and trace (see the module doc); the
    load, drain and read-back keys are the caller's. ``cpu_s`` None: not measured (a
    run in virtual time), and so is ``cpu_us_per_request``. O(rows log rows) over the
    trace."""
    counters = broker.counters
    requests = counters.produce_requests + counters.fetch_requests
    latencies: dict[str, list[int]] = defaultdict(list)
    lateness: dict[str, list[int]] = defaultdict(list)
    for row in writer.rows:
        if row.outcome == "completed":
            latencies[row.purgatory].append(row.completed_ms - row.created_ms)
        elif row.outcome == "expired":
            lateness[row.purgatory].append(row.completed_ms - row.deadline_ms)
    summary: dict[str, Any] = {
        "wall_s": round(wall_s, 2),
        "cpu_s": None if cpu_s is None else round(cpu_s, 2),
        "uvloop": uvloop,
        "produce_requests": counters.produce_requests,
        "fetch_requests": counters.fetch_requests,
        "requests_per_s": _per_s(requests, wall_s),
        "delayed_ops": len(writer),
        "delayed_ops_per_s": _per_s(len(writer), wall_s),
        "cpu_us_per_request": None if cpu_s is None else round(cpu_s / max(1, requests) * 1e6, 1),
    }
    for name, stats in (("produce", produce), ("fetch", fetch)):
        summary[f"{name}_completed"] = stats.completed_early
        summary[f"{name}_expired"] = stats.expired
        summary[f"{name}_cancelled"] = stats.cancelled
        for figure, values in (("latency", latencies[name]), ("lateness", lateness[name])):
            values.sort()
            summary[f"{name}_{figure}_p50_ms"] = exact_quantile(values, 0.5) if values else 0
            summary[f"{name}_{figure}_p99_ms"] = exact_quantile(values, 0.99) if values else 0
            summary[f"{name}_{figure}_max_ms"] = values[-1] if values else 0
    parts = broker.partitions.values()
    summary["isr_shrinks"] = sum(p.isr_shrinks for p in parts)
    summary["isr_expands"] = sum(p.isr_expands for p in parts)
    summary["leader_changes"] = leader_changes
    summary["bytes_in"] = counters.bytes_in
    summary["bytes_out"] = counters.bytes_out
    summary["consumed_records"] = consumed_records
    summary["trace_rows"] = len(writer)
    summary["trace_path"] = None
    return summary


def _value(value: Any, unit: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) and unit not in ("", "ms"):
        return f"{value:,} {unit}"
    return f"{value} {unit}".rstrip()


def format_summary(summary: dict[str, Any], width: int = 100) -> str:
    """The summary as grouped tables: figure, value with its unit, what it means
    (wrapped to ``width`` columns). Keys missing from ``summary`` are left out.
    O(keys)."""
    present = [(k, u, n) for _, rows in SUMMARY_GROUPS for k, u, n in rows if k in summary]
    if not present:
        return ""
    key_width = max(len(k) for k, _, _ in present)
    value_width = max(len(_value(summary[k], u)) for k, u, _ in present)
    lines: list[str] = []
    for title, rows in SUMMARY_GROUPS:
        shown = [(k, u, n) for k, u, n in rows if k in summary]
        if not shown:
            continue
        if lines:
            lines.append("")
        lines.append(title)
        for key, unit, note in shown:
            text = f"  {key:<{key_width}}  {_value(summary[key], unit):>{value_width}}  "
            notes = textwrap.wrap(note, max(20, width - 1 - len(text))) or [""]
            lines.append((text + notes[0]).rstrip())
            lines += [" " * len(text) + more for more in notes[1:]]
    return "\n".join(lines)
