"""The report's figures from Spark's cells, exactly, on the driver (pandas and numpy).

:mod:`._spark_figures` folds the trace into cells: rows that share every
grouping column and the value (``value_ms``: latency of an early completion,
lateness of an expiry) become one cell with their count in ``rows``. Every
figure of :mod:`.figures` is a sum over cells, except the percentiles, which
are read from the cells' running counts:

* sort a group's cells by value; the running sum of ``rows`` is, at each
  cell, the rank of that cell's last row among the group's ``n`` values;
* the ``q``-percentile is the value of 1-based rank
  :func:`purgatory.core.quantile_rank` ``(q, n)`` (``max(1, ceil(q * n))``,
  the "inverted CDF" definition): the first cell whose running sum reaches
  that rank. Exact, the same rule as the reference (:mod:`.exact`).

Worked example: latencies 4, 4, 9 of one group fold into cells (4, 2) and
(9, 1), running sums 2 and 3; p50 is rank ``ceil(1.5) = 2``, reached by the
first cell: 4 ms; p99 is rank 3: 9 ms; the max is the last cell's value.

All groups are done at once: one sort of the cells by (group, value), one
cumulative sum, and per quantile one ``searchsorted`` of every group's target
(the rows before the group plus its rank): O(c log c) for ``c`` cells, and
O(groups) calls of the rank rule. The cells are bounded by the distinct
(group, outcome, value) combinations, not by the trace's rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from purgatory.core import quantile_rank

from ._trace import RowCheck
from ._trace import row_check as _row_check_from_flags
from .exact import bucket_indexes, error_names
from .figures import BY_KIND, BY_PARTITION, HISTOGRAMS, LATENESS_QUANTILES, WINDOWS, Summary

__all__ = ["cell_quantiles", "figures", "row_check", "table_schema"]

_OUTCOMES = ("completed", "expired", "cancelled")
#: the outcome whose values each histogram counts
_HISTOGRAM_OUTCOMES = {"latency_ms": "completed", "lateness_ms": "expired"}
_TEXT = {"purgatory", "kind", "key", "error_name"}
_SMALL = {"error_code": "SMALLINT", "bucket": "INT"}
_NOT_NULL = {"operations", "error_name", "results", "bucket", "lo_ms", "count"}


def table_schema(table: pd.DataFrame) -> str:
    """A figure table's Parquet schema as Spark DDL: the types and nullability
    the tables have always had. O(columns)."""

    def kind(name: str) -> str:
        base = "STRING" if name in _TEXT else _SMALL.get(name, "BIGINT")
        return base + (" NOT NULL" if name in _NOT_NULL else "")

    return ", ".join(f"`{name}` {kind(name)}" for name in table.columns)


def _categorical(frame: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """Text columns as sorted categories: grouping and sorting compare small codes."""
    return frame.assign(
        **{
            c: pd.Categorical(frame[c], categories=sorted(frame[c].dropna().unique()))
            for c in columns
            if c in frame
        }
    )


def row_check(cells: pd.DataFrame) -> RowCheck:
    """The row check from the operation cells (their ``flags``). O(cells)."""
    by_flags = cells.groupby("flags")["rows"].sum()
    valid = cells[cells["flags"] == 0]
    last = valid["last_created_ms"].max() if len(valid) else None
    return _row_check_from_flags(
        {int(f): int(n) for f, n in by_flags.items()},
        None if last is None or pd.isna(last) else int(last),
    )


def cell_quantiles(
    cells: pd.DataFrame, keys: list[str], qs: dict[str, float], prefix: str
) -> pd.DataFrame:
    """Exact quantiles of ``value_ms`` per group of ``keys``, from cells weighted
    by ``rows`` (null values skipped), and the max: columns ``{prefix}_{name}_ms``
    and ``{prefix}_max_ms``, indexed by the groups. O(c log c) for c cells."""
    sub = cells.loc[cells["value_ms"].notna(), [*keys, "value_ms", "rows"]]
    sub = sub.sort_values([*keys, "value_ms"], kind="stable")
    sizes = sub.groupby(keys, observed=True, sort=True)["rows"].agg(["size", "sum"])
    counts = sub["rows"].to_numpy(np.int64)
    running = np.cumsum(counts)
    ends = np.cumsum(sizes["size"].to_numpy())  # one past each group's last cell
    starts = ends - sizes["size"].to_numpy()
    before = running[starts] - counts[starts]  # rows of the groups before
    values = sub["value_ms"].to_numpy()
    totals = sizes["sum"].to_numpy().tolist()
    out = pd.DataFrame(index=sizes.index)
    for name, q in qs.items():
        ranks = np.array([quantile_rank(q, n) for n in totals], dtype=np.int64)
        at = np.searchsorted(running, before + ranks, side="left")
        out[f"{prefix}_{name}_ms"] = values[at].astype(np.int64)
    out[f"{prefix}_max_ms"] = values[ends - 1].astype(np.int64)
    return out


def _summary(cells: pd.DataFrame, summary: Summary, extra: dict[str, pd.Series]) -> pd.DataFrame:
    """A summary figure's table: counts, percentiles, bytes and ``extra`` sums."""
    keys = list(summary.keys)
    sums = {"operations": cells["rows"]}
    for outcome in _OUTCOMES:
        sums[outcome] = cells["rows"].where(cells["outcome"] == outcome, 0)
    sums |= {"bytes": cells["bytes"], **extra}
    table = pd.DataFrame(sums).groupby([cells[k] for k in keys], observed=True, sort=True).sum()
    table.index.names = keys
    completed = cells[cells["outcome"] == "completed"]
    expired = cells[cells["outcome"] == "expired"]
    latency = cell_quantiles(completed, keys, summary.latency_quantiles, "latency")
    lateness = cell_quantiles(expired, keys, LATENESS_QUANTILES, "lateness")
    table = table.join(latency.astype("Int64")).join(lateness.astype("Int64"))
    first = ["operations", *_OUTCOMES]
    ordered = [*first, *latency.columns, *lateness.columns]
    ordered += [c for c in table.columns if c not in ordered]
    return _text(table[ordered].reset_index())


