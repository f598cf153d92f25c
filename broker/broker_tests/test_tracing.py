"""The trace schema, defined once by TraceRow: columns, Arrow schema and rows agree."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from purgatory_broker.tracing import (
    OUTCOMES,
    TRACE_COLUMNS,
    TraceRow,
    TraceWriter,
    column_names,
    trace_schema,
)

from .api_kit import loaded_on_import

#: the contract readers rely on (the Parquet files written so far have exactly these)
EXPECTED = (
    ("op_id", "int64"),
    ("purgatory", "string"),
    ("kind", "string"),
    ("keys", "list<string>"),
    ("created_ms", "int64"),
    ("deadline_ms", "int64"),
    ("completed_ms", "int64"),
    ("outcome", "string"),
    ("error_codes", "list<int16>"),
    ("bytes", "int64"),
)


def test_columns_are_the_rows_fields() -> None:
    assert TRACE_COLUMNS == EXPECTED
    assert list(column_names()) == [f.name for f in dataclasses.fields(TraceRow)]
    assert all(f.metadata["meaning"] for f in dataclasses.fields(TraceRow))
    assert OUTCOMES == ("completed", "expired", "cancelled")


def test_the_arrow_schema_follows_the_columns() -> None:
    pytest.importorskip("pyarrow")
    schema = trace_schema()
    assert schema.names == list(column_names())
    assert not any(field.nullable for field in schema)
    assert [str(field.type).replace("item: ", "") for field in schema] == [
        kind for _, kind in EXPECTED
    ]


def test_rows_round_trip_through_parquet(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    writer = TraceWriter()
    rows = [
        TraceRow(7, "produce", "produce", ["t-0", "t-1"], 100, 1100, 112, "completed", [0, 0], 9),
        TraceRow(8, "fetch", "fetch_consumer", ["t-0"], 101, 301, 302, "expired", [0], 0),
    ]
    for row in rows:
        writer.record(row)
    table = pq.read_table(writer.write(tmp_path / "deep" / "trace.parquet"))
    assert table.schema.equals(trace_schema())
    assert table.to_pylist() == [dataclasses.asdict(row) for row in rows]


@pytest.mark.parametrize(
    ("changes", "message"),
    [({"outcome": "exploded"}, "outcome"), ({"error_codes": None}, "one error code per key")],
)
def test_bad_rows_are_refused(tmp_path: Path, changes: dict[str, object], message: str) -> None:
    writer = TraceWriter()
    row = TraceRow(1, "produce", "produce", ["t-0"], 0, 10, 5, "completed", [0])
    writer.record(dataclasses.replace(row, **changes))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        writer.write(tmp_path / "t.parquet")


def test_importing_the_schema_loads_neither_the_broker_nor_pyarrow() -> None:
    assert (
        loaded_on_import(["purgatory_broker.tracing"], ["purgatory_broker.broker", "pyarrow"]) == []
    )
