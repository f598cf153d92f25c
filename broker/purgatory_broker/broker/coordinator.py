"""The group coordinator: Kafka's classic consumer-group protocol, on the purgatory.

One broker coordinates every group (FindCoordinator names it). The requests:

* **JoinGroup** (:meth:`GroupCoordinator.join_group`). A member without an id is
  given one; with ``require_known_member_id`` (JoinGroup v4+) it is answered
  MEMBER_ID_REQUIRED at once, kept *pending*, and joins for real with that id.
  A join moves the group to PreparingRebalance and parks the request: the
  group's :class:`~.group_delayed.DelayedJoin` (or, for a group that was empty,
  :class:`~.group_delayed.InitialDelayedJoin`) waits in the join purgatory under
  the group id until every member is back or the rebalance timeout passes. Then
  the generation moves on, a protocol is voted (:mod:`.groups`), and every
  waiting JoinGroup is answered; the leader's answer lists the members and their
  subscriptions. The group is now CompletingRebalance, and its
  :class:`~.group_delayed.DelayedSync` waits (sync purgatory, same key) for every
  member's SyncGroup: who has not sent one by the rebalance timeout is removed
  and the group rebalances (Kafka 3.x). A member of a Stable
  group rejoining with unchanged protocols (not the leader) is answered with the
  current generation without a rebalance.
* **SyncGroup** (:meth:`sync_group`): the leader sends the assignment; the group
  becomes Stable and every member's waiting SyncGroup gets its part. A
  follower's SyncGroup waits for the leader's.
* **Heartbeat** (:meth:`heartbeat`), **LeaveGroup** (:meth:`leave_group`): a
  heartbeat pushes the member's :class:`~.group_delayed.DelayedHeartbeat` back
  by its session timeout and answers REBALANCE_IN_PROGRESS while the group
  prepares one (the member then rejoins). A session that expires, or a member
  that leaves, is removed, and the group rebalances at once.
* **OffsetCommit / OffsetFetch** (:meth:`commit_offsets`, :meth:`fetch_offsets`):
  through :class:`~.offsets.OffsetStore`, written through before the answer. A
  member commits with its generation (Stable or PreparingRebalance; in
  CompletingRebalance the answer is REBALANCE_IN_PROGRESS); a commit with
  generation -1 and no member id is accepted for a group without members (a
  consumer with manually assigned partitions).
* **ListGroups / DescribeGroups** (:meth:`list_groups`, :meth:`describe_group`).
  A group known only by its committed offsets (after a restart, say) is Empty,
  with the protocol type kept with the offsets (as Kafka keeps group metadata in
  ``__consumer_offsets``): "consumer" once a member committed, "" for a group
  whose offsets were only ever committed outside group management.

Errors are Kafka's (:class:`~.errors.ErrorCode`): INVALID_SESSION_TIMEOUT outside
``[min_session_timeout_ms, max_session_timeout_ms]``, UNKNOWN_MEMBER_ID,
ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, INCONSISTENT_GROUP_PROTOCOL,
INVALID_GROUP_ID, MEMBER_ID_REQUIRED, GROUP_ID_NOT_FOUND.

Answers that wait (JoinGroup, SyncGroup) are given through a callback, called
exactly once, possibly inside the call; everything else returns its answer. The
coordinator is synchronous: its time is its timers' clock (a
:class:`purgatory.testing.ManualClock` in the unit tests, who call :meth:`poll`),
the asyncio shell only runs the timers' reapers (``async with``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from purgatory import Clock, DelayedOperationPurgatory, SystemTimer, TimerTask, TopicPartition

from .errors import ErrorCode, KafkaError
from .group_delayed import DelayedHeartbeat, DelayedJoin, DelayedSync, InitialDelayedJoin
from .groups import (
    GroupMetadata,
    GroupState,
    JoinResult,
    MemberMetadata,
    SyncResult,
)
from .offsets import CommittedOffset, OffsetStore

__all__ = [
    "GroupConfig",
    "GroupCoordinator",
    "GroupDescription",
    "MemberDescription",
]

Empty = GroupState.EMPTY
Preparing = GroupState.PREPARING_REBALANCE
Completing = GroupState.COMPLETING_REBALANCE
Stable = GroupState.STABLE
Dead = GroupState.DEAD


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Kafka's group settings (``group.*``, ``offsets.*``), in milliseconds."""

    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    offsets_retention_minutes: int = 10_080  # offsets.retention.minutes (7 days)
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms

    def validate(self) -> None:
        """Raise ValueError naming the first bad setting."""
        checks = [
            (self.initial_rebalance_delay_ms >= 0, "initial_rebalance_delay_ms must be >= 0"),
            (self.min_session_timeout_ms >= 1, "min_session_timeout_ms must be >= 1"),
            (
                self.max_session_timeout_ms >= self.min_session_timeout_ms,
                "max_session_timeout_ms must be >= min_session_timeout_ms",
            ),
            (self.offsets_retention_minutes >= 1, "offsets_retention_minutes must be >= 1"),
            (
                self.offsets_retention_check_interval_ms >= 1,
                "offsets_retention_check_interval_ms must be >= 1",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)


@dataclass(frozen=True, slots=True)
class MemberDescription:
    """One member as DescribeGroups shows it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # its subscription for the chosen protocol (empty if none yet)
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """A group as DescribeGroups shows it."""

    error_code: int
    group_id: str
    state: str
    protocol_type: str
    protocol_name: str
    members: tuple[MemberDescription, ...]


class _RetentionTask(TimerTask):
    """Runs the offset-retention check every interval."""

    __slots__ = ("_coordinator",)

    def __init__(self, coordinator: GroupCoordinator, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self._coordinator = coordinator

    def run(self) -> None:
        self._coordinator.expire_offsets()


class GroupCoordinator:
    """Consumer groups and their committed offsets; see the module doc. Not thread-safe.

    ``clock`` (default: the event loop's) drives both purgatories' timers;
    ``wall_clock_ms`` stamps commits (offset retention outlives restarts). Offsets
    live under ``data_dir`` (:class:`~.offsets.OffsetStore`).
    """

    def __init__(
        self,
        data_dir: str | Path,
        config: GroupConfig | None = None,
        *,
        clock: Clock | None = None,
        wall_clock_ms: Callable[[], int] | None = None,
        reaper_enabled: bool = True,
    ) -> None:
        self.config = GroupConfig() if config is None else config
        self.config.validate()
        self.offsets = OffsetStore(data_dir, wall_clock_ms=wall_clock_ms)
        self._wall_clock_ms = self.offsets.wall_clock_ms
        # Kafka's filing (may_expire_early) on every timer: the coordinator keeps
        # Kafka's timing, a delay expiring up to a tick before its timeout
        self.join_purgatory: DelayedOperationPurgatory[DelayedJoin] = DelayedOperationPurgatory(
            "join",
            timer=SystemTimer("join", clock=clock, may_expire_early=True),
            reaper_enabled=reaper_enabled,
        )
        self.sync_purgatory: DelayedOperationPurgatory[DelayedSync] = DelayedOperationPurgatory(
            "sync",
            timer=SystemTimer("sync", clock=clock, may_expire_early=True),
            reaper_enabled=reaper_enabled,
        )
        self.heartbeat_purgatory: DelayedOperationPurgatory[DelayedHeartbeat] = (
            DelayedOperationPurgatory(
                "heartbeat",
                timer=SystemTimer("heartbeat", tick_ms=10, clock=clock, may_expire_early=True),
                reaper_enabled=reaper_enabled,
            )
        )
        # the retention check runs on its own timer (it is no delayed operation)
        self.retention_timer = SystemTimer(
            "offsets-retention", tick_ms=1000, clock=clock, may_expire_early=True
        )
        self._reaper_enabled = reaper_enabled
        self._groups: dict[str, GroupMetadata] = {}
        self.rebalances = 0  # joins completed (generations made)
        self.expired_members = 0  # sessions that ran out
        self.left_members = 0  # members removed by LeaveGroup

    # -- lifecycle -----------------------------------------------------------------

    @property
    def timers(self) -> tuple[SystemTimer, ...]:
        return (
            self.join_purgatory.timer,
            self.sync_purgatory.timer,
            self.heartbeat_purgatory.timer,
            self.retention_timer,
        )

    def poll(self) -> int:
        """Run what is due on every timer (for a manual clock). O(due)."""
        return sum(timer.poll() for timer in self.timers)

    async def __aenter__(self) -> GroupCoordinator:
        await self.join_purgatory.__aenter__()
        await self.sync_purgatory.__aenter__()
        await self.heartbeat_purgatory.__aenter__()
        if self._reaper_enabled:
            await self.retention_timer.start_reaper()
        self._schedule_retention()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop the timers; waiting JoinGroup / SyncGroup requests are answered
        COORDINATOR_NOT_AVAILABLE (clients find the coordinator again). Idempotent."""
        for group in self._groups.values():
            for member in group.members.values():
                gone = ErrorCode.COORDINATOR_NOT_AVAILABLE
                self._answer_join(member, JoinResult(gone, member.member_id))
                self._answer_sync(member, SyncResult(gone))
        await self.join_purgatory.close()
        await self.sync_purgatory.close()
        await self.heartbeat_purgatory.close()
        if self.retention_timer.reaper is not None:
            await self.retention_timer.stop_reaper()
        self.offsets.close()

    # -- queries ---------------------------------------------------------------------

    def group(self, group_id: str) -> GroupMetadata | None:
        """The group's state, or None. O(1)."""
        return self._groups.get(group_id)

    def list_groups(self) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every group, including those known only
        by committed offsets (Empty, with the protocol type stored with them: "consumer"
        for a group that had members, "" for one committed outside group management).
        O(groups)."""
        listed = [
            (g.group_id, g.protocol_type or "", g.state.value)
            for g in self._groups.values()
            if g.state is not Dead
        ]
        known = {g[0] for g in listed}
        offsets = self.offsets
        listed += [
            (gid, offsets.protocol_type(gid) or "", Empty.value)
            for gid in offsets.groups()
            if gid not in known
        ]
        return listed

    def describe_group(self, group_id: str) -> GroupDescription:
        """DescribeGroups for one group: an unknown one is Dead (as in Kafka). O(members)."""
        group = self._groups.get(group_id)
        if group is None:
            state = Empty if group_id in self.offsets.groups() else Dead
            protocol_type = self.offsets.protocol_type(group_id) or ""
            return GroupDescription(ErrorCode.NONE, group_id, state.value, protocol_type, "", ())
        stable = group.state is Stable
        members = tuple(
            MemberDescription(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        return GroupDescription(
            ErrorCode.NONE,
            group_id,
            group.state.value,
            group.protocol_type or "",
            group.protocol_name or "" if stable else "",
            members,
        )

    # -- JoinGroup -------------------------------------------------------------------

    def join_group(
        self,
        group_id: str,
        member_id: str,
        *,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        on_join: Callable[[JoinResult], None],
        require_known_member_id: bool = True,
        group_instance_id: str | None = None,
    ) -> None:
        """Join (or rejoin) ``group_id``; ``on_join`` gets the answer once, maybe at once
        (errors, MEMBER_ID_REQUIRED), else when the rebalance completes. O(members)."""
        try:
            group = self._group_to_join(group_id, member_id, session_timeout_ms)
            unchanged = self._check_joining_member(group, member_id, protocol_type, protocols)
        except KafkaError as exc:  # the one place a refused join becomes its answer
            return on_join(JoinResult(exc.code, member_id))
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms  # JoinGroup v0: none given
        if member_id in group.members:
            member = group.members[member_id]
            member.session_timeout_ms = session_timeout_ms
            member.rebalance_timeout_ms = rebalance_timeout_ms
            return self._rejoin(group, member, protocols, unchanged, on_join)
        if not member_id:
            member_id = f"{client_id}-{uuid.uuid4()}"
            if require_known_member_id:  # KIP-394: rejoin with this id
                group.pending[member_id] = session_timeout_ms
                self._schedule_heartbeat(group, member_id, None, session_timeout_ms)
                return on_join(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id))
        member = MemberMetadata(
            member_id,
            group_instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            list(protocols),
            awaiting_join=on_join,
        )
        return self._add_member(group, member)

    def _group_to_join(
        self, group_id: str, member_id: str, session_timeout_ms: int
    ) -> GroupMetadata:
        """The group a JoinGroup names, created for a new member's first join; raises
        :class:`KafkaError` for a join refused before its member is looked at. O(1)."""
        cfg = self.config
        if not group_id:
            raise KafkaError(ErrorCode.INVALID_GROUP_ID, "an empty group id")
        if not cfg.min_session_timeout_ms <= session_timeout_ms <= cfg.max_session_timeout_ms:
            raise KafkaError(
                ErrorCode.INVALID_SESSION_TIMEOUT,
                f"session timeout {session_timeout_ms} ms is outside "
                f"[{cfg.min_session_timeout_ms}, {cfg.max_session_timeout_ms}]",
            )
        group = self._groups.get(group_id)
        if group is None:
            if member_id:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"{group_id} has no members")
            group = self._groups[group_id] = GroupMetadata(
                group_id, state_since_ms=self._wall_clock_ms()
            )
        if group.state is Dead:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{group_id} is dead")
        return group

    def _check_joining_member(
        self,
        group: GroupMetadata,
        member_id: str,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> bool:
        """Whether a known member joins with the protocols it has; raises
        :class:`KafkaError` for an unknown member id or no protocol in common with the
        group. O(members x protocols)."""
        known = member_id in group.members
        if not known and member_id not in group.pending and member_id:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"{member_id} is not in the group")
        unchanged = known and group.members[member_id].same_protocols(protocols)
        if not unchanged and not group.supports(protocol_type, protocols, excluding=member_id):
            raise KafkaError(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"no protocol shared with {group.group_id}"
            )
        return unchanged

    def _add_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """A new member joins (a pending one's heartbeat wait ends): rebalance. O(members)."""
        group.pending.pop(member.member_id, None)
        self.heartbeat_purgatory.cancel_for_key((group.group_id, member.member_id))
        if group.state is Preparing and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        self._maybe_prepare_rebalance(group)

    def _rejoin(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        protocols: list[tuple[str, bytes]],
        unchanged: bool,
        on_join: Callable[[JoinResult], None],
    ) -> None:
        """A member joins again: answered the current generation at once when nothing
        changes (Kafka's rule), else it waits for a rebalance. O(members)."""
        if (
            group.state in (Completing, Stable)
            and unchanged
            and (group.state is Completing or member.member_id != group.leader_id)
        ):
            self._touch(group, member)
            return on_join(self._join_result(group, member))
        member.protocols = list(protocols)
        self._set_awaiting_join(member, on_join)
        self._maybe_prepare_rebalance(group)
        return None

    def _set_awaiting_join(
        self, member: MemberMetadata, on_join: Callable[[JoinResult], None]
    ) -> None:
        if member.awaiting_join is not None:  # a retried join replaces the one waiting
            retry = ErrorCode.REBALANCE_IN_PROGRESS
            self._answer_join(member, JoinResult(retry, member.member_id))
        member.awaiting_join = on_join

    def _maybe_prepare_rebalance(self, group: GroupMetadata) -> None:
        """Start a rebalance, or, in one already, see whether it can complete now."""
        if group.state is Preparing:
            self.join_purgatory.check_and_complete(group.group_id)
        else:
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: GroupMetadata) -> None:
        """Start a rebalance: waiting syncs are told to rejoin, a join waits. O(members)."""
        if group.state is Completing:
            for member in group.members.values():
                member.assignment = b""
                self._answer_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        if group.pending_sync:  # the generation's DelayedSync has nothing left to wait for
            group.pending_sync.clear()
            self.sync_purgatory.check_and_complete(group.group_id)
        was_empty = group.state is Empty
        group.transition(Preparing, self._wall_clock_ms())
        timeout = group.rebalance_timeout_ms()
        if was_empty:
            delay = self.config.initial_rebalance_delay_ms
            self.schedule_initial_join(group, min(delay, timeout), max(timeout - delay, 0))
        else:
            op = DelayedJoin(self, group, timeout)
            self.join_purgatory.try_complete_else_watch(op, [group.group_id])

    # the delayed operations' callbacks (group_delayed.GroupCallbacks)

    def schedule_initial_join(self, group: GroupMetadata, delay_ms: int, remaining_ms: int) -> None:
        op = InitialDelayedJoin(
            self,
            group,
            delay_ms=delay_ms,
            configured_delay_ms=self.config.initial_rebalance_delay_ms,
            remaining_ms=remaining_ms,
        )
        self.join_purgatory.try_complete_else_watch(op, [group.group_id])

    def can_complete_join(self, group: GroupMetadata) -> bool:
        return group.state is Preparing and group.has_all_members_joined()

    def complete_join(self, group: GroupMetadata) -> None:
        """The rebalance ends: drop who did not rejoin, next generation, answer all joins."""
        if group.state is not Preparing:
            return  # the group died meanwhile
        for member in [m for m in group.members.values() if m.awaiting_join is None]:
            self._remove_member(group, member)
        group.generation_id += 1
        self.rebalances += 1
        now = self._wall_clock_ms()
        if group.is_empty:
            # Kafka keeps the protocol type (ListGroups, DescribeGroups still show it);
            # the next first member sets it again (GroupMetadata.add)
            group.protocol_name = None
            group.transition(Empty, now)
            return
        group.protocol_name = group.select_protocol()
        group.transition(Completing, now)
        group.pending_sync = set(group.members)
        op = DelayedSync(self, group, group.rebalance_timeout_ms())
        self.sync_purgatory.try_complete_else_watch(op, [group.group_id])
        for member in list(group.members.values()):
            result = self._join_result(group, member)
            self._answer_join(member, result)
            self._touch(group, member)

    def expire_heartbeat(self, group: GroupMetadata, member_id: str, pending: bool) -> None:
        """A session ran out: remove the member (or pending member) and rebalance."""
        if pending:
            if group.pending.pop(member_id, None) is not None and group.state is Preparing:
                self.join_purgatory.check_and_complete(group.group_id)
            return
        member = group.members.get(member_id)
        if member is None:
            return
        if member.awaiting_join is not None or member.awaiting_sync is not None:
            # a request of it waits: Kafka keeps it (the rebalance decides)
            self._schedule_heartbeat(group, member_id, member, member.session_timeout_ms)
            return
        self.expired_members += 1
        self._remove_member_and_update(group, member)

    def expire_sync(self, group: GroupMetadata, generation_id: int) -> None:
        """The rebalance timeout passed since the join: drop who has not synced."""
        if group.generation_id != generation_id or not group.pending_sync:
            return
        for member_id in list(group.pending_sync):
            self._remove_member(group, group.members[member_id])
        group.pending_sync.clear()
        self._maybe_prepare_rebalance(group)

    # -- SyncGroup -------------------------------------------------------------------

    def sync_group(  # noqa: PLR0911
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        assignments: dict[str, bytes],
        on_sync: Callable[[SyncResult], None],
        *,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> None:
        """The leader's assignment, or a follower's wait for it; ``on_sync`` gets the
        member's assignment once. O(members)."""
        group = self._groups.get(group_id)
        if group is None or member_id not in group.members:
            return on_sync(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        if group.state is Dead:
            return on_sync(SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        if generation_id != group.generation_id:
            return on_sync(SyncResult(ErrorCode.ILLEGAL_GENERATION))
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return on_sync(SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        member = group.members[member_id]
        if group.state is Empty:
            return on_sync(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        if group.state is Preparing:
            return on_sync(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        self._touch(group, member)
        if member_id in group.pending_sync:
            group.pending_sync.discard(member_id)
            if not group.pending_sync:
                self.sync_purgatory.check_and_complete(group_id)
        if group.state is Stable:
            return on_sync(self._sync_result(group, member))
        if member.awaiting_sync is not None:
            self._answer_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.awaiting_sync = on_sync
        if member_id == group.leader_id:
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            group.transition(Stable, self._wall_clock_ms())
            for m in group.members.values():
                self._answer_sync(m, self._sync_result(group, m))
        return None

    # -- Heartbeat, LeaveGroup ---------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, generation_id: int) -> int:
        """The error code for a member's heartbeat; pushes its session back. O(1)."""
        group = self._groups.get(group_id)
        refused = _refuse_member(group, member_id, generation_id)
        if group is None or refused:
            return refused
        self._touch(group, group.members[member_id])
        if group.state is Preparing:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(self, group_id: str, member_ids: Iterable[str]) -> dict[str, int]:
        """Remove members (each answered NONE or UNKNOWN_MEMBER_ID); the group rebalances
        at once. O(members)."""
        group = self._groups.get(group_id)
        answers: dict[str, int] = {}
        for member_id in member_ids:
            if group is None:
                answers[member_id] = ErrorCode.UNKNOWN_MEMBER_ID
            elif member_id in group.pending:
                del group.pending[member_id]
                self.heartbeat_purgatory.cancel_for_key((group_id, member_id))
                answers[member_id] = ErrorCode.NONE
                if group.state is Preparing:
                    self.join_purgatory.check_and_complete(group_id)
            elif member_id in group.members:
                self.left_members += 1
                self._remove_member_and_update(group, group.members[member_id])
                answers[member_id] = ErrorCode.NONE
            else:
                answers[member_id] = ErrorCode.UNKNOWN_MEMBER_ID
        return answers

    def _remove_member_and_update(self, group: GroupMetadata, member: MemberMetadata) -> None:
        self._remove_member(group, member)
        if group.state is not Empty:
            self._maybe_prepare_rebalance(group)

    def _remove_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        group.remove(member.member_id)
        if not group.pending_sync:
            self.sync_purgatory.check_and_complete(group.group_id)
        self.heartbeat_purgatory.cancel_for_key((group.group_id, member.member_id))
        self._answer_join(member, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        self._answer_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))

    # -- offsets ---------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        offsets: dict[TopicPartition, CommittedOffset],
    ) -> int:
        """Store a member's (or a group-less consumer's) offsets; the error code for all
        of them (NONE once written through). Raises OSError if the write fails.
        O(len(offsets))."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self._groups.get(group_id)
        if generation_id < 0 and not member_id:
            # a consumer outside group management: only while the group has no members
            if group is not None and not group.is_empty:
                return ErrorCode.UNKNOWN_MEMBER_ID
        else:
            refused = _refuse_member(group, member_id, generation_id)
            if group is None or refused:
                return refused
            if group.state is Completing:
                return ErrorCode.REBALANCE_IN_PROGRESS
            self._touch(group, group.members[member_id])
        # the group's protocol type goes with its offsets (after a restart, ListGroups
        # still says "consumer"); a group never managed has none
        protocol_type = group.protocol_type if group is not None else None
        self.offsets.commit(group_id, offsets, protocol_type=protocol_type)
        return ErrorCode.NONE

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, CommittedOffset]:
        """The committed offsets (of ``partitions``, or all). O(partitions)."""
        return self.offsets.fetch(group_id, partitions)

    def expire_offsets(self) -> int:
        """Drop offsets past ``offsets_retention_minutes`` of groups without members, and
        forget empty groups left with none; reschedules itself. O(groups + offsets)."""
        idle = {
            gid: (g.state_since_ms if g is not None else 0)
            for gid in self.offsets.groups()
            if (g := self._groups.get(gid)) is None or g.is_empty
        }
        dropped = self.offsets.expire(idle, self.config.offsets_retention_minutes * 60_000)
        committed = set(self.offsets.groups())
        for gid in [
            gid
            for gid, g in self._groups.items()
            if g.state is Empty and not g.pending and gid not in committed
        ]:
            self._groups.pop(gid).transition(Dead, self._wall_clock_ms())
        self._schedule_retention()
        return dropped

    def _schedule_retention(self) -> None:
        self.retention_timer.add(
            _RetentionTask(self, self.config.offsets_retention_check_interval_ms)
        )

    # -- helpers ---------------------------------------------------------------------

    def _touch(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """A sign of life: complete the member's DelayedHeartbeat, schedule the next."""
        member.heartbeat_satisfied = True
        key = (group.group_id, member.member_id)
        self.heartbeat_purgatory.check_and_complete(key)
        member.heartbeat_satisfied = False
        self._schedule_heartbeat(group, member.member_id, member, member.session_timeout_ms)

    def _schedule_heartbeat(
        self,
        group: GroupMetadata,
        member_id: str,
        member: MemberMetadata | None,
        timeout_ms: int,
    ) -> None:
        op = DelayedHeartbeat(self, group, member_id, member, timeout_ms)
        self.heartbeat_purgatory.try_complete_else_watch(op, [(group.group_id, member_id)])

    def _join_result(self, group: GroupMetadata, member: MemberMetadata) -> JoinResult:
        protocol = group.protocol_name
        assert protocol is not None
        members: tuple[tuple[str, str | None, bytes], ...] = ()
        if member.member_id == group.leader_id:
            members = tuple(
                (m.member_id, m.group_instance_id, m.metadata(protocol))
                for m in group.members.values()
            )
        return JoinResult(
            ErrorCode.NONE,
            member.member_id,
            group.generation_id,
            group.protocol_type,
            protocol,
            group.leader_id or "",
            members,
        )

    @staticmethod
    def _sync_result(group: GroupMetadata, member: MemberMetadata) -> SyncResult:
        return SyncResult(
            ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name
        )

    @staticmethod
    def _answer_join(member: MemberMetadata, result: JoinResult) -> None:
        callback, member.awaiting_join = member.awaiting_join, None
        if callback is not None:
            callback(result)

    @staticmethod
    def _answer_sync(member: MemberMetadata, result: SyncResult) -> None:
        callback, member.awaiting_sync = member.awaiting_sync, None
        if callback is not None:
            callback(result)

    def check_invariants(self) -> None:
        """O(groups x members): every group's invariants; a member's session is timed."""
        for group in self._groups.values():
            group.check_invariants()

    def __repr__(self) -> str:
        return (
            f"<GroupCoordinator groups={len(self._groups)} offsets={len(self.offsets)} "
            f"rebalances={self.rebalances} expired_members={self.expired_members} "
            f"left_members={self.left_members}>"
        )


def _refuse_member(group: GroupMetadata | None, member_id: str, generation_id: int) -> int:
    """The error for a request that names a member of ``group`` at ``generation_id``
    (a heartbeat, an offset commit), or NONE (0) if the member and generation are
    current. O(1)."""
    if group is None or member_id not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if group.state is Dead:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if generation_id != group.generation_id:
        return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE
