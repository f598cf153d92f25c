"""Spark's figures agree with an exact computation (pandas and pyarrow) on the test trace.

Counts, bytes, maxima and histogram buckets must be equal. Percentiles come
from ``percentile_approx`` with accuracy ``A``; Spark documents ``1 / A`` as
its relative error, i.e. the returned value's rank is within ``n / A`` of the
target rank, where ``n`` is the group's size. The returned value is also
always one of the group's values. So for each percentile ``q`` of a group of
``n`` values we check that the value occurs in the group and that its rank
range ``[count(x < v) + 1, count(x <= v)]`` comes within
``ceil(n / A)`` of the exact rank ``ceil(q * n)``.

The report is built with ``A = 100`` (conftest.ACCURACY): with Spark's default
of 10 000 a few-thousand-row group is summarised exactly, and the check would
prove nothing about the approximation.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from purgatory.analytics import exact

from .conftest import ACCURACY, SYNTHETIC_ROWS, WINDOW_MS, Report

QUANTILES = {"p50": 0.5, "p99": 0.99, "p999": 0.999}


@pytest.fixture(scope="module")
def trace(trace_dir: Path) -> Any:
    return exact.load_trace([trace_dir])


@pytest.fixture(scope="module")
def reference(trace: Any) -> dict[str, pd.DataFrame]:
    valid, check = exact.check_rows(trace)
    assert check.valid == SYNTHETIC_ROWS
    return exact.figures(valid, WINDOW_MS)


def _spark(report: Report, name: str) -> pd.DataFrame:
    frame: pd.DataFrame = pq.read_table(report.out / "tables" / name).to_pandas()
    return frame


def _joined(
    report: Report, reference: dict[str, pd.DataFrame], name: str, keys: list[str]
) -> pd.DataFrame:
    spark = _spark(report, name)
    ref = reference[name]
    assert len(spark) == len(ref), f"{name}: {len(spark)} groups in Spark, {len(ref)} exact"
    joined = spark.merge(ref, on=keys, suffixes=("", "_exact"), validate="one_to_one")
    assert len(joined) == len(ref), f"{name}: the groups differ"
    return joined


EXACT_COLUMNS = ["operations", "completed", "expired", "cancelled", "bytes", "latency_max_ms"]


@pytest.mark.parametrize(
    ("name", "keys", "extra"),
    [
        ("by_kind", ["purgatory", "kind"], ["key_watches", "with_error", "lateness_max_ms"]),
        ("by_partition", ["purgatory", "key"], ["errors", "lateness_max_ms"]),
        (
            "windows",
            ["window_start_ms", "window_end_ms", "purgatory", "kind"],
            ["lateness_max_ms"],
        ),
    ],
)
def test_counts_bytes_and_maxima_are_exact(
    report: Report,
    reference: dict[str, pd.DataFrame],
    name: str,
    keys: list[str],
    extra: list[str],
) -> None:
    joined = _joined(report, reference, name, keys)
    for column in EXACT_COLUMNS + extra:
        spark = joined[column].astype("float64").fillna(-1e18).to_numpy()
        ref = joined[f"{column}_exact"].astype("float64").fillna(-1e18).to_numpy()
        assert np.array_equal(spark, ref), f"{name}.{column}"


@pytest.mark.parametrize(
    ("name", "keys"),
    [
        ("error_codes", ["purgatory", "kind", "error_code"]),
        ("latency_histogram", ["purgatory", "kind", "bucket"]),
        ("lateness_histogram", ["purgatory", "kind", "bucket"]),
    ],
)
def test_error_codes_and_histograms_are_exact(
    report: Report, reference: dict[str, pd.DataFrame], name: str, keys: list[str]
) -> None:
    joined = _joined(report, reference, name, keys)
    count = "results" if name == "error_codes" else "count"
    assert (joined[count] == joined[f"{count}_exact"]).all()
    if name != "error_codes":
        assert (joined["lo_ms"] == joined["lo_ms_exact"]).all()
    else:
        assert (joined["error_name"] == joined["error_name_exact"]).all()


def _within_bound(values: np.ndarray, v: float, q: float) -> tuple[bool, str]:
    n = len(values)
    below = int(np.count_nonzero(values < v))
    at_most = int(np.count_nonzero(values <= v))
    target = max(1, math.ceil(round(q * n, 9)))
    slack = math.ceil(n / ACCURACY)
    ok = at_most > below and below + 1 - slack <= target <= at_most + slack
    return ok, f"n={n} q={q} value={v} ranks {below + 1}..{at_most}, target {target} +-{slack}"


def _groups(trace: Any, keys: list[str], column: str) -> dict[tuple[Any, ...], np.ndarray]:
    valid, _ = exact.check_rows(trace)
    ops, _, pairs = exact._operations(valid)
    frame = pairs if "key" in keys else ops
    frame = frame.assign(**{k: frame[k].astype(str) for k in keys})
    return {
        (key if isinstance(key, tuple) else (key,)): group[column].dropna().to_numpy()
        for key, group in frame.groupby(keys, observed=True)
    }


@pytest.mark.parametrize(
    ("name", "keys", "prefix", "column", "quantiles"),
    [
        ("by_kind", ["purgatory", "kind"], "latency", "latency_ms", QUANTILES),
        ("by_kind", ["purgatory", "kind"], "lateness", "lateness_ms", {"p50": 0.5, "p99": 0.99}),
        ("by_partition", ["purgatory", "key"], "latency", "latency_ms", QUANTILES),
    ],
)
def test_percentiles_within_documented_accuracy(  # noqa: PLR0917 - parametrized
    report: Report,
    trace: Any,
    name: str,
    keys: list[str],
    prefix: str,
    column: str,
    quantiles: dict[str, float],
) -> None:
    groups = _groups(trace, keys, column)
    spark = _spark(report, name)
    checked = 0
    for row in spark.to_dict("records"):
        values = groups.get(tuple(row[k] for k in keys), np.array([]))
        for label, q in quantiles.items():
            got = row[f"{prefix}_{label}_ms"]
            if len(values) == 0:
                assert pd.isna(got)
                continue
            ok, detail = _within_bound(values, float(got), q)
            assert ok, f"{name} {row[keys[0]]}/{row[keys[1]]} {prefix} {label}: {detail}"
            checked += 1
    assert checked >= len(spark)  # every group had values for at least one percentile


def test_exact_reference_on_a_hand_computed_trace() -> None:
    """The reference itself, on four operations worked out by hand."""
    import pyarrow as pa

    from purgatory.tracing import trace_schema

    rows: list[dict[str, Any]] = [
        # latency 10, 20, 30 (completed); one expired 3 ms late
        {"created_ms": 0, "deadline_ms": 100, "completed_ms": 10, "outcome": "completed"},
        {"created_ms": 0, "deadline_ms": 100, "completed_ms": 20, "outcome": "completed"},
        {"created_ms": 60, "deadline_ms": 160, "completed_ms": 90, "outcome": "completed"},
        {"created_ms": 60, "deadline_ms": 160, "completed_ms": 163, "outcome": "expired"},
    ]
    full = [
        {
            "op_id": i,
            "purgatory": "fetch",
            "kind": "fetch_consumer",
            "keys": ["t-0", "t-1"] if i == 0 else ["t-0"],
            "error_codes": [0, 6] if i == 0 else [0],
            "bytes": 100 * (i + 1),
            **row,
        }
        for i, row in enumerate(rows)
    ]
    table = pa.Table.from_pylist(full, schema=trace_schema())
    valid, check = exact.check_rows(table)
    assert check.bad == 0
    figures = exact.figures(valid, window_ms=50)
    kind = figures["by_kind"].iloc[0]
    assert (kind.operations, kind.completed, kind.expired, kind.bytes) == (4, 3, 1, 1000)
    assert (kind.latency_p50_ms, kind.latency_p99_ms, kind.latency_max_ms) == (20, 30, 30)
    assert (kind.lateness_p50_ms, kind.lateness_max_ms) == (3, 3)
    assert (kind.key_watches, kind.with_error) == (5, 1)
    windows = figures["windows"]
    assert list(windows["window_start_ms"]) == [0, 50]
    assert list(windows["operations"]) == [2, 2]
    partitions = figures["by_partition"].set_index("key")
    assert partitions.loc["t-0", "operations"] == 4
    assert partitions.loc["t-1", "errors"] == 1
