"""A broker's core built on the purgatory: partition logs with Kafka's offset index,
replication with an ISR and a high watermark, DelayedProduce and DelayedFetch, and
the traces of every delayed operation."""

from ._log import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    DEFAULT_SEGMENT_BYTES,
    LogRecovery,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordBatchTooLargeError,
)
from ._offset_index import (
    CorruptIndexError,
    IndexFullError,
    InvalidOffsetError,
    OffsetIndex,
    OffsetIndexError,
    OffsetPosition,
)
from ._segment import LogSegment
from .records import (
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

__all__ = [
    "DEFAULT_INDEX_INTERVAL_BYTES",
    "DEFAULT_SEGMENT_BYTES",
    "CorruptIndexError",
    "CorruptRecordError",
    "DecodedRecord",
    "IndexFullError",
    "InvalidOffsetError",
    "LogRecovery",
    "LogSegment",
    "OffsetIndex",
    "OffsetIndexError",
    "OffsetOutOfRangeError",
    "OffsetPosition",
    "PartitionLog",
    "Record",
    "RecordBatchHeader",
    "RecordBatchTooLargeError",
    "UnsupportedCompressionError",
    "build_batch",
    "crc32c",
    "iter_batches",
    "iter_records",
    "validate_batch",
    "with_base_offset",
]
