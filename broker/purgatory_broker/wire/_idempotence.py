"""Idempotent producers: producer ids, epochs, and deduplication of retried batches.

An idempotent producer gets a producer id and epoch from InitProducerId and
numbers its batches per partition: a batch carries ``base_sequence`` and covers
the sequences ``base_sequence .. base_sequence + last_offset_delta`` (mod 2^31).
When a produce request times out the producer resends the same batch, with the
same sequence numbers; the broker must answer with the offsets of the first
append instead of appending a second copy.

Like Kafka's ``ProducerStateManager``, the table keeps, per (partition, producer
id), the epoch and the metadata of the last :data:`CACHED_BATCHES` batches
appended. :meth:`ProducerStateTable.check` classifies an incoming batch (a refusal
is raised, a :class:`~purgatory_broker.broker.errors.KafkaError` carrying its code):

==========================================  =====================================
incoming batch                              verdict
==========================================  =====================================
producer unknown here                       append (state is rebuilt from it)
epoch older than the known epoch            INVALID_PRODUCER_EPOCH (47)
epoch newer                                 append if base_sequence == 0,
                                            else OUT_OF_ORDER_SEQUENCE_NUMBER (45)
same epoch, same sequences as a cached one  duplicate: answer its original offsets
same epoch, base = last sequence + 1        append
same epoch, anything else                   OUT_OF_ORDER_SEQUENCE_NUMBER (45)
==========================================  =====================================

Worked example, producer 7 epoch 0 on one partition::

    seq 0..4   append at offsets 0..4      cache [(0..4 @ 0)]
    seq 5..9   append at offsets 5..9      cache [(0..4 @ 0), (5..9 @ 5)]
    seq 5..9   (a retry)                   duplicate -> base offset 5, nothing appended
    seq 12..13                             OUT_OF_ORDER_SEQUENCE_NUMBER

The broker calls :meth:`check` before appending and :meth:`record` right after
a successful append, in the same synchronous step, so a pipelined retry on the
same connection already sees the first append. State lives in memory only: after
a restart a known producer is "unknown" and its next batch is accepted.

Expiry (Kafka's ``producer.id.expiration.ms``, default one day). Without it the
table would grow with every producer id ever seen. Each (partition, producer
id) entry is a key of an :class:`~purgatory.IdleTracker` on the wire broker's
timer: :meth:`record` touches it (a dictionary lookup and a clock read, no timer
operation), and an entry not written for ``expiration_ms`` is dropped, within a
timer tick of its deadline. A producer writing again after that is "unknown"
and accepted, exactly as after a restart. Kafka checks expiry by a scan every
``producer.id.expiration.check.interval.ms`` (10 minutes), O(producers) per
scan; here each entry costs one timer operation per expiration period it lives
through (the tracker's lazy re-arm) and O(1) when it expires, and memory is
O(producers written to in the last ``expiration_ms``). Kafka measures the time
since a batch's own timestamp; this table uses the broker's clock, so a
client's clock cannot keep an entry alive or expire it early.
:class:`ProducerIdAllocator` expires the same way: a producer id's epoch is
forgotten ``expiration_ms`` after its last InitProducerId (a later epoch bump
for it then gets a new id, which the producer accepts).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from purgatory import IdleTracker, SystemTimer, TopicPartition
from purgatory_broker.broker.errors import ErrorCode, KafkaError

__all__ = [
    "CACHED_BATCHES",
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "BatchMetadata",
    "ProducerIdAllocator",
    "ProducerStateTable",
]

#: Batches remembered per producer and partition (Kafka: 5, the max in-flight requests).
CACHED_BATCHES = 5
#: Kafka's producer.id.expiration.ms: one day.
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
_SEQUENCE_MODULUS = 2**31
_MAX_EPOCH = 2**15 - 1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One appended batch of a producer: its sequences and the offsets it got."""

    first_sequence: int
    last_sequence: int
    base_offset: int
    last_offset: int


@dataclass(slots=True)
class _ProducerEntry:
    epoch: int
    # invariant: at most CACHED_BATCHES, oldest first, consecutive sequences
    batches: deque[BatchMetadata]


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """The batch's last sequence number, wrapping at 2^31. O(1)."""
    return (base_sequence + last_offset_delta) % _SEQUENCE_MODULUS


