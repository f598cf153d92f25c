"""Synthetic traces: made-up delayed operations with the trace schema, for tests and benchmarks.

**Synthetic.** Nothing here comes from a broker. The numbers are drawn from
simple distributions so the pipeline has something realistic-looking to chew
on until the broker simulation (:mod:`purgatory_broker.broker`) writes real traces.
Do not read tuning advice into a report of a synthetic trace.

How a row is drawn (all vectorised with numpy, one chunk at a time):

* arrivals are a Poisson process at ``rate_per_s``: ``created_ms`` is the
  running sum of exponential gaps, rounded down to whole milliseconds;
* the kind is drawn from the mix in :class:`KindSpec` shares; each kind has its
  purgatory, its timeout and a lognormal completion latency given by its p50
  and p75 (``mu = ln p50``, ``sigma = ln(p75 / p50) / z_0.75``), the way
  Confluent's purgatory benchmark describes latency;
* a latency below the timeout completes the operation early
  (``completed_ms = created_ms + latency``); otherwise it expires at the
  deadline plus a small lateness (geometric, mostly 0 to 2 ms, rarely tens);
  a ``cancelled_fraction`` of operations is cancelled at a uniform time before
  the deadline;
* 1 to ``max_keys`` watch keys per operation: the first drawn with a Zipf-like
  skew over ``topics x partitions`` (so some partitions are much busier), the
  others the next partitions along, so an operation never watches a key twice;
* error codes per key: REQUEST_TIMED_OUT (7) on every key of an expired
  produce, a sprinkle (``error_fraction``) of NOT_LEADER_OR_FOLLOWER (6),
  NOT_ENOUGH_REPLICAS_AFTER_APPEND (20) or OFFSET_OUT_OF_RANGE (1), else NONE;
* bytes: lognormal per key for produce, per operation for completed fetches,
  mostly 0 for expired fetches, 0 for cancelled operations.

The output is deterministic for a given ``seed``, row count and chunk size.
Generating costs about a second per million rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from purgatory_broker.tracing import trace_schema

from .workload import lognormal_params

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

__all__ = ["KindSpec", "SyntheticSpec", "synthetic_trace", "write_synthetic_trace"]


@dataclass(frozen=True)
class KindSpec:
    """One operation kind: its purgatory, share of the mix, timeout and latency."""

    purgatory: str
    kind: str
    share: float
    timeout_ms: int
    latency_p50_ms: float
    latency_p75_ms: float
    bytes_median: float  # per key for produce, per operation for fetches

    def __post_init__(self) -> None:
        if not (self.share >= 0 and self.timeout_ms > 0 and self.bytes_median > 0):
            raise ValueError(f"share, timeout_ms and bytes_median must be positive: {self}")
        if not 0 < self.latency_p50_ms < self.latency_p75_ms:
            raise ValueError(f"need 0 < latency_p50_ms < latency_p75_ms: {self}")


def _default_kinds() -> tuple[KindSpec, ...]:
    return (
        KindSpec("produce", "produce", 0.45, 1_000, 20.0, 60.0, 16_384.0),
        KindSpec("fetch", "fetch_consumer", 0.35, 500, 200.0, 400.0, 65_536.0),
        KindSpec("fetch", "fetch_follower", 0.20, 500, 5.0, 15.0, 32_768.0),
    )


@dataclass(frozen=True)
class SyntheticSpec:
    """What a synthetic trace looks like. The defaults give a busy three-topic broker."""

    kinds: tuple[KindSpec, ...] = field(default_factory=_default_kinds)
    rate_per_s: float = 20_000.0
    topics: tuple[str, ...] = ("orders", "payments", "clicks")
    partitions_per_topic: int = 16
    key_skew: float = 1.1  # Zipf exponent of the first key's popularity
    max_keys: int = 3
    cancelled_fraction: float = 0.01
    error_fraction: float = 0.01

    def __post_init__(self) -> None:
        if not self.kinds or sum(k.share for k in self.kinds) <= 0:
            raise ValueError("kinds must hold at least one kind with a positive share")
        if self.rate_per_s <= 0 or not self.topics or self.partitions_per_topic <= 0:
            raise ValueError("rate_per_s, topics and partitions_per_topic must be positive")
        if not 1 <= self.max_keys <= len(self.topics) * self.partitions_per_topic:
            raise ValueError("max_keys must be between 1 and the number of partitions")
        for name in ("cancelled_fraction", "error_fraction"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be within [0, 1]")

    @property
    def key_names(self) -> list[str]:
        return [f"{t}-{p}" for t in self.topics for p in range(self.partitions_per_topic)]


def synthetic_trace(
    rows: int,
    *,
    spec: SyntheticSpec | None = None,
    seed: int | Sequence[int] | np.random.SeedSequence = 0,
    start_ms: int = 0,
    first_op_id: int = 0,
) -> pa.Table:
    """``rows`` synthetic operations as a ``pyarrow.Table`` with the trace schema.

    O(rows) time and memory (roughly 100 bytes a row). Operations are in
    ``created_ms`` order starting at ``start_ms``; ``op_id`` counts from
    ``first_op_id``.
    """
    import numpy as np

    if rows < 0:
        raise ValueError(f"rows must be >= 0, not {rows}")
    spec = spec or SyntheticSpec()
    rng = np.random.default_rng(seed)
    # the draws in this order: the trace of a seed depends on it
    ops = _draw_operations(rng, spec, rows, start_ms)
    keys = _draw_keys(rng, spec, rows)
    codes = _draw_error_codes(rng, spec, ops, keys)
    nbytes = _draw_bytes(rng, spec, ops, keys)
    return _trace_table(spec, ops, keys, codes=codes, nbytes=nbytes, first_op_id=first_op_id)


@dataclass(frozen=True)
class _Operations:
    """Per operation (arrays of ``rows``): what it is, when, and how it ended."""

    kind_ix: np.ndarray  # index into spec.kinds
    is_produce: np.ndarray
    created: np.ndarray
    deadline: np.ndarray
    completed: np.ndarray
    expired: np.ndarray
    cancelled: np.ndarray
    outcome_ix: np.ndarray  # 0 completed, 1 expired, 2 cancelled


@dataclass(frozen=True)
class _Keys:
    """Every operation's keys, flattened: operation i's are ``offsets[i]:offsets[i + 1]``."""

    offsets: np.ndarray  # rows + 1, int32
    key_ix: np.ndarray  # index into spec.key_names, one per key
    parent: np.ndarray  # the operation of each key
    count: np.ndarray  # keys per operation


def _draw_operations(
    rng: np.random.Generator, spec: SyntheticSpec, n: int, start_ms: int
) -> _Operations:
    """Poisson arrivals, a kind each, a lognormal latency: completed early, or
    expired a little late, or cancelled (module doc)."""
    import numpy as np

    gaps_ms = rng.exponential(1000.0 / spec.rate_per_s, n)
    created = start_ms + np.floor(np.cumsum(gaps_ms)).astype(np.int64)

    shares = np.array([k.share for k in spec.kinds], dtype=np.float64)
    kind_ix = rng.choice(len(spec.kinds), size=n, p=shares / shares.sum())
    timeout = np.array([k.timeout_ms for k in spec.kinds], dtype=np.int64)[kind_ix]
    fits = [lognormal_params(k.latency_p50_ms, k.latency_p75_ms) for k in spec.kinds]
    mu = np.array([m for m, _ in fits])[kind_ix]
    sigma = np.array([s for _, s in fits])[kind_ix]
    latency = np.ceil(np.exp(mu + sigma * rng.standard_normal(n))).astype(np.int64)

    deadline = created + timeout
    expired = latency >= timeout
    cancelled = rng.random(n) < spec.cancelled_fraction
    lateness = rng.geometric(0.6, n).astype(np.int64) - 1
    spikes = rng.random(n) < 0.001
    lateness[spikes] += np.ceil(rng.exponential(20.0, int(spikes.sum()))).astype(np.int64)
    completed = np.where(expired, deadline + lateness, created + latency)
    cancel_at = created + np.floor(rng.random(n) * timeout).astype(np.int64)
    return _Operations(
        kind_ix=kind_ix,
        is_produce=np.array([k.purgatory == "produce" for k in spec.kinds])[kind_ix],
        created=created,
        deadline=deadline,
        completed=np.where(cancelled, cancel_at, completed),
        expired=expired,
        cancelled=cancelled,
        outcome_ix=np.where(cancelled, 2, np.where(expired, 1, 0)),
    )


def _draw_keys(rng: np.random.Generator, spec: SyntheticSpec, n: int) -> _Keys:
    """The first key by a skewed popularity, the rest the next partitions along."""
    import numpy as np

    names = spec.key_names
    weights = 1.0 / np.arange(1, len(names) + 1) ** spec.key_skew
    popularity = rng.permutation(len(names))
    first = popularity[rng.choice(len(names), size=n, p=weights / weights.sum())]
    count = rng.integers(1, spec.max_keys + 1, size=n)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(count, out=offsets[1:])
    total = int(offsets[-1])
    parent = np.repeat(np.arange(n), count)
    position = np.arange(total) - offsets[:-1][parent]
    key_ix = (first[parent] + position) % len(names)
    return _Keys(offsets=offsets, key_ix=key_ix, parent=parent, count=count)


def _draw_error_codes(
    rng: np.random.Generator, spec: SyntheticSpec, ops: _Operations, keys: _Keys
) -> np.ndarray:
    """One code per key: REQUEST_TIMED_OUT on an expired produce, else a sprinkle
    of errors over NONE (module doc)."""
    import numpy as np

    from purgatory_broker.broker.errors import ErrorCode

    total = len(keys.key_ix)
    codes = np.zeros(total, dtype=np.int16)
    sprinkle = rng.random(total) < spec.error_fraction
    not_leader = ErrorCode.NOT_LEADER_OR_FOLLOWER
    produce_codes = np.array([not_leader, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND], np.int16)
    fetch_codes = np.array([not_leader, ErrorCode.OFFSET_OUT_OF_RANGE], np.int16)
    pick = rng.integers(0, 2, size=total)
    on_produce = ops.is_produce[keys.parent]
    codes = np.where(sprinkle, np.where(on_produce, produce_codes[pick], fetch_codes[pick]), codes)
    timed_out = (ops.is_produce & ops.expired & ~ops.cancelled)[keys.parent]
    return np.where(timed_out, np.int16(ErrorCode.REQUEST_TIMED_OUT), codes).astype(np.int16)


def _draw_bytes(
    rng: np.random.Generator, spec: SyntheticSpec, ops: _Operations, keys: _Keys
) -> np.ndarray:
    """Lognormal per key for produce, per operation for fetches; mostly 0 for an
    expired fetch, 0 for a cancelled operation."""
    import numpy as np

    n = len(ops.kind_ix)
    median = np.array([k.bytes_median for k in spec.kinds])[ops.kind_ix]
    size = np.exp(np.log(median) + 0.8 * rng.standard_normal(n))
    size = np.where(ops.is_produce, size * keys.count, size)
    empty_fetch = ~ops.is_produce & ops.expired & (rng.random(n) < 0.7)
    size = np.where(empty_fetch | ops.cancelled, 0.0, size)
    return np.floor(size).astype(np.int64)


def _trace_table(
    spec: SyntheticSpec,
    ops: _Operations,
    keys: _Keys,
    *,
    codes: np.ndarray,
    nbytes: np.ndarray,
    first_op_id: int,
) -> pa.Table:
    """The drawn operations as a table with the trace schema."""
    import numpy as np
    import pyarrow as pa

    n = len(ops.kind_ix)
    kind_ix = pa.array(ops.kind_ix)
    offsets = pa.array(keys.offsets)
    arrays: list[Any] = [
        pa.array(np.arange(first_op_id, first_op_id + n, dtype=np.int64)),
        pa.array([k.purgatory for k in spec.kinds]).take(kind_ix),
        pa.array([k.kind for k in spec.kinds]).take(kind_ix),
        pa.ListArray.from_arrays(offsets, pa.array(spec.key_names).take(pa.array(keys.key_ix))),
        pa.array(ops.created),
        pa.array(ops.deadline),
        pa.array(ops.completed),
        pa.array(["completed", "expired", "cancelled"]).take(pa.array(ops.outcome_ix)),
        pa.ListArray.from_arrays(offsets, pa.array(codes, pa.int16())),
        pa.array(nbytes),
    ]
    return pa.Table.from_arrays(arrays, schema=trace_schema())


def write_synthetic_trace(
    directory: str | Path,
    rows: int,
    *,
    spec: SyntheticSpec | None = None,
    seed: int = 0,
    rows_per_file: int = 1_000_000,
) -> list[Path]:
    """Write ``rows`` synthetic operations as Parquet files ``part-NNNNN.parquet``.

    One file per ``rows_per_file`` rows, each generated and written on its own,
    so memory stays O(rows_per_file) however large the trace. Time continues
    across files. Returns the files written.
    """
    import numpy as np
    import pyarrow.parquet as pq

    if rows_per_file <= 0:
        raise ValueError(f"rows_per_file must be positive, not {rows_per_file}")
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    seeds = np.random.SeedSequence(seed).spawn(max(1, math.ceil(rows / rows_per_file)))
    start_ms = 0
    for index, done in enumerate(range(0, max(rows, 1), rows_per_file)):
        chunk = min(rows_per_file, rows - done)
        table = synthetic_trace(
            chunk, spec=spec, seed=seeds[index], start_ms=start_ms, first_op_id=done
        )
        path = out / f"part-{index:05d}.parquet"
        pq.write_table(table, path)
        files.append(path)
        if chunk:
            start_ms = int(table.column("created_ms")[-1].as_py()) + 1
    return files
