"""DelayedProduce and DelayedFetch: Kafka's two delayed operations, on the purgatory.

DelayedProduce (acks=-1). Each partition of the request has a required offset
(the last appended offset + 1) and an error code preset to REQUEST_TIMED_OUT.
``try_complete`` looks at each partition still pending:

* unknown, or no longer led here: NOT_LEADER_OR_FOLLOWER (or UNKNOWN_TOPIC_OR_PARTITION);
* high watermark >= required offset: NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND
  if the ISR is now smaller than ``min_insync_replicas``;

and completes the operation when no partition is pending. On expiry the pending
partitions keep REQUEST_TIMED_OUT.

DelayedFetch (Kafka's accounting, O(1) per partition and check, no log read).
Each partition has a fetch offset and a byte limit. The first check looks up the
fetch offset's place in the log, a
:class:`~.storage.log.LogOffsetMetadata` (offset, segment, byte position: a
dictionary lookup for a recent batch boundary, which is where readers fetch),
and keeps it. Every check then compares it with the end a reader may reach: the
high watermark's metadata for a consumer, the log end's for a follower, both
kept current by the partition and its log. Per partition:

* end offset <= fetch offset: no bytes yet (if the fetch offset is past the log
  end, the log was truncated under it: complete, the read answers the error);
* end in a newer segment than the fetch offset: complete (at least the rest of
  the older segment is readable; Kafka does the same);
* same segment: ``end.position - fetch.position`` bytes, capped at the
  partition's limit.

It completes when the sum reaches ``min_bytes``, or at once when a partition
errors (unknown, not leader, offset out of range, a damaged batch header or an
I/O error while looking the offset up: the read then answers the error). On
completion, early or by expiry, it reads the logs through the broker's read
function and returns what is there. Example, consumer, ``min_bytes=250``,
batches of 100 bytes::

    fetch at 10 -> (10, segment 0, position 1000)   HW (10, 0, 1000): 0 bytes, wait
    HW moves to 12 -> (12, 0, 1200)                  200 bytes, wait
    HW moves to 13 -> (13, 0, 1300)                  300 bytes: complete, read

Both are answered through a :class:`~purgatory_broker.tracing.TraceRecorder`, if
given: one :class:`~purgatory_broker.tracing.TraceRow` per operation, filled in when
it completes (outcome ``completed``) and marked ``expired`` by ``on_expiration``.

The per-partition request and answer values (``ProducePartitionResponse``,
``FetchPartitionStatus``, ``FetchPartitionData``) are named tuples: immutable,
compared by value, and made for every request, where a frozen dataclass would set
each field through ``object.__setattr__`` (the cost is in benchmarks/HISTORY.md). The
broker's other per-request values, and the simulated clients' acks, are named tuples
for the same reason. On the per-request path they are made by ``tuple.__new__(cls,
(fields...))``: calling the class runs the named tuple's ``__new__``, a Python
function (a frame for every value), where this is one C call to the same result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, ClassVar, Generic, NamedTuple, TypeVar

from purgatory import DelayedOperation, TopicPartition

from ..tracing import TraceRecorder, TraceRow
from .errors import CODE_NONE, CODE_UNKNOWN_TOPIC_OR_PARTITION, ErrorCode
from .replication import LeaderPartition
from .storage.log import LogOffsetMetadata, OffsetOutOfRangeError
from .storage.records import CorruptRecordError

if TYPE_CHECKING:  # the stand-in's types: Cython's own module has none
    from . import _cython_shim as cython
else:
    try:
        import cython
    except ImportError:  # the pure-Python build, with Cython not installed
        from . import _cython_shim as cython

T = TypeVar("T")
S = TypeVar("S")  # a partition's status

__all__ = [
    "DelayedFetch",
    "DelayedProduce",
    "FetchPartitionData",
    "FetchPartitionStatus",
    "ProducePartitionResponse",
    "ProducePartitionStatus",
]

PartitionLookup = Callable[[TopicPartition], "LeaderPartition | None"]


# -------------------------------------------------------------------- produce


class ProducePartitionStatus:
    """One partition of a produce request while it waits.

    One is made per partition of every produce, so it is not a dataclass, whose
    ``__init__`` is a Python function: in the compiled build it is an extension type
    (``delayed.pxd``) and its fields are C struct members. Compared by value (and so
    not hashable, as a dataclass).
    """

    __slots__ = ("acks_pending", "base_offset", "error_code", "required_offset", "size_bytes")

    def __init__(
        self,
        required_offset: int,  # last appended offset + 1
        base_offset: int,
        size_bytes: int,
        acks_pending: bool = True,
        error_code: int = ErrorCode.REQUEST_TIMED_OUT,
    ) -> None:
        self.required_offset = required_offset
        self.base_offset = base_offset
        self.size_bytes = size_bytes
        self.acks_pending = acks_pending
        self.error_code = error_code

    def _values(self) -> tuple[int, int, int, bool, int]:
        return (
            self.required_offset,
            self.base_offset,
            self.size_bytes,
            self.acks_pending,
            self.error_code,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducePartitionStatus):
            return NotImplemented
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # compared by value, and mutable

    def __repr__(self) -> str:
        return (
            f"ProducePartitionStatus(required_offset={self.required_offset}, "
            f"base_offset={self.base_offset}, size_bytes={self.size_bytes}, "
            f"acks_pending={self.acks_pending}, error_code={self.error_code!r})"
        )


class ProducePartitionResponse(NamedTuple):
    """The answer for one partition: error code and the batch's base offset (-1 if none)."""

    error_code: int
    base_offset: int


