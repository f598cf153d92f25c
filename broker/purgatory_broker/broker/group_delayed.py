"""The group coordinator's delayed operations: DelayedJoin, InitialDelayedJoin,
DelayedSync, DelayedHeartbeat (Kafka's, on the purgatory).

* :class:`DelayedJoin` waits in the join purgatory under the group's key while a
  rebalance collects its members. ``try_complete`` holds when every known member
  has sent its JoinGroup and no pending member is missing; the delay is the
  group's rebalance timeout (the longest of its members'). Completing, early or
  by expiry, runs the coordinator's ``complete_join``: members that did not
  rejoin are dropped, the generation moves on, every waiting JoinGroup is answered.
* :class:`InitialDelayedJoin` replaces it for a group that was empty: it never
  completes early; at expiry, if a member arrived while it waited and rebalance
  time remains, it schedules another one (``group.initial.rebalance.delay.ms``,
  at most what remains), else it completes the join. So consumers started
  together land in one generation instead of one rebalance each. Worked example
  (delay 3000, rebalance timeout 10000): first join at 0 -> waits to 3000; a
  second member at 1000 -> at 3000 another wait to 6000 (7000 left, then 4000);
  nobody new by 6000 -> the join completes with both.
* :class:`DelayedSync` (Kafka 3.x) waits in the sync purgatory under the group's
  key once a join has completed: it completes when every member of that
  generation has sent SyncGroup (or the generation is gone); at the rebalance
  timeout the coordinator removes the members that did not and rebalances, so a
  leader that never sends the assignment cannot hold the group forever.
* :class:`DelayedHeartbeat` is one member's session, in the heartbeat purgatory
  under ``(group id, member id)``: a heartbeat (or join, sync, commit) marks the
  member satisfied and completes it through ``check_and_complete``; the
  coordinator then schedules the next one, so every heartbeat pushes the deadline
  to now + session timeout. Expiry tells the coordinator, which removes the
  member unless a request of it is waiting (Kafka keeps such members alive).
"""

from __future__ import annotations

from typing import Protocol

from purgatory import DelayedOperation

from .groups import GroupMetadata, MemberMetadata

__all__ = [
    "DelayedHeartbeat",
    "DelayedJoin",
    "DelayedSync",
    "GroupCallbacks",
    "InitialDelayedJoin",
]


class GroupCallbacks(Protocol):
    """What the delayed operations call back (the coordinator)."""

    def can_complete_join(self, group: GroupMetadata) -> bool: ...

    def complete_join(self, group: GroupMetadata) -> None: ...

    def schedule_initial_join(self, group: GroupMetadata, delay_ms: int, remaining_ms: int) -> None:
        """Wait once more for members (InitialDelayedJoin)."""

    def expire_heartbeat(self, group: GroupMetadata, member_id: str, pending: bool) -> None: ...

    def expire_sync(self, group: GroupMetadata, generation_id: int) -> None: ...


class DelayedJoin(DelayedOperation[None]):
    """A rebalance collecting its members; see the module doc. O(members) per try."""

    __slots__ = ("coordinator", "group")

    def __init__(self, coordinator: GroupCallbacks, group: GroupMetadata, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.coordinator = coordinator
        self.group = group

    def try_complete(self) -> bool:
        if self.coordinator.can_complete_join(self.group):
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.coordinator.complete_join(self.group)

    def on_expiration(self) -> None:
        pass  # on_complete did the work: members that did not rejoin are dropped


class InitialDelayedJoin(DelayedJoin):
    """The first rebalance of an empty group; see the module doc."""

    __slots__ = ("configured_delay_ms", "remaining_ms")

    def __init__(
        self,
        coordinator: GroupCallbacks,
        group: GroupMetadata,
        *,
        delay_ms: int,
        configured_delay_ms: int,
        remaining_ms: int,
    ) -> None:
        super().__init__(coordinator, group, delay_ms)
        self.configured_delay_ms = configured_delay_ms
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        return False  # completes at expiry only

    def on_complete(self) -> None:
        group = self.group
        if group.new_member_added and self.remaining_ms > 0:
            group.new_member_added = False
            delay = min(self.configured_delay_ms, self.remaining_ms)
            remaining = max(self.remaining_ms - delay, 0)
            self.coordinator.schedule_initial_join(group, delay, remaining)
        else:
            self.coordinator.complete_join(group)


class DelayedSync(DelayedOperation[None]):
    """A generation waiting for its members' SyncGroup; see the module doc. O(1) per try."""

    __slots__ = ("coordinator", "generation_id", "group")

    def __init__(self, coordinator: GroupCallbacks, group: GroupMetadata, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.coordinator = coordinator
        self.group = group
        self.generation_id = group.generation_id

    def try_complete(self) -> bool:
        group = self.group
        if group.generation_id != self.generation_id or not group.pending_sync:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        pass  # nothing to answer: the SyncGroup requests answer themselves

    def on_expiration(self) -> None:
        self.coordinator.expire_sync(self.group, self.generation_id)


class DelayedHeartbeat(DelayedOperation[None]):
    """One member's session (or a pending member's wait to rejoin); see the module doc."""

    __slots__ = ("coordinator", "group", "member", "member_id")

    def __init__(
        self,
        coordinator: GroupCallbacks,
        group: GroupMetadata,
        member_id: str,
        member: MemberMetadata | None,
        session_timeout_ms: int,
    ) -> None:
        super().__init__(session_timeout_ms)
        self.coordinator = coordinator
        self.group = group
        self.member_id = member_id
        self.member = member  # None: a pending member (given an id, not joined)

    def try_complete(self) -> bool:
        member = self.member
        if member is not None and member.heartbeat_satisfied:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        if self.member is not None:
            self.member.heartbeat_satisfied = False

    def on_expiration(self) -> None:
        self.coordinator.expire_heartbeat(self.group, self.member_id, self.member is None)
