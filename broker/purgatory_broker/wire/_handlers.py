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

Produce, per partition, before anything is appended (each check raises; one place,
``_plan_topic``, answers the partition with the exception's code, from
:func:`~purgatory_broker.broker.errors.error_code`):

0. a partition named twice: INVALID_REQUEST (42), both times; acks not -1, 0 or 1:
   INVALID_REQUIRED_ACKS (21);
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
from dataclasses import dataclass, field
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
)
from purgatory_broker.broker.errors import KafkaError, error_code
from purgatory_broker.broker.storage.records import check_batch

from . import _codec as codec
from ._codec import FetchResponse, ListOffsetsResponse, MetadataResponse, ProduceResponse
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

#: what a produce answers a partition with an error code for (anything else closes the
#: connection): the checks' exceptions, and a batch found corrupt
_PARTITION_ERRORS = (KafkaError, CorruptRecordError)

# the answers' topics
_FetchTopic = FetchResponse.FetchableTopicResponse
_ListOffsetsTopic = ListOffsetsResponse.ListOffsetsTopicResponse
_ProduceTopic = ProduceResponse.TopicProduceResponse


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

    def topic(self, name: str) -> tuple[int, uuid.UUID]:
        """(partition count, topic id), creating the topic on first use. Raises
        :class:`~purgatory_broker.broker.errors.KafkaError` with INVALID_TOPIC_EXCEPTION
        (17) for an illegal name, UNKNOWN_TOPIC_OR_PARTITION (3) when creating it would
        pass ``max_partitions`` or the process is out of file descriptors,
        LEADER_NOT_AVAILABLE (5) when the request already created its share (see the
        module doc). O(partitions) on creation, O(1) after."""
        known = self._topics.get(name)
        if known is not None:
            return known
        if TOPIC_NAME.fullmatch(name) is None or name in (".", ".."):
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"illegal topic name {name!r}")
        broker = self.broker
        missing = [
            tp
            for tp in (TopicPartition(name, p) for p in range(self.config.partitions))
            if broker.partition(tp) is None  # a creation cut short keeps what it made
        ]
        self._check_partition_limit(name, len(missing))
        if self._creatable <= 0:
            raise KafkaError(
                ErrorCode.LEADER_NOT_AVAILABLE, f"topic {name!r} is created by a later request"
            )
        self._creatable -= len(missing)
        for tp in missing:
            self._create_partition(tp)
        self.partition_descriptors.clear()
        entry = (self.config.partitions, uuid.uuid4())
        self._topics[name] = entry
        self._topic_names[entry[1]] = name
        log.info("created topic %s with %d partitions", name, self.config.partitions)
        return entry

    def _check_partition_limit(self, name: str, new_partitions: int) -> None:
        """Raise UNKNOWN_TOPIC_OR_PARTITION (logged once) if
        ``new_partitions`` more would pass ``max_partitions``. O(1)."""
        led, limit = len(self.broker.partitions), self.config.max_partitions
        if led + new_partitions <= limit:
            return
        self.topics_refused += 1
        self.partition_limit.fail(
            f"partition limit reached: {led} of --max-partitions {limit}; topic {name!r} "
            "and any later new topic are answered UNKNOWN_TOPIC_OR_PARTITION"
        )
        raise KafkaError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} would pass --max-partitions"
        )

    def _create_partition(self, tp: TopicPartition) -> None:
        """Open ``tp``'s log and follow it; out of file descriptors, raise
        UNKNOWN_TOPIC_OR_PARTITION (logged once). O(log recovery)."""
        cfg = self.config
        try:
            self.broker.create_partition(
                tp,
                range(1, cfg.followers + 1),
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
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"cannot create partition {tp}"
            ) from exc
        self.replicas.follow([tp])

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
        if body.topics is None or (version == 0 and not body.topics):
            names: list[str | None] = list(self._topics)
        else:
            names = [t.name for t in body.topics]
        response = MetadataResponse(
            version=version,
            throttle_time_ms=0,
            brokers=[
                MetadataResponse.MetadataResponseBroker(node_id=0, host=host, port=port, rack=None)
            ],
            cluster_id=self.config.cluster_id,
            controller_id=0,
            topics=[self._metadata_topic(name) for name in names],
        )
        return codec.encode_response(response, req.correlation_id)

    def _metadata_topic(self, name: str | None) -> Any:
        """One topic's Metadata answer, creating the topic on first use; a refused
        topic is answered with its error code and no partitions. O(partitions)."""
        try:
            if name is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "a null topic name")
            count, topic_id = self.topic(name)
        except KafkaError as exc:
            error_code, topic_id, partitions = int(exc.code), None, []
        else:
            error_code = 0
            partitions = [self._metadata_partition(TopicPartition(name, p)) for p in range(count)]
        return MetadataResponse.MetadataResponseTopic(
            error_code=error_code,
            name=name,
            topic_id=topic_id,
            is_internal=False,
            partitions=partitions,
        )

    def _metadata_partition(self, tp: TopicPartition) -> Any:
        """One partition's Metadata answer: this broker leads it; its followers are
        listed only with ``advertise_followers``. O(replicas)."""
        partition = self.broker.partition(tp)
        assert partition is not None
        if self.config.advertise_followers:
            nodes = [0, *range(1, self.config.followers + 1)]
            isr = sorted(partition.isr)
        else:
            nodes = isr = [0]
        return MetadataResponse.MetadataResponseTopic.MetadataResponsePartition(
            error_code=0,
            partition_index=tp.partition,
            leader_id=0,
            leader_epoch=partition.leader_epoch,
            replica_nodes=nodes,
            isr_nodes=isr,
            offline_replicas=[],
        )

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
        topics = []
        for topic in req.body.topics:
            partitions = []
            for asked in topic.partitions:
                index = asked.partition_index
                partition = self.broker.partition(TopicPartition(topic.name, index))
                error, offset, epoch = 0, -1, -1
                if partition is None:
                    error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif asked.timestamp == -2:  # earliest
                    offset, epoch = partition.log.log_start_offset, partition.leader_epoch
                elif asked.timestamp == -1:  # latest: the high watermark (= LSO, no transactions)
                    offset, epoch = partition.high_watermark, partition.leader_epoch
                else:  # lookups by time are not implemented
                    error = ErrorCode.INVALID_REQUEST
                partitions.append(
                    _ListOffsetsTopic.ListOffsetsPartitionResponse(
                        partition_index=index,
                        error_code=int(error),
                        timestamp=-1,
                        offset=offset,
                        leader_epoch=epoch,
                    )
                )
            topics.append(_ListOffsetsTopic(name=topic.name, partitions=partitions))
        response = ListOffsetsResponse(version=req.api_version, throttle_time_ms=0, topics=topics)
        return codec.encode_response(response, req.correlation_id)

    # -- Produce -----------------------------------------------------------------

    def _produce(self, req: codec.DecodedRequest) -> Reply:
        body = req.body
        timeout_ms = max(0, body.timeout_ms)
        plan = _ProducePlan(body.acks)
        order: list[tuple[str, list[int]]] = []
        for topic in body.topic_data:
            order.append((topic.name, [data.index for data in topic.partition_data]))
            self._plan_topic(plan, topic.name, topic.partition_data)
        op = self._append(plan, timeout_ms)
        if plan.acks == 0:
            _close_if_any_failed(plan, op)
            return None
        waits = [] if op is None else [op]
        if plan.retried:
            waits.append(
                self.broker.await_replication(plan.retried, acks=plan.acks, timeout_ms=timeout_ms)
            )
        version, cid = req.api_version, req.correlation_id

        def finish(outcomes: list[dict[TopicPartition, ProducePartitionResponse]]) -> bytes:
            merged = dict(plan.refused)
            for outcome in outcomes:
                merged.update(outcome)
            return self._produce_response(version, cid, order, merged)

        if all(w.is_done for w in waits):
            return finish([w.result() for w in waits])
        return Pending(waits, finish)

    def _plan_topic(self, plan: _ProducePlan, name: str | None, partitions: Sequence[Any]) -> None:
        """Sort one topic's partitions into ``plan``: the boundary where a refused
        partition's exception becomes its error code. The topic is looked up (created,
        or refused) once, before its partitions. O(partitions + bytes) (the CRCs)."""
        try:
            if not isinstance(name, str):
                raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "a null topic name")
            count, _ = self.topic(name)
            refusal = None
        except _PARTITION_ERRORS as exc:
            count, refusal = 0, exc
        for data in partitions:
            tp = TopicPartition(name, data.index)  # type: ignore[arg-type]  # None: refused
            try:
                self._plan_partition(plan, tp, data.records, count, refusal)
            except _PARTITION_ERRORS as exc:
                plan.refused[tp] = ProducePartitionResponse(int(error_code(exc)), -1)

    def _plan_partition(
        self,
        plan: _ProducePlan,
        tp: TopicPartition,
        records: bytes | None,
        count: int,
        refusal: Exception | None,
    ) -> None:
        """Put one partition's batch into ``plan`` (to append, or a retry), or raise
        why it is refused, in the module doc's order; ``count``: its topic's partitions,
        ``refusal``: why its topic is refused. O(len(records)) (the CRC)."""
        if tp in plan.refused or tp in plan.batches or tp in plan.retried:
            plan.forget(tp)  # a partition twice: both refused
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"{tp} twice in one produce request")
        if plan.acks not in (-1, 0, 1):
            raise KafkaError(ErrorCode.INVALID_REQUIRED_ACKS, f"acks {plan.acks} is not -1, 0 or 1")
        if refusal is not None:
            raise refusal.with_traceback(None)  # each partition's raise its own traceback
        if not 0 <= tp.partition < count:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp}: the topic has {count} partitions"
            )
        header = check_produce_batch(records)
        assert records is not None  # checked
        if header.producer_id >= 0:
            retried = self.producer_states.check(
                tp,
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                last_sequence(header.base_sequence, header.last_offset_delta),
            )
            if retried is not None:  # answered with its first append's offsets
                plan.retried[tp] = (retried.base_offset, retried.last_offset)
                return
        plan.batches[tp] = records
        plan.headers[tp] = header

    def _append(self, plan: _ProducePlan, timeout_ms: int) -> DelayedProduce | None:
        """Append the plan's batches in one broker call, tell the followers, remember
        the idempotent producers' batches; None if there is nothing to append.
        O(bytes appended + partitions)."""
        if not plan.batches:
            return None
        before = {tp: self._high_watermark(tp) for tp in plan.batches}
        op = self.broker.produce(plan.batches, acks=plan.acks, timeout_ms=timeout_ms)
        for tp, hw in before.items():
            self.replicas.notify_if_moved(tp, hw)
        self._record_appends(op.statuses, plan.headers)
        return op

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
        topics = []
        for name, indexes in order:
            partitions = []
            for index in indexes:
                result = results[TopicPartition(name, index)]
                partition = self.broker.partition(TopicPartition(name, index))
                partitions.append(
                    _ProduceTopic.PartitionProduceResponse(
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
            topics.append(_ProduceTopic(name=name, partition_responses=partitions))
        response = ProduceResponse(version=version, responses=topics, throttle_time_ms=0)
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
        topics = []
        for name, topic_id, indexes in order:
            partitions = []
            for index in indexes:
                tp = TopicPartition(name, index)
                answer = data.get(tp)
                if answer is None:  # a topic id this broker does not know
                    answer = FetchPartitionData(ErrorCode.UNKNOWN_TOPIC_ID, -1, -1, b"")
                partition = self.broker.partition(tp)
                log_start = -1 if partition is None else partition.log.log_start_offset
                partitions.append(
                    _FetchTopic.PartitionData(
                        partition_index=index,
                        error_code=answer.error_code,
                        high_watermark=answer.high_watermark,
                        last_stable_offset=answer.high_watermark,  # no transactions: LSO = HW
                        log_start_offset=log_start,
                        aborted_transactions=[] if read_committed else None,
                        preferred_read_replica=-1,
                        records=answer.records,
                    )
                )
            topics.append(_FetchTopic(topic=name, topic_id=topic_id, partitions=partitions))
        response = FetchResponse(
            version=version, throttle_time_ms=0, error_code=0, session_id=0, responses=topics
        )
        return codec.encode_response(response, correlation_id)


def check_produce_batch(records: bytes | None) -> RecordBatchHeader:
    """The batch's header if ``records`` is exactly one valid magic-2 batch; else raise
    :class:`~purgatory_broker.broker.errors.KafkaError` with INVALID_RECORD (87), or
    :class:`CorruptRecordError` (answered CORRUPT_MESSAGE, 2) for a truncated batch or a
    CRC-32C mismatch. O(len(records))."""
    if not records:
        raise KafkaError(ErrorCode.INVALID_RECORD, "no records")
    if len(records) < _HEADER_MAGIC_AT + 1:
        raise CorruptRecordError(f"{len(records)} bytes hold no batch header")
    if records[_HEADER_MAGIC_AT] != 2:
        raise KafkaError(ErrorCode.INVALID_RECORD, f"magic {records[_HEADER_MAGIC_AT]}, not 2")
    header = RecordBatchHeader.parse(records)
    if header.size_bytes < len(records):
        raise KafkaError(ErrorCode.INVALID_RECORD, "more than one batch, or bytes after the batch")
    # truncated, bad lengths, CRC mismatch (validate_batch's checks, without a second parse)
    check_batch(records if type(records) is bytes else bytes(records), True)
    if header.records_count != header.last_offset_delta + 1:
        raise KafkaError(
            ErrorCode.INVALID_RECORD,
            f"{header.records_count} records, last offset delta {header.last_offset_delta}",
        )
    if header.attributes & _RECORD_BITS_TRANSACTIONAL_OR_CONTROL:
        raise KafkaError(ErrorCode.INVALID_RECORD, "a transactional or control batch")
    return header


@dataclass(slots=True)
class _ProducePlan:
    """A produce request's partitions, sorted before anything is appended; a
    partition is in at most one of ``refused``, ``batches`` and ``retried``."""

    acks: int
    #: answered before any wait, with their error code
    refused: dict[TopicPartition, ProducePartitionResponse] = field(default_factory=dict)
    #: to append, and the batch's header (kept for its producer state)
    batches: dict[TopicPartition, bytes] = field(default_factory=dict)
    headers: dict[TopicPartition, RecordBatchHeader] = field(default_factory=dict)
    #: an idempotent producer's retried batch: (base offset, last offset) of its append
    retried: dict[TopicPartition, tuple[int, int]] = field(default_factory=dict)

    def forget(self, tp: TopicPartition) -> None:
        """Drop ``tp`` from the batches to append and the retries. O(1)."""
        self.batches.pop(tp, None)
        self.retried.pop(tp, None)


def _close_if_any_failed(plan: _ProducePlan, op: DelayedProduce | None) -> None:
    """acks=0: raise :class:`CloseConnection` if a partition failed, Kafka's way of
    telling a producer that reads no answer. O(partitions)."""
    failed = [tp for tp, r in plan.refused.items() if r.error_code != 0]
    if op is not None:
        failed += [tp for tp, s in op.statuses.items() if s.error_code != 0]
    if failed:
        raise CloseConnection(f"acks=0 produce failed for {sorted(map(str, failed))}")


def _sleep_then(value: T, delay_ms: int) -> asyncio.Future[T]:
    """A future resolved with ``value`` after ``delay_ms`` (no coroutine to leak). O(1)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[T] = loop.create_future()

    def resolve() -> None:
        if not fut.done():
            fut.set_result(value)

    loop.call_later(delay_ms / 1000, resolve)
    return fut