class _PartitionsOperation(DelayedOperation[T], Generic[T, S]):
    """A delayed operation over a request's partitions, each with its status (at
    least one), that writes one trace row when it completes."""

    __slots__ = ("_lookup", "_now_ms", "_recorder", "statuses", "trace_row")
    #: what the operation is, for its errors
    _what: ClassVar[str] = "request"

    def __init__(
        self,
        delay_ms: int,
        statuses: Mapping[TopicPartition, S],
        lookup: PartitionLookup,
        *,
        now_ms: Callable[[], int] | None = None,
        recorder: TraceRecorder | None = None,
        trace_row: TraceRow | None = None,
    ) -> None:
        DelayedOperation.__init__(self, delay_ms)  # not super(): no super object per request
        if not statuses:
            raise ValueError(f"a {self._what} needs at least one partition")
        self.statuses = dict(statuses)
        self._lookup = lookup  # the partition led here, or None
        self._now_ms = now_ms
        self._recorder = recorder
        self.trace_row = trace_row

    def attach_trace(
        self, recorder: TraceRecorder, row: TraceRow, now_ms: Callable[[], int]
    ) -> None:
        """Record ``row`` through ``recorder`` when this operation completes. O(1)."""
        self._recorder = recorder
        self.trace_row = row
        self._now_ms = now_ms

    @cython.locals(row=TraceRow)  # compiled: its fields written in C
    def _record_trace(self, error_codes: list[int], size_bytes: int | None = None) -> None:
        """Fill in the row's completion and hand it to the recorder (in on_complete).

        The recorder keeps the row, so ``on_expiration``, which runs right after
        ``on_complete``, can still mark it expired.
        """
        row = self.trace_row
        if row is None or self._recorder is None:
            return
        row.completed_ms = self._now_ms() if self._now_ms is not None else -1
        row.outcome = "completed"
        row.error_codes = error_codes
        if size_bytes is not None:
            row.bytes = size_bytes
        self._recorder.record(row)

    def on_expiration(self) -> None:
        if self.trace_row is not None:
            self.trace_row.outcome = "expired"


