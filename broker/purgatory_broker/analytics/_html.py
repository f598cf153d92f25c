"""The HTML reports: one self-contained page each, no scripts, fonts or stylesheets fetched.

:func:`page` wraps sections in a document with inline CSS; :func:`table`
renders a pandas DataFrame with readable numbers; :func:`render_trace_report`
lays out the trace report from the small tables the Spark jobs wrote. Charts
are inline SVG from :mod:`._svg`. Building a page is O(cells + points).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape
from typing import TYPE_CHECKING, Any

from . import _svg
from ._trace import REASONS, RowCheck

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["TraceReportData", "page", "render_trace_report", "table"]

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem auto;
       max-width: 1200px; padding: 0 1rem; color: #222; line-height: 1.45; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { font-size: 1.25rem; margin-top: 2.2rem;
     border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
.meta { color: #555; font-size: .9rem; } .note { color: #444; font-size: .9rem; max-width: 70ch; }
table { border-collapse: collapse; font-size: .85rem; margin: .6rem 0; }
th, td { padding: .25rem .6rem; border-bottom: 1px solid #e6e6e6; }
th { background: #f5f5f5; text-align: left; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.best td { background: #eef7ee; font-weight: 600; }
.charts { display: flex; flex-wrap: wrap; gap: 1rem; } .bad { color: #b00020; font-weight: 600; }
.ok { color: #1b7a1b; } .wide { overflow-x: auto; max-width: 100%; }
code { background: #f3f3f3; padding: 0 .2rem; }
"""


