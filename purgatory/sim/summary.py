"""The simulation's summary: one flat dict of figures, and its table.

:func:`summarize` reads what the run leaves behind: the broker's counters, both
purgatories' statistics (completed early, expired, cancelled, expiry lateness
p50/p99/max from their histograms), the partitions' ISR changes, and the trace
rows, from which the completion latency of each purgatory's early completions
is taken: p50 and p99 are exact (:func:`purgatory.core.exact_quantile`: rank
``ceil(q * n)`` of the sorted latencies), max is the largest. CPU per request is
the process's CPU time over the run divided by the produce and fetch requests.

A flat dict, so a sweep can put one run per row (:data:`SUMMARY_KEYS` orders the
table; the run adds ``read_back_problems``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from purgatory import PurgatoryStatistics
from purgatory.broker import Broker
from purgatory.core import exact_quantile
from purgatory.tracing import TraceWriter

__all__ = ["SUMMARY_KEYS", "format_summary", "summarize"]

#: The keys of the run's summary, in table order.
SUMMARY_KEYS = (
    "wall_s",
    "cpu_s",
    "uvloop",
    "produce_requests",
    "fetch_requests",
    "requests_per_s",
    "delayed_ops",
    "delayed_ops_per_s",
    "cpu_us_per_request",
    "produce_completed",
    "produce_expired",
    "produce_cancelled",
    "produce_latency_p50_ms",
    "produce_latency_p99_ms",
    "produce_latency_max_ms",
    "produce_lateness_p50_ms",
    "produce_lateness_p99_ms",
    "produce_lateness_max_ms",
    "fetch_completed",
    "fetch_expired",
    "fetch_cancelled",
    "fetch_latency_p50_ms",
    "fetch_latency_p99_ms",
    "fetch_latency_max_ms",
    "fetch_lateness_p50_ms",
    "fetch_lateness_p99_ms",
    "fetch_lateness_max_ms",
    "isr_shrinks",
    "isr_expands",
    "leader_changes",
    "bytes_in",
    "bytes_out",
    "log_flushes",
    "recovery_truncated_bytes",
    "acked_records",
    "failed_produces",
    "consumed_records",
    "read_back_records",
    "read_back_ok",
    "trace_rows",
    "trace_path",
)


def summarize(
    broker: Broker,
    writer: TraceWriter,
    *,
    wall_s: float,
    cpu_s: float,
    uvloop: bool,
    produce: PurgatoryStatistics,
    fetch: PurgatoryStatistics,
    leader_changes: int,
    consumed_records: int,
) -> dict[str, Any]:
    """The summary's figures from the run's broker and trace (see the module doc);
    ``log_flushes`` and the read-back's keys are the caller's. O(rows log rows)
    over the trace rows."""
    counters = broker.counters
    requests = counters.produce_requests + counters.fetch_requests
    latencies: dict[str, list[int]] = defaultdict(list)
    for row in writer.rows:
        if row.outcome == "completed":
            latencies[row.purgatory].append(row.completed_ms - row.created_ms)
    summary: dict[str, Any] = {
        "wall_s": round(wall_s, 2),
        "cpu_s": round(cpu_s, 2),
        "uvloop": uvloop,
        "produce_requests": counters.produce_requests,
        "fetch_requests": counters.fetch_requests,
        "requests_per_s": round(requests / wall_s, 1),
        "delayed_ops": len(writer),
        "delayed_ops_per_s": round(len(writer) / wall_s, 1),
        "cpu_us_per_request": round(cpu_s / max(1, requests) * 1e6, 1),
    }
    for name, stats in (("produce", produce), ("fetch", fetch)):
        values = sorted(latencies[name])
        summary[f"{name}_completed"] = stats.completed_early
        summary[f"{name}_expired"] = stats.expired
        summary[f"{name}_cancelled"] = stats.cancelled
        summary[f"{name}_latency_p50_ms"] = exact_quantile(values, 0.5) if values else 0
        summary[f"{name}_latency_p99_ms"] = exact_quantile(values, 0.99) if values else 0
        summary[f"{name}_latency_max_ms"] = values[-1] if values else 0
        summary[f"{name}_lateness_p50_ms"] = stats.lateness_p50_ms
        summary[f"{name}_lateness_p99_ms"] = stats.lateness_p99_ms
        summary[f"{name}_lateness_max_ms"] = stats.lateness_max_ms
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


def format_summary(summary: dict[str, Any]) -> str:
    """The summary as a two-column table."""
    width = max(len(k) for k in SUMMARY_KEYS)
    lines = [f"{'metric':<{width}}  value", f"{'-' * width}  {'-' * 20}"]
    lines += [f"{key:<{width}}  {summary.get(key)}" for key in SUMMARY_KEYS]
    return "\n".join(lines)
