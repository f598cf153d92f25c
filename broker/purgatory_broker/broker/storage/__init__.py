"""The broker's storage: record batches, the offset index, segments, partition logs.

Bottom up, one job per module:

* :mod:`.records`: Kafka's record batch v2: parse, validate (CRC-32C), build,
  rewrite the base offset;
* :mod:`.offset_index`: Kafka's sparse, memory-mapped offset index with its
  warm section;
* :mod:`.segment`: one segment: a log file written through (``pwrite``) and its
  index, verified reads, recovery of a torn tail;
* :mod:`.log`: a partition's log: offsets, rolls, reads, truncation, the flush
  policy, recovery on open;
* :mod:`.open_files`: the bounded LRU of reopenable files (rolled logs, index
  maps) that keeps descriptors bounded.

Nothing here knows about replication, purgatories or requests; the broker
(:mod:`purgatory_broker.broker`) builds on these. A broker user needs only the few
names :mod:`purgatory_broker.broker` re-exports (building and reading batches,
:class:`PartitionLog`); the rest is for storage's own tests and benchmarks.
"""

from .log import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    DEFAULT_SEGMENT_BYTES,
    RECENT_BOUNDARIES,
    LogOffsetMetadata,
    LogRecovery,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordBatchTooLargeError,
)
from .offset_index import (
    DEFAULT_MAX_INDEX_SIZE_BYTES,
    ENTRY_BYTES,
    PAGE_BYTES,
    WARM_SECTION_BYTES,
    CorruptIndexError,
    IndexFullError,
    InvalidOffsetError,
    OffsetIndex,
    OffsetIndexError,
    OffsetPosition,
)
from .open_files import DEFAULT_MAX_OPEN_FILES, OpenFiles, Reopenable
from .records import (
    CRC32C_IMPLEMENTATION,
    CRC_START,
    HEADER_BYTES,
    LOG_OVERHEAD_BYTES,
    MAGIC,
    CompressionType,
    CorruptRecordError,
    DecodedRecord,
    Record,
    RecordBatchHeader,
    UnsupportedCompressionError,
    build_batch,
    crc32c,
    iter_batches,
    iter_records,
    next_offset,
    records_of,
    validate_batch,
    with_base_offset,
)
from .segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    BatchInfo,
    LogSegment,
    SegmentRecovery,
    segment_file_name,
)

__all__ = [
    "CRC32C_IMPLEMENTATION",
    "CRC_START",
    "DEFAULT_INDEX_INTERVAL_BYTES",
    "DEFAULT_MAX_INDEX_SIZE_BYTES",
    "DEFAULT_MAX_OPEN_FILES",
    "DEFAULT_SEGMENT_BYTES",
    "ENTRY_BYTES",
    "HEADER_BYTES",
    "INDEX_SUFFIX",
    "LOG_OVERHEAD_BYTES",
    "LOG_SUFFIX",
    "MAGIC",
    "PAGE_BYTES",
    "RECENT_BOUNDARIES",
    "WARM_SECTION_BYTES",
    "BatchInfo",
    "CompressionType",
    "CorruptIndexError",
    "CorruptRecordError",
    "DecodedRecord",
    "IndexFullError",
    "InvalidOffsetError",
    "LogOffsetMetadata",
    "LogRecovery",
    "LogSegment",
    "OffsetIndex",
    "OffsetIndexError",
    "OffsetOutOfRangeError",
    "OffsetPosition",
    "OpenFiles",
    "PartitionLog",
    "Record",
    "RecordBatchHeader",
    "RecordBatchTooLargeError",
    "Reopenable",
    "SegmentRecovery",
    "UnsupportedCompressionError",
    "build_batch",
    "crc32c",
    "iter_batches",
    "iter_records",
    "next_offset",
    "records_of",
    "segment_file_name",
    "validate_batch",
    "with_base_offset",
]
