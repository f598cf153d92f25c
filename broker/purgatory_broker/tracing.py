"""The trace of delayed operations: one row per operation, its schema defined once.

The broker records a row for every operation that enters one of its purgatories
(:class:`purgatory_broker.broker.Broker` with a ``recorder``); the simulation writes the
rows as Parquet; the data pipeline (:mod:`purgatory_broker.analytics`) reads them. Any
Parquet file with these columns and types is a valid trace.

One definition: :data:`COLUMNS`, each column's name, Arrow type and meaning, in
file order. :class:`TraceRow`'s fields are its names (a test holds them together),
and everything else is derived from it, so a column added there appears everywhere:

* :data:`TRACE_COLUMNS`, ``(name, arrow type name)`` pairs, and
  :func:`column_names`: what readers check a file against;
* :func:`trace_schema`: the ``pyarrow.Schema`` (every column non-nullable);
* :meth:`TraceWriter.write`: one Arrow column per field, taken from the rows.

For example the row of a produce that waited 12 ms on two partitions::

    TraceRow(op_id=7, purgatory="produce", kind="produce", keys=["t-0", "t-1"],
             created_ms=100, deadline_ms=1100, completed_ms=112,
             outcome="completed", error_codes=[0, 0], bytes=1050)

Importing this module loads neither the broker nor pyarrow: pyarrow is imported
only when a schema is built or a trace written, so a reader of traces needs no
broker, and the broker's users need no pyarrow unless they write one.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "COLUMNS",
    "OUTCOMES",
    "TRACE_COLUMNS",
    "TraceRecorder",
    "TraceRow",
    "TraceWriter",
    "column_names",
    "trace_schema",
]

#: how an operation left its purgatory: completed early, by expiry, or cancelled
#: (still pending when the broker closed)
OUTCOMES = ("completed", "expired", "cancelled")


#: the trace's columns, in file order: (name, Arrow type name, meaning), ``list<item>``
#: for lists. The one definition of the schema: :class:`TraceRow`'s fields are these
#: names in this order (``broker_tests/test_tracing.py`` checks its ``__slots__`` and
#: ``__init__`` against it).
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("op_id", "int64", "unique per operation within one trace"),
    ("purgatory", "string", "the purgatory that held it: produce or fetch"),
    ("kind", "string", "produce, fetch_consumer or fetch_follower"),
    ("keys", "list<string>", "the watch keys, as topic-partition strings"),
    ("created_ms", "int64", "when it entered the purgatory (the broker's clock)"),
    ("deadline_ms", "int64", "created_ms + its timeout"),
    ("completed_ms", "int64", "when it completed, early or by expiry"),
    ("outcome", "string", "completed, expired or cancelled"),
    ("error_codes", "list<int16>", "the Kafka error code per key, in keys order"),
    ("bytes", "int64", "bytes appended (produce) or returned (fetch)"),
)

#: (name, arrow type name) per column, in file order; derived from :data:`COLUMNS`
TRACE_COLUMNS: tuple[tuple[str, str], ...] = tuple((name, arrow) for name, arrow, _ in COLUMNS)


class TraceRow:
    """One delayed operation; each field is a trace column (:data:`COLUMNS`).

    The broker fills in the first six when the operation enters a purgatory and
    the rest when it leaves; ``error_codes`` stays None until then. Compared by
    value (and so not hashable, being mutable).

    The broker makes one per request, so it is not a dataclass, whose ``__init__``
    is a Python function: in the compiled build it is an extension type
    (``tracing.pxd``), its fields C struct members.
    """

    __slots__ = (
        "op_id",
        "purgatory",
        "kind",
        "keys",
        "created_ms",
        "deadline_ms",
        "completed_ms",
        "outcome",
        "error_codes",
        "bytes",
    )

    def __init__(  # noqa: PLR0917  # positional, as the dataclass it was (and the broker's calls)
        self,
        op_id: int,
        purgatory: str,
        kind: str,
        keys: list[str],
        created_ms: int,
        deadline_ms: int,
        completed_ms: int = -1,
        outcome: str = "cancelled",
        error_codes: list[int] | None = None,
        bytes: int = 0,
    ) -> None:
        self.op_id = op_id
        self.purgatory = purgatory
        self.kind = kind
        self.keys = keys
        self.created_ms = created_ms
        self.deadline_ms = deadline_ms
        self.completed_ms = completed_ms
        self.outcome = outcome
        self.error_codes = error_codes
        self.bytes = bytes

    def as_dict(self) -> dict[str, Any]:
        """The row as ``{column: value}``, in file order. O(columns)."""
        return {name: getattr(self, name) for name, _, _ in COLUMNS}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TraceRow):
            return NotImplemented
        return self.as_dict() == other.as_dict()

    __hash__ = None  # type: ignore[assignment]  # compared by value, and mutable

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in self.as_dict().items())
        return f"TraceRow({fields})"


def column_names() -> Sequence[str]:
    """The trace's column names, in file order. O(columns)."""
    return [name for name, _ in TRACE_COLUMNS]


def trace_schema() -> Any:
    """The trace's ``pyarrow.Schema``, every column non-nullable. O(columns)."""
    import pyarrow as pa

    types = {
        "int64": pa.int64(),
        "string": pa.string(),
        "list<string>": pa.list_(pa.string()),
        "list<int16>": pa.list_(pa.int16()),
    }
    return pa.schema([pa.field(name, types[kind], nullable=False) for name, kind in TRACE_COLUMNS])


class TraceRecorder(Protocol):
    """Receives each delayed operation's row when it completes."""

    def record(self, row: TraceRow) -> None: ...


class TraceWriter:
    """A :class:`TraceRecorder` that keeps the rows in memory, in completion order,
    and writes them as Parquet. ``record`` O(1); ``write`` O(rows x columns).

    Rows are kept as Python objects (a few hundred bytes each) and turned into
    Arrow columns only at :meth:`write`.
    """

    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows: list[TraceRow] = []

    def record(self, row: TraceRow) -> None:
        self.rows.append(row)

    def __len__(self) -> int:
        return len(self.rows)

    def write(self, path: str | Path) -> Path:
        """Write the rows to ``path`` (parent directories made); return the path.

        Raises ValueError for a row with an unknown outcome or without one
        error code per key.
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = self.rows
        for row in rows:
            if row.outcome not in OUTCOMES:
                raise ValueError(f"row {row.op_id} has outcome {row.outcome!r}")
            if row.error_codes is None or len(row.error_codes) != len(row.keys):
                raise ValueError(f"row {row.op_id} needs one error code per key")
        columns = {name: [getattr(row, name) for row in rows] for name in column_names()}
        table = pa.table(columns, schema=trace_schema())
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, out)
        return out
