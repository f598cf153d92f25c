"""The broker core (Kafka's ReplicaManager): partitions, produce and fetch purgatories.

:class:`Broker` leads a set of partitions (:class:`~.replication.LeaderPartition`)
and answers produce and fetch requests. Both calls are synchronous and return a
delayed operation, which is already completed when the answer needs no wait;
``await op`` (or ``op.result()`` once done) gives the answer per partition.

produce(entries, acks, timeout_ms):
    appends each batch; failures before the wait (unknown partition, not leader,
    NOT_ENOUGH_REPLICAS) answer at once. acks 0 and 1 answer after the append;
    acks=-1 with a successful append becomes a :class:`~.delayed.DelayedProduce`
    watched on its partitions in the produce purgatory.

await_replication(appended, acks, timeout_ms):
    the answer for batches already in the logs (an idempotent producer's
    retried batch, which a broker answers with the original offsets): with
    acks=-1 a :class:`~.delayed.DelayedProduce` that waits for replication
    exactly as a produce's does, traced and counted the same way; acks 0 and 1
    answer at once. :meth:`Broker.produce` ends the same way for what it appended.

fetch(requests, min_bytes, max_wait_ms, replica_id, max_bytes):
    a follower's fetch (``replica_id >= 0``) first records the follower's log end
    offset. The fetch answers at once if ``min_bytes`` are readable, a partition
    errors or ``max_wait_ms <= 0``; otherwise it becomes a
    :class:`~.delayed.DelayedFetch` in the fetch purgatory. ``max_bytes`` (the
    request-level limit, none by default) bounds the whole answer, as Kafka's
    ReplicaManager does: partitions are read in order, each up to the smaller of
    its own limit and what is left, and only the first non-empty partition may
    go past what is left (by its first batch), so a consumer always progresses.

Which purgatory to check, and when (Kafka's rules):

=================================  ===================  ======================
event on a partition               produce purgatory    fetch purgatory
=================================  ===================  ======================
append, high watermark moved       check                check
append, high watermark unchanged   -                    check followers' only
follower fetch moved the HW        check                check consumers' only
ISR shrink moved the HW            check                check consumers' only
leadership lost                    check                check
=================================  ===================  ======================

Kafka watches every fetch under its partition's key and checks them all on each
append. Here a follower's fetch is watched under a second key of its partition
(:class:`ReplicaFetchKey`), because the two kinds wait for different ends: a
follower reads to the log end, which only an append moves; a consumer reads to the
high watermark, which an append without acks=-1 followers may leave where it was.
So an append that leaves the high watermark checks only the followers' fetches, and
a high watermark move only the consumers' (a follower's fetch does not depend on
it); the answers are Kafka's, with fewer checks. In the simulation's default run a
consumer waits for 16 KiB across many appends and was checked, in vain, on each.

Damaged logs. Every batch a fetch returns has passed its header checks and its
CRC-32C on the way out (:meth:`.storage.segment.LogSegment.read`), so a batch damaged
on disk, in a rolled segment or the active one, is never served: a fetch whose
first batch to return is bad answers CORRUPT_MESSAGE (2) for that partition, an
I/O error answers KAFKA_STORAGE_ERROR (56) (an append whose write or policy
flush fails too); the other partitions of the request are answered as usual.
The broker logs each damaged place once (ERROR, ``purgatory_broker.broker``), counts
every such answer in ``counters.storage_errors``, and never raises: waiting
fetches and follower tasks carry on. The partition's followers cannot copy past
the damaged batch, so they stop there and leave the ISR after
``replica_lag_time_max_ms``; from then on the high watermark moves with the
leader alone (acks=-1 produces get NOT_ENOUGH_REPLICAS if that is below
``min_insync_replicas``) and consumers below the damage keep getting error 2.

File descriptors: each partition keeps its active segment's log open; rolled
segments' logs and the index maps (a CPython map holds a descriptor) of all
partitions share ``open_files``, an LRU of at most ``max_open_files`` (see
:mod:`.storage.open_files`). So N partitions cost N descriptors plus that bound.

Flush policy (``flush_messages``, ``flush_ms``; default off, as in Kafka): each
partition log applies it (see :mod:`.storage.log`); ``flush_messages`` acts inside
the append. For ``flush_ms`` the broker keeps one timer task per partition on
the produce purgatory's timer, armed when an append leaves the log unflushed,
due at the log's ``flush_due_ms``: one timer operation per flush period per
written partition, none for idle ones. An ``fsync`` that fails is logged and
counted (``counters.flush_errors``), not raised into the timer.

Both purgatories' timers share one clock (injectable; a
:class:`~purgatory.testing.ManualClock` with ``reaper_enabled=False`` makes the
broker deterministic). With a recorder, every operation that enters a
purgatory yields one :class:`~purgatory_broker.tracing.TraceRow`; operations still pending at
``close`` are recorded as ``cancelled`` (error code REQUEST_TIMED_OUT per key).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from purgatory import (
    Clock,
    DelayedOperationPurgatory,
    LoopClock,
    SystemTimer,
    TimerTask,
    TopicPartition,
)
from purgatory.core import DEFAULT_PURGE_INTERVAL, DEFAULT_TICK_MS, DEFAULT_WHEEL_SIZE

from ..tracing import TraceRecorder, TraceRow
from .delayed import (
    DelayedFetch,
    DelayedProduce,
    FetchPartitionData,
    FetchPartitionStatus,
    ProducePartitionStatus,
)
from .errors import (
    CODE_NONE,
    CODE_REQUEST_TIMED_OUT,
    ErrorCode,
    KafkaError,
    NotLeaderError,
    error_code,
)
from .replication import LeaderPartition
from .storage.log import DEFAULT_SEGMENT_BYTES, OffsetOutOfRangeError, PartitionLog
from .storage.open_files import DEFAULT_MAX_OPEN_FILES, OpenFiles
from .storage.records import BytesLike, CorruptRecordError

if TYPE_CHECKING:  # the stand-in's types: Cython's own module has none
    from . import _cython_shim as cython
else:
    try:
        import cython
    except ImportError:  # the pure-Python build, with Cython not installed
        from . import _cython_shim as cython

__all__ = ["Broker", "BrokerCounters", "ReplicaFetchKey"]

log = logging.getLogger("purgatory_broker.broker")


def _kafka_timed_purgatory(
    name: str, clock: Clock, settings: tuple[int, int, int, bool]
) -> DelayedOperationPurgatory[Any]:
    """A purgatory named ``name`` on its own timer of ``clock``; ``settings`` are
    (tick_ms, wheel_size, purge_interval, reaper_enabled). Kafka's filing
    (``may_expire_early``): the broker keeps Kafka's timing, a delayed request
    expiring up to a tick before its timeout."""
    tick_ms, wheel_size, purge_interval, reaper_enabled = settings
    timer = SystemTimer(
        name, tick_ms=tick_ms, wheel_size=wheel_size, clock=clock, may_expire_early=True
    )
    return DelayedOperationPurgatory(
        name, timer=timer, purge_interval=purge_interval, reaper_enabled=reaper_enabled
    )


class BrokerCounters:
    """Running totals: requests, bytes in (appended) and out (returned by fetches),
    flush failures."""

    __slots__ = (
        "bytes_in",
        "bytes_out",
        "fetch_requests",
        "flush_errors",
        "produce_requests",
        "replication_waits",
        "storage_errors",
    )

    def __init__(self) -> None:
        self.produce_requests = 0
        self.replication_waits = 0  # await_replication calls (retried batches)
        self.fetch_requests = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.flush_errors = 0  # timer flushes that failed
        self.storage_errors = 0  # partition answers CORRUPT_MESSAGE / KAFKA_STORAGE_ERROR

    def __repr__(self) -> str:
        return (
            f"BrokerCounters(produce_requests={self.produce_requests}, "
            f"replication_waits={self.replication_waits}, "
            f"fetch_requests={self.fetch_requests}, bytes_in={self.bytes_in}, "
            f"bytes_out={self.bytes_out}, flush_errors={self.flush_errors}, "
            f"storage_errors={self.storage_errors})"
        )


class ReplicaFetchKey:
    """The fetch purgatory's key under which the followers' fetches of one partition
    wait (see the module doc). The broker makes one per partition, and keys compare
    by identity, so a check hashes no tuple. O(1)."""

    __slots__ = ("topic_partition",)

    def __init__(self, topic_partition: TopicPartition) -> None:
        self.topic_partition = topic_partition

    def __repr__(self) -> str:
        return f"ReplicaFetchKey({self.topic_partition})"


class _FlushTask(TimerTask):
    """Runs a partition's time-based flush when its ``flush_due_ms`` comes."""

    __slots__ = ("_broker", "_partition")

    def __init__(self, broker: Broker, partition: LeaderPartition) -> None:
        super().__init__(0)
        self._broker = broker
        self._partition = partition

    def run(self) -> None:
        self._broker._flush_due(self._partition)


