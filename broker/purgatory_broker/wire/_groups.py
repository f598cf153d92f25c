"""The group APIs on the wire: kafka-python's request objects in,
:class:`purgatory_broker.broker.GroupCoordinator` calls, kafka-python's responses out.

FindCoordinator names this broker (node 0) for every group key, in the v0-3
single-key layout and the v4+ batched ``coordinator_keys`` layout; transaction
keys (key type 1) get COORDINATOR_NOT_AVAILABLE, as this broker has no
transaction coordinator. JoinGroup and SyncGroup answers wait (a
:class:`~._handlers.Pending` on an ``asyncio.Future`` the coordinator's callback
resolves); the others are answered at once. JoinGroup v4+ asks a new member to
rejoin with the id it is given (MEMBER_ID_REQUIRED). LeaveGroup v0-2 names one
member, v3+ a list. OffsetFetch v8 batches groups; a null topic list means all
the group's offsets. Committed offsets are written to the data directory before
the OffsetCommit answer leaves (see :mod:`purgatory_broker.broker.offsets`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from purgatory import TopicPartition
from purgatory_broker.broker import (
    CommittedOffset,
    ErrorCode,
    GroupCoordinator,
    JoinResult,
    SyncResult,
)
from purgatory_broker.broker.errors import error_code

from . import _codec as codec
from ._codec import (
    DescribeGroupsResponse,
    FindCoordinatorResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    ListGroupsResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
)

__all__ = ["GroupHandlers"]

T = TypeVar("T")

#: FindCoordinator key types
_GROUP_KEY = 0


class GroupHandlers:
    """One method per group API: ``(request, client host) -> bytes | (future, finish)``."""

    def __init__(
        self, coordinator: GroupCoordinator, advertised: Callable[[], tuple[str, int]]
    ) -> None:
        self.coordinator = coordinator
        self._advertised = advertised

    # -- FindCoordinator -----------------------------------------------------------

    def find_coordinator(self, req: codec.DecodedRequest) -> bytes:
        body, version = req.body, req.api_version
        host, port = self._advertised()
        key_type = body.key_type if version >= 1 else _GROUP_KEY

        def answer(key: str) -> tuple[int, str | None, int, str, int]:
            if key_type != _GROUP_KEY:
                message = "this example broker has no transaction coordinator"
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, message, -1, "", -1
            if not key:
                return ErrorCode.INVALID_REQUEST, "empty group id", -1, "", -1
            return ErrorCode.NONE, None, 0, host, port

        if version >= 4:
            coordinators = []
            for key in body.coordinator_keys:
                error, message, node, node_host, node_port = answer(key)
                coordinators.append(
                    FindCoordinatorResponse.Coordinator(
                        key=key,
                        node_id=node,
                        host=node_host,
                        port=node_port,
                        error_code=error,
                        error_message=message,
                    )
                )
            response = FindCoordinatorResponse(
                version=version, throttle_time_ms=0, coordinators=coordinators
            )
        else:
            error, message, node, node_host, node_port = answer(body.key)
            response = FindCoordinatorResponse(
                version=version,
                throttle_time_ms=0,
                error_code=error,
                error_message=message,
                node_id=node,
                host=node_host,
                port=node_port,
            )
        return codec.encode_response(response, req.correlation_id)

    # -- JoinGroup, SyncGroup (they wait) ------------------------------------------

    def join_group(
        self, req: codec.DecodedRequest, client_host: str
    ) -> tuple[asyncio.Future[JoinResult], Callable[[list[JoinResult]], bytes]]:
        body, version, cid = req.body, req.api_version, req.correlation_id
        future, resolve = _future(JoinResult)
        self.coordinator.join_group(
            body.group_id,
            body.member_id,
            client_id=req.client_id or "",
            client_host=client_host,
            session_timeout_ms=body.session_timeout_ms,
            rebalance_timeout_ms=body.rebalance_timeout_ms if version >= 1 else -1,
            protocol_type=body.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
            on_join=resolve,
            require_known_member_id=version >= 4,
            group_instance_id=body.group_instance_id if version >= 5 else None,
        )

        def finish(results: list[JoinResult]) -> bytes:
            result = results[0]
            members = [
                JoinGroupResponse.JoinGroupResponseMember(
                    member_id=mid, group_instance_id=instance, metadata=meta
                )
                for mid, instance, meta in result.members
            ]
            response = JoinGroupResponse(
                version=version,
                throttle_time_ms=0,
                error_code=result.error_code,
                generation_id=result.generation_id,
                protocol_type=result.protocol_type,
                protocol_name=result.protocol_name if version >= 7 else result.protocol_name or "",
                leader=result.leader_id,
                skip_assignment=False,
                member_id=result.member_id,
                members=members,
            )
            return codec.encode_response(response, cid)

        return future, finish

    def sync_group(
        self, req: codec.DecodedRequest
    ) -> tuple[asyncio.Future[SyncResult], Callable[[list[SyncResult]], bytes]]:
        body, version, cid = req.body, req.api_version, req.correlation_id
        future, resolve = _future(SyncResult)
        self.coordinator.sync_group(
            body.group_id,
            body.generation_id,
            body.member_id,
            {a.member_id: bytes(a.assignment) for a in body.assignments},
            resolve,
            protocol_type=body.protocol_type if version >= 5 else None,
            protocol_name=body.protocol_name if version >= 5 else None,
        )

        def finish(results: list[SyncResult]) -> bytes:
            result = results[0]
            response = codec.SyncGroupResponse(
                version=version,
                throttle_time_ms=0,
                error_code=result.error_code,
                protocol_type=result.protocol_type,
                protocol_name=result.protocol_name,
                assignment=result.assignment,
            )
            return codec.encode_response(response, cid)

        return future, finish

    # -- Heartbeat, LeaveGroup -------------------------------------------------------

    def heartbeat(self, req: codec.DecodedRequest) -> bytes:
        body = req.body
        error = self.coordinator.heartbeat(body.group_id, body.member_id, body.generation_id)
        response = codec.HeartbeatResponse(
            version=req.api_version, throttle_time_ms=0, error_code=error
        )
        return codec.encode_response(response, req.correlation_id)

    def leave_group(self, req: codec.DecodedRequest) -> bytes:
        body, version = req.body, req.api_version
        if version < 3:
            answers = self.coordinator.leave_group(body.group_id, [body.member_id])
            response = LeaveGroupResponse(
                version=version, throttle_time_ms=0, error_code=answers[body.member_id]
            )
        else:
            ids = [m.member_id for m in body.members]
            answers = self.coordinator.leave_group(body.group_id, ids)
            members = [
                LeaveGroupResponse.MemberResponse(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    error_code=answers[m.member_id],
                )
                for m in body.members
            ]
            response = LeaveGroupResponse(
                version=version, throttle_time_ms=0, error_code=0, members=members
            )
        return codec.encode_response(response, req.correlation_id)

    # -- OffsetCommit, OffsetFetch -------------------------------------------------------

    def offset_commit(self, req: codec.DecodedRequest) -> bytes:
        body, version = req.body, req.api_version
        offsets: dict[TopicPartition, CommittedOffset] = {}
        for t in body.topics:
            for p in t.partitions:
                epoch = p.committed_leader_epoch if version >= 6 else -1
                offsets[TopicPartition(t.name, p.partition_index)] = CommittedOffset(
                    p.committed_offset, epoch, p.committed_metadata or ""
                )
        try:
            error = self.coordinator.commit_offsets(
                body.group_id, body.member_id, body.generation_id_or_member_epoch, offsets
            )
        except OSError as exc:  # the commit could not be written
            error = error_code(exc)
        topics = [
            OffsetCommitResponse.OffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    OffsetCommitResponse.OffsetCommitResponseTopic.OffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=error
                    )
                    for p in t.partitions
                ],
            )
            for t in body.topics
        ]
        response = OffsetCommitResponse(version=version, throttle_time_ms=0, topics=topics)
        return codec.encode_response(response, req.correlation_id)

    def offset_fetch(self, req: codec.DecodedRequest) -> bytes:
        body, version = req.body, req.api_version
        if version >= 8:
            groups = []
            for g in body.groups:
                topic_class = OffsetFetchResponse.OffsetFetchResponseGroup.OffsetFetchResponseTopics
                topics = self._fetched(
                    g.group_id,
                    _wanted(g.topics),
                    topic_class,
                    topic_class.OffsetFetchResponsePartitions,
                )
                groups.append(
                    OffsetFetchResponse.OffsetFetchResponseGroup(
                        group_id=g.group_id, topics=topics, error_code=0
                    )
                )
            response = OffsetFetchResponse(version=version, throttle_time_ms=0, groups=groups)
        else:
            topic_class = OffsetFetchResponse.OffsetFetchResponseTopic
            topics = self._fetched(
                body.group_id,
                _wanted(body.topics),
                topic_class,
                topic_class.OffsetFetchResponsePartition,
            )
            response = OffsetFetchResponse(
                version=version, throttle_time_ms=0, topics=topics, error_code=0
            )
        return codec.encode_response(response, req.correlation_id)

    def _fetched(
        self,
        group_id: str,
        wanted: list[tuple[str, list[int]]] | None,
        topic_class: Any,
        part_class: Any,
    ) -> list[Any]:
        """The response topics for one group: the partitions asked (-1 where nothing was
        committed), or every committed one."""
        if wanted is None:
            by_topic: dict[str, list[int]] = {}
            for tp in sorted(self.coordinator.fetch_offsets(group_id)):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            wanted = list(by_topic.items())
        asked = [TopicPartition(name, p) for name, parts in wanted for p in parts]
        committed = self.coordinator.fetch_offsets(group_id, asked)
        topics = []
        for name, parts in wanted:
            partitions = []
            for p in parts:
                c = committed.get(TopicPartition(name, p))
                partitions.append(
                    part_class(
                        partition_index=p,
                        committed_offset=-1 if c is None else c.offset,
                        committed_leader_epoch=-1 if c is None else c.leader_epoch,
                        metadata="" if c is None else c.metadata,
                        error_code=0,
                    )
                )
            topics.append(topic_class(name=name, partitions=partitions))
        return topics

    # -- ListGroups, DescribeGroups ----------------------------------------------------

    def list_groups(self, req: codec.DecodedRequest) -> bytes:
        body, version = req.body, req.api_version
        states = set(body.states_filter) if version >= 4 and body.states_filter else None
        groups = [
            ListGroupsResponse.ListedGroup(
                group_id=gid, protocol_type=ptype, group_state=state, group_type="classic"
            )
            for gid, ptype, state in self.coordinator.list_groups()
            if states is None or state in states
        ]
        response = ListGroupsResponse(
            version=version, throttle_time_ms=0, error_code=0, groups=groups
        )
        return codec.encode_response(response, req.correlation_id)

    def describe_groups(self, req: codec.DecodedRequest) -> bytes:
        body, version = req.body, req.api_version
        groups = []
        for gid in body.groups:
            described = self.coordinator.describe_group(gid)
            members = [
                DescribeGroupsResponse.DescribedGroup.DescribedGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata,
                    member_assignment=m.assignment,
                )
                for m in described.members
            ]
            groups.append(
                DescribeGroupsResponse.DescribedGroup(
                    error_code=described.error_code,
                    error_message=None,
                    group_id=described.group_id,
                    group_state=described.state,
                    protocol_type=described.protocol_type,
                    protocol_data=described.protocol_name,
                    members=members,
                    authorized_operations=None,  # not asked for (a bit-set in kafka-python)
                )
            )
        response = DescribeGroupsResponse(version=version, throttle_time_ms=0, groups=groups)
        return codec.encode_response(response, req.correlation_id)


def _wanted(topics: Any) -> list[tuple[str, list[int]]] | None:
    """(topic, partitions) asked for; None (all) for a null topic list."""
    return None if topics is None else [(t.name, list(t.partition_indexes)) for t in topics]


def _future(kind: type[T]) -> tuple[asyncio.Future[T], Callable[[T], None]]:
    """A future of a ``kind`` and the callback that resolves it (once; a cancelled one
    is left alone)."""
    future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

    def resolve(value: T) -> None:
        if not future.done():
            future.set_result(value)

    return future, resolve
