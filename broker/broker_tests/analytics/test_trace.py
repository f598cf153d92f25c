"""Reading a trace: a bad schema is refused with the columns named."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from purgatory_broker.analytics import TraceSchemaError, read_trace, synthetic_trace

pytestmark = pytest.mark.system  # Java: a Spark session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _write(table: pa.Table, path: Path) -> Path:
    pq.write_table(table, path)
    return path


def test_a_valid_trace_reads_with_the_trace_columns(spark: SparkSession, tmp_path: Path) -> None:
    path = _write(synthetic_trace(10), tmp_path / "t.parquet")
    frame = read_trace(spark, [path])
    assert frame.columns[:3] == ["op_id", "purgatory", "kind"]


def test_missing_and_mistyped_columns_are_named(spark: SparkSession, tmp_path: Path) -> None:
    table = synthetic_trace(10).drop_columns(["bytes", "outcome"])
    table = table.set_column(
        table.schema.get_field_index("created_ms"),
        "created_ms",
        table.column("created_ms").cast(pa.int32()),
    )
    table = table.set_column(
        table.schema.get_field_index("error_codes"),
        "error_codes",
        table.column("error_codes").cast(pa.list_(pa.int32())),
    )
    path = _write(table, tmp_path / "bad.parquet")
    with pytest.raises(TraceSchemaError) as info:
        read_trace(spark, [path])
    message = str(info.value)
    assert "not a purgatory trace" in message
    assert "missing column(s): outcome, bytes" in message
    # local files are checked from their footers, before Spark reads them
    assert "created_ms is int32, expected int64" in message
    assert "error_codes is list<int32>, expected list<int16>" in message
    assert str(path) in message


def test_extra_columns_are_ignored(spark: SparkSession, tmp_path: Path) -> None:
    table = synthetic_trace(5).append_column("note", pa.array(["x"] * 5))
    frame = read_trace(spark, [_write(table, tmp_path / "t.parquet")])
    assert "note" not in frame.columns


def test_files_that_disagree_are_refused(spark: SparkSession, tmp_path: Path) -> None:
    good = synthetic_trace(5)
    _write(good, tmp_path / "a.parquet")
    odd = good.set_column(
        good.schema.get_field_index("bytes"), "bytes", good.column("bytes").cast(pa.string())
    )
    _write(odd, tmp_path / "b.parquet")
    with pytest.raises(TraceSchemaError, match=r"not a purgatory trace") as info:
        read_trace(spark, [tmp_path])
    message = str(info.value)
    assert f"{tmp_path / 'b.parquet'}: mistyped column(s): bytes is string, expected int64" in (
        message
    )
    assert "a.parquet:" not in message


def test_a_missing_path_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope"):
        read_trace(spark, [tmp_path / "nope"])
    with pytest.raises(ValueError, match="no trace given"):
        read_trace(spark, [])