class Broker:
    """Leads partitions under ``data_dir``; see module doc. Not thread-safe.

    In the compiled build an extension type (``broker.pxd``): a subclass may
    override its methods, an instance's cannot be replaced.
    """

    __slots__ = (
        "_closed",
        "_flush_tasks",
        "_logged_storage_errors",
        "_names",
        "_op_ids",
        "_open_rows",
        "_origin_ms",
        "_partitions",
        "_replica_keys",
        "_timer",
        "clock",
        "counters",
        "data_dir",
        "fetch_purgatory",
        "flush_messages",
        "flush_ms",
        "open_files",
        "produce_purgatory",
        "recorder",
        "segment_bytes",
    )

    def __init__(
        self,
        data_dir: str | Path,
        *,
        clock: Clock | None = None,
        tick_ms: int = DEFAULT_TICK_MS,
        wheel_size: int = DEFAULT_WHEEL_SIZE,
        reaper_enabled: bool = True,
        purge_interval: int = DEFAULT_PURGE_INTERVAL,
        recorder: TraceRecorder | None = None,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        flush_messages: int | None = None,
        flush_ms: int | None = None,
        max_open_files: int = DEFAULT_MAX_OPEN_FILES,
    ) -> None:
        self.data_dir = Path(data_dir)
        # rolled logs and index maps of every partition share this bounded set: an
        # idle partition holds one descriptor (its active segment's log)
        self.open_files = OpenFiles(max_open_files)
        self.clock: Clock = LoopClock() if clock is None else clock
        self.flush_messages = flush_messages
        self.flush_ms = flush_ms
        settings = (tick_ms, wheel_size, purge_interval, reaper_enabled)
        self.produce_purgatory: DelayedOperationPurgatory[DelayedProduce] = _kafka_timed_purgatory(
            "produce", self.clock, settings
        )
        self.fetch_purgatory: DelayedOperationPurgatory[DelayedFetch] = _kafka_timed_purgatory(
            "fetch", self.clock, settings
        )
        self.recorder = recorder
        self.segment_bytes = segment_bytes
        self.counters = BrokerCounters()
        # the clock as the library reads it (see age_ms): the produce timer's
        self._timer = self.produce_purgatory.timer
        self._origin_ms = self._timer.now_ms()  # trace times count from here
        self._partitions: dict[TopicPartition, LeaderPartition] = {}
        self._names: dict[TopicPartition, str] = {}  # str(tp) of each partition, for traces
        # invariant: one per partition, made with it: its followers' fetches' watch key
        self._replica_keys: dict[TopicPartition, ReplicaFetchKey] = {}
        # invariant: one per partition when flush_ms is set, else empty; scheduled
        # while its log has unflushed writes (flush_due_ms is not None)
        self._flush_tasks: dict[TopicPartition, _FlushTask] = {}
        self._op_ids = itertools.count()
        # the storage problems already logged, as (partition, message): each once
        self._logged_storage_errors: set[tuple[TopicPartition, str]] = set()
        # invariant: the traced operations not yet completed, by op id
        self._open_rows: dict[int, TraceRow] = {}
        self._closed = False

    # -- partitions ----------------------------------------------------------

    def age_ms(self) -> int:
        """Milliseconds since the broker was made (the trace's clock), on its clock.
        O(1).

        Read through the produce timer (``timer.now_ms()``, the same clock): while its
        reaper runs, the library reads a :class:`~purgatory.LoopClock` through a
        reader bound to the loop (see :mod:`purgatory.aio.clock`), which saves the
        running loop's lookup (a ``getpid()`` system call on asyncio), and the broker
        reads the clock about twice per request.
        """
        return self._timer.now_ms() - self._origin_ms

    def create_partition(
        self,
        tp: TopicPartition,
        follower_ids: Iterable[int] = (),
        *,
        min_insync_replicas: int = 1,
        replica_lag_time_max_ms: int = 30_000,
    ) -> LeaderPartition:
        """Open (or create) ``tp``'s log under ``data_dir`` and lead it. O(log recovery)."""
        if tp in self._partitions:
            raise ValueError(f"partition {tp} already exists")
        log = PartitionLog(
            self.data_dir / str(tp),
            segment_bytes=self.segment_bytes,
            flush_messages=self.flush_messages,
            flush_ms=self.flush_ms,
            clock=self.clock,
            open_files=self.open_files,
        )
        partition = LeaderPartition(
            tp,
            log,
            follower_ids,
            min_insync_replicas=min_insync_replicas,
            replica_lag_time_max_ms=replica_lag_time_max_ms,
            now_ms=self.age_ms(),
        )
        self._partitions[tp] = partition
        self._names[tp] = str(tp)
        self._replica_keys[tp] = ReplicaFetchKey(tp)
        if self.flush_ms is not None:
            self._flush_tasks[tp] = _FlushTask(self, partition)
        return partition

    def partition(self, tp: TopicPartition) -> LeaderPartition | None:
        """The partition led here, or None. O(1)."""
        return self._partitions.get(tp)

    @property
    def partitions(self) -> Mapping[TopicPartition, LeaderPartition]:
        return self._partitions

    # -- produce -------------------------------------------------------------

    def produce(
        self, entries: Mapping[TopicPartition, BytesLike], *, acks: int = -1, timeout_ms: int
    ) -> DelayedProduce:
        """Append each batch and return the (maybe pending) answer; see module doc.

        O(bytes appended + partitions) plus the purgatory checks.
        """
        if acks not in (-1, 0, 1):
            raise ValueError(f"acks must be -1, 0 or 1, not {acks}")
        self._require_open()
        if not entries:
            raise ValueError("a produce needs at least one partition")
        self.counters.produce_requests += 1
        statuses: dict[TopicPartition, ProducePartitionStatus] = {}
        for tp, batch in entries.items():
            partition = self._partitions.get(tp)
            if partition is None:
                statuses[tp] = _failed(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            try:
                # unpacked: a field read of a named tuple is an attribute lookup
                base_offset, last_offset, size_bytes, hw_changed = partition.append_as_leader(
                    batch, required_acks=acks
                )
            except KafkaError as exc:
                statuses[tp] = _failed(error_code(exc))
                continue
            except OSError as exc:
                # the write or a policy flush failed; the log keeps whatever reached it
                statuses[tp] = _failed(self._storage_error(tp, exc))
                continue
            self.counters.bytes_in += size_bytes
            if self._flush_tasks:
                self._arm_flush(tp)
            # positional, in the fields' order (required offset, base offset, size,
            # acks pending, error code): the per-request path
            statuses[tp] = ProducePartitionStatus(
                last_offset + 1,
                base_offset,
                size_bytes,
                acks == -1,
                CODE_REQUEST_TIMED_OUT if acks == -1 else CODE_NONE,
            )
            if hw_changed:
                self._high_watermark_moved(tp)
            self.fetch_purgatory.check_and_complete(self._replica_keys[tp])  # the log end moved
        return self._wait_for_replication(statuses, timeout_ms)

    def await_replication(
        self,
        appended: Mapping[TopicPartition, tuple[int, int]],
        *,
        acks: int = -1,
        timeout_ms: int,
    ) -> DelayedProduce:
        """The answer for batches already in the logs: per partition, the batch's
        (base offset, last offset). See the module doc.

        With acks=-1 each partition is answered, as after a produce, once its
        high watermark passes the last offset (NONE, or
        NOT_ENOUGH_REPLICAS_AFTER_APPEND below min ISR), when leadership is lost
        (NOT_LEADER_OR_FOLLOWER) or at ``timeout_ms`` (REQUEST_TIMED_OUT); acks 0
        and 1 answer NONE at once. The answer carries the given base offsets.
        O(partitions) plus the purgatory checks.
        """
        if acks not in (-1, 0, 1):
            raise ValueError(f"acks must be -1, 0 or 1, not {acks}")
        self._require_open()
        if not appended:
            raise ValueError("a replication wait needs at least one partition")
        statuses: dict[TopicPartition, ProducePartitionStatus] = {}
        for tp, (base_offset, last_offset) in appended.items():
            if not 0 <= base_offset <= last_offset:
                raise ValueError(
                    f"{tp}: need 0 <= base_offset <= last_offset, not {base_offset}, {last_offset}"
                )
            statuses[tp] = ProducePartitionStatus(
                required_offset=last_offset + 1,
                base_offset=base_offset,
                size_bytes=0,  # nothing appended now
                acks_pending=acks == -1,
                error_code=ErrorCode.REQUEST_TIMED_OUT if acks == -1 else ErrorCode.NONE,
            )
        self.counters.replication_waits += 1
        return self._wait_for_replication(statuses, timeout_ms)

    @cython.locals(status=ProducePartitionStatus, row=TraceRow)  # compiled: fields in C
    def _wait_for_replication(
        self, statuses: dict[TopicPartition, ProducePartitionStatus], timeout_ms: int
    ) -> DelayedProduce:
        """A DelayedProduce over ``statuses``: completed now when no partition waits
        for acks, else traced and watched on the waiting partitions. O(partitions)."""
        op = DelayedProduce(timeout_ms, statuses, self._partitions.get)
        pending = []
        size_bytes = 0
        for tp, status in statuses.items():
            if status.acks_pending:
                pending.append(tp)
                size_bytes += status.size_bytes
        if not pending:
            op.force_complete()
            return op
        if self.recorder is not None:
            row = self._new_row("produce", "produce", pending, timeout_ms)
            row.bytes = size_bytes
            op.attach_trace(self, row, self.age_ms)
        self.produce_purgatory.try_complete_else_watch(op, pending)
        return op

    # -- fetch ---------------------------------------------------------------

    def fetch(
        self,
        requests: Mapping[TopicPartition, FetchPartitionStatus],
        *,
        min_bytes: int = 1,
        max_wait_ms: int = 500,
        replica_id: int = -1,
        max_bytes: int | None = None,
    ) -> DelayedFetch:
        """Fetch from each partition, waiting up to ``max_wait_ms`` for ``min_bytes``.

        ``replica_id >= 0`` is a follower (reads to the log end and moves its
        LEO); -1 a consumer (reads to the high watermark). ``max_bytes`` bounds
        the answer's total (see the module doc). O(partitions x log lookups)
        plus the purgatory checks.
        """
        self._require_open()
        if not requests:
            raise ValueError("a fetch needs at least one partition")
        if min_bytes < 0:
            raise ValueError(f"min_bytes must be >= 0, not {min_bytes}")
        if max_bytes is not None and max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, not {max_bytes}")
        self.counters.fetch_requests += 1
        statuses = dict(requests)
        if replica_id >= 0:
            self._record_follower_fetch(statuses, replica_id)

        def read() -> dict[TopicPartition, FetchPartitionData]:
            return self._read(statuses, replica_id, max_bytes)

        op = DelayedFetch(
            max_wait_ms,
            statuses,
            self._partitions.get,
            read,
            min_bytes=min_bytes,
            replica_id=replica_id,
        )
        accumulated = op.accumulated_bytes()
        if max_wait_ms <= 0 or accumulated is None or accumulated >= min_bytes:
            op.force_complete()
        else:
            self._watch_fetch(op, max_wait_ms)
        return op

    def _record_follower_fetch(
        self, statuses: Mapping[TopicPartition, FetchPartitionStatus], replica_id: int
    ) -> None:
        """A follower's fetch offsets are its log end offsets: move each partition's
        high watermark with them. O(partitions) plus the purgatory checks."""
        now_ms = self.age_ms()
        for tp, status in statuses.items():
            partition = self._partitions.get(tp)
            if partition is None or status.fetch_offset > partition.log_end_offset:
                continue  # answered by the read with its error
            try:
                moved = partition.update_follower_fetch(replica_id, status.fetch_offset, now_ms)
            except NotLeaderError:
                continue
            if moved:
                self._high_watermark_moved(tp)

    def _watch_fetch(self, op: DelayedFetch, max_wait_ms: int) -> None:
        """Trace a fetch that waits and watch it: a follower's under its partitions'
        replica keys, a consumer's under the partitions (see the module doc). O(partitions)."""
        statuses = op.statuses
        follower = op.replica_id >= 0
        if self.recorder is not None:
            kind = "fetch_follower" if follower else "fetch_consumer"
            op.attach_trace(self, self._new_row("fetch", kind, statuses, max_wait_ms), self.age_ms)
        if follower:
            keys = self._replica_keys
            self.fetch_purgatory.try_complete_else_watch(op, [keys[tp] for tp in statuses])
        else:
            self.fetch_purgatory.try_complete_else_watch(op, statuses)

    def _read(
        self,
        statuses: Mapping[TopicPartition, FetchPartitionStatus],
        replica_id: int,
        max_bytes: int | None = None,
    ) -> dict[TopicPartition, FetchPartitionData]:
        out: dict[TopicPartition, FetchPartitionData] = {}
        total = 0  # bytes read so far: the first non-empty partition is read at total 0
        for tp, status in statuses.items():
            partition = self._partitions.get(tp)
            if partition is None:
                out[tp] = FetchPartitionData(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, b"")
                continue
            hw = partition.high_watermark
            leo = partition.log_end_offset
            if not partition.is_leader:
                out[tp] = FetchPartitionData(ErrorCode.NOT_LEADER_OR_FOLLOWER, hw, leo, b"")
                continue
            max_offset = None if replica_id >= 0 else hw
            limit = status.max_bytes
            left = None if max_bytes is None else max(0, max_bytes - total)
            try:
                if left == 0 and total:  # nothing more fits: only the offset's range check
                    partition.log.offset_metadata(status.fetch_offset)
                    data = b""
                else:
                    data = partition.log.read(
                        status.fetch_offset, limit if left is None else min(limit, left), max_offset
                    )
                    if left is not None and total and len(data) > left:
                        data = b""  # a first batch past the limit: only the first partition's
            except OffsetOutOfRangeError as exc:
                out[tp] = FetchPartitionData(error_code(exc), hw, leo, b"")
                continue
            except (CorruptRecordError, OSError) as exc:
                out[tp] = FetchPartitionData(self._storage_error(tp, exc), hw, leo, b"")
                continue
            total += len(data)
            # tuple.__new__: no Python frame (see the module doc of .delayed)
            out[tp] = tuple.__new__(FetchPartitionData, (CODE_NONE, hw, leo, data))
        self.counters.bytes_out += total
        return out

    def _storage_error(self, tp: TopicPartition, exc: Exception) -> ErrorCode:
        """The error code for a damaged log or a failed I/O; logs each place once. O(1)."""
        self.counters.storage_errors += 1
        key = (tp, str(exc))
        if key not in self._logged_storage_errors:
            self._logged_storage_errors.add(key)
            log.error("%s: %s; answering it with an error until repaired", tp, exc)
        return error_code(exc)

    # -- replication events --------------------------------------------------

    def _high_watermark_moved(self, tp: TopicPartition) -> None:
        """Check the produces and the consumers' fetches waiting on ``tp``. O(watchers)."""
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)  # the followers' do not read to the HW

    def maybe_shrink_isr(self) -> list[tuple[TopicPartition, int]]:
        """Drop lagging followers from every ISR; (partition, replica) pairs removed.

        Kafka runs this every ``replica_lag_time_max_ms / 2``. O(partitions x replicas).
        """
        now_ms = self.age_ms()
        removed: list[tuple[TopicPartition, int]] = []
        for tp, partition in self._partitions.items():
            gone, moved = partition.maybe_shrink_isr(now_ms)
            removed.extend((tp, rid) for rid in gone)
            if moved:
                self._high_watermark_moved(tp)
        return removed

    def become_follower(self, tp: TopicPartition) -> None:
        """Give up leadership of ``tp``: its waiting produces and fetches answer
        NOT_LEADER_OR_FOLLOWER now. O(replicas) + the purgatory checks."""
        self._require(tp).become_follower()
        self._high_watermark_moved(tp)
        self.fetch_purgatory.check_and_complete(self._replica_keys[tp])

    def become_leader(self, tp: TopicPartition) -> int:
        """Lead ``tp`` again with a new leader epoch (returned). O(replicas)."""
        return self._require(tp).become_leader(self.age_ms())

    def _require_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"broker {self.data_dir} is closed")

    def _require(self, tp: TopicPartition) -> LeaderPartition:
        partition = self._partitions.get(tp)
        if partition is None:
            raise KeyError(f"unknown partition {tp}")
        return partition

    # -- flushing ------------------------------------------------------------

    def _arm_flush(self, tp: TopicPartition) -> None:
        """Schedule ``tp``'s time-based flush if its log is unflushed. O(1)."""
        task = self._flush_tasks[tp]
        if task.is_scheduled:
            return
        due_ms = self._partitions[tp].log.flush_due_ms
        if due_ms is not None:
            task.delay_ms = max(0, due_ms - self._timer.now_ms())
            self.produce_purgatory.timer.add(task)

    def _flush_due(self, partition: LeaderPartition) -> None:
        """The flush task's body: flush if due, re-arm if still unflushed."""
        partition_log = partition.log
        if partition_log.closed:
            return
        try:
            partition_log.maybe_flush(self._timer.now_ms())
        except OSError:
            self.counters.flush_errors += 1
            log.exception("flushing %s failed", partition.topic_partition)
            return
        self._arm_flush(partition.topic_partition)

    @property
    def log_flushes(self) -> int:
        """Flushes over all partition logs, ever. O(partitions)."""
        return sum(p.log.flush_count for p in self._partitions.values())

    # -- tracing -------------------------------------------------------------

    def _new_row(
        self, purgatory: str, kind: str, keys: Iterable[TopicPartition], timeout_ms: int
    ) -> TraceRow:
        now_ms = self.age_ms()
        names = self._names
        op_id = next(self._op_ids)
        # positional: TraceRow's first six fields, in its order
        row = TraceRow(
            op_id,
            purgatory,
            kind,
            [names.get(tp) or str(tp) for tp in keys],
            now_ms,
            now_ms + timeout_ms,
        )
        self._open_rows[op_id] = row
        return row

    def record(self, row: TraceRow) -> None:
        """The operations' recorder: forget the open row, pass it on. O(1)."""
        del self._open_rows[row.op_id]
        if self.recorder is not None:
            self.recorder.record(row)

    # -- lifecycle -----------------------------------------------------------

    async def __aenter__(self) -> Broker:
        await self.produce_purgatory.__aenter__()
        await self.fetch_purgatory.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Cancel pending operations (recorded as cancelled), close the logs; produce
        and fetch raise RuntimeError from the start of the close on. Idempotent."""
        if self._closed:
            return
        self._closed = True  # from here on produce and fetch refuse
        for task in self._flush_tasks.values():
            task.cancel()
        # first the purgatories (their pending operations are cancelled, and other
        # tasks may still complete some while this awaits), then the rows left open
        await self.produce_purgatory.close()
        await self.fetch_purgatory.close()
        now_ms = self.age_ms()
        for row in list(self._open_rows.values()):
            row.completed_ms = now_ms
            row.outcome = "cancelled"
            row.error_codes = [int(ErrorCode.REQUEST_TIMED_OUT)] * len(row.keys)
            self.record(row)
        for partition in self._partitions.values():
            try:
                partition.log.close()  # flushes first when a flush policy is set
            except OSError:  # the files are closed all the same
                self.counters.flush_errors += 1
                log.exception("flushing %s on close failed", partition.topic_partition)
        self.open_files.close()

    def _check_invariants(self) -> None:
        """Check every partition and both purgatories. O(everything)."""
        for partition in self._partitions.values():
            partition._check_invariants()
        assert self._replica_keys.keys() == self._partitions.keys()
        self.produce_purgatory._check_invariants()
        self.fetch_purgatory._check_invariants()

    def __repr__(self) -> str:
        return f"<Broker {self.data_dir} partitions={len(self._partitions)} {self.counters!r}>"


def _failed(code: int) -> ProducePartitionStatus:
    return ProducePartitionStatus(
        required_offset=-1, base_offset=-1, size_bytes=0, acks_pending=False, error_code=code
    )