class ProducerStateTable:
    """Per (partition, producer id): epoch and the last batches; see module doc.

    ``timer`` is a :class:`~purgatory.SystemTimer` the caller drives (its reaper
    running, or ``poll`` called); an entry not written for ``expiration_ms`` by
    its clock is dropped. ``check`` is O(CACHED_BATCHES), ``record`` O(1), an
    expiry O(1) (plus one timer operation per period for an entry still written).
    """

    __slots__ = ("_entries", "_written")

    def __init__(
        self,
        *,
        timer: SystemTimer,
        expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        # invariant: the same keys as _written tracks
        self._entries: dict[tuple[TopicPartition, int], _ProducerEntry] = {}
        self._written: IdleTracker[tuple[TopicPartition, int]] = IdleTracker(
            expiration_ms, self._expire, timer=timer
        )

    @property
    def expiration_ms(self) -> int:
        return self._written.timeout_ms

    @property
    def expired(self) -> int:
        """Entries dropped for age so far. O(1)."""
        return self._written.reaped

    def _expire(self, key: tuple[TopicPartition, int]) -> None:
        del self._entries[key]

    def check(
        self, tp: TopicPartition, producer_id: int, epoch: int, base_sequence: int, last_seq: int
    ) -> BatchMetadata | None:
        """None: append it. A :class:`BatchMetadata`: a duplicate of that batch, not to
        append again. Raises :class:`~purgatory_broker.broker.errors.KafkaError` with
        INVALID_PRODUCER_EPOCH or OUT_OF_ORDER_SEQUENCE_NUMBER for a batch to refuse (the
        table in the module doc). O(CACHED_BATCHES)."""
        entry = self._entries.get((tp, producer_id))
        if entry is None:
            return None
        if epoch < entry.epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"{tp}: producer {producer_id} epoch {epoch} is older than {entry.epoch}",
            )
        if epoch > entry.epoch:
            if base_sequence != 0:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"{tp}: producer {producer_id}'s new epoch {epoch} starts at sequence "
                    f"{base_sequence}, not 0",
                )
            return None
        for batch in entry.batches:
            if batch.first_sequence == base_sequence and batch.last_sequence == last_seq:
                return batch
        if entry.batches:
            expected = (entry.batches[-1].last_sequence + 1) % _SEQUENCE_MODULUS
            if base_sequence != expected:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"{tp}: producer {producer_id} sent sequence {base_sequence}, "
                    f"expected {expected}",
                )
        return None

    def record(
        self,
        tp: TopicPartition,
        producer_id: int,
        epoch: int,
        batch: BatchMetadata,
    ) -> None:
        """Remember an appended batch (a newer epoch resets the cache). O(1)."""
        key = (tp, producer_id)
        entry = self._entries.get(key)
        if entry is None or epoch != entry.epoch:
            entry = _ProducerEntry(epoch, deque(maxlen=CACHED_BATCHES))
            self._entries[key] = entry
        entry.batches.append(batch)
        self._written.touch(key)

    def __len__(self) -> int:
        """Entries held. O(1)."""
        return len(self._entries)

    def clear(self) -> None:
        """Forget every entry. O(entries)."""
        self._entries.clear()
        self._written.clear()

    def _check_invariants(self) -> None:
        """Every entry is tracked for expiry, and nothing else. O(entries)."""
        assert set(self._entries) == set(self._written), "entries and expiry keys differ"
        self._written._check_invariants()


class ProducerIdAllocator:
    """Hands out producer ids and bumps epochs (InitProducerId). O(1) per call.

    A producer id's epoch is forgotten ``expiration_ms`` after its last
    InitProducerId (by ``timer``'s clock; see the module doc)."""

    __slots__ = ("_epochs", "_next_id", "_used")

    def __init__(
        self,
        *,
        timer: SystemTimer,
        expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        first_id: int = 1000,
    ) -> None:
        self._next_id = first_id
        # invariant: the same keys as _used tracks
        self._epochs: dict[int, int] = {}
        self._used: IdleTracker[int] = IdleTracker(expiration_ms, self._expire, timer=timer)

    def _expire(self, producer_id: int) -> None:
        del self._epochs[producer_id]

    def init_producer_id(self, producer_id: int = -1, epoch: int = -1) -> tuple[int, int]:
        """A new (id, 0), or (id, epoch + 1) when a known producer asks with its current
        epoch (KIP-360's epoch bump); a new id once the epoch would overflow."""
        current = self._epochs.get(producer_id)
        if producer_id >= 0 and current is not None and current == epoch and epoch < _MAX_EPOCH:
            self._epochs[producer_id] = epoch + 1
            self._used.touch(producer_id)
            return producer_id, epoch + 1
        new_id = self._next_id
        self._next_id += 1
        self._epochs[new_id] = 0
        self._used.touch(new_id)
        return new_id, 0

    def __len__(self) -> int:
        """Producer ids whose epoch is remembered. O(1)."""
        return len(self._epochs)

    def _check_invariants(self) -> None:
        """Every remembered id is tracked for expiry, and nothing else. O(ids)."""
        assert set(self._epochs) == set(self._used), "epochs and expiry keys differ"
        self._used._check_invariants()
