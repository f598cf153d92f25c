"""Every (API, version) the broker advertises in ApiVersions works on the wire.

The cases are generated from :data:`codec.ADVERTISED_VERSIONS` (what every
ApiVersions answer lists): for each advertised version of each API, a well-formed
request at that version goes over a real socket to one running broker (one per
module, in a thread), and the answer must decode at that version and make sense:
no error where the request is valid, and the fields asked about answered (a
produce gets its offset and the records are there, a fetch gets the records
produced, Metadata lists the topic, a group API's answer matches the group).
Produce v0-v2 are advertised but refused, as in Kafka 4 (KAFKA-18659, see
:data:`codec.ADVERTISED_PRODUCE_MIN_VERSION`): their check is that the broker
closes the connection without an answer and appends nothing.

:data:`CHECKS` says which versions each check was written for: a version the
broker starts advertising without its check being looked at fails here.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from purgatory_broker.broker import ErrorCode, build_batch, iter_batches, iter_records
from purgatory_broker.wire import BrokerThread, WireConfig
from purgatory_broker.wire import _codec as codec

from .rawclient import (
    RawClient,
    fetch_partitions_request,
    fetch_request,
    metadata_request,
    produce_request,
)

PARTITIONS = 2
SESSION_MS = 60_000  # no member expires while the module runs
TIMEOUT_S = 30.0  # a hung request fails its test instead of the run


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerThread]:
    config = WireConfig(
        port=0,
        partitions=PARTITIONS,
        followers=1,
        follower_lag_ms=5,
        group_initial_rebalance_delay_ms=0,
        group_min_session_timeout_ms=1000,
    )
    with BrokerThread(config) as bt:
        yield bt
        assert bt.call(lambda wb: wb.stats.internal_errors) == 0
        bt.call(lambda wb: wb.coordinator.check_invariants())


def request(api: int, version: int, **fields: Any) -> Any:
    """A request of ``api`` at ``version`` (fields outside the version are not sent)."""
    return codec.SUPPORTED_APIS[api].request(version=version, **fields)


# -- helpers at fixed versions (the version under test is the only one that varies) -----


async def produce(client: RawClient, topic: str, partition: int, *values: bytes) -> int:
    """Append ``values`` as one batch (Produce v9, acks=all); returns the base offset."""
    answer = await client.request(produce_request(topic, partition, build_batch(list(values))))
    (t,) = answer.responses
    (p,) = t.partition_responses
    assert (t.name, p.index, p.error_code) == (topic, partition, 0), answer
    return int(p.base_offset)


async def fetch_values(client: RawClient, topic: str, partition: int) -> list[bytes | None]:
    """The values of ``topic``'s ``partition`` from offset 0 (Fetch v12, no wait)."""
    answer = await client.request(fetch_request(topic, partition, 0, max_wait_ms=0, min_bytes=0))
    (t,) = answer.responses
    (p,) = t.partitions
    assert p.error_code == 0, answer
    return values(p.records)


def values(records: bytes | None) -> list[bytes | None]:
    """The values of the records of concatenated batches."""
    return [r.value for b in iter_batches(records or b"") for r in iter_records(b)]


async def create_topic(client: RawClient, topic: str) -> uuid.UUID:
    """Create ``topic`` (Metadata v12); returns its topic id."""
    (t,) = (await client.request(metadata_request(topic))).topics
    assert (t.name, t.error_code) == (topic, 0)
    assert isinstance(t.topic_id, uuid.UUID)
    return t.topic_id


def join_request(group: str, version: int, member_id: str = "") -> Any:
    jr = codec.SUPPORTED_APIS[codec.JOIN_GROUP].request
    return jr(
        version=version,
        group_id=group,
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=SESSION_MS,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[jr.JoinGroupRequestProtocol(name="range", metadata=b"sub")],
        reason=None,
    )


async def joined_member(client: RawClient, group: str) -> tuple[str, int]:
    """A new group's only member, joined (JoinGroup v3), not synced: (member id, generation)."""
    joined = await client.request(join_request(group, 3))
    assert (joined.error_code, joined.generation_id) == (0, 1), joined
    return joined.member_id, joined.generation_id


