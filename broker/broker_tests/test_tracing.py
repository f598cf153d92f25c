"""The trace schema, defined once by COLUMNS: TraceRow, the Arrow schema and rows agree."""

from __future__ import annotations

from pathlib import Path

import pytest
from purgatory_broker.tracing import (
    COLUMNS,
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
    names = list(column_names())
    assert all(meaning for _, _, meaning in COLUMNS)
    # the row's fields (tracing.pxd's in the compiled build: test_compiled_classes
    # holds them to __slots__) and its constructor's parameters, by name and by
    # position, are the columns in order
    assert list(TraceRow.__slots__) == names
    by_name = TraceRow(**{name: i for i, name in enumerate(names)})  # type: ignore[arg-type]
    assert by_name.as_dict() == {name: i for i, name in enumerate(names)}
    assert TraceRow(*range(len(names))) == by_name
    assert OUTCOMES == ("completed", "expired", "cancelled")


def test_a_row_is_a_value_with_its_defaults() -> None:
    row = TraceRow(3, "fetch", "fetch_consumer", ["t-0"], 10, 510)
    assert row.as_dict() == {
        "op_id": 3,
        "purgatory": "fetch",
        "kind": "fetch_consumer",
        "keys": ["t-0"],
        "created_ms": 10,
        "deadline_ms": 510,
        "completed_ms": -1,
        "outcome": "cancelled",
        "error_codes": None,
        "bytes": 0,
    }
    same = TraceRow(3, "fetch", "fetch_consumer", ["t-0"], 10, 510)
    assert row == same
    same.outcome = "expired"
    assert row != same
    assert row != tuple(row.as_dict().values())
    with pytest.raises(TypeError, match="unhashable"):
        hash(row)
    assert eval(repr(row), {"TraceRow": TraceRow}) == row
    assert repr(row).startswith("TraceRow(op_id=3, purgatory='fetch', ")


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
    assert table.to_pylist() == [row.as_dict() for row in rows]


@pytest.mark.parametrize(
    ("changes", "message"),
    [({"outcome": "exploded"}, "outcome"), ({"error_codes": None}, "one error code per key")],
)
def test_bad_rows_are_refused(tmp_path: Path, changes: dict[str, object], message: str) -> None:
    writer = TraceWriter()
    row = TraceRow(1, "produce", "produce", ["t-0"], 0, 10, 5, "completed", [0])
    for name, value in changes.items():
        setattr(row, name, value)
    writer.record(row)
    with pytest.raises(ValueError, match=message):
        writer.write(tmp_path / "t.parquet")


def test_importing_the_schema_loads_neither_the_broker_nor_pyarrow() -> None:
    assert (
        loaded_on_import(["purgatory_broker.tracing"], ["purgatory_broker.broker", "pyarrow"]) == []
    )
