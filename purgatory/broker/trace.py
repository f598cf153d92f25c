"""The trace of delayed operations: one row per operation, written as Parquet.

The broker simulation writes it; the data pipeline (:mod:`purgatory.analytics`)
reads it. Any file with these columns and types is a valid trace.

=============  ==============  ====================================================
column         type            meaning
=============  ==============  ====================================================
op_id          int64           unique per operation within one trace
purgatory      string          the purgatory that held it: ``produce`` or ``fetch``
kind           string          ``produce``, ``fetch_consumer`` or ``fetch_follower``
keys           list<string>    the watch keys, as ``topic-partition`` strings
created_ms     int64           when it entered the purgatory (simulation clock)
deadline_ms    int64           ``created_ms + timeout``
completed_ms   int64           when it completed, early or by expiry
outcome        string          ``completed`` (early), ``expired`` or ``cancelled``
error_codes    list<int16>     Kafka error code per key, in ``keys`` order
bytes          int64           bytes appended (produce) or returned (fetch)
=============  ==============  ====================================================

pyarrow is imported only when a trace is written or read, so the core package
keeps no third-party dependency.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["OUTCOMES", "TRACE_COLUMNS", "column_names", "trace_schema"]

#: (name, arrow type name) in file order; list types written as ``list<item>``.
TRACE_COLUMNS: tuple[tuple[str, str], ...] = (
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

OUTCOMES = ("completed", "expired", "cancelled")


def trace_schema() -> Any:
    """The trace's ``pyarrow.Schema``."""
    import pyarrow as pa

    types = {
        "int64": pa.int64(),
        "string": pa.string(),
        "list<string>": pa.list_(pa.string()),
        "list<int16>": pa.list_(pa.int16()),
    }
    return pa.schema([pa.field(name, types[kind], nullable=False) for name, kind in TRACE_COLUMNS])


def column_names() -> Sequence[str]:
    """The trace's column names, in file order."""
    return [name for name, _ in TRACE_COLUMNS]
