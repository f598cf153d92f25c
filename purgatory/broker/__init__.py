"""A broker's core built on the purgatory: partition logs with Kafka's offset index,
replication with an ISR and a high watermark, DelayedProduce and DelayedFetch, and
the traces of every delayed operation."""

from ._broker import Broker, BrokerCounters
from ._delayed import (
    DelayedFetch,
    DelayedProduce,
    FetchPartitionData,
    FetchPartitionStatus,
    ProducePartitionResponse,
    ProducePartitionStatus,
)
from ._replication import LEADER_ID, AppendResult, LeaderPartition, ReplicaState
from .errors import ERROR_NAMES, ErrorCode, KafkaError, NotEnoughReplicasError, NotLeaderError
from .storage.log import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    DEFAULT_SEGMENT_BYTES,
    LogRecovery,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordBatchTooLargeError,
)
from .storage.offset_index import (
    CorruptIndexError,
    IndexFullError,
    InvalidOffsetError,
    OffsetIndex,
    OffsetIndexError,
    OffsetPosition,
)
from .storage.open_files import OpenFiles
from .storage.records import (
    CorruptRecordError,
    DecodedRecord,
    Record,
    RecordBatchHeader,
    UnsupportedCompressionError,
    build_batch,
    crc32c,
    iter_batches,
    iter_records,
    validate_batch,
    with_base_offset,
)
from .storage.segment import LogSegment

__all__ = [
    "DEFAULT_INDEX_INTERVAL_BYTES",
    "DEFAULT_SEGMENT_BYTES",
    "ERROR_NAMES",
    "LEADER_ID",
    "AppendResult",
    "Broker",
    "BrokerCounters",
    "CorruptIndexError",
    "CorruptRecordError",
    "DecodedRecord",
    "DelayedFetch",
    "DelayedProduce",
    "ErrorCode",
    "FetchPartitionData",
    "FetchPartitionStatus",
    "IndexFullError",
    "InvalidOffsetError",
    "KafkaError",
    "LeaderPartition",
    "LogRecovery",
    "LogSegment",
    "NotEnoughReplicasError",
    "NotLeaderError",
    "OffsetIndex",
    "OffsetIndexError",
    "OffsetOutOfRangeError",
    "OffsetPosition",
    "OpenFiles",
    "PartitionLog",
    "ProducePartitionResponse",
    "ProducePartitionStatus",
    "Record",
    "RecordBatchHeader",
    "RecordBatchTooLargeError",
    "ReplicaState",
    "UnsupportedCompressionError",
    "build_batch",
    "crc32c",
    "iter_batches",
    "iter_records",
    "validate_batch",
    "with_base_offset",
]
