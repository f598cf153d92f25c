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

# Each module's __all__ is its public API, once: this package re-exports all of them.
from . import log, offset_index, open_files, records, segment
from .log import *  # noqa: F403
from .offset_index import *  # noqa: F403
from .open_files import *  # noqa: F403
from .records import *  # noqa: F403
from .segment import *  # noqa: F403

__all__ = (
    log.__all__ + offset_index.__all__ + open_files.__all__ + records.__all__ + segment.__all__
)
