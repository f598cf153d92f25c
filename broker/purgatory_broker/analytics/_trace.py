"""Reading a trace into Spark: schema validation and the impossible-row check.

:func:`check_local_trace` checks local inputs before Spark starts: a
missing path, a folder without files, a file that is not Parquet (its magic
bytes) or whose footer's schema does not match
:data:`purgatory_broker.tracing.TRACE_COLUMNS` (every missing and every mistyped
column named, per file). :func:`read_trace` then reads local inputs with the
trace's schema given (no schema-inference job) and URLs (``hdfs://``, ...) with
schema merging, checked the same way. Extra columns are allowed and ignored.

:func:`reason_flags` classifies a row in one bitmask. A row is *impossible* when it
has a null where the schema forbids one, completed before it was created, has a
deadline before its creation, negative bytes, an outcome outside
:data:`~purgatory_broker.tracing.OUTCOMES`, or a different number of error codes
and keys. The report counts rows per bitmask in the same pass that folds
them (:mod:`._spark_figures`), and :func:`row_check` turns the counts into a
:class:`RowCheck`: each reason counted on its own (a row may count under
several), bad rows once in total. Only the valid rows go on to the figures.
Nothing is dropped silently: the counts are written to the report.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING, Any

from purgatory_broker.tracing import OUTCOMES, TRACE_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "REASONS",
    "SPARK_TYPES",
    "RowCheck",
    "TraceSchemaError",
    "check_local_trace",
    "check_rows",
    "read_trace",
    "reason_flags",
    "row_check",
    "spark_schema",
    "trace_files",
]

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


_MAGIC = b"PAR1"


class TraceSchemaError(ValueError):
    """The input is not a trace: unreadable, or columns missing or of the wrong type."""


@dataclass(frozen=True)
class RowCheck:
    """How many rows were read, how many were impossible, and why."""

    total: int
    bad: int
    reasons: dict[str, int]  # reason -> rows with that problem, in REASONS order
    #: the latest created_ms of a valid row (None without valid rows): where the
    #: trace ends, so the report can tell a partial last time window
    last_created_ms: int | None = None

    @property
    def valid(self) -> int:
        return self.total - self.bad


def _has_scheme(path: str) -> bool:
    head, sep, _ = path.partition("://")
    return bool(sep) and head.isalpha()


def trace_files(path: Path) -> list[Path]:
    """The files Spark would read under a local path: the path itself, or the
    folder's files whose names (and folders) do not start with ``_`` or ``.``."""
    if not path.is_dir():
        return [path]
    return sorted(
        f
        for f in path.rglob("*")
        if f.is_file()
        and not any(part.startswith(("_", ".")) for part in f.relative_to(path).parts)
    )


def check_local_trace(paths: Sequence[str | Path]) -> list[str]:
    """Check the local inputs before Spark starts; return every problem found.

    Missing paths, folders without files, files that are not Parquet (the
    ``PAR1`` magic bytes at both ends) and files whose schema is not the trace's
    (footers read with pyarrow) are reported, one sentence each. URLs of other
    filesystems (``hdfs://``, ``s3a://``) are left to Spark. O(files) reads of
    a few bytes and one footer each.
    """
    problems: list[str] = []
    for name in (str(p) for p in paths):
        if _has_scheme(name):
            continue
        path = Path(name)
        if not path.exists():
            problems.append(f"trace not found: {name}")
            continue
        files = trace_files(path)
        if not files:
            problems.append(f"no trace files in {name} (an empty folder)")
            continue
        not_parquet = [f for f in files if not _is_parquet(f)]
        problems += [f"{f} is not a Parquet file" for f in not_parquet]
        problems += _file_problems([f for f in files if f not in not_parquet])
    return problems


def _is_parquet(file: Path) -> bool:
    """Parquet starts and ends with the magic bytes ``PAR1`` (O(1) reads)."""
    try:
        with file.open("rb") as stream:
            head = stream.read(4)
            stream.seek(-4, os.SEEK_END)
            tail = stream.read(4)
    except OSError:
        return False
    return head == _MAGIC and tail == _MAGIC


