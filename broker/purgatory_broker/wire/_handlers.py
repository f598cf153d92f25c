"""The server logic: one synchronous handler per API, on top of
:class:`purgatory_broker.broker.Broker`.

:meth:`RequestHandler.handle` takes one request frame and returns its reply:

* ``bytes``: the framed response, ready now;
* a :class:`Pending`: delayed operations to await, then a function that builds the
  framed response from their outcomes (acks=-1 produce, long-poll fetch);
* ``None``: no response (acks=0 produce);

or raises :class:`CloseConnection` when Kafka would drop the connection: unknown
API key, unsupported version (except ApiVersions; Produce v0-v2 included, though
ApiVersions lists them: see :data:`._codec.ADVERTISED_PRODUCE_MIN_VERSION`), a request that does not
decode, an acks=0 produce that failed. Handling is synchronous, so side effects
(appends, producer-state updates, topic creation) happen in request order; the
connection writes replies in the same order.

Produce, per partition, before anything is appended:

1. unknown topic: created (valid names only, see :data:`TOPIC_NAME`); partition
   index out of range: UNKNOWN_TOPIC_OR_PARTITION;
2. the records must be exactly one magic-2 batch with ``records_count ==
   last_offset_delta + 1``, neither transactional nor control: else
   INVALID_RECORD (87); a truncated batch or a CRC-32C mismatch: CORRUPT_MESSAGE (2);
3. a batch with a producer id goes through :class:`~._idempotence.ProducerStateTable`:
   a retried batch is not appended again but answered with its original offsets,
   through :meth:`Broker.await_replication` (acks=-1: once the high watermark
   covers them, as for a new batch; one wait for all retries of a request).

The rest go to :meth:`Broker.produce` in one call (acks=-1 becomes one
DelayedProduce). Fetches go to :meth:`Broker.fetch` as a consumer
(``replica_id=-1`` whatever the request says: followers here are simulated).
A fetch's answer holds at most its request-level ``max_bytes`` in total, and at
most ``partition_max_bytes`` per partition, except that a partition's first batch
is returned whole when it fits in what is left of ``max_bytes``, and the first
non-empty partition's first batch is returned whole whatever its size (Kafka's
rule: a consumer always gets at least one batch, so it progresses).

Topics are created on first use (Metadata or Produce naming them), each with
``partitions`` partitions, as long as the broker then leads at most
``max_partitions`` partitions. A topic past that cap, or one whose partition
cannot be opened because the process is out of file descriptors (each partition
holds about three), is not created and is answered UNKNOWN_TOPIC_OR_PARTITION
(3): what Kafka answers when it does not auto-create a topic, which every client
treats as "not there (yet)" and retries until its own timeout, rather than
POLICY_VIOLATION (44), which a Metadata answer cannot explain (it has no error
message) and clients do not expect there. Each shortage is logged once (see
:mod:`._shortage`). A creation cut short keeps the partitions it opened and
finishes on the next attempt. Opening a partition takes a few file-system calls
with the event loop blocked, so one request creates at most about
:data:`CREATE_PARTITIONS_PER_REQUEST` partitions (whole topics; the first new
topic always); its other new topics are answered LEADER_NOT_AVAILABLE (5), what
Kafka answers while a topic is being created, and are created when the client
asks again.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from purgatory import SystemTimer, TopicPartition
from purgatory_broker.broker import (
    Broker,
    CorruptRecordError,
    DelayedProduce,
    ErrorCode,
    FetchPartitionData,
    FetchPartitionStatus,
    Followers,
    GroupCoordinator,
    ProducePartitionResponse,
    ProducePartitionStatus,
    RecordBatchHeader,
    validate_batch,
)

from . import _codec as codec
from ._config import WireConfig
from ._groups import GroupHandlers
from ._idempotence import (
    BatchMetadata,
    ProducerIdAllocator,
    ProducerStateTable,
    last_sequence,
)
from ._shortage import OUT_OF_DESCRIPTORS, Shortage

__all__ = ["TOPIC_NAME", "CloseConnection", "Pending", "Reply", "RequestHandler"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Kafka's legal topic names (also safe as directory names: "." and ".." are refused).
TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


class CloseConnection(Exception):
    """The connection must be closed (Kafka's answer to input it cannot answer)."""


@dataclass(slots=True)
class Pending(Generic[T]):
    """A reply that waits: await ``waits`` in order, then ``finish`` builds the frame.

    ``size_hint_bytes``: about the most the frame will hold (the connection's
    back-pressure reserves it while the reply is queued); 0 for small replies."""

    waits: Sequence[Awaitable[T]]
    finish: Callable[[list[T]], bytes]
    size_hint_bytes: int = 0

    async def wait(self) -> bytes:
        return self.finish([await w for w in self.waits])


Reply = bytes | Pending[Any] | None

#: Partitions one request may create before its other new topics are put off (each
#: takes a few file-system calls, a millisecond or more, with the event loop blocked).
CREATE_PARTITIONS_PER_REQUEST = 100
#: Fetch names topics by id from this version on (KIP-516)
FETCH_BY_TOPIC_ID = 13
_RECORD_BITS_TRANSACTIONAL_OR_CONTROL = 0x30
_HEADER_MAGIC_AT = 16


class RequestHandler:
    """Topics, producer state and the per-API handlers; see module doc. Not thread-safe.

    ``timer`` (the wire broker's, its reaper running) expires idempotent producer
    state after ``config.producer_id_expiration_ms`` (see :mod:`._idempotence`).
    ``coordinator`` answers the group APIs (see :mod:`._groups`)."""

    def __init__(
        self,
        broker: Broker,
        replicas: Followers,
        config: WireConfig,
        advertised: Callable[[], tuple[str, int]],
        *,
        timer: SystemTimer,
        coordinator: GroupCoordinator,
    ) -> None:
        self.broker = broker
        self.groups = GroupHandlers(coordinator, advertised)
        self._client_host = ""
        self.replicas = replicas
        self.config = config
        self._advertised = advertised
        self._topics: dict[str, tuple[int, uuid.UUID]] = {}  # name -> (partitions, topic id)
        self._topic_names: dict[uuid.UUID, str] = {}  # topic id -> name (Fetch v13+)
        expiration_ms = config.producer_id_expiration_ms
        self.producer_ids = ProducerIdAllocator(timer=timer, expiration_ms=expiration_ms)
        self.producer_states = ProducerStateTable(timer=timer, expiration_ms=expiration_ms)
        # topics not created: over max_partitions, or no file descriptor left
        self.topics_refused = 0
        self.partition_limit = Shortage("creating topics", log)  # never ends: none deleted
        self.partition_descriptors = Shortage("creating partitions", log)
        self._creatable = CREATE_PARTITIONS_PER_REQUEST  # left for the current request
        self.requests_by_api: dict[str, int] = {}
        self._handlers: dict[int, Callable[[codec.DecodedRequest], Reply]] = {
            codec.PRODUCE: self._produce,
            codec.FETCH: self._fetch,
            codec.LIST_OFFSETS: self._list_offsets,
            codec.METADATA: self._metadata,
            codec.FIND_COORDINATOR: self.groups.find_coordinator,
            codec.API_VERSIONS: self._api_versions,
            codec.INIT_PRODUCER_ID: self._init_producer_id,
            codec.JOIN_GROUP: self._join_group,
            codec.SYNC_GROUP: self._sync_group,
            codec.HEARTBEAT: self.groups.heartbeat,
            codec.LEAVE_GROUP: self.groups.leave_group,
            codec.OFFSET_COMMIT: self.groups.offset_commit,
            codec.OFFSET_FETCH: self.groups.offset_fetch,
            codec.LIST_GROUPS: self.groups.list_groups,
            codec.DESCRIBE_GROUPS: self.groups.describe_groups,
        }

    # -- dispatch --------------------------------------------------------------

    def handle(self, frame: bytes, client_host: str = "") -> Reply:
        """Decode one request frame (without its size prefix) and answer it; see module doc.
        ``client_host``: the peer's address (DescribeGroups shows it)."""
        self._client_host = client_host
        try:
            peek = codec.peek_header(frame)
        except ValueError as exc:
            raise CloseConnection(str(exc)) from None
        spec = codec.SUPPORTED_APIS.get(peek.api_key)
        if spec is None:
            raise CloseConnection(f"unknown API key {peek.api_key}")
        if not spec.min_version <= peek.api_version <= spec.max_version:
            if peek.api_key == codec.API_VERSIONS:
                self._count("ApiVersions (unsupported version)")
                return codec.unsupported_api_versions_response(peek.correlation_id)
            raise CloseConnection(
                f"{spec.name} v{peek.api_version} is not supported "
                f"(v{spec.min_version}-v{spec.max_version})"
            )
        try:
            request = codec.decode_request(spec, peek, frame)
        except ValueError as exc:
            raise CloseConnection(str(exc)) from None
        self._count(spec.name)
        self._creatable = CREATE_PARTITIONS_PER_REQUEST
        return self._handlers[peek.api_key](request)

    def _count(self, name: str) -> None:
        self.requests_by_api[name] = self.requests_by_api.get(name, 0) + 1

    # -- topics ----------------------------------------------------------------

    def topic(self, name: str) -> tuple[int, uuid.UUID] | int:
        """(partition count, topic id), creating the topic on first use; else the error
        code to answer for it: INVALID_TOPIC_EXCEPTION (17) for an illegal name,
        UNKNOWN_TOPIC_OR_PARTITION (3) when creating it would pass ``max_partitions``
        or the process is out of file descriptors, LEADER_NOT_AVAILABLE (5) when the
        request already created its share (see the module doc).
        O(partitions) on creation, O(1) after."""
        known = self._topics.get(name)
        if known is not None:
            return known
        if TOPIC_NAME.fullmatch(name) is None or name in (".", ".."):
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        cfg = self.config
        broker = self.broker
        missing = [
            tp
            for tp in (TopicPartition(name, p) for p in range(cfg.partitions))
            if broker.partition(tp) is None  # a creation cut short keeps what it made
        ]
        if len(broker.partitions) + len(missing) > cfg.max_partitions:
            self.topics_refused += 1
            self.partition_limit.fail(
                f"partition limit reached: {len(broker.partitions)} of --max-partitions "
                f"{cfg.max_partitions}; topic {name!r} and any later new topic are answered "
                "UNKNOWN_TOPIC_OR_PARTITION"
            )
            return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if self._creatable <= 0:
            return ErrorCode.LEADER_NOT_AVAILABLE  # created by a later request
        self._creatable -= len(missing)
        followers = range(1, cfg.followers + 1)
        for tp in missing:
            try:
                broker.create_partition(
                    tp,
                    followers,
                    min_insync_replicas=cfg.min_insync_replicas,
                    replica_lag_time_max_ms=cfg.replica_lag_time_max_ms,
                )
            except OSError as exc:
                if exc.errno not in OUT_OF_DESCRIPTORS:
                    raise
                self.topics_refused += 1
                self.partition_descriptors.fail(
                    f"cannot create partition {tp}: {exc.strerror} (errno {exc.errno}); "
                    "new topics are answered UNKNOWN_TOPIC_OR_PARTITION until "
                    "file descriptors free up"
                )
                return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            self.replicas.follow([tp])
        self.partition_descriptors.clear()
        entry = (cfg.partitions, uuid.uuid4())
        self._topics[name] = entry
        self._topic_names[entry[1]] = name
        log.info("created topic %s with %d partitions", name, cfg.partitions)
        return entry

    @property
    def topics(self) -> dict[str, int]:
        """Topic name -> partition count. O(topics)."""
        return {name: count for name, (count, _) in self._topics.items()}

    # -- ApiVersions, Metadata, FindCoordinator, InitProducerId -------------------

    def _api_versions(self, req: codec.DecodedRequest) -> Reply:
        response = codec.api_versions_response(req.api_version)  # codec.ADVERTISED_VERSIONS
        return codec.encode_response(response, req.correlation_id)

    def _metadata(self, req: codec.DecodedRequest) -> Reply:
        body, version = req.body, req.api_version
        host, port = self._advertised()
        mr = codec.MetadataResponse
        if body.topics is None or (version == 0 and not body.topics):
            names: list[str | None] = list(self._topics)
        else:
            names = [t.name for t in body.topics]
        replicas = [0, *range(1, self.config.followers + 1)]
        topics = []
        for name in names:
            entry = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) if name is None else self.topic(name)
            if isinstance(entry, int):
                topics.append(
                    mr.MetadataResponseTopic(
                        error_code=entry,
                        name=name,
                        topic_id=None,
                        is_internal=False,
                        partitions=[],
                    )
                )
                continue
            assert name is not None
            count, topic_id = entry
            partitions = []
            for p in range(count):
                partition = self.broker.partition(TopicPartition(name, p))
                assert partition is not None
                if self.config.advertise_followers:
                    nodes = replicas
                    isr = sorted(partition.isr)
                else:
                    nodes = isr = [0]
                partitions.append(
                    mr.MetadataResponseTopic.MetadataResponsePartition(
                        error_code=0,
                        partition_index=p,
                        leader_id=0,
                        leader_epoch=partition.leader_epoch,
                        replica_nodes=nodes,
                        isr_nodes=isr,
                        offline_replicas=[],
                    )
                )
            topics.append(
                mr.MetadataResponseTopic(
                    error_code=0,
                    name=name,
                    topic_id=topic_id,
                    is_internal=False,
                    partitions=partitions,
                )
            )
        response = mr(
            version=version,
            throttle_time_ms=0,
            brokers=[mr.MetadataResponseBroker(node_id=0, host=host, port=port, rack=None)],
            cluster_id=self.config.cluster_id,
            controller_id=0,
            topics=topics,
        )
        return codec.encode_response(response, req.correlation_id)

    def _join_group(self, req: codec.DecodedRequest) -> Reply:
        future, finish = self.groups.join_group(req, self._client_host)
        if future.done():
            return finish([future.result()])
        return Pending([future], finish)

    def _sync_group(self, req: codec.DecodedRequest) -> Reply:
        future, finish = self.groups.sync_group(req)
        if future.done():
            return finish([future.result()])
        return Pending([future], finish)

    def _init_producer_id(self, req: codec.DecodedRequest) -> Reply:
        body = req.body
        if body.transactional_id is not None:
            # transactions need a transaction coordinator, which this broker does not have
            error, pid, epoch = ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, -1
        else:
            error = ErrorCode.NONE
            pid, epoch = self.producer_ids.init_producer_id(body.producer_id, body.producer_epoch)
        response = codec.InitProducerIdResponse(
            version=req.api_version,
            throttle_time_ms=0,
            error_code=error,
            producer_id=pid,
            producer_epoch=epoch,
        )
        return codec.encode_response(response, req.correlation_id)

    # -- ListOffsets -------------------------------------------------------------

    def _list_offsets(self, req: codec.DecodedRequest) -> Reply:
        lr = codec.ListOffsetsResponse
        topics = []
        for t in req.body.topics:
            parts = []
            for p in t.partitions:
                partition = self.broker.partition(TopicPartition(t.name, p.partition_index))
                error, offset, epoch = 0, -1, -1
                if partition is None:
                    error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif p.timestamp == -2:  # earliest
                    offset, epoch = partition.log.log_start_offset, partition.leader_epoch
                elif p.timestamp == -1:  # latest: the high watermark (= LSO, no transactions)
                    offset, epoch = partition.high_watermark, partition.leader_epoch
                else:  # lookups by time are not implemented
                    error = ErrorCode.INVALID_REQUEST
                parts.append(
                    lr.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(
                        partition_index=p.partition_index,
                        error_code=int(error),
                        timestamp=-1,
                        offset=offset,
                        leader_epoch=epoch,
                    )
                )
            topics.append(lr.ListOffsetsTopicResponse(name=t.name, partitions=parts))
        response = lr(version=req.api_version, throttle_time_ms=0, topics=topics)
        return codec.encode_response(response, req.correlation_id)

    # -- Produce -----------------------------------------------------------------

    def _produce(self, req: codec.DecodedRequest) -> Reply:
        body = req.body
        acks = body.acks
        order: list[tuple[str, list[int]]] = []
        answered: dict[TopicPartition, ProducePartitionResponse] = {}  # known before any wait
        entries: dict[TopicPartition, bytes] = {}
        headers: dict[TopicPartition, RecordBatchHeader] = {}
        duplicates: dict[TopicPartition, tuple[int, int]] = {}  # retried: (base, last offset)
        for topic in body.topic_data:
            name = topic.name
            indexes = [pd.index for pd in topic.partition_data]
            order.append((name, indexes))
            entry = self.topic(name) if isinstance(name, str) else ErrorCode.INVALID_TOPIC_EXCEPTION
            for pd in topic.partition_data:
                tp = TopicPartition(name, pd.index)
                if tp in answered or tp in entries or tp in duplicates:
                    answered[tp] = _produce_error(ErrorCode.INVALID_REQUEST)
                    entries.pop(tp, None)
                    duplicates.pop(tp, None)
                    continue
                if acks not in (-1, 0, 1):
                    answered[tp] = _produce_error(ErrorCode.INVALID_REQUIRED_ACKS)
                    continue
                if isinstance(entry, int):
                    answered[tp] = _produce_error(entry)
                    continue
                if not 0 <= pd.index < entry[0]:
                    answered[tp] = _produce_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    continue
                checked = check_produce_batch(pd.records)
                if isinstance(checked, int):
                    answered[tp] = _produce_error(checked)
                    continue
                if checked.producer_id >= 0:
                    verdict = self.producer_states.check(
                        tp,
                        checked.producer_id,
                        checked.producer_epoch,
                        checked.base_sequence,
                        last_sequence(checked.base_sequence, checked.last_offset_delta),
                    )
                    if isinstance(verdict, int):
                        answered[tp] = _produce_error(verdict)
                        continue
                    if verdict is not None:  # a retry: answered with its first offsets
                        duplicates[tp] = (verdict.base_offset, verdict.last_offset)
                        continue
                entries[tp] = pd.records
                headers[tp] = checked
        op: DelayedProduce | None = None
        if entries:
            before = {tp: self._high_watermark(tp) for tp in entries}
            op = self.broker.produce(entries, acks=acks, timeout_ms=max(0, body.timeout_ms))
            for tp, hw in before.items():
                self.replicas.notify_if_moved(tp, hw)
            self._record_appends(op.statuses, headers)
        if acks == 0:
            failed = [tp for tp, r in answered.items() if r.error_code != 0]
            if op is not None:
                failed += [tp for tp, s in op.statuses.items() if s.error_code != 0]
            if failed:  # Kafka's way of telling an acks=0 producer: drop the connection
                raise CloseConnection(f"acks=0 produce failed for {sorted(map(str, failed))}")
            return None
        retried = None
        if duplicates:
            retried = self.broker.await_replication(
                duplicates, acks=acks, timeout_ms=max(0, body.timeout_ms)
            )
        waits = [w for w in (op, retried) if w is not None]
        version, cid = req.api_version, req.correlation_id

        def finish(outcomes: list[dict[TopicPartition, ProducePartitionResponse]]) -> bytes:
            merged = dict(answered)
            for outcome in outcomes:
                merged.update(outcome)
            return self._produce_response(version, cid, order, merged)

        if all(w.is_done for w in waits):
            return finish([w.result() for w in waits])
        return Pending(waits, finish)

    def _high_watermark(self, tp: TopicPartition) -> int:
        partition = self.broker.partition(tp)
        return -1 if partition is None else partition.high_watermark

    def _record_appends(
        self,
        statuses: dict[TopicPartition, ProducePartitionStatus],
        headers: dict[TopicPartition, RecordBatchHeader],
    ) -> None:
        for tp, status in statuses.items():
            header = headers[tp]
            if header.producer_id < 0 or status.base_offset < 0:
                continue  # not idempotent, or not appended
            self.producer_states.record(
                tp,
                header.producer_id,
                header.producer_epoch,
                BatchMetadata(
                    first_sequence=header.base_sequence,
                    last_sequence=last_sequence(header.base_sequence, header.last_offset_delta),
                    base_offset=status.base_offset,
                    last_offset=status.required_offset - 1,
                ),
            )

    def _produce_response(
        self,
        version: int,
        correlation_id: int,
        order: list[tuple[str, list[int]]],
        results: dict[TopicPartition, ProducePartitionResponse],
    ) -> bytes:
        pr = codec.ProduceResponse
        topics = []
        for name, indexes in order:
            parts = []
            for index in indexes:
                result = results[TopicPartition(name, index)]
                partition = self.broker.partition(TopicPartition(name, index))
                parts.append(
                    pr.TopicProduceResponse.PartitionProduceResponse(
                        index=index,
                        error_code=result.error_code,
                        base_offset=result.base_offset,
                        log_append_time_ms=-1,
                        log_start_offset=-1
                        if partition is None
                        else partition.log.log_start_offset,
                        record_errors=[],
                        error_message=None,
                    )
                )
            topics.append(pr.TopicProduceResponse(name=name, partition_responses=parts))
        response = pr(version=version, responses=topics, throttle_time_ms=0)
        return codec.encode_response(response, correlation_id)

    # -- Fetch -------------------------------------------------------------------

    def _fetch(self, req: codec.DecodedRequest) -> Reply:
        body = req.body
        by_id = req.api_version >= FETCH_BY_TOPIC_ID
        # (name, topic id, partition indexes); an unknown id keeps name "" and is answered
        # UNKNOWN_TOPIC_ID
        order: list[tuple[str, uuid.UUID | None, list[int]]] = []
        requests: dict[TopicPartition, FetchPartitionStatus] = {}
        for topic in body.topics:
            topic_id: uuid.UUID | None = None
            if by_id:  # the all-zero id decodes as None: no topic has it
                topic_id = topic.topic_id
                name = "" if topic_id is None else self._topic_names.get(topic_id, "")
            else:
                name = topic.topic
            indexes = []
            for p in topic.partitions:
                tp = TopicPartition(name, p.partition)
                if by_id and not name:
                    indexes.append(p.partition)  # answered UNKNOWN_TOPIC_ID
                    continue
                if tp in requests:
                    continue
                indexes.append(p.partition)
                requests[tp] = FetchPartitionStatus(
                    max(0, p.fetch_offset), max(0, p.partition_max_bytes)
                )
            order.append((name, topic_id, indexes))
        version, cid = req.api_version, req.correlation_id
        read_committed = body.isolation_level == 1

        def finish(outcomes: list[dict[TopicPartition, FetchPartitionData]]) -> bytes:
            return self._fetch_response(version, cid, order, outcomes[0], read_committed)

        max_wait_ms = max(0, body.max_wait_ms)
        if not requests:  # nothing to fetch: wait max_wait, answer empty (as Kafka does)
            return Pending([_sleep_then({}, max_wait_ms)], finish)
        op = self.broker.fetch(
            requests,
            min_bytes=max(0, body.min_bytes),
            max_wait_ms=max_wait_ms,
            replica_id=-1,
            max_bytes=max(0, body.max_bytes),
        )
        if op.is_done:
            return finish([op.result()])
        hint = min(body.max_bytes, sum(s.max_bytes for s in requests.values()))
        return Pending([op], finish, size_hint_bytes=max(0, hint))

    def _fetch_response(
        self,
        version: int,
        correlation_id: int,
        order: list[tuple[str, uuid.UUID | None, list[int]]],
        data: dict[TopicPartition, FetchPartitionData],
        read_committed: bool,
    ) -> bytes:
        fr = codec.FetchResponse
        topics = []
        for name, topic_id, indexes in order:
            parts = []
            for index in indexes:
                tp = TopicPartition(name, index)
                d = data.get(tp)
                if d is None:  # a topic id this broker does not know
                    d = FetchPartitionData(ErrorCode.UNKNOWN_TOPIC_ID, -1, -1, b"")
                partition = self.broker.partition(tp)
                log_start = -1 if partition is None else partition.log.log_start_offset
                parts.append(
                    fr.FetchableTopicResponse.PartitionData(
                        partition_index=index,
                        error_code=d.error_code,
                        high_watermark=d.high_watermark,
                        last_stable_offset=d.high_watermark,  # no transactions: LSO = HW
                        log_start_offset=log_start,
                        aborted_transactions=[] if read_committed else None,
                        preferred_read_replica=-1,
                        records=d.records,
                    )
                )
            topics.append(
                fr.FetchableTopicResponse(topic=name, topic_id=topic_id, partitions=parts)
            )
        response = fr(
            version=version, throttle_time_ms=0, error_code=0, session_id=0, responses=topics
        )
        return codec.encode_response(response, correlation_id)


