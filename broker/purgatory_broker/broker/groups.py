"""Consumer groups' state: members, generations, the protocol vote (Kafka's GroupMetadata).

A group moves through Kafka's five states::

    Empty --join--> PreparingRebalance --all joined / timeout--> CompletingRebalance
      ^                  ^        |                                  |
      |                  |        +--(nobody left)--> Empty          | leader's SyncGroup
      |                  +-----------------------------------------+ v
      |                  +--- join of a new member, leave, expiry --- Stable
      +-- (last member gone)                                  Dead: removed, answers nothing

A :class:`MemberMetadata` is one consumer: its session and rebalance timeouts,
the protocols it offers (``(name, metadata)`` in preference order), and while a
request of it waits, the callback that answers it (``awaiting_join``,
``awaiting_sync``). A :class:`GroupMetadata` holds the members by id, the
members that were given an id but have not joined with it yet (``pending``,
JoinGroup v4+'s MEMBER_ID_REQUIRED round), the generation, the leader and the
chosen protocol.

The protocol vote (:meth:`GroupMetadata.select_protocol`): the candidates are
the protocols every member offers; each member votes for the first candidate in
its own preference order; the most votes win, ties going to the candidate the
leader prefers. Example: members offering ``[range, roundrobin]``,
``[roundrobin, range]`` and ``[roundrobin]``: candidates ``{roundrobin}`` (the
third offers no range), so roundrobin.

After a join completes, every member must send SyncGroup within the rebalance
timeout (Kafka 3.x): ``pending_sync`` holds those that have not yet.

This module is state only; :mod:`.coordinator` drives it and
:mod:`.group_delayed` holds the delayed operations that wait on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

__all__ = [
    "GroupMetadata",
    "GroupState",
    "JoinResult",
    "MemberMetadata",
    "SyncResult",
]


class GroupState(Enum):
    """Kafka's group states; the value is the name DescribeGroups and ListGroups show."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class JoinResult:
    """The answer to one JoinGroup. ``members`` (id, group instance id, metadata) is
    filled for the leader only, as in Kafka."""

    error_code: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResult:
    """The answer to one SyncGroup: the member's assignment (empty on error)."""

    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


@dataclass(slots=True, eq=False)
class MemberMetadata:
    """One member of a group; see the module doc."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata), the member's preference order
    assignment: bytes = b""
    awaiting_join: JoinCallback | None = None  # set while its JoinGroup waits
    awaiting_sync: SyncCallback | None = None  # set while its SyncGroup waits
    # a heartbeat (or join, sync, commit) came since its DelayedHeartbeat was scheduled
    heartbeat_satisfied: bool = False

    def metadata(self, protocol: str) -> bytes:
        """This member's metadata for ``protocol`` (KeyError if it offers none). O(protocols)."""
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(protocol)

    def same_protocols(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether ``protocols`` equals what this member offers. O(protocols)."""
        return self.protocols == protocols


@dataclass(slots=True, eq=False)
class GroupMetadata:
    """One group's state; see the module doc. The coordinator is its only writer."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    # invariant: leader_id is None or in members
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    # member id -> session timeout: given an id (MEMBER_ID_REQUIRED), not yet rejoined
    pending: dict[str, int] = field(default_factory=dict)
    # members of this generation that have not sent SyncGroup yet (DelayedSync waits)
    # invariant: a subset of members
    pending_sync: set[str] = field(default_factory=set)
    # a member joined while an InitialDelayedJoin waits (it then waits once more)
    new_member_added: bool = False
    state_since_ms: int = 0  # wall clock of the last state change (offset retention)

    # -- queries -------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    @property
    def is_empty(self) -> bool:
        return not self.members

    def has_all_members_joined(self) -> bool:
        """Every member waits in JoinGroup and no pending member is missing. O(members)."""
        return not self.pending and all(m.awaiting_join is not None for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout of the members (0 with none). O(members)."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def supports(
        self, protocol_type: str, protocols: list[tuple[str, bytes]], excluding: str = ""
    ) -> bool:
        """Whether a member with these protocols may join: same type as the others and at
        least one protocol every other member offers (anything, with no others).
        ``excluding``: the joining member's own id (its old offer does not count).
        O(members x protocols)."""
        if not protocol_type or not protocols:
            return False
        others = [m for m in self.members.values() if m.member_id != excluding]
        if not others:
            return True
        if protocol_type != self.protocol_type:
            return False
        common = {name for name, _ in protocols}
        for member in others:
            common &= {name for name, _ in member.protocols}
        return bool(common)

    def candidate_protocols(self) -> set[str]:
        """The protocols every member offers. O(members x protocols)."""
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """The vote of the module doc; the group must have members. O(members x protocols)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            vote = next(name for name, _ in member.protocols if name in candidates)
            votes[vote] = votes.get(vote, 0) + 1
        best = max(votes.values())
        leader = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        return next(name for name, _ in leader.protocols if votes.get(name) == best)

    # -- changes (the coordinator's) -------------------------------------------

    def transition(self, state: GroupState, now_ms: int) -> None:
        """Move to ``state``, stamped with ``now_ms`` (wall clock). O(1)."""
        self.state = state
        self.state_since_ms = now_ms

    def add(self, member: MemberMetadata) -> None:
        """Add ``member``; the first member of an empty group sets the protocol type and
        leads. O(1)."""
        if self.is_empty:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> MemberMetadata | None:
        """Remove a member; a new leader is any remaining member. O(1)."""
        member = self.members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        if member is not None and self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def check_invariants(self) -> None:
        """O(members): assert what the fields promise."""
        assert self.leader_id is None or self.leader_id in self.members, self
        assert self.members or self.leader_id is None
        assert not (set(self.pending) & set(self.members)), self
        assert self.pending_sync <= set(self.members), self
        if self.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            assert self.members and self.protocol_name is not None, self
        if self.state is GroupState.STABLE:
            assert all(m.awaiting_join is None for m in self.members.values()), self
