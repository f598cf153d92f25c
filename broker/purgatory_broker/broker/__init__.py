"""A broker's core built on the purgatory (Kafka's ReplicaManager, one broker).

The layers, bottom up:

* :mod:`.storage`: record batches, the offset index, segments, partition logs;
* :mod:`.errors`: Kafka's error codes, once;
* :mod:`.replication`: one led partition: follower offsets, the ISR, the high
  watermark;
* :mod:`.delayed`: DelayedProduce and DelayedFetch, Kafka's two delayed operations;
* :mod:`.broker`: :class:`Broker`: partitions, produce, fetch, awaiting
  replication, both purgatories, traces (:mod:`purgatory_broker.tracing`);
* :mod:`.followers`: :class:`Followers`: simulated followers fetching with lag,
  and the ISR check, on asyncio (the simulation and the wire example share it);
* :mod:`.groups`, :mod:`.group_delayed`, :mod:`.offsets`, :mod:`.coordinator`:
  :class:`GroupCoordinator`: consumer groups (Kafka's classic protocol), their
  rebalances in a join purgatory, sessions in a heartbeat purgatory, and
  committed offsets kept in the data directory.

The names below are what a user of the broker needs: the broker, its requests
and answers, the partitions it leads, the error codes, and the record-batch
helpers to build what it stores and read what it returns. Storage internals are
in :mod:`purgatory_broker.broker.storage`.
"""

from .broker import Broker, BrokerCounters
from .coordinator import GroupConfig, GroupCoordinator, GroupDescription, MemberDescription
from .delayed import (
    DelayedFetch,
    DelayedProduce,
    FetchPartitionData,
    FetchPartitionStatus,
    ProducePartitionResponse,
    ProducePartitionStatus,
)
from .errors import ErrorCode
from .followers import Followers, HighWatermarkHook
from .group_delayed import DelayedHeartbeat, DelayedJoin, DelayedSync, InitialDelayedJoin
from .groups import GroupMetadata, GroupState, JoinResult, MemberMetadata, SyncResult
from .offsets import CommittedOffset, OffsetStore
from .replication import LEADER_ID, LeaderPartition, ReplicaState
from .storage import (
    CorruptRecordError,
    DecodedRecord,
    PartitionLog,
    Record,
    RecordBatchHeader,
    build_batch,
    iter_batches,
    iter_records,
    next_offset,
    validate_batch,
)

__all__ = [
    "LEADER_ID",
    "Broker",
    "BrokerCounters",
    "CommittedOffset",
    "CorruptRecordError",
    "DecodedRecord",
    "DelayedFetch",
    "DelayedHeartbeat",
    "DelayedJoin",
    "DelayedProduce",
    "DelayedSync",
    "ErrorCode",
    "FetchPartitionData",
    "FetchPartitionStatus",
    "Followers",
    "GroupConfig",
    "GroupCoordinator",
    "GroupDescription",
    "GroupMetadata",
    "GroupState",
    "HighWatermarkHook",
    "InitialDelayedJoin",
    "JoinResult",
    "LeaderPartition",
    "MemberDescription",
    "MemberMetadata",
    "OffsetStore",
    "PartitionLog",
    "ProducePartitionResponse",
    "ProducePartitionStatus",
    "Record",
    "RecordBatchHeader",
    "ReplicaState",
    "SyncResult",
    "build_batch",
    "iter_batches",
    "iter_records",
    "next_offset",
    "validate_batch",
]