def sync_request(group: str, version: int, member: str, generation: int) -> Any:
    sr = codec.SUPPORTED_APIS[codec.SYNC_GROUP].request
    return sr(
        version=version,
        group_id=group,
        generation_id=generation,
        member_id=member,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[sr.SyncGroupRequestAssignment(member_id=member, assignment=b"a")],
    )


async def stable_member(client: RawClient, group: str) -> tuple[str, int]:
    """A new Stable group's only member (JoinGroup v3, SyncGroup v3): (id, generation)."""
    member, generation = await joined_member(client, group)
    synced = await client.request(sync_request(group, 3, member, generation))
    assert (synced.error_code, bytes(synced.assignment)) == (0, b"a")
    return member, generation


def commit_request(
    group: str,
    version: int,
    offsets: dict[int, int],
    *,
    topic: str = "committed",
    member: str = "",
    generation: int = -1,
    leader_epoch: int = -1,
    metadata: str = "",
) -> Any:
    oc = codec.SUPPORTED_APIS[codec.OFFSET_COMMIT].request
    partition = oc.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    return oc(
        version=version,
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member,
        group_instance_id=None,
        retention_time_ms=-1,
        topics=[
            oc.OffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    partition(
                        partition_index=p,
                        committed_offset=offset,
                        committed_leader_epoch=leader_epoch,
                        commit_timestamp=-1,
                        committed_metadata=metadata,
                    )
                    for p, offset in offsets.items()
                ],
            )
        ],
    )


async def committed(client: RawClient, group: str, topic: str = "committed") -> dict[int, Any]:
    """partition -> (offset, leader epoch, metadata) committed (OffsetFetch v5, all
    partitions of ``PARTITIONS``; offset -1 where none)."""
    of = codec.SUPPORTED_APIS[codec.OFFSET_FETCH].request
    answer = await client.request(
        of(
            version=5,
            group_id=group,
            topics=[of.OffsetFetchRequestTopic(name=topic, partition_indexes=range(PARTITIONS))],
        )
    )
    assert answer.error_code == 0
    return {
        p.partition_index: (p.committed_offset, p.committed_leader_epoch, p.metadata)
        for t in answer.topics
        for p in t.partitions
        if p.error_code == 0
    }


async def describe(client: RawClient, group: str) -> Any:
    answer = await client.request(request(codec.DESCRIBE_GROUPS, 0, groups=[group]))
    (d,) = answer.groups
    assert d.error_code == 0
    return d


# -- one check per API -----------------------------------------------------------------


async def check_produce(client: RawClient, v: int) -> None:
    topic = f"produce-v{v}"
    # acks=1 answers before the followers have the batch; acks=all's wait covers both
    for offset, acks in enumerate((1, -1)):
        answer = await client.request(
            produce_request(topic, 1, build_batch([b"p%d" % offset]), acks=acks, version=v)
        )
        (t,) = answer.responses
        (p,) = t.partition_responses
        assert (t.name, p.index, p.error_code, p.base_offset) == (topic, 1, 0, offset), answer
        if v >= 5:
            assert p.log_start_offset == 0
    assert await fetch_values(client, topic, 1) == [b"p0", b"p1"]