def check_produce_batch(records: bytes | None) -> RecordBatchHeader | int:  # noqa: PLR0911
    """The batch's header if ``records`` is exactly one valid magic-2 batch, else the
    error code: INVALID_RECORD (87) or CORRUPT_MESSAGE (2). O(len(records)) (the CRC)."""
    if records is None or len(records) < _HEADER_MAGIC_AT + 1:
        return ErrorCode.INVALID_RECORD if not records else ErrorCode.CORRUPT_MESSAGE
    if records[_HEADER_MAGIC_AT] != 2:
        return ErrorCode.INVALID_RECORD
    try:
        header = RecordBatchHeader.parse(records)
    except CorruptRecordError:
        return ErrorCode.CORRUPT_MESSAGE
    if header.size_bytes < len(records):  # more than one batch (or trailing bytes)
        return ErrorCode.INVALID_RECORD
    try:
        validate_batch(records, check_crc=True)
    except CorruptRecordError:
        return ErrorCode.CORRUPT_MESSAGE  # truncated, bad lengths, CRC mismatch
    if (
        header.records_count != header.last_offset_delta + 1
        or header.attributes & _RECORD_BITS_TRANSACTIONAL_OR_CONTROL
    ):
        return ErrorCode.INVALID_RECORD
    return header


def _produce_error(code: int) -> ProducePartitionResponse:
    return ProducePartitionResponse(int(code), -1)


def _sleep_then(value: T, delay_ms: int) -> asyncio.Future[T]:
    """A future resolved with ``value`` after ``delay_ms`` (no coroutine to leak). O(1)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[T] = loop.create_future()

    def resolve() -> None:
        if not fut.done():
            fut.set_result(value)

    loop.call_later(delay_ms / 1000, resolve)
    return fut
