"""Collect trace rows in memory and write them as Parquet with :func:`.trace.trace_schema`.

:class:`TraceWriter` is a :class:`~._delayed.TraceRecorder`: the broker hands it
one :class:`~._delayed.TraceRow` per delayed operation as it completes. Rows are
kept as Python objects (a few hundred bytes each) and converted column by column
at :meth:`TraceWriter.write`; pyarrow is imported only there.
"""

from __future__ import annotations

from pathlib import Path

from ._delayed import TraceRow
from .trace import OUTCOMES, trace_schema

__all__ = ["TraceWriter"]


class TraceWriter:
    """Rows in completion order; ``record`` O(1), ``write`` O(rows)."""

    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows: list[TraceRow] = []

    def record(self, row: TraceRow) -> None:
        self.rows.append(row)

    def __len__(self) -> int:
        return len(self.rows)

    def write(self, path: str | Path) -> Path:
        """Write the rows to ``path`` (parent directories made); return the path."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        for row in self.rows:
            if row.outcome not in OUTCOMES:
                raise ValueError(f"row {row.op_id} has outcome {row.outcome!r}")
            if row.error_codes is None or len(row.error_codes) != len(row.keys):
                raise ValueError(f"row {row.op_id} needs one error code per key")
        rows = self.rows
        columns = {
            "op_id": [r.op_id for r in rows],
            "purgatory": [r.purgatory for r in rows],
            "kind": [r.kind for r in rows],
            "keys": [r.keys for r in rows],
            "created_ms": [r.created_ms for r in rows],
            "deadline_ms": [r.deadline_ms for r in rows],
            "completed_ms": [r.completed_ms for r in rows],
            "outcome": [r.outcome for r in rows],
            "error_codes": [r.error_codes for r in rows],
            "bytes": [r.bytes for r in rows],
        }
        table = pa.table(columns, schema=trace_schema())
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, out)
        return out
