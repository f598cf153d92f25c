"""Every version of every group API the broker advertises, on the wire: one member's
whole life (find the coordinator, join, sync, heartbeat, commit, fetch offsets,
describe, list, leave) encoded and decoded by kafka-python's schemas at that version.
Run ``level`` uses version ``min(level, max)`` of each API (at least its minimum),
so every version of every API runs once at least."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from purgatory_broker.broker import ErrorCode
from purgatory_broker.wire import KafkaWireBroker, WireConfig
from purgatory_broker.wire import _codec as codec

from .rawclient import RawClient

GROUP_APIS = (
    codec.FIND_COORDINATOR,
    codec.JOIN_GROUP,
    codec.SYNC_GROUP,
    codec.HEARTBEAT,
    codec.LEAVE_GROUP,
    codec.OFFSET_COMMIT,
    codec.OFFSET_FETCH,
    codec.LIST_GROUPS,
    codec.DESCRIBE_GROUPS,
)
LEVELS = max(codec.SUPPORTED_APIS[k].max_version for k in GROUP_APIS) + 1


def version(api: int, level: int) -> int:
    spec = codec.SUPPORTED_APIS[api]
    return max(spec.min_version, min(level, spec.max_version))


def request(api: int, level: int, **fields: Any) -> Any:
    spec = codec.SUPPORTED_APIS[api]
    return spec.request(version=version(api, level), **fields)


@pytest_asyncio.fixture
async def wire() -> AsyncIterator[KafkaWireBroker]:
    config = WireConfig(
        port=0,
        partitions=2,
        followers=0,
        group_initial_rebalance_delay_ms=0,
        group_min_session_timeout_ms=1000,
    )
    async with KafkaWireBroker(config) as wb:
        yield wb
        assert wb.stats.internal_errors == 0
        wb.coordinator.check_invariants()


def test_api_versions_lists_the_group_apis() -> None:
    response = codec.api_versions_response(3)
    listed = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert listed[codec.FIND_COORDINATOR] == (0, 5)  # v4+: batched keys
    assert all(api in listed for api in GROUP_APIS)


@pytest.mark.asyncio
@pytest.mark.parametrize("level", range(LEVELS))
async def test_a_member_life_at_every_version(wire: KafkaWireBroker, level: int) -> None:
    group = f"group-{level}"
    client = await RawClient.connect(wire.bootstrap_servers)
    try:
        # FindCoordinator: this broker
        v = version(codec.FIND_COORDINATOR, level)
        fields: dict[str, Any] = (
            {"coordinator_keys": [group], "key_type": 0}
            if v >= 4
            else {"key": group, "key_type": 0}
        )
        found = await client.request(request(codec.FIND_COORDINATOR, level, **fields))
        if v >= 4:
            (c,) = found.coordinators
            assert (c.key, c.error_code, c.node_id, c.port) == (group, 0, 0, wire.port)
        else:
            assert (found.error_code, found.node_id, found.port) == (0, 0, wire.port)

        # JoinGroup: v4+ first answers MEMBER_ID_REQUIRED with an id
        jv = version(codec.JOIN_GROUP, level)
        jr = codec.SUPPORTED_APIS[codec.JOIN_GROUP].request

        def join(member_id: str) -> Any:
            return request(
                codec.JOIN_GROUP,
                level,
                group_id=group,
                session_timeout_ms=10_000,
                rebalance_timeout_ms=10_000,
                member_id=member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocols=[jr.JoinGroupRequestProtocol(name="range", metadata=b"sub")],
                reason=None,
            )

        joined = await client.request(join(""))
        if jv >= 4:
            assert joined.error_code == ErrorCode.MEMBER_ID_REQUIRED and joined.member_id
            joined = await client.request(join(joined.member_id))
        assert joined.error_code == 0, joined
        member = joined.member_id
        assert (joined.generation_id, joined.leader, joined.protocol_name) == (1, member, "range")
        assert [(m.member_id, bytes(m.metadata)) for m in joined.members] == [(member, b"sub")]

        # SyncGroup: the leader assigns
        sr = codec.SUPPORTED_APIS[codec.SYNC_GROUP].request
        synced = await client.request(
            request(
                codec.SYNC_GROUP,
                level,
                group_id=group,
                generation_id=1,
                member_id=member,
                group_instance_id=None,
                protocol_type="consumer",
                protocol_name="range",
                assignments=[sr.SyncGroupRequestAssignment(member_id=member, assignment=b"a")],
            )
        )
        assert (synced.error_code, bytes(synced.assignment)) == (0, b"a")

        beat = await client.request(
            request(
                codec.HEARTBEAT,
                level,
                group_id=group,
                generation_id=1,
                member_id=member,
                group_instance_id=None,
            )
        )
        assert beat.error_code == 0

        # OffsetCommit, OffsetFetch
        oc = codec.SUPPORTED_APIS[codec.OFFSET_COMMIT].request
        topic = oc.OffsetCommitRequestTopic
        committed = await client.request(
            request(
                codec.OFFSET_COMMIT,
                level,
                group_id=group,
                generation_id_or_member_epoch=1,
                member_id=member,
                group_instance_id=None,
                retention_time_ms=-1,
                topics=[
                    topic(
                        name="orders",
                        partitions=[
                            topic.OffsetCommitRequestPartition(
                                partition_index=1,
                                committed_offset=42,
                                committed_leader_epoch=-1,
                                commit_timestamp=-1,
                                committed_metadata="m",
                            )
                        ],
                    )
                ],
            )
        )
        assert [p.error_code for t in committed.topics for p in t.partitions] == [0]
        of = codec.SUPPORTED_APIS[codec.OFFSET_FETCH].request
        fv = version(codec.OFFSET_FETCH, level)
        if fv >= 8:
            group_topics = of.OffsetFetchRequestGroup.OffsetFetchRequestTopics
            fetched = await client.request(
                request(
                    codec.OFFSET_FETCH,
                    level,
                    groups=[
                        of.OffsetFetchRequestGroup(
                            group_id=group,
                            topics=[group_topics(name="orders", partition_indexes=[0, 1])],
                        )
                    ],
                    require_stable=False,
                )
            )
            (g,) = fetched.groups
            parts = [
                (p.partition_index, p.committed_offset) for t in g.topics for p in t.partitions
            ]
        else:
            fetched = await client.request(
                request(
                    codec.OFFSET_FETCH,
                    level,
                    group_id=group,
                    topics=[of.OffsetFetchRequestTopic(name="orders", partition_indexes=[0, 1])],
                    require_stable=False,
                )
            )
            parts = [
                (p.partition_index, p.committed_offset)
                for t in fetched.topics
                for p in t.partitions
            ]
        assert parts == [(0, -1), (1, 42)]

        # DescribeGroups, ListGroups
        described = await client.request(
            request(
                codec.DESCRIBE_GROUPS,
                level,
                groups=[group],
                include_authorized_operations=False,
            )
        )
        (d,) = described.groups
        assert (d.error_code, d.group_state, d.protocol_data) == (0, "Stable", "range")
        assert [m.member_id for m in d.members] == [member]
        listed = await client.request(
            request(codec.LIST_GROUPS, level, states_filter=[], types_filter=[])
        )
        assert (group, "consumer") in {(g.group_id, g.protocol_type) for g in listed.groups}

        # LeaveGroup: v3+ names a list of members
        lv = version(codec.LEAVE_GROUP, level)
        lr = codec.SUPPORTED_APIS[codec.LEAVE_GROUP].request
        if lv >= 3:
            left = await client.request(
                request(
                    codec.LEAVE_GROUP,
                    level,
                    group_id=group,
                    members=[
                        lr.MemberIdentity(member_id=member, group_instance_id=None, reason=None)
                    ],
                )
            )
            assert [m.error_code for m in left.members] == [0]
        else:
            left = await client.request(
                request(codec.LEAVE_GROUP, level, group_id=group, member_id=member)
            )
        assert left.error_code == 0
        assert wire.coordinator.describe_group(group).state == "Empty"
    finally:
        await client.close()


def _versions_with_field(api: int, *path: str) -> list[int]:
    """The advertised versions of ``api`` whose response carries the field at ``path``
    (kafka-python's public schema: ``fields`` by name, nested through struct arrays)."""
    spec = codec.SUPPORTED_APIS[api]
    fields = spec.response.fields
    chain = []
    for name in path:
        chain.append(fields[name])
        fields = fields[name].fields
    return [
        v
        for v in range(spec.min_version, spec.max_version + 1)
        if all(f.for_version_q(v) for f in chain)
    ]


LIST_GROUPS_PROTOCOL_TYPE = _versions_with_field(codec.LIST_GROUPS, "groups", "protocol_type")
LIST_GROUPS_STATE = _versions_with_field(codec.LIST_GROUPS, "groups", "group_state")


def test_every_advertised_list_groups_version_carries_the_protocol_type() -> None:
    spec = codec.SUPPORTED_APIS[codec.LIST_GROUPS]
    advertised = list(range(spec.min_version, spec.max_version + 1))
    assert advertised == LIST_GROUPS_PROTOCOL_TYPE


@pytest.mark.asyncio
@pytest.mark.parametrize("list_version", LIST_GROUPS_PROTOCOL_TYPE)
async def test_list_groups_keeps_the_protocol_type_the_members_joined_with(
    wire: KafkaWireBroker, list_version: int
) -> None:
    """Kafka keeps a group's protocol type when its last member leaves: ListGroups (and
    DescribeGroups) answer "consumer" for the Empty group, as for the Stable one. A group
    known only by offsets committed outside group management never had a protocol type:
    "" (Kafka's ``protocolType.getOrElse("")``)."""
    jr, sr = (codec.SUPPORTED_APIS[k].request for k in (codec.JOIN_GROUP, codec.SYNC_GROUP))
    lr, oc = (codec.SUPPORTED_APIS[k].request for k in (codec.LEAVE_GROUP, codec.OFFSET_COMMIT))
    client = await RawClient.connect(wire.bootstrap_servers)
    try:

        async def list_groups() -> dict[str, tuple[str, str]]:
            """group id -> (protocol type, state); the state "?" where v has none."""
            listed = await client.request(
                codec.SUPPORTED_APIS[codec.LIST_GROUPS].request(
                    version=list_version, states_filter=[], types_filter=[]
                )
            )
            assert listed.error_code == 0
            with_state = list_version in LIST_GROUPS_STATE
            return {
                g.group_id: (g.protocol_type, g.group_state if with_state else "?")
                for g in listed.groups
            }

        def state(name: str) -> str:
            return name if list_version in LIST_GROUPS_STATE else "?"

        joined = await client.request(
            jr(
                version=3,  # no MEMBER_ID_REQUIRED round
                group_id="left",
                session_timeout_ms=10_000,
                rebalance_timeout_ms=10_000,
                member_id="",
                protocol_type="consumer",
                protocols=[jr.JoinGroupRequestProtocol(name="range", metadata=b"sub")],
            )
        )
        assert joined.error_code == 0, joined
        member = joined.member_id
        synced = await client.request(
            sr(
                version=3,
                group_id="left",
                generation_id=joined.generation_id,
                member_id=member,
                assignments=[sr.SyncGroupRequestAssignment(member_id=member, assignment=b"a")],
            )
        )
        assert synced.error_code == 0
        assert (await list_groups())["left"] == ("consumer", state("Stable"))

        left = await client.request(lr(version=0, group_id="left", member_id=member))
        assert left.error_code == 0
        committed = await client.request(
            oc(
                version=2,
                group_id="offsets-only",
                generation_id_or_member_epoch=-1,
                member_id="",
                retention_time_ms=-1,
                topics=[
                    oc.OffsetCommitRequestTopic(
                        name="orders",
                        partitions=[
                            oc.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                                partition_index=0, committed_offset=7, committed_metadata=""
                            )
                        ],
                    )
                ],
            )
        )
        assert [p.error_code for t in committed.topics for p in t.partitions] == [0]

        groups = await list_groups()
        assert groups["left"] == ("consumer", state("Empty"))
        assert groups["offsets-only"] == ("", state("Empty"))
        described = await client.request(
            codec.SUPPORTED_APIS[codec.DESCRIBE_GROUPS].request(
                version=0, groups=["left", "offsets-only"]
            )
        )
        assert [(d.group_state, d.protocol_type) for d in described.groups] == [
            ("Empty", "consumer"),
            ("Empty", ""),
        ]
    finally:
        await client.close()