async def check_produce_refused(client: RawClient, v: int) -> None:
    """Produce v0-v2: advertised (for librdkafka) yet refused, as Kafka 4 refuses them:
    the connection is closed, no answer, nothing appended (the topic is not even made)."""
    topic = f"produce-refused-v{v}"
    # the message set of those versions: magic 0 (v0, v1) or 1 (v2, KIP-32)
    message_set = LegacyRecordBatchBuilder(magic=v // 2, compression_type=0, batch_size=1 << 10)
    message_set.append(0, timestamp=None if v < 2 else 1, key=None, value=b"old")
    produce = produce_request(topic, 0, bytes(message_set.build()), version=v)
    frame = _frame(produce)
    produce_request_class = codec.SUPPORTED_APIS[codec.PRODUCE].request
    assert produce_request_class.decode(frame[4:], version=v, header=True).topic_data  # well formed
    await client.write_raw(frame)
    with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
        await client.read_frame()
    host, port = client.writer.get_extra_info("peername")[:2]
    other = await RawClient.connect(f"{host}:{port}")
    try:
        metadata_request_class = codec.SUPPORTED_APIS[codec.METADATA].request
        every = await other.request(metadata_request_class(version=1, topics=None))
        assert topic not in {t.name for t in every.topics}
    finally:
        await other.close()


async def check_fetch(client: RawClient, v: int) -> None:
    topic = f"fetch-v{v}"
    topic_id = await create_topic(client, topic)
    await produce(client, topic, 0, b"a", b"b")
    await produce(client, topic, 0, b"c")
    by_id = v >= 13  # KIP-516
    for isolation_level in (0, 1):  # read_uncommitted, read_committed
        answer = await client.request(
            fetch_partitions_request(
                None if by_id else topic,
                {0: 0},
                topic_id=topic_id,
                max_wait_ms=0,
                max_bytes=1 << 20,
                isolation_level=isolation_level,
                version=v,
            )
        )
        if v >= 7:
            assert (answer.error_code, answer.session_id) == (0, 0)
        (t,) = answer.responses
        assert t.topic_id == topic_id if by_id else t.topic == topic
        (p,) = t.partitions
        assert (p.partition_index, p.error_code, p.high_watermark) == (0, 0, 3)
        assert p.last_stable_offset == 3
        if v >= 5:
            assert p.log_start_offset == 0
        # read_committed: no aborted transactions (there are no transactions)
        assert p.aborted_transactions == ([] if isolation_level else None)
        assert values(p.records) == [b"a", b"b", b"c"]


async def check_list_offsets(client: RawClient, v: int) -> None:
    topic = f"list-offsets-v{v}"
    await produce(client, topic, 1, b"a", b"b", b"c")
    lr = codec.SUPPORTED_APIS[codec.LIST_OFFSETS].request
    partition = lr.ListOffsetsTopic.ListOffsetsPartition
    answer = await client.request(
        lr(
            version=v,
            replica_id=-1,
            isolation_level=0,
            topics=[
                lr.ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        partition(partition_index=1, current_leader_epoch=-1, timestamp=ts)
                        for ts in (-2, -1)  # earliest, latest
                    ],
                )
            ],
        )
    )
    (t,) = answer.topics
    assert t.name == topic
    assert [(p.partition_index, p.error_code, p.offset) for p in t.partitions] == [
        (1, 0, 0),
        (1, 0, 3),
    ]
    if v >= 4:
        assert all(p.leader_epoch >= 0 for p in t.partitions)


