"""The trace report end to end: exit status, output layout, row checks, the HTML."""

from __future__ import annotations

import re

import pyarrow.parquet as pq
import pytest
from purgatory_broker.analytics import REASONS

from .conftest import BAD_ROWS, SYNTHETIC_ROWS, Report

pytestmark = pytest.mark.system  # Java: a Spark session

TABLES = (
    "row_checks",
    "by_kind",
    "by_partition",
    "windows",
    "error_codes",
    "latency_histogram",
    "lateness_histogram",
)


def _table(report: Report, name: str) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = pq.read_table(report.out / "tables" / name).to_pylist()
    return rows


def test_cli_prints_where_the_report_went(report: Report) -> None:
    assert report.status == 0
    html = report.out / "report.html"
    assert f"report: {html}" in report.stdout
    total = SYNTHETIC_ROWS + len(BAD_ROWS)
    assert f"{total:,} operations, {SYNTHETIC_ROWS:,} valid, {len(BAD_ROWS)} excluded" in (
        report.stdout
    )


def test_every_figure_is_written_as_parquet(report: Report) -> None:
    for name in TABLES:
        assert (report.out / "tables" / name).is_dir(), name
        assert _table(report, name), f"{name} is empty"


def test_impossible_rows_are_counted_per_reason(report: Report) -> None:
    expected = dict.fromkeys(REASONS, 0)
    for _, reasons in BAD_ROWS:
        for reason in reasons:
            expected[reason] += 1
    found = {str(r["reason"]): r["rows"] for r in _table(report, "row_checks")}
    assert found == expected


def test_impossible_rows_are_excluded_from_the_figures(report: Report) -> None:
    by_kind = _table(report, "by_kind")
    assert sum(int(str(r["operations"])) for r in by_kind) == SYNTHETIC_ROWS
    keys = {(r["purgatory"], r["key"]) for r in _table(report, "by_partition")}
    assert all(not str(key).startswith("None") for _, key in keys)


def test_report_html_is_self_contained(report: Report) -> None:
    html = (report.out / "report.html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    for forbidden in ("<script", "<link", "<img", "src=", "@import", "url("):
        assert forbidden not in html, forbidden
    # the only URL is the SVG namespace, which is a name, not a fetch
    assert set(re.findall(r"https?://[^\"' ]+", html)) == {"http://www.w3.org/2000/svg"}


def test_report_html_shows_the_figures(report: Report) -> None:
    html = (report.out / "report.html").read_text(encoding="utf-8")
    assert html.count("<svg") >= 6  # latency and lateness histograms, 3 lines over time
    for heading in (
        "Rows checked",
        "Per purgatory and operation kind",
        "Completion latency distribution",
        "Expirations over time",
        "Expiry lateness",
        "Busiest keys (top 5)",
        "Error codes",
    ):
        assert heading in html, heading
    assert f"{len(BAD_ROWS)} of {SYNTHETIC_ROWS + len(BAD_ROWS):,} rows" in html
    assert "excluded from every figure" in html
    for reason in REASONS:
        assert reason in html


def test_busiest_keys_are_the_top_of_by_partition(report: Report) -> None:
    by_partition = _table(report, "by_partition")
    top = sorted(by_partition, key=lambda r: -int(str(r["operations"])))[:5]
    html = (report.out / "report.html").read_text(encoding="utf-8")
    for row in top:
        assert f"<td>{row['key']}</td>" in html


def test_a_partial_last_window_is_not_charted(report: Report) -> None:
    windows = pq.read_table(report.out / "tables" / "windows").to_pandas()
    last_start = int(windows["window_start_ms"].max())
    html = (report.out / "report.html").read_text(encoding="utf-8")
    # the synthetic trace ends inside its last 50 ms window, which the table keeps
    assert f"The last window (from {last_start:,} ms) is partial" in html
    assert "Percentiles are exact" in html