class DelayedProduce(
    _PartitionsOperation[dict[TopicPartition, ProducePartitionResponse], ProducePartitionStatus]
):
    """Waits until every partition's high watermark reaches its required offset.

    ``try_complete`` is O(partitions); see module doc.
    """

    __slots__ = ()
    _what = "produce"

    # compiled: a status's fields and the partition's check are reached in C
    @cython.locals(status=ProducePartitionStatus, partition=LeaderPartition)
    def try_complete(self) -> bool:
        pending = False
        lookup = self._lookup
        for tp, status in self.statuses.items():
            if not status.acks_pending:
                continue
            partition = lookup(tp)
            if partition is None:
                status.acks_pending = False
                status.error_code = CODE_UNKNOWN_TOPIC_OR_PARTITION
                continue
            code = partition.check_enough_replicas_reach_offset(status.required_offset)
            if code is None:
                pending = True
            else:
                status.acks_pending = False
                status.error_code = code
        if pending:
            return False
        return self.force_complete()

    @cython.locals(s=ProducePartitionStatus)  # compiled: its fields read in C
    def on_complete(self) -> dict[TopicPartition, ProducePartitionResponse]:
        response = {}
        codes = []
        for tp, s in self.statuses.items():
            code = int(s.error_code)
            response[tp] = tuple.__new__(
                ProducePartitionResponse, (code, s.base_offset if code == CODE_NONE else -1)
            )
            codes.append(code)
        self._record_trace(codes)
        return response


# -------------------------------------------------------------------- fetch


class FetchPartitionStatus(NamedTuple):
    """One partition of a fetch request: where to read and how much at most."""

    fetch_offset: int
    max_bytes: int = 1024 * 1024


class FetchPartitionData(NamedTuple):
    """The answer for one partition: error, high watermark, log end, the batches read."""

    error_code: int
    high_watermark: int
    log_end_offset: int
    records: bytes


class DelayedFetch(
    _PartitionsOperation[dict[TopicPartition, FetchPartitionData], FetchPartitionStatus]
):
    """Waits until ``min_bytes`` are readable over its partitions, or one errors.

    ``try_complete`` is O(partitions), reading no log bytes (see the module doc).
    ``read`` is called once, on completion, to build the answer.
    """

    __slots__ = ("_items", "_read", "_starts", "min_bytes", "replica_id")
    _what = "fetch"

    def __init__(
        self,
        delay_ms: int,
        statuses: Mapping[TopicPartition, FetchPartitionStatus],
        lookup: PartitionLookup,
        read: Callable[[], dict[TopicPartition, FetchPartitionData]],
        *,
        min_bytes: int,
        replica_id: int = -1,
        now_ms: Callable[[], int] | None = None,
        recorder: TraceRecorder | None = None,
        trace_row: TraceRow | None = None,
    ) -> None:
        super().__init__(
            delay_ms, statuses, lookup, now_ms=now_ms, recorder=recorder, trace_row=trace_row
        )
        self._items = list(self.statuses.items())
        # the fetch offsets' places in their logs, looked up by the first check
        self._starts: list[LogOffsetMetadata | None] = [None] * len(self._items)
        self.min_bytes = min_bytes
        self.replica_id = replica_id
        self._read = read

    def accumulated_bytes(self) -> int | None:
        """Readable bytes over the partitions (each capped), or None when the fetch
        must complete now: a partition errors, or its end reached a newer segment.
        O(partitions); reads no log bytes once the fetch offsets are known."""
        total = 0
        follower = self.replica_id >= 0
        lookup = self._lookup
        starts = self._starts
        for i, (tp, status) in enumerate(self._items):
            partition = lookup(tp)
            if partition is None or not partition.is_leader:
                return None
            log = partition.log
            try:
                start = starts[i]
                if start is None:
                    start = starts[i] = log.offset_metadata(status.fetch_offset)
                end = log.log_end_metadata if follower else partition.high_watermark_metadata
            except (OffsetOutOfRangeError, CorruptRecordError, OSError):
                return None
            if end.offset <= start.offset:
                if start.offset > log.log_end_offset:
                    return None  # truncated under the fetch offset: the read says so
                continue
            if start.segment_base_offset != end.segment_base_offset:
                return None  # a newer segment (or an older one after a truncation)
            readable = end.position - start.position
            total += readable if readable < status.max_bytes else status.max_bytes
        return total

    def try_complete(self) -> bool:
        accumulated = self.accumulated_bytes()
        if accumulated is None or accumulated >= self.min_bytes:
            return self.force_complete()
        return False

    def on_complete(self) -> dict[TopicPartition, FetchPartitionData]:
        response = self._read()
        self._record_trace(
            [int(d.error_code) for d in response.values()],
            sum(len(d.records) for d in response.values()),
        )
        return response
