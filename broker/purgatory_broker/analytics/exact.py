"""The same figures on one machine, exactly: pyarrow to read, numpy and pandas to count.

This is the reference the Spark pipeline is checked against (the tests) and
measured against (``broker/benchmarks/analytics_bench.py``). It loads the whole trace
into memory, so it is bounded by one machine's RAM, and computes:

* the impossible-row counts with the same reasons as :mod:`._trace`;
* every figure of :mod:`.figures` (as the report computes it from Spark's
  cells, :mod:`._fold`), with the same columns; percentiles are the value of
  1-based rank ``max(1, ceil(q * n))`` in the sorted group (the "inverted
  CDF" definition), the rank :func:`purgatory.core.quantile_rank` gives.
  Percentiles come from one sort per figure: values are sorted by (group,
  value), each group's rank is computed once per quantile by that function
  (O(groups) calls, not O(rows)) and read by index, O(n log n) in all.

Memory: about 60 bytes per operation plus 40 per (operation, key) pair, with
the key strings dictionary-encoded.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from purgatory.core import quantile_rank
from purgatory_broker.broker.errors import ERROR_NAMES
from purgatory_broker.tracing import OUTCOMES, TRACE_COLUMNS

from ._trace import REASONS, RowCheck
from .figures import BY_KIND, BY_PARTITION, HISTOGRAMS, LATENESS_QUANTILES, WINDOWS, Summary

__all__ = [
    "bucket_indexes",
    "check_rows",
    "error_names",
    "figures",
    "group_quantiles",
    "load_trace",
    "window_starts",
]


def load_trace(paths: Sequence[str | Path]) -> pa.Table:
    """Read Parquet files or folders into one ``pyarrow.Table`` of the trace columns."""
    sources = [str(p) for p in paths]
    files: list[str] = []
    for source in sources:
        path = Path(source)
        files += sorted(str(f) for f in path.rglob("*.parquet")) if path.is_dir() else [source]
    dataset = ds.dataset(files, format="parquet")
    return dataset.to_table(columns=[name for name, _ in TRACE_COLUMNS])


def _list_null_rows(column: pa.ChunkedArray, rows: int) -> np.ndarray:
    array = column.combine_chunks()
    flat_nulls = pc.is_null(pc.list_flatten(array)).to_numpy(zero_copy_only=False)
    parents = pc.list_parent_indices(array).to_numpy()
    counts: np.ndarray = np.bincount(parents[flat_nulls], minlength=rows)
    return counts > 0


def check_rows(table: pa.Table) -> tuple[pa.Table, RowCheck]:
    """The valid rows and the counts of impossible ones, by :data:`~._trace.REASONS`."""
    n = table.num_rows

    def col(name: str) -> np.ndarray:
        values: np.ndarray = table.column(name).to_numpy()
        return values

    nulls = np.zeros(n, dtype=bool)
    for name, _ in TRACE_COLUMNS:
        nulls |= pc.is_null(table.column(name)).to_numpy(zero_copy_only=False)
    for name in ("keys", "error_codes"):
        nulls |= _list_null_rows(table.column(name), n)
    if nulls.any():  # the comparisons below need non-null values
        table = table.filter(pa.array(~nulls))
        kept = ~nulls
    else:
        kept = np.ones(n, dtype=bool)
    masks = {"null_value": nulls}
    for reason, test in (
        ("completed_before_created", lambda: col("completed_ms") < col("created_ms")),
        ("deadline_before_created", lambda: col("deadline_ms") < col("created_ms")),
        ("negative_bytes", lambda: col("bytes") < 0),
        (
            "unknown_outcome",
            lambda: ~pc.is_in(table.column("outcome"), pa.array(OUTCOMES)).to_numpy(),
        ),
        (
            "error_codes_length_mismatch",
            lambda: (
                pc.list_value_length(table.column("error_codes")).to_numpy()
                != pc.list_value_length(table.column("keys")).to_numpy()
            ),
        ),
    ):
        full = np.zeros(n, dtype=bool)
        full[kept] = test()
        masks[reason] = full
    bad = np.zeros(n, dtype=bool)
    for mask in masks.values():
        bad |= mask
    counts = {reason: int(masks[reason].sum()) for reason in REASONS}
    check = RowCheck(total=n, bad=int(bad.sum()), reasons=counts)
    return table.filter(pa.array(~bad[kept])), check


def group_quantiles(
    frame: pd.DataFrame, keys: list[str], column: str, qs: dict[str, float], prefix: str
) -> pd.DataFrame:
    """Exact quantiles (:func:`purgatory.core.quantile_rank`) of ``column`` per
    group, nulls skipped.

    One stable sort by (keys, value), then an index per group and quantile.
    O(n log n) time, O(n) memory.
    """
    sub = frame.loc[frame[column].notna(), [*keys, column]]
    sub = sub.sort_values([*keys, column], kind="stable")
    sizes = sub.groupby(keys, observed=True, sort=True).size()
    n = sizes.to_numpy()
    starts = np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int64)
    values = sub[column].to_numpy()
    out = pd.DataFrame(index=sizes.index)
    sizes_list = n.tolist()
    for name, q in qs.items():
        rank = np.array([quantile_rank(q, size) for size in sizes_list], dtype=np.int64)
        out[f"{prefix}_{name}_ms"] = values[starts + rank - 1].astype(np.int64)
    out[f"{prefix}_max_ms"] = values[starts + n - 1].astype(np.int64)
    return out


def _operations(table: pa.Table) -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame]:
    """Per-operation frame, the parent row of each (op, key) pair, and the pair frame."""
    outcome = table.column("outcome").to_numpy(zero_copy_only=False)
    created = table.column("created_ms").to_numpy()
    completed = table.column("completed_ms").to_numpy()
    deadline = table.column("deadline_ms").to_numpy()
    is_completed = outcome == "completed"
    is_expired = outcome == "expired"
    ops = pd.DataFrame(
        {
            "purgatory": table.column("purgatory").dictionary_encode().to_pandas(),
            "kind": table.column("kind").dictionary_encode().to_pandas(),
            "created_ms": created,
            "completed": is_completed.astype(np.int64),
            "expired": is_expired.astype(np.int64),
            "cancelled": (outcome == "cancelled").astype(np.int64),
            "bytes": table.column("bytes").to_numpy(),
            "latency_ms": np.where(is_completed, completed - created, np.nan),
            "lateness_ms": np.where(is_expired, completed - deadline, np.nan),
        }
    )
    keys = table.column("keys").combine_chunks()
    parent = pc.list_parent_indices(keys).to_numpy()
    codes = pc.list_flatten(table.column("error_codes").combine_chunks()).to_numpy()
    pairs = ops.iloc[parent].reset_index(drop=True)
    pairs["key"] = pc.list_flatten(keys).dictionary_encode().to_pandas()
    pairs["code"] = codes
    return ops, parent, pairs


def _summarise(frame: pd.DataFrame, summary: Summary) -> pd.DataFrame:
    keys = list(summary.keys)
    grouped = frame.groupby(keys, observed=True, sort=True)
    out = grouped.agg(
        operations=("completed", "size"),
        completed=("completed", "sum"),
        expired=("expired", "sum"),
        cancelled=("cancelled", "sum"),
        bytes=("bytes", "sum"),
    )
    out = out.join(group_quantiles(frame, keys, "latency_ms", summary.latency_quantiles, "latency"))
    out = out.join(group_quantiles(frame, keys, "lateness_ms", LATENESS_QUANTILES, "lateness"))
    return out


def bucket_indexes(values: np.ndarray, edges: tuple[int, ...]) -> np.ndarray:
    """:func:`.figures.bucket_index` of every value (edges at or below it, minus
    one, clamped), vectorised. O(n log len(edges))."""
    bucket = np.searchsorted(np.array(edges), values, side="right") - 1
    clipped: np.ndarray = np.clip(bucket, 0, len(edges) - 1)
    return clipped


def error_names(codes: pd.Series) -> list[str]:
    """The name of every error code (:data:`~purgatory_broker.broker.errors.ERROR_NAMES`;
    "other" for a code it does not know). O(n)."""
    return [ERROR_NAMES.get(int(c), "other") for c in codes]


def window_starts(created_ms: np.ndarray, window_ms: int) -> np.ndarray:
    """:func:`.figures.window_start_ms` of every value, vectorised. O(n)."""
    starts: np.ndarray = created_ms // window_ms * window_ms
    return starts


def _histogram(ops: pd.DataFrame, column: str, edges: tuple[int, ...]) -> pd.DataFrame:
    sub = ops.loc[ops[column].notna(), ["purgatory", "kind", column]]
    sub = sub.assign(bucket=bucket_indexes(sub[column].to_numpy(), edges))
    out = sub.groupby(["purgatory", "kind", "bucket"], observed=True).size().rename("count")
    out = out.reset_index()
    out["lo_ms"] = np.array(edges)[out["bucket"].to_numpy()]
    highs = np.array([*edges[1:], -1])[out["bucket"].to_numpy()]
    out["hi_ms"] = pd.array(np.where(highs == -1, None, highs), dtype="Int64")
    return out[["purgatory", "kind", "bucket", "lo_ms", "hi_ms", "count"]]


def figures(valid: pa.Table, window_ms: int) -> dict[str, pd.DataFrame]:
    """Every figure of the report, exactly, from the valid rows. O(n log n)."""
    ops, parent, pairs = _operations(valid)
    tables: dict[str, pd.DataFrame] = {}

    by_kind = _summarise(ops, BY_KIND)
    codes = valid.column("error_codes").combine_chunks()
    flat = pc.list_flatten(codes).to_numpy()
    has_error = np.bincount(parent[flat != 0], minlength=len(ops)) > 0
    extra = (
        ops.assign(
            key_watches=pc.list_value_length(codes).to_numpy().astype(np.int64),
            with_error=has_error.astype(np.int64),
        )
        .groupby(["purgatory", "kind"], observed=True)[["key_watches", "with_error"]]
        .sum()
    )
    tables[BY_KIND.name] = by_kind.join(extra).reset_index()

    by_partition = _summarise(pairs, BY_PARTITION)
    errors = (
        pairs.assign(errors=(pairs["code"] != 0).astype(np.int64))
        .groupby(["purgatory", "key"], observed=True)["errors"]
        .sum()
    )
    tables[BY_PARTITION.name] = by_partition.join(errors).reset_index()

    start = window_starts(ops["created_ms"].to_numpy(), window_ms)
    windowed = ops.assign(window_start_ms=start, window_end_ms=start + window_ms)
    tables[WINDOWS.name] = _summarise(windowed, WINDOWS).reset_index()

    error_codes = (
        (pairs.groupby(["purgatory", "kind", "code"], observed=True).size().rename("results"))
        .reset_index()
        .rename(columns={"code": "error_code"})
    )
    error_codes.insert(3, "error_name", error_names(error_codes["error_code"]))
    tables["error_codes"] = error_codes

    for histogram in HISTOGRAMS:
        tables[histogram.name] = _histogram(ops, histogram.column, histogram.edges)
    for frame in tables.values():
        for column in ("purgatory", "kind", "key"):
            if column in frame:
                frame[column] = frame[column].astype(str)
    return tables