def spark_schema() -> str:
    """The trace's schema as a Spark DDL string."""
    return ", ".join(f"`{name}` {SPARK_TYPES[kind]}" for name, kind in TRACE_COLUMNS)


def read_trace(spark: SparkSession, paths: Sequence[str | Path]) -> DataFrame:
    """The trace's columns from Parquet files or folders, schema checked.

    Local inputs are checked first with :func:`check_local_trace` (no Spark
    job); when every input is local, Spark reads them with the trace's schema
    given, so no job infers it. URLs are read with schema merging, so files
    that disagree are caught. Raises :class:`TraceSchemaError` for an
    unreadable or mistyped trace, :class:`FileNotFoundError` for a missing path.
    """
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    if not paths:
        raise ValueError("no trace given: pass one or more Parquet files or folders")
    names = [str(p) for p in paths]
    problems = check_local_trace(names)
    if problems:
        if all(p.startswith("trace not found") for p in problems):
            raise FileNotFoundError("; ".join(problems))
        raise TraceSchemaError("not a purgatory trace: " + "; ".join(problems))
    try:
        if not any(_has_scheme(p) for p in names):
            return spark.read.schema(spark_schema()).parquet(*names)
        frame = spark.read.option("mergeSchema", "true").parquet(*names)
    except (PySparkException, Py4JJavaError) as exc:
        raise TraceSchemaError(
            f"cannot read {', '.join(names)} as a Parquet trace: {_first_lines(exc)}"
        ) from exc
    found = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    problems = _problems(found, SPARK_TYPES)
    if problems:
        raise TraceSchemaError(
            f"not a purgatory trace in {', '.join(names)}: {'. '.join(problems)}. "
            "See purgatory_broker.tracing.TRACE_COLUMNS for the schema."
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


def _file_problems(files: Sequence[Path]) -> list[str]:
    """Per local Parquet file, its schema problems (footers only, O(files))."""
    import pyarrow.parquet as pq

    identity = {kind: kind for _, kind in TRACE_COLUMNS}
    problems = []
    for file in files:
        try:
            schema = pq.read_schema(file)
        except (OSError, ValueError) as exc:
            problems.append(f"{file}: not Parquet ({exc})")
            continue
        found = {field.name: _arrow_type_name(field.type) for field in schema}
        found_problems = _problems(found, identity)
        if found_problems:
            problems.append(f"{file}: {'. '.join(found_problems)}")
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


def reason_flags() -> Column:
    """A row's problems as a bitmask: bit ``i`` set when the ``i``-th reason of
    :data:`REASONS` holds; 0 for a valid row. O(1) per row."""
    from pyspark.sql import functions as F

    bits = [
        F.when(col, F.lit(1 << i)).otherwise(F.lit(0))
        for i, col in enumerate(reason_columns().values())
    ]
    return reduce(lambda a, b: a + b, bits)


def row_check(rows_by_flags: dict[int, int], last_created_ms: int | None) -> RowCheck:
    """The row check from the rows counted per :func:`reason_flags` value. O(flag values)."""
    reasons = {
        reason: sum(n for flags, n in rows_by_flags.items() if flags >> i & 1)
        for i, reason in enumerate(REASONS)
    }
    return RowCheck(
        total=sum(rows_by_flags.values()),
        bad=sum(n for flags, n in rows_by_flags.items() if flags),
        reasons=reasons,
        last_created_ms=last_created_ms,
    )


def check_rows(trace: DataFrame) -> tuple[DataFrame, RowCheck]:
    """The valid rows (lazily) and the counts of impossible ones (one Spark job,
    O(rows)): rows counted per :func:`reason_flags` value. The report gets the
    same counts from its fold instead (no job of their own)."""
    from pyspark.sql import functions as F

    flags = reason_flags()
    counted = trace.groupBy(flags.alias("flags")).agg(
        F.count(F.lit(1)).alias("rows"),
        F.max(F.when(flags == 0, F.col("created_ms"))).alias("last_created_ms"),
    )
    found = counted.collect()
    last = [row["last_created_ms"] for row in found if row["flags"] == 0]
    check = row_check(
        {int(row["flags"]): int(row["rows"]) for row in found},
        int(last[0]) if last and last[0] is not None else None,
    )
    return trace.where(flags == 0), check
