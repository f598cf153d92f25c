"""Spark's figures equal an exact computation (pandas and pyarrow) on the test trace.

Every column of every table must be equal: counts, bytes, maxima, histogram
buckets, and the percentiles, which the report computes exactly from Spark's
cells (:mod:`purgatory_broker.analytics._fold`) with the same rank rule as the
reference (:func:`purgatory.core.quantile_rank`). Before exact percentiles the
report used ``percentile_approx``, whose values only came within ``n / A``
ranks of these.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from purgatory_broker.analytics import exact

from .conftest import SYNTHETIC_ROWS, WINDOW_MS, Report


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


@pytest.mark.system  # Java: a Spark session
@pytest.mark.parametrize(
    ("name", "keys"),
    [
        ("by_kind", ["purgatory", "kind"]),
        ("by_partition", ["purgatory", "key"]),
        ("windows", ["window_start_ms", "window_end_ms", "purgatory", "kind"]),
    ],
)
def test_every_figure_is_exact_percentiles_included(
    report: Report, reference: dict[str, pd.DataFrame], name: str, keys: list[str]
) -> None:
    joined = _joined(report, reference, name, keys)
    columns = [c for c in _spark(report, name).columns if c not in keys]
    assert {c for c in columns if "_p" in c} >= {"latency_p50_ms", "lateness_p99_ms"}
    assert set(columns) == {c for c in reference[name].columns if c not in keys}
    for column in columns:
        spark = joined[column].astype("float64").fillna(-1e18).to_numpy()
        ref = joined[f"{column}_exact"].astype("float64").fillna(-1e18).to_numpy()
        assert np.array_equal(spark, ref), f"{name}.{column}"


@pytest.mark.system  # Java: a Spark session
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


def test_exact_reference_on_a_hand_computed_trace() -> None:
    """The reference itself, on four operations worked out by hand."""
    import pyarrow as pa
    from purgatory_broker.tracing import trace_schema

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