def page(title: str, sections: Sequence[str], subtitle: str = "") -> str:
    """A complete HTML document with inline CSS. O(size of the sections)."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>"
        f'<h1>{escape(title)}</h1><p class="meta">{subtitle}Generated {stamp}.</p>'
        + "\n".join(sections)
        + "</body></html>\n"
    )


def _cell(value: Any) -> tuple[str, bool]:
    """(text, is_number) for a table cell."""
    import pandas as pd

    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return "-", True
    if isinstance(value, bool):
        return ("yes" if value else "no"), False
    if isinstance(value, int) or (hasattr(value, "is_integer") and float(value).is_integer()):
        return f"{int(value):,}", True
    if isinstance(value, float):
        return (f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"), True
    return escape(str(value)), False


def table(
    frame: pd.DataFrame,
    *,
    columns: dict[str, str] | None = None,
    highlight: Sequence[bool] | None = None,
) -> str:
    """An HTML table of ``frame``; ``columns`` maps column -> header (and picks them)."""
    columns = columns or {c: c for c in frame.columns}
    if frame.empty:
        return '<p class="note">No rows.</p>'
    head = "".join(f"<th>{escape(h)}</th>" for h in columns.values())
    rows = []
    records = frame[list(columns)].astype(object).to_numpy().tolist()
    for index, record in enumerate(records):
        cells = []
        for value in record:
            text, number = _cell(value)
            cells.append(f'<td class="num">{text}</td>' if number else f"<td>{text}</td>")
        best = highlight is not None and highlight[index]
        opening = '<tr class="best">' if best else "<tr>"
        rows.append(f"{opening}{''.join(cells)}</tr>")
    body = "".join(rows)
    return (
        f'<div class="wide"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


@dataclass
class TraceReportData:
    """What the trace report shows: small tables collected from the written Parquet."""

    inputs: list[str]
    rows: RowCheck
    window_ms: int
    by_kind: pd.DataFrame
    busiest: pd.DataFrame
    windows: pd.DataFrame
    windows_truncated: bool
    error_codes: pd.DataFrame
    latency_histogram: pd.DataFrame
    lateness_histogram: pd.DataFrame
    tables: dict[str, str] = field(default_factory=dict)  # figure -> where its Parquet is
    elapsed_s: float = 0.0


def _rows_section(rows: RowCheck) -> str:
    if rows.bad == 0:
        verdict = f'<p class="ok">All {rows.total:,} rows are valid.</p>'
    else:
        share = rows.bad / rows.total if rows.total else 0.0
        percent = "<0.01%" if share < 0.0001 else f"{share:.2%}"
        verdict = (
            f'<p class="bad">{rows.bad:,} of {rows.total:,} rows ({escape(percent)}) '
            "are impossible and are excluded from every figure in this report.</p>"
        )
    import pandas as pd

    frame = pd.DataFrame(
        {
            "reason": list(REASONS),
            "meaning": list(REASONS.values()),
            "rows": [rows.reasons.get(r, 0) for r in REASONS],
        }
    )
    return (
        "<h2>Rows checked</h2>"
        + verdict
        + table(frame)
        + '<p class="note">A row with several problems counts under each of them; the '
        "excluded total counts it once.</p>"
    )


_KIND_COLUMNS = {
    "purgatory": "purgatory",
    "kind": "kind",
    "operations": "operations",
    "completed": "completed early",
    "expired": "expired",
    "cancelled": "cancelled",
    "latency_p50_ms": "latency p50 ms",
    "latency_p99_ms": "p99",
    "latency_p999_ms": "p99.9",
    "latency_max_ms": "max",
    "lateness_p50_ms": "lateness p50 ms",
    "lateness_p99_ms": "p99",
    "lateness_max_ms": "max",
    "bytes": "bytes",
    "with_error": "ops with error",
}


def _label(row: Any) -> str:
    return f"{row.purgatory} / {row.kind}"


def _histograms(frame: pd.DataFrame, what: str, x_label: str) -> str:
    charts = []
    for (purgatory, kind), unsorted in frame.groupby(["purgatory", "kind"], sort=True):
        group = unsorted.sort_values("bucket")
        labels = [_svg.fmt_number(float(lo)) for lo in group["lo_ms"]]
        counts = [float(c) for c in group["count"]]
        charts.append(
            _svg.bar_chart(
                labels,
                {"operations": counts},
                title=f"{what}: {purgatory} / {kind} ({int(sum(counts)):,} ops)",
                x_label=x_label,
                y_label="operations",
                width=540,
            )
        )
    if not charts:
        return '<p class="note">No operations.</p>'
    return f'<div class="charts">{"".join(charts)}</div>'


def _over_time(
    frame: pd.DataFrame, value: str, title: str, y_label: str, *, markers: bool = False
) -> str:
    import pandas as pd

    if frame.empty:
        return '<p class="note">No operations.</p>'
    origin = float(frame["window_start_ms"].min())
    starts = sorted(frame["window_start_ms"].unique())
    xs = [(float(s) - origin) / 1000.0 for s in starts]
    series: dict[str, list[float | None]] = {}
    for (purgatory, kind), group in frame.groupby(["purgatory", "kind"], sort=True):
        by_start = dict(zip(group["window_start_ms"], group[value], strict=True))
        series[f"{purgatory}/{kind}"] = [
            None if s not in by_start or pd.isna(by_start[s]) else float(by_start[s])
            for s in starts
        ]
    return _svg.line_chart(
        xs,
        series,
        title=title,
        x_label=f"seconds since {_svg.fmt_number(origin)} ms (trace clock)",
        y_label=y_label,
        width=1040,
        height=260,
        markers=markers,
    )


def _without_partial_last_window(data: TraceReportData) -> tuple[pd.DataFrame, str]:
    """The windows to chart and a note: the last window is left out when the
    trace ends before it does (it would look like a collapse)."""
    frame = data.windows
    last = data.rows.last_created_ms
    if frame.empty or last is None:
        return frame, ""
    start = int(frame["window_start_ms"].max())
    end = int(frame["window_end_ms"].max())
    covered = last + 1 - start
    if covered >= end - start:
        return frame, ""
    note = (
        f"The last window (from {start:,} ms) is partial: the trace ends {covered:,} ms into "
        f"it, so it is not charted (the Parquet table has it)."
    )
    return frame[frame["window_start_ms"] < start], note


def render_trace_report(data: TraceReportData) -> str:
    """The trace report as one HTML document. O(cells + points)."""
    sources = ", ".join(f"<code>{escape(s)}</code>" for s in data.inputs)
    sections = [
        f'<p class="meta">Trace: {sources}. {data.rows.total:,} operations read, '
        f"{data.rows.valid:,} valid. Computed with Apache Spark in {data.elapsed_s:.1f} s.</p>",
        _rows_section(data.rows),
        *_kinds_section(data),
        *_time_sections(data),
        *_busiest_section(data),
        "<h2>Error codes</h2>",
        table(data.error_codes),
        '<p class="note">One result per (operation, key).</p>',
        _about_section(data),
    ]
    return page("Purgatory trace report", sections)


def _kinds_section(data: TraceReportData) -> list[str]:
    """The table per purgatory and kind, and the completion latency histograms."""
    return [
        "<h2>Per purgatory and operation kind</h2>",
        table(data.by_kind, columns=_KIND_COLUMNS),
        '<p class="note">Latency is <code>completed_ms - created_ms</code> of operations that '
        "completed early; lateness is <code>completed_ms - deadline_ms</code> of expired ones "
        "(negative when a coarse tick fired a bucket before the exact deadline).</p>",
        "<h2>Completion latency distribution</h2>",
        _histograms(data.latency_histogram, "latency", "latency bucket, lower edge (ms)"),
    ]


def _time_sections(data: TraceReportData) -> list[str]:
    """Expirations and operations per window, then the expiry lateness."""
    sections = [
        "<h2>Expirations over time</h2>",
        f'<p class="note">Tumbling windows of {data.window_ms:,} ms over <code>created_ms'
        "</code>.</p>",
    ]
    if data.windows_truncated:
        sections.append(
            '<p class="note">Only the first windows are charted; the Parquet table has all.</p>'
        )
    windows, partial_note = _without_partial_last_window(data)
    if partial_note:
        sections.append(f'<p class="note">{partial_note}</p>')
    return [
        *sections,
        _over_time(windows, "expired", "Expired operations per window", "expired"),
        _over_time(windows, "operations", "Operations per window", "operations"),
        "<h2>Expiry lateness</h2>",
        _histograms(data.lateness_histogram, "lateness", "lateness bucket, lower edge (ms)"),
        _over_time(
            windows,
            "lateness_max_ms",
            "Maximum lateness per window (a dot per window with expiries)",
            "ms",
            markers=True,
        ),
    ]


_BUSIEST_COLUMNS = {
    "purgatory": "purgatory",
    "key": "topic-partition",
    "operations": "operations",
    "completed": "completed early",
    "expired": "expired",
    "latency_p99_ms": "latency p99 ms",
    "lateness_max_ms": "lateness max ms",
    "bytes": "bytes",
    "errors": "error results",
}


def _busiest_section(data: TraceReportData) -> list[str]:
    return [
        f"<h2>Busiest keys (top {len(data.busiest)})</h2>",
        table(data.busiest, columns=_BUSIEST_COLUMNS),
        '<p class="note">An operation watching several keys counts once for each key.</p>',
    ]


def _about_section(data: TraceReportData) -> str:
    """How the figures are computed, and where each one's Parquet is."""
    listing = "".join(
        f"<li><code>{escape(name)}</code>: <code>{escape(path)}</code></li>"
        for name, path in data.tables.items()
    )
    return (
        "<h2>About these figures</h2>"
        '<p class="note">Percentiles are exact: the p-th percentile of a group of n values '
        "is the value of rank max(1, ceil(p / 100 &times; n)) in the sorted group. "
        "Counts and bytes are exact.</p>"
        f'<p class="note">Every figure is also written as Parquet:</p><ul>{listing}</ul>'
    )