def _text(frame: pd.DataFrame) -> pd.DataFrame:
    """Categories back to plain strings, counts to int64, in the table's order."""
    for column in frame.columns:
        if isinstance(frame[column].dtype, pd.CategoricalDtype):
            frame[column] = frame[column].astype(str)
        elif (
            frame[column].dtype.kind in "fiub"
            and column not in _SMALL
            and not frame[column].isna().any()
        ):
            frame[column] = frame[column].astype(np.int64)
    return frame


def _histogram(cells: pd.DataFrame, outcome: str, edges: tuple[int, ...]) -> pd.DataFrame:
    sub = cells[cells["outcome"] == outcome]
    bucket = bucket_indexes(sub["value_ms"].to_numpy(np.int64), edges).astype(np.int32)
    table = (
        sub["rows"]
        .groupby([sub["purgatory"], sub["kind"], pd.Series(bucket, index=sub.index)], observed=True)
        .sum()
        .rename("count")
        .rename_axis(["purgatory", "kind", "bucket"])
        .reset_index()
    )
    table = table[table["count"] > 0]  # categories never seen together
    at = table["bucket"].to_numpy()
    table.insert(3, "lo_ms", np.array(edges, dtype=np.int64)[at])
    table.insert(4, "hi_ms", pd.array([*edges[1:], None], dtype="Int64")[at])
    return _text(table.reset_index(drop=True))


def figures(
    operations: pd.DataFrame, pairs: pd.DataFrame, window_ms: int
) -> dict[str, pd.DataFrame]:
    """Every figure table of the report from the cells (see the module
    docstring), sorted by its keys. O(c log c) for c cells."""
    ops = _categorical(operations[operations["flags"] == 0], ("purgatory", "kind", "outcome"))
    ops = ops.assign(
        window_start_ms=ops["window_start_ms"].astype(np.int64),
        window_end_ms=ops["window_start_ms"].astype(np.int64) + window_ms,
    )
    pairs = _categorical(pairs, ("purgatory", "kind", "key", "outcome"))
    tables = {
        BY_KIND.name: _summary(
            ops, BY_KIND, {"key_watches": ops["key_watches"], "with_error": ops["with_error"]}
        ),
        BY_PARTITION.name: _summary(
            pairs, BY_PARTITION, {"errors": pairs["rows"].where(pairs["code"] != 0, 0)}
        ),
        WINDOWS.name: _summary(ops, WINDOWS, {}),
    }
    codes = (
        pairs.groupby(["purgatory", "kind", "code"], observed=True, sort=True)["rows"]
        .sum()
        .rename("results")
        .reset_index()
        .rename(columns={"code": "error_code"})
    )
    codes = codes[codes["results"] > 0].reset_index(drop=True)
    codes["error_code"] = codes["error_code"].astype(np.int16)
    codes.insert(3, "error_name", error_names(codes["error_code"]))
    tables["error_codes"] = _text(codes)
    for histogram in HISTOGRAMS:
        outcome = _HISTOGRAM_OUTCOMES[histogram.column]
        tables[histogram.name] = _histogram(ops, outcome, histogram.edges)
    return tables
