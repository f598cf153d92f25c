"""Replication state of one leader partition: follower offsets, the ISR, the high watermark.

A :class:`LeaderPartition` owns the leader's :class:`~.storage.log.PartitionLog` and
tracks, per follower, what Kafka's leader tracks: the follower's log end offset
(LEO, which is the offset it asks for in its next fetch) and the last time it was
caught up. It is a plain synchronous class; the broker calls it and the
simulation's asyncio tasks drive the broker. Followers here keep no log of their
own: they fetch the leader's batches and keep only their offset, so the disk cost
is the leader's log alone.

Caught up (Kafka's ``Replica.updateFetchState``). A follower fetching at offset
``o`` at time ``t`` is caught up *now* if ``o >= leader LEO``; otherwise it is
caught up as of its previous fetch if ``o`` reaches the leader LEO seen at that
previous fetch. The second rule keeps a follower under steady load in sync
although the leader has always appended a little more by the time it fetches.

ISR. The in-sync replica set always holds the leader (replica id
:data:`LEADER_ID`). ``maybe_shrink_isr(now_ms)`` drops a follower not caught up
for more than ``replica_lag_time_max_ms``, unless its LEO equals the leader's
(Kafka's ``isCaughtUp``: an idle follower with nothing to fetch stays); a
follower out of the ISR rejoins on a fetch whose offset reaches the high watermark (Kafka's
``isFollowerInSync``: ``LEO >= HW``).

High watermark = the minimum LEO over the ISR, never decreasing while leader.
Worked example, leader + followers 1 and 2, ``replica_lag_time_max_ms=100``::

    t=0    append 10 records        leader LEO 10, HW 0 (followers at 0)
    t=5    follower 1 fetches at 10 ISR {0,1,2}, LEO {10,10,0}   HW 0
    t=6    follower 2 fetches at 4                               HW 4
    t=150  follower 1 fetches at 10 caught up at 150
    t=200  maybe_shrink_isr         2 last caught up at 0: ISR {0,1}, HW 10
    t=210  follower 2 fetches at 10 LEO 10 >= HW 10: rejoins, ISR {0,1,2}

The high watermark's place in the log (:attr:`LeaderPartition.high_watermark_metadata`,
Kafka's ``highWatermarkMetadata``: offset, segment, byte position) is looked up
when first asked for after the high watermark moves; the high watermark is a
follower's fetch offset or the log end, both recent batch boundaries, so that is
a dictionary lookup in the log (:meth:`~.storage.log.PartitionLog.offset_metadata`).
A waiting fetch compares it with its own fetch offset's place: O(1), no read.

Leadership. ``become_follower()`` makes the partition refuse appends and fetches
(NOT_LEADER_OR_FOLLOWER); ``become_leader(now_ms)`` takes leadership back with
a new leader epoch, every follower treated as caught up now.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from purgatory import TopicPartition

from .errors import (
    CODE_NONE,
    CODE_NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    CODE_NOT_LEADER_OR_FOLLOWER,
    NotEnoughReplicasError,
    NotLeaderError,
)
from .storage.log import LogOffsetMetadata, PartitionLog
from .storage.records import BytesLike

__all__ = ["LEADER_ID", "AppendResult", "LeaderPartition", "ReplicaState"]

#: The replica id of the broker that leads (this broker).
LEADER_ID = 0


@dataclass(slots=True)
class ReplicaState:
    """What the leader knows of one follower."""

    replica_id: int
    log_end_offset: int = 0  # the offset of its latest fetch
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = 0  # the leader LEO when it last fetched


class AppendResult(NamedTuple):
    """A leader append: the batch's offsets and whether the high watermark moved.
    One is made per produce: a named tuple (why: :mod:`.delayed`)."""

    base_offset: int
    last_offset: int
    size_bytes: int
    high_watermark_changed: bool


class LeaderPartition:
    """One partition led by this broker, with simulated followers; see module doc.

    All methods are O(replicas) unless stated; no asyncio, not thread-safe.
    """

    __slots__ = (
        "_high_watermark",
        "_high_watermark_metadata",
        "_is_leader",
        "_isr",
        "_leader_epoch",
        "_replicas",
        "isr_expands",
        "isr_shrinks",
        "log",
        "min_insync_replicas",
        "replica_lag_time_max_ms",
        "topic_partition",
    )

    def __init__(
        self,
        topic_partition: TopicPartition,
        log: PartitionLog,
        follower_ids: Iterable[int],
        *,
        min_insync_replicas: int = 1,
        replica_lag_time_max_ms: int = 30_000,
        now_ms: int = 0,
        leader_epoch: int = 0,
    ) -> None:
        followers = tuple(follower_ids)
        if LEADER_ID in followers or len(set(followers)) != len(followers):
            raise ValueError(f"follower ids must be distinct and not {LEADER_ID}: {followers}")
        if not 1 <= min_insync_replicas <= len(followers) + 1:
            raise ValueError(
                f"min_insync_replicas must be in [1, {len(followers) + 1}], "
                f"not {min_insync_replicas}"
            )
        if replica_lag_time_max_ms <= 0:
            raise ValueError(
                f"replica_lag_time_max_ms must be positive, not {replica_lag_time_max_ms}"
            )
        self.topic_partition = topic_partition
        self.log = log
        self.min_insync_replicas = min_insync_replicas
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        leo = log.log_end_offset
        self._replicas = {rid: ReplicaState(rid, 0, now_ms, now_ms, leo) for rid in followers}
        # invariant: LEADER_ID in _isr; every other member is a follower id
        self._isr: set[int] = {LEADER_ID, *followers}
        # invariant: log_start <= _high_watermark <= log.log_end_offset; never decreases as leader
        self._high_watermark = log.log_start_offset
        # invariant: None, or the metadata of _high_watermark (looked up on demand)
        self._high_watermark_metadata: LogOffsetMetadata | None = None
        self._is_leader = True
        self._leader_epoch = leader_epoch
        self.isr_shrinks = 0  # followers removed from the ISR, ever
        self.isr_expands = 0  # followers added back, ever
        self._update_high_watermark()

    # -- state ---------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self._is_leader

    @property
    def leader_epoch(self) -> int:
        return self._leader_epoch

    @property
    def high_watermark(self) -> int:
        """The offset below which records are committed (on every ISR member). O(1)."""
        return self._high_watermark

    @property
    def high_watermark_metadata(self) -> LogOffsetMetadata:
        """The high watermark's place in the log (see the module doc). O(1) when the
        high watermark is a recent batch boundary (always, here), else one offset
        lookup; raises as :meth:`~.storage.log.PartitionLog.offset_metadata`."""
        known = self._high_watermark_metadata
        if known is None or known.offset != self._high_watermark:
            known = self._high_watermark_metadata = self.log.offset_metadata(self._high_watermark)
        return known

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def isr(self) -> frozenset[int]:
        return frozenset(self._isr)

    @property
    def follower_ids(self) -> tuple[int, ...]:
        return tuple(self._replicas)

    def replica(self, replica_id: int) -> ReplicaState:
        """The leader's view of follower ``replica_id``; KeyError if unknown. O(1)."""
        return self._replicas[replica_id]

    @property
    def under_min_isr(self) -> bool:
        """True when the ISR is smaller than ``min_insync_replicas``. O(1)."""
        return len(self._isr) < self.min_insync_replicas

    def check_enough_replicas_reach_offset(self, required_offset: int) -> int | None:
        """Where an acks=-1 append ending before ``required_offset`` stands (Kafka's
        ``checkEnoughReplicasReachOffset``): None while the high watermark is below
        it, else its answer: NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR
        is smaller than ``min_insync_replicas``; NOT_LEADER_OR_FOLLOWER once this
        broker no longer leads. One call per waiting produce and check. O(1).
        """
        if not self._is_leader:
            return CODE_NOT_LEADER_OR_FOLLOWER
        if self._high_watermark < required_offset:
            return None
        if len(self._isr) < self.min_insync_replicas:
            return CODE_NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return CODE_NONE

    # -- the leader's work ---------------------------------------------------

    def append_as_leader(self, batch: BytesLike, *, required_acks: int) -> AppendResult:
        """Append a producer's batch; raise NotLeaderError or NotEnoughReplicasError.

        acks=-1 is refused before the append when the ISR is below min ISR.
        O(len(batch)) + O(replicas).
        """
        if required_acks not in (-1, 0, 1):
            raise ValueError(f"acks must be -1, 0 or 1, not {required_acks}")
        if not self._is_leader:
            raise NotLeaderError(f"not the leader of {self.topic_partition}")
        if required_acks == -1 and self.under_min_isr:
            raise NotEnoughReplicasError(
                f"{self.topic_partition}: ISR {sorted(self._isr)} is smaller than "
                f"min.insync.replicas {self.min_insync_replicas}"
            )
        base, last = self.log.append(batch, leader_epoch=self._leader_epoch)
        changed = self._update_high_watermark()
        # tuple.__new__: no Python frame (see the module doc of .delayed)
        return tuple.__new__(AppendResult, (base, last, len(batch), changed))

    def update_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """Record that follower ``replica_id`` fetched at ``fetch_offset`` (its LEO).

        Updates its caught-up time, adds it back to the ISR if it reached the high
        watermark, and returns True if the high watermark moved. O(replicas).
        """
        if not self._is_leader:
            raise NotLeaderError(f"not the leader of {self.topic_partition}")
        replica = self._replicas.get(replica_id)
        if replica is None:
            raise ValueError(f"{replica_id} is not a follower of {self.topic_partition}")
        leader_leo = self.log.log_end_offset
        if not 0 <= fetch_offset <= leader_leo:
            raise ValueError(
                f"follower {replica_id} fetch offset {fetch_offset} outside [0, {leader_leo}]"
            )
        if fetch_offset >= leader_leo:
            replica.last_caught_up_ms = now_ms
        elif fetch_offset >= replica.last_fetch_leader_leo:
            replica.last_caught_up_ms = max(replica.last_caught_up_ms, replica.last_fetch_ms)
        replica.log_end_offset = fetch_offset
        replica.last_fetch_ms = now_ms
        replica.last_fetch_leader_leo = leader_leo
        if replica_id not in self._isr and fetch_offset >= self._high_watermark:
            self._isr.add(replica_id)
            self.isr_expands += 1
        return self._update_high_watermark()

    def maybe_shrink_isr(self, now_ms: int) -> tuple[list[int], bool]:
        """Drop followers not caught up for ``replica_lag_time_max_ms`` (one at the
        leader's LEO is caught up, however long ago it fetched).

        Returns (removed replica ids, whether the high watermark moved). O(replicas).
        """
        if not self._is_leader:
            return [], False
        leader_leo = self.log.log_end_offset
        removed = [
            rid
            for rid in sorted(self._isr)
            if rid != LEADER_ID
            and self._replicas[rid].log_end_offset < leader_leo
            and now_ms - self._replicas[rid].last_caught_up_ms > self.replica_lag_time_max_ms
        ]
        for rid in removed:
            self._isr.discard(rid)
        self.isr_shrinks += len(removed)
        return removed, bool(removed) and self._update_high_watermark()

    def become_follower(self) -> None:
        """Lose leadership: appends and fetches now raise NotLeaderError. O(1)."""
        self._is_leader = False

    def become_leader(self, now_ms: int) -> int:
        """Take leadership back with a new leader epoch (returned). O(replicas).

        Every follower counts as caught up now; the ISR and the high watermark
        stay as they were.
        """
        if self._is_leader:
            raise ValueError(f"already the leader of {self.topic_partition}")
        self._is_leader = True
        self._leader_epoch += 1
        leo = self.log.log_end_offset
        for replica in self._replicas.values():
            replica.last_caught_up_ms = now_ms
            replica.last_fetch_ms = now_ms
            replica.last_fetch_leader_leo = min(leo, replica.log_end_offset)
        return self._leader_epoch

    def _update_high_watermark(self) -> bool:
        new_hw = self.log.log_end_offset
        replicas = self._replicas
        for rid in self._isr:
            if rid != LEADER_ID:
                leo = replicas[rid].log_end_offset
                if leo < new_hw:
                    new_hw = leo
        if new_hw > self._high_watermark:
            self._high_watermark = new_hw
            return True
        return False

    def _check_invariants(self) -> None:
        """Check the fields' invariants. O(replicas)."""
        log = self.log
        assert LEADER_ID in self._isr
        assert self._isr - {LEADER_ID} <= set(self._replicas)
        assert log.log_start_offset <= self._high_watermark <= log.log_end_offset
        if self._is_leader:
            expected = min(
                [log.log_end_offset]
                + [self._replicas[r].log_end_offset for r in self._isr if r != LEADER_ID]
            )
            assert self._high_watermark >= expected
        for replica in self._replicas.values():
            assert 0 <= replica.log_end_offset <= log.log_end_offset

    def __repr__(self) -> str:
        return (
            f"<LeaderPartition {self.topic_partition} leader={self._is_leader} "
            f"epoch={self._leader_epoch} isr={sorted(self._isr)} "
            f"hw={self._high_watermark} leo={self.log.log_end_offset}>"
        )
