"""Reading a trace into Spark: schema validation and the impossible-row check.

:func:`read_trace` reads one or many Parquet files or folders (with schema
merging, so files that disagree are caught) and refuses a trace whose schema
does not match :data:`purgatory.tracing.TRACE_COLUMNS`, naming every
missing and every mistyped column. Extra columns are allowed and ignored.

:func:`check_rows` classifies rows in one pass. A row is *impossible* when it
has a null where the schema forbids one, completed before it was created, has a
deadline before its creation, negative bytes, an outcome outside
:data:`~purgatory.tracing.OUTCOMES`, or a different number of error codes
and keys. Each reason is counted on its own (a row may count under several),
bad rows are counted once in total, and only the valid rows go on to the
figures. Nothing is dropped silently: the counts are written to the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING, Any

from purgatory.tracing import OUTCOMES, TRACE_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["REASONS", "SPARK_TYPES", "RowCheck", "TraceSchemaError", "check_rows", "read_trace"]

#: the trace's arrow type names as Spark shows them (``DataType.simpleString``)
SPARK_TYPES = {
    "int64": "bigint",
    "string": "string",
    "list<string>": "array<string>",
    "list<int16>": "array<smallint>",
}

#: the reasons a row is impossible, in report order, with their explanation
REASONS: dict[str, str] = {
    "null_value": "a column, key or error code is null",
    "completed_before_created": "completed_ms < created_ms",
    "deadline_before_created": "deadline_ms < created_ms",
    "negative_bytes": "bytes < 0",
    "unknown_outcome": f"outcome not one of {', '.join(OUTCOMES)}",
    "error_codes_length_mismatch": "len(error_codes) != len(keys)",
}


class TraceSchemaError(ValueError):
    """The input is not a trace: unreadable, or columns missing or of the wrong type."""


@dataclass(frozen=True)
class RowCheck:
    """How many rows were read, how many were impossible, and why."""

    total: int
    bad: int
    reasons: dict[str, int]  # reason -> rows with that problem, in REASONS order

    @property
    def valid(self) -> int:
        return self.total - self.bad


def _has_scheme(path: str) -> bool:
    head, sep, _ = path.partition("://")
    return bool(sep) and head.isalpha()


def read_trace(spark: SparkSession, paths: Sequence[str | Path]) -> DataFrame:
    """The trace's columns from Parquet files or folders, schema checked.

    Local paths must exist (URLs such as ``hdfs://`` are passed to Spark as
    they are). Reads only Parquet footers here; rows are read by later jobs.
    Raises :class:`TraceSchemaError` for an unreadable or mistyped trace; when
    files disagree, local files are checked one by one to name the culprits.
    """
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    if not paths:
        raise ValueError("no trace given: pass one or more Parquet files or folders")
    names = [str(p) for p in paths]
    missing = [p for p in names if not _has_scheme(p) and not Path(p).exists()]
    if missing:
        raise FileNotFoundError(f"trace not found: {', '.join(missing)}")
    try:
        frame = spark.read.option("mergeSchema", "true").parquet(*names)
    except (PySparkException, Py4JJavaError) as exc:
        per_file = _file_problems([p for p in names if not _has_scheme(p)])
        detail = "; ".join(per_file) if per_file else _first_lines(exc)
        raise TraceSchemaError(
            f"cannot read {', '.join(names)} as a Parquet trace: {detail}"
        ) from exc
    found = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    problems = _problems(found, SPARK_TYPES)
    if problems:
        raise TraceSchemaError(
            f"not a purgatory trace in {', '.join(names)}: {'. '.join(problems)}. "
            "See purgatory.tracing.TRACE_COLUMNS for the schema."
        )
    return frame.select(*[name for name, _ in TRACE_COLUMNS])


def _problems(found: dict[str, str], type_names: dict[str, str]) -> list[str]:
    """Missing and mistyped columns of a schema ``{column: type}``, as sentences."""
    missing = [name for name, _ in TRACE_COLUMNS if name not in found]
    mistyped = [
        f"{name} is {found[name]}, expected {type_names[kind]}"
        + (f" ({kind})" if type_names[kind] != kind else "")
        for name, kind in TRACE_COLUMNS
        if name in found and found[name] != type_names[kind]
    ]
    problems = []
    if missing:
        problems.append(f"missing column(s): {', '.join(missing)}")
    if mistyped:
        problems.append(f"mistyped column(s): {'; '.join(mistyped)}")
    return problems


def _arrow_type_name(arrow_type: Any) -> str:
    """``list<item: string>`` -> ``list<string>``; other types as arrow prints them."""
    value_type = getattr(arrow_type, "value_type", None)
    if value_type is not None and str(arrow_type).startswith("list<"):
        return f"list<{value_type}>"
    return str(arrow_type)


def _file_problems(paths: Sequence[str]) -> list[str]:
    """Per local Parquet file, its schema problems (footers only, O(files))."""
    import pyarrow.parquet as pq

    files: list[Path] = []
    for name in paths:
        path = Path(name)
        candidates = path.rglob("*.parquet") if path.is_dir() else [path]
        files += sorted(f for f in candidates if not f.name.startswith(("_", ".")))
    identity = {kind: kind for _, kind in TRACE_COLUMNS}
    problems = []
    for file in files:
        try:
            schema = pq.read_schema(file)
        except (OSError, ValueError) as exc:
            problems.append(f"{file}: not Parquet ({exc})")
            continue
        found = {field.name: _arrow_type_name(field.type) for field in schema}
        problems += [f"{file}: {p}" for p in _problems(found, identity)]
    return problems


def _first_lines(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return " ".join(lines[:2]) if lines else type(exc).__name__


def reason_columns() -> dict[str, Column]:
    """One boolean column per reason, never null (a null comparison counts as False)."""
    from pyspark.sql import functions as F

    def known(expr: Column) -> Column:
        return F.coalesce(expr, F.lit(False))

    nulls = reduce(lambda a, b: a | b, [F.col(name).isNull() for name, _ in TRACE_COLUMNS])
    for name in ("keys", "error_codes"):
        nulls = nulls | known(F.exists(name, lambda item: item.isNull()))
    return {
        "null_value": nulls,
        "completed_before_created": known(F.col("completed_ms") < F.col("created_ms")),
        "deadline_before_created": known(F.col("deadline_ms") < F.col("created_ms")),
        "negative_bytes": known(F.col("bytes") < 0),
        "unknown_outcome": known(~F.col("outcome").isin(*OUTCOMES)),
        "error_codes_length_mismatch": known(F.size("error_codes") != F.size("keys")),
    }


def check_rows(trace: DataFrame) -> tuple[DataFrame, RowCheck]:
    """The valid rows (lazily) and the counts of impossible ones (one Spark job, O(rows))."""
    from pyspark.sql import functions as F

    reasons = reason_columns()
    any_bad = reduce(lambda a, b: a | b, reasons.values())
    aggs = [F.count(F.lit(1)).alias("total"), F.sum(any_bad.cast("long")).alias("bad")]
    aggs += [F.sum(col.cast("long")).alias(name) for name, col in reasons.items()]
    row = trace.agg(*aggs).first()
    assert row is not None
    counts = {name: int(row[name] or 0) for name in reasons}
    check = RowCheck(total=int(row["total"]), bad=int(row["bad"] or 0), reasons=counts)
    return trace.where(~any_bad), check