async def check_metadata(client: RawClient, v: int) -> None:
    topic = f"metadata-v{v}"
    answer = await client.request(metadata_request(topic, version=v))
    host, port = client.writer.get_extra_info("peername")[:2]
    assert [(b.node_id, b.host, b.port) for b in answer.brokers] == [(0, host, port)]
    if v >= 1:
        assert answer.controller_id == 0
    if v >= 2:
        assert answer.cluster_id == "purgatory-wire-example"
    (t,) = answer.topics
    assert (t.name, t.error_code, t.is_internal) == (topic, 0, False)
    if v >= 10:
        assert isinstance(t.topic_id, uuid.UUID)
    assert [(p.partition_index, p.error_code, p.leader_id) for p in t.partitions] == [
        (i, 0, 0) for i in range(PARTITIONS)
    ]
    assert all(0 in p.replica_nodes and 0 in p.isr_nodes for p in t.partitions)
    if v >= 1:  # a null topic list: every topic
        metadata_request_class = codec.SUPPORTED_APIS[codec.METADATA].request
        every = await client.request(
            metadata_request_class(
                version=v,
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        assert topic in {t.name for t in every.topics}


async def check_offset_commit(client: RawClient, v: int) -> None:
    # a member of the group, at its generation
    group = f"offset-commit-v{v}"
    member, generation = await stable_member(client, group)
    epoch = 5 if v >= 6 else -1  # committed_leader_epoch: v6+
    answer = await client.request(
        commit_request(
            group,
            v,
            {0: 10 + v},
            member=member,
            generation=generation,
            leader_epoch=epoch,
            metadata=f"m{v}",
        )
    )
    assert [(t.name, p.partition_index, p.error_code) for t in answer.topics for p in t.partitions]
    assert [p.error_code for t in answer.topics for p in t.partitions] == [0]
    assert await committed(client, group) == {0: (10 + v, epoch, f"m{v}"), 1: (-1, -1, "")}
    stale = await client.request(
        commit_request(group, v, {0: 99}, member=member, generation=generation + 1)
    )
    assert [p.error_code for t in stale.topics for p in t.partitions] == [
        ErrorCode.ILLEGAL_GENERATION
    ]
    # a consumer outside group management (generation -1, no member id)
    alone = f"offset-commit-alone-v{v}"
    answer = await client.request(commit_request(alone, v, {1: 7}))
    assert [(p.partition_index, p.error_code) for t in answer.topics for p in t.partitions] == [
        (1, 0)
    ]
    assert (await committed(client, alone))[1][0] == 7


async def check_offset_fetch(client: RawClient, v: int) -> None:
    group = f"offset-fetch-v{v}"
    stored = await client.request(commit_request(group, 2, {1: 42}, metadata="m"))
    assert [p.error_code for t in stored.topics for p in t.partitions] == [0]
    of = codec.SUPPORTED_APIS[codec.OFFSET_FETCH].request

    def offsets(topics: Any) -> list[tuple[str, int, int, str | None, int]]:
        return [
            (t.name, p.partition_index, p.committed_offset, p.metadata, p.error_code)
            for t in topics
            for p in t.partitions
        ]

    asked = [(0, -1, ""), (1, 42, "m")]
    for wanted in ([0, 1], None):  # two partitions; a null list (v2+): all committed
        if wanted is None and v < 2:
            continue
        if v >= 8:
            group_topics = of.OffsetFetchRequestGroup.OffsetFetchRequestTopics
            topics = (
                None
                if wanted is None
                else [group_topics(name="committed", partition_indexes=wanted)]
            )
            answer = await client.request(
                of(
                    version=v,
                    groups=[of.OffsetFetchRequestGroup(group_id=group, topics=topics)],
                    require_stable=False,
                )
            )
            (g,) = answer.groups
            assert (g.group_id, g.error_code) == (group, 0)
            got = offsets(g.topics)
        else:
            topics = (
                None
                if wanted is None
                else [of.OffsetFetchRequestTopic(name="committed", partition_indexes=wanted)]
            )
            answer = await client.request(
                of(version=v, group_id=group, topics=topics, require_stable=False)
            )
            if v >= 2:
                assert answer.error_code == 0
            got = offsets(answer.topics)
        expected = asked if wanted is not None else asked[1:]
        assert got == [("committed", p, o, m, 0) for p, o, m in expected]


async def check_find_coordinator(client: RawClient, v: int) -> None:
    group = f"find-coordinator-v{v}"
    host, port = client.writer.get_extra_info("peername")[:2]
    if v >= 4:  # batched keys
        answer = await client.request(
            request(codec.FIND_COORDINATOR, v, key_type=0, coordinator_keys=[group, "other"])
        )
        assert [(c.key, c.error_code, c.node_id, c.host, c.port) for c in answer.coordinators] == [
            (group, 0, 0, host, port),
            ("other", 0, 0, host, port),
        ]
    else:
        answer = await client.request(request(codec.FIND_COORDINATOR, v, key=group, key_type=0))
        assert (answer.error_code, answer.node_id, answer.host, answer.port) == (0, 0, host, port)


async def check_join_group(client: RawClient, v: int) -> None:
    group = f"join-group-v{v}"
    joined = await client.request(join_request(group, v))
    if v >= 4:  # KIP-394: a new member first gets its id
        assert joined.error_code == ErrorCode.MEMBER_ID_REQUIRED and joined.member_id
        joined = await client.request(join_request(group, v, joined.member_id))
    assert joined.error_code == 0, joined
    member = joined.member_id
    assert (joined.generation_id, joined.leader, joined.protocol_name) == (1, member, "range")
    if v >= 7:
        assert joined.protocol_type == "consumer"
    assert [(m.member_id, bytes(m.metadata)) for m in joined.members] == [(member, b"sub")]
    d = await describe(client, group)
    assert (d.group_state, [m.member_id for m in d.members]) == ("CompletingRebalance", [member])


async def check_sync_group(client: RawClient, v: int) -> None:
    group = f"sync-group-v{v}"
    member, generation = await joined_member(client, group)
    synced = await client.request(sync_request(group, v, member, generation))
    assert (synced.error_code, bytes(synced.assignment)) == (0, b"a")
    if v >= 5:
        assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")
    d = await describe(client, group)
    assert (d.group_state, [bytes(m.member_assignment) for m in d.members]) == ("Stable", [b"a"])


async def check_heartbeat(client: RawClient, v: int) -> None:
    group = f"heartbeat-v{v}"
    member, generation = await stable_member(client, group)

    async def beat(member_id: str, generation_id: int) -> int:
        answer = await client.request(
            request(
                codec.HEARTBEAT,
                v,
                group_id=group,
                generation_id=generation_id,
                member_id=member_id,
                group_instance_id=None,
            )
        )
        return int(answer.error_code)

    assert await beat(member, generation) == 0
    assert await beat(member, generation + 1) == ErrorCode.ILLEGAL_GENERATION
    assert await beat("stranger", generation) == ErrorCode.UNKNOWN_MEMBER_ID


async def check_leave_group(client: RawClient, v: int) -> None:
    group = f"leave-group-v{v}"
    member, _ = await stable_member(client, group)
    lr = codec.SUPPORTED_APIS[codec.LEAVE_GROUP].request

    async def leave() -> int:
        if v >= 3:  # a list of members
            answer = await client.request(
                lr(
                    version=v,
                    group_id=group,
                    members=[
                        lr.MemberIdentity(member_id=member, group_instance_id=None, reason=None)
                    ],
                )
            )
            assert answer.error_code == 0
            (m,) = answer.members
            assert m.member_id == member
            return int(m.error_code)
        answer = await client.request(lr(version=v, group_id=group, member_id=member))
        return int(answer.error_code)

    assert await leave() == 0
    d = await describe(client, group)
    assert (d.group_state, d.protocol_type, list(d.members)) == ("Empty", "consumer", [])
    assert await leave() == ErrorCode.UNKNOWN_MEMBER_ID


async def check_describe_groups(client: RawClient, v: int) -> None:
    group = f"describe-groups-v{v}"
    member, _ = await stable_member(client, group)
    answer = await client.request(
        request(
            codec.DESCRIBE_GROUPS,
            v,
            groups=[group, "never-seen"],
            include_authorized_operations=False,
        )
    )
    d, unknown = answer.groups
    assert (d.error_code, d.group_id, d.group_state) == (0, group, "Stable")
    assert (d.protocol_type, d.protocol_data) == ("consumer", "range")
    (m,) = d.members
    assert (m.member_id, m.client_id) == (member, "raw-test")
    assert (bytes(m.member_metadata), bytes(m.member_assignment)) == (b"sub", b"a")
    if v >= 4:
        assert m.group_instance_id is None
    if v >= 3:  # not asked for: INT32_MIN on the wire, which kafka-python reads as None
        assert d.authorized_operations is None
    assert (unknown.error_code, unknown.group_id, unknown.group_state) == (0, "never-seen", "Dead")


async def check_list_groups(client: RawClient, v: int) -> None:
    group = f"list-groups-v{v}"
    await stable_member(client, group)
    filters: list[list[str]] = [[], ["Stable"], ["Empty"]] if v >= 4 else [[]]
    for states in filters:
        answer = await client.request(
            request(codec.LIST_GROUPS, v, states_filter=states, types_filter=[])
        )
        assert answer.error_code == 0
        listed = {g.group_id: g for g in answer.groups}
        if states == ["Empty"]:
            assert group not in listed
            continue
        assert listed[group].protocol_type == "consumer"
        if v >= 4:
            assert listed[group].group_state == "Stable"


async def check_api_versions(client: RawClient, v: int) -> None:
    answer = await client.request(
        request(
            codec.API_VERSIONS,
            v,
            client_software_name="raw-test",
            client_software_version="1.0",
        )
    )
    assert answer.error_code == 0
    assert ranges(answer) == codec.ADVERTISED_VERSIONS


async def check_init_producer_id(client: RawClient, v: int) -> None:
    def init(producer_id: int = -1, epoch: int = -1, transactional_id: str | None = None) -> Any:
        return request(
            codec.INIT_PRODUCER_ID,
            v,
            transactional_id=transactional_id,
            transaction_timeout_ms=60_000,
            producer_id=producer_id,
            producer_epoch=epoch,
        )

    answer = await client.request(init())
    assert answer.error_code == 0
    pid, epoch = answer.producer_id, answer.producer_epoch
    assert pid >= 0 and epoch == 0
    # the id works: an idempotent batch is appended once, a retry gets its offset
    topic = f"init-producer-id-v{v}"
    batch = build_batch([b"once"], producer_id=pid, producer_epoch=epoch, base_sequence=0)
    for _ in range(2):
        r = await client.request(produce_request(topic, 0, batch))
        p = r.responses[0].partition_responses[0]
        assert (p.error_code, p.base_offset) == (0, 0)
    assert await fetch_values(client, topic, 0) == [b"once"]
    if v >= 3:  # KIP-360: the producer's current id and epoch bump the epoch
        bumped = await client.request(init(pid, epoch))
        assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (0, pid, 1)
    # transactions need a transaction coordinator, which this broker does not have
    refused = await client.request(init(transactional_id="tx"))
    assert refused.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE


Check = Callable[[RawClient, int], Awaitable[None]]

#: api key -> its checks, each with the versions it was written for
CHECKS: dict[int, list[tuple[Check, range]]] = {
    codec.PRODUCE: [(check_produce_refused, range(3)), (check_produce, range(3, 10))],
    codec.FETCH: [(check_fetch, range(4, 17))],
    codec.LIST_OFFSETS: [(check_list_offsets, range(1, 8))],
    codec.METADATA: [(check_metadata, range(13))],
    codec.OFFSET_COMMIT: [(check_offset_commit, range(2, 9))],
    codec.OFFSET_FETCH: [(check_offset_fetch, range(1, 9))],
    codec.FIND_COORDINATOR: [(check_find_coordinator, range(6))],
    codec.JOIN_GROUP: [(check_join_group, range(10))],
    codec.HEARTBEAT: [(check_heartbeat, range(5))],
    codec.LEAVE_GROUP: [(check_leave_group, range(6))],
    codec.SYNC_GROUP: [(check_sync_group, range(6))],
    codec.DESCRIBE_GROUPS: [(check_describe_groups, range(6))],
    codec.LIST_GROUPS: [(check_list_groups, range(5))],
    codec.API_VERSIONS: [(check_api_versions, range(4))],
    codec.INIT_PRODUCER_ID: [(check_init_producer_id, range(5))],
}

#: (api key, version) for every version ApiVersions advertises
ADVERTISED = [
    (api, v) for api, (low, high) in codec.ADVERTISED_VERSIONS.items() for v in range(low, high + 1)
]


def test_every_api_versions_answer_lists_the_advertised_versions() -> None:
    """Every ApiVersions version's answer, and the UNSUPPORTED_VERSION one, list
    :data:`codec.ADVERTISED_VERSIONS`: the served ranges, Produce from v0."""
    low, high = codec.ADVERTISED_VERSIONS[codec.API_VERSIONS]
    for v in range(low, high + 1):
        assert ranges(codec.api_versions_response(v)) == codec.ADVERTISED_VERSIONS
    frame = codec.unsupported_api_versions_response(1)
    old = codec.ApiVersionsResponse.decode(frame[4:], version=0, header=True)
    assert ranges(old) == codec.ADVERTISED_VERSIONS
    served = {s.api_key: (s.min_version, s.max_version) for s in codec.SUPPORTED_APIS.values()}
    produce_max = codec.SUPPORTED_APIS[codec.PRODUCE].max_version
    assert {**served, codec.PRODUCE: (0, produce_max)} == codec.ADVERTISED_VERSIONS
    assert len(ADVERTISED) == len(set(ADVERTISED))


@pytest.mark.parametrize(
    ("api", "version"),
    ADVERTISED,
    ids=[f"{codec.SUPPORTED_APIS[a].name}-v{v}" for a, v in ADVERTISED],
)
def test_an_advertised_version_round_trips(broker: BrokerThread, api: int, version: int) -> None:
    name = codec.SUPPORTED_APIS[api].name
    assert api in CHECKS, f"{name} is advertised but has no round-trip check"
    checks = [check for check, written_for in CHECKS[api] if version in written_for]
    assert checks, f"{name} v{version} is advertised but no check of it is"
    (check,) = checks

    async def main() -> None:
        client = await RawClient.connect(broker.bootstrap_servers)
        try:
            await asyncio.wait_for(check(client, version), TIMEOUT_S)
        finally:
            await client.close()

    asyncio.run(main())


# -- nulls: what the schema allows decodes, what it does not closes the connection ------


def _frame(request: Any) -> bytes:
    request.with_header(correlation_id=1, client_id="raw-test")
    return bytes(request.encode(header=True, framed=True))


def _produce_null_topic(version: int) -> bytes:
    """A Produce whose topic name is null (kafka-python writes a None string as null)."""
    request = produce_request("x", 0, build_batch([b"v"]), version=version)
    request.topic_data[0].name = None
    return _frame(request)


def _metadata_v0_null_topics(version: int) -> bytes:
    """Metadata v0 with a null topic list (length -1; kafka-python writes None as [])."""
    empty = _frame(metadata_request(version=version))
    assert empty.endswith(b"\x00\x00\x00\x00")  # the topic array's length, last
    return empty[:-4] + b"\xff\xff\xff\xff"


@pytest.mark.parametrize(
    ("build", "version"),
    [(_produce_null_topic, 3), (_produce_null_topic, 9), (_metadata_v0_null_topics, 0)],
    ids=["Produce-v3-topic-name", "Produce-v9-topic-name", "Metadata-v0-topics"],
)
def test_a_null_the_schema_does_not_allow_closes_the_connection(
    broker: BrokerThread, build: Callable[[int], bytes], version: int
) -> None:
    async def main() -> None:
        client = await RawClient.connect(broker.bootstrap_servers)
        try:
            await client.write_raw(build(version))
            with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
                await asyncio.wait_for(client.read_frame(), TIMEOUT_S)
        finally:
            await client.close()

    asyncio.run(main())


def test_a_null_the_schema_allows_is_answered(broker: BrokerThread) -> None:
    """Metadata v1+ topics null: every topic (the codec's null check lets it through)."""

    async def main() -> None:
        client = await RawClient.connect(broker.bootstrap_servers)
        try:
            await create_topic(client, "listed")
            metadata_request_class = codec.SUPPORTED_APIS[codec.METADATA].request
            answer = await client.request(
                metadata_request_class(version=1, topics=None, allow_auto_topic_creation=False)
            )
            assert "listed" in {t.name for t in answer.topics}
        finally:
            await client.close()

    asyncio.run(main())


def test_an_unsupported_api_versions_version_lists_what_a_supported_one_lists(
    broker: BrokerThread,
) -> None:
    """The UNSUPPORTED_VERSION answer (v0 body) and a v3 answer list the same ranges."""

    async def main() -> None:
        client = await RawClient.connect(broker.bootstrap_servers)
        try:
            v3 = await client.request(request(codec.API_VERSIONS, 3))
            # an ApiVersions v127 header: key 18, version 127, correlation 5, client "x"
            frame = b"\x00\x12\x00\x7f\x00\x00\x00\x05\x00\x01x"
            await client.write_raw(len(frame).to_bytes(4, "big") + frame)
            old = codec.ApiVersionsResponse.decode(
                await asyncio.wait_for(client.read_frame(), TIMEOUT_S), version=0, header=True
            )
            assert (old.header.correlation_id, old.error_code) == (5, 35)
            assert ranges(old) == ranges(v3)
        finally:
            await client.close()

    asyncio.run(main())


def ranges(answer: Any) -> dict[int, tuple[int, int]]:
    """An ApiVersions answer's api key -> (min, max) version."""
    return {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
