"""A partition's log: a directory of segments holding record batches in offset order.

The log assigns offsets. ``append`` gives a batch the offsets from the log end
offset on (it covers ``last_offset_delta + 1`` of them) by rewriting only its
base offset (and, if asked, its leader epoch), which the batch CRC does not
cover, so the producer's CRC stays valid. Batches are stored byte for byte.

Segments are files named by their base offset (see :mod:`.segment`). Only the
last segment takes appends; the log *rolls* to a new segment, based at the log
end offset, before an append that would not fit: when the segment would exceed
``segment_bytes``, its index is full, or the batch's last offset would not fit
the index's 32-bit relative offset.

Reads return whole batches, raw, as a fetch response carries them::

    read(offset, max_bytes, max_offset)

starts with the batch containing ``offset`` and continues (across segments)
while the next batch ends below ``max_offset`` (exclusive; the high watermark for
consumers, the log end for followers) and fits in ``max_bytes``. The first batch
is returned whole even if larger than ``max_bytes``, so a reader always makes
progress. A batch that straddles ``max_offset`` is not returned: part of it is
not readable yet. Offsets below the log start or above the log end raise
:class:`OffsetOutOfRangeError`; the log end itself reads as ``b""``.

Example, three batches of 3, 1 and 2 records, 100 bytes each::

    append -> (0, 2)   append -> (3, 3)   append -> (4, 5)     log end 6
    read(1, 1000)                -> batches [0..2] [3] [4..5]   300 bytes
    read(1, 150)                 -> batch [0..2]                (second won't fit)
    read(1, 10)                  -> batch [0..2]                (first is always whole)
    read(1, 1000, max_offset=4)  -> batches [0..2] [3]
    read(6, 1000)                -> b""                          (the log end)
    read(7, 1000)                -> OffsetOutOfRangeError
    truncate_to(5)               -> drops [4..5] (it straddles 5); log end 4

Offset metadata (Kafka's ``LogOffsetMetadata``)
----------------------------------------------
:class:`LogOffsetMetadata` names a place in the log three ways: the offset, the
base offset of the segment holding it and the byte position there of the batch
that contains it (for the log end: the end of the last segment). Two places in
the same segment are ``position_diff`` bytes apart, so a waiting fetch can tell
how many bytes lie between its fetch offset and the high watermark or the log
end with one subtraction and no read; a place in a newer segment means "at
least the rest of the older one". The log keeps:

* :attr:`PartitionLog.log_end_metadata`, current after every append, roll and
  truncation (O(1), no read);
* the metadata of the last :data:`RECENT_BOUNDARIES` batch boundaries (each
  append's end), so :meth:`PartitionLog.offset_metadata` of an offset a reader
  got from a recent fetch (a follower's next offset, the high watermark) is a
  dictionary lookup; other offsets take the index lookup and header walk of
  :meth:`.segment.LogSegment.translate_offset`. A roll re-bases the log end's
  entry onto the new segment; a truncation forgets the boundaries past the new
  end.

Example, batches of 100 bytes, a roll at offset 4::

    append [0..2] [3]          log end (4, segment 0, position 200)
    roll; append [4..5]        log end (6, segment 4, position 100)
    offset_metadata(3)      -> (3, segment 0, position 100)   (a recent boundary)
    offset_metadata(4)      -> (4, segment 4, position 0)

Reopening a directory recovers what a crash can leave (see
:meth:`.segment.LogSegment.open`): a torn last batch is cut, index entries past
the log end are dropped, an index that fails its check is rebuilt from the log.
What was done is in :attr:`PartitionLog.recovery`. Dropping data is never
silent: a cut logs a WARNING on the ``purgatory_broker.broker`` logger naming the
partition's directory, the offset the log now ends at and the bytes dropped;
index repairs (which drop no data) are logged at INFO.

Durability and the flush policy
-------------------------------
Every append is in the segment file when ``append`` returns (written through,
see :mod:`.segment`), so the OS holds it: the broker *process* may die at any
moment without losing an acknowledged record. Reaching the disk, which is what
survives the *machine* dying, takes an ``fsync``; when is Kafka's flush policy,
off by default (replication is Kafka's durability mechanism):

* ``flush_messages=N`` (Kafka's ``flush.messages``): ``append`` flushes once N
  or more offsets were appended since the last flush;
* ``flush_ms=M`` (Kafka's ``flush.ms``): the log remembers when it was first
  written after its last flush; :meth:`PartitionLog.maybe_flush` flushes once M
  ms have passed since then, and :attr:`PartitionLog.flush_due_ms` says when that
  is, so the owner (the broker's timer) can call it on time. The log itself
  never sleeps or schedules.

A flush calls ``fsync`` on every segment written since the last one (a segment
rolled meanwhile included) and ``msync`` on their indexes. With a policy set,
:meth:`PartitionLog.close` flushes too. Example, ``flush_messages=3``::

    append 2 records (offsets 0-1)   unflushed 2
    append 1 record  (offset 2)      unflushed 3 -> fsync; unflushed 0
    append 5 records (offsets 3-7)   unflushed 5 -> fsync
"""

from __future__ import annotations

import bisect
import itertools
import logging
import os
import re
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from purgatory import Clock, LoopClock

from .offset_index import DEFAULT_MAX_INDEX_SIZE_BYTES, ENTRY_BYTES
from .open_files import OpenFiles
from .records import BytesLike, check_batch, with_base_offset
from .segment import INDEX_SUFFIX, LOG_SUFFIX, LogSegment, SegmentSettings

__all__ = [
    "DEFAULT_INDEX_INTERVAL_BYTES",
    "DEFAULT_SEGMENT_BYTES",
    "RECENT_BOUNDARIES",
    "LogOffsetMetadata",
    "LogRecovery",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "RecordBatchTooLargeError",
]

#: Kafka's ``segment.bytes``.
DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024
#: Kafka's ``index.interval.bytes``.
DEFAULT_INDEX_INTERVAL_BYTES = 4096

log = logging.getLogger("purgatory_broker.broker")

#: The capacity of a log's own :class:`~.open_files.OpenFiles` (when none is given).
OWN_MAX_OPEN_FILES = 4

#: How many recent batch boundaries :meth:`PartitionLog.offset_metadata` answers
#: without a lookup.
RECENT_BOUNDARIES = 1024

_INT32_MAX = 2**31 - 1
_SEGMENT_NAME = re.compile(r"^(\d{20})\.(log|index)$")


class OffsetOutOfRangeError(Exception):
    """A read below the log start or beyond the log end (OFFSET_OUT_OF_RANGE, 1)."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class RecordBatchTooLargeError(ValueError):
    """A batch larger than a whole segment (Kafka: RECORD_LIST_TOO_LARGE)."""


class LogOffsetMetadata(NamedTuple):
    """A place in a log: ``offset``, the base offset of its segment and the byte
    position there of the batch containing it (the segment's size at the log end).
    See the module doc. A named tuple: one is made per append."""

    offset: int
    segment_base_offset: int
    position: int

    def on_older_segment(self, other: LogOffsetMetadata) -> bool:
        """Whether this place lies in an older segment than ``other``'s. O(1)."""
        return self.segment_base_offset < other.segment_base_offset

    def position_diff(self, other: LogOffsetMetadata) -> int:
        """Bytes from ``other`` to this place, both in the same segment. O(1)."""
        if self.segment_base_offset != other.segment_base_offset:
            raise ValueError(f"{self} and {other} are in different segments")
        return self.position - other.position


@dataclass(frozen=True, slots=True)
class LogRecovery:
    """What opening the log repaired; all zero/empty for a clean directory."""

    truncated_bytes: int = 0  # cut from the last segment (torn or bad batches)
    truncated_at_offset: int = -1  # the log end after the cut; -1 if nothing was cut
    dropped_index_entries: int = 0  # index entries beyond the log end, removed
    rebuilt_indexes: tuple[int, ...] = ()  # base offsets of segments re-indexed
    reasons: tuple[str, ...] = ()  # one line per repair


def _check_settings(
    segment_bytes: int,
    index_interval_bytes: int,
    max_index_size_bytes: int,
    flush_messages: int | None,
    flush_ms: int | None,
) -> None:
    """Raise ValueError naming the first setting a log cannot have. O(1)."""
    for name, value in (
        ("segment_bytes", segment_bytes),
        ("index_interval_bytes", index_interval_bytes),
        ("max_index_size_bytes", max_index_size_bytes),
        ("flush_messages", 1 if flush_messages is None else flush_messages),
        ("flush_ms", 1 if flush_ms is None else flush_ms),
    ):
        if type(value) is not int or value <= 0:
            raise ValueError(f"{name} must be a positive int, not {value!r}")
    if segment_bytes > _INT32_MAX:
        raise ValueError(f"segment_bytes must fit an int32 position, not {segment_bytes}")
    if max_index_size_bytes < ENTRY_BYTES:
        raise ValueError(f"max_index_size_bytes must be >= {ENTRY_BYTES}")


class PartitionLog:
    """The log of one partition in ``directory`` (created if missing).

    ``append`` is O(len(batch)); ``read`` is O(log segments + log
    index entries + bytes read); ``truncate_to`` is O(dropped segments + log n).
    Opening is O(size of the last segment) plus O(index interval) per older
    segment. It keeps one file descriptor open for good (the last segment's log);
    rolled segments' logs and every index map are opened on use and registered in
    ``open_files`` (an :class:`~.open_files.OpenFiles`, by default the log's
    own), which bounds them. Not thread-safe; no asyncio.
    """

    __slots__ = (
        "_bases",
        "_clock",
        "_closed",
        "_directory",
        "_dirty_since_ms",
        "_end_metadata",
        "_flush_count",
        "_flush_messages",
        "_flush_ms",
        "_flushed_offset",
        "_recent",
        "_recovery",
        "_rolled_unflushed",
        "_segment_bytes",
        "_segment_settings",
        "_segments",
        "_size_bytes",
    )

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        max_index_size_bytes: int = DEFAULT_MAX_INDEX_SIZE_BYTES,
        flush_messages: int | None = None,
        flush_ms: int | None = None,
        clock: Clock | None = None,
        open_files: OpenFiles | None = None,
    ) -> None:
        _check_settings(
            segment_bytes, index_interval_bytes, max_index_size_bytes, flush_messages, flush_ms
        )
        self._directory = Path(directory)
        self._directory.mkdir(parents=True, exist_ok=True)
        self._segment_bytes = segment_bytes
        # invariant: non-empty, in base-offset order, each segment's next_offset
        # is the next one's base_offset; only the last one takes appends
        self._segments: list[LogSegment] = []
        # invariant: [s.base_offset for s in _segments], for bisect
        self._bases: list[int] = []
        # invariant: == sum of the segments' size_bytes
        self._size_bytes = 0
        self._closed = False
        self._flush_messages = flush_messages
        self._flush_ms = flush_ms
        # rolled logs' descriptors and index maps: a shared set (the broker's) or
        # this log's own
        files = OpenFiles(OWN_MAX_OPEN_FILES) if open_files is None else open_files
        self._segment_settings = SegmentSettings(index_interval_bytes, max_index_size_bytes, files)
        self._clock: Clock = LoopClock() if clock is None else clock
        # invariant: segments before the last that were written since the last
        # flush (each needs an fsync), oldest first
        self._rolled_unflushed: list[LogSegment] = []
        # invariant: None when nothing was written since the last flush (or when
        # flush_ms is None: the clock is read only for that rule); else the clock
        # time of the first write after it
        self._dirty_since_ms: int | None = None
        self._flush_count = 0  # flushes that synced something, ever
        self._recovery = self._load()
        # invariant: the metadata of log_end_offset (see the module doc)
        self._end_metadata = self._current_end()
        # invariant: offset -> its metadata, for at most RECENT_BOUNDARIES batch
        # boundaries (oldest first), all <= the log end; the log end is one of them.
        # An OrderedDict drops its oldest in O(1); a dict's first key is found by
        # skipping the deleted slots before it (hundreds, between two resizes)
        self._recent: OrderedDict[int, LogOffsetMetadata] = OrderedDict()
        self._remember_end()
        # invariant: <= log_end_offset; the log end at the last flush (at open:
        # what the files held), Kafka's recovery point
        self._flushed_offset = self.log_end_offset

    # ------------------------------------------------------------ opening

    def _new_segment(self, base_offset: int) -> LogSegment:
        return LogSegment.create(self._directory, base_offset, self._segment_settings)

    def _load(self) -> LogRecovery:
        log_bases: set[int] = set()
        index_bases: set[int] = set()
        for path in self._directory.iterdir():
            match = _SEGMENT_NAME.match(path.name)
            if match:
                (log_bases if match.group(2) == "log" else index_bases).add(int(match.group(1)))
        for base in index_bases - log_bases:  # an index whose log is gone: stale
            (self._directory / f"{base:020d}{INDEX_SUFFIX}").unlink()
        bases = sorted(log_bases)
        if not bases:
            segment = self._new_segment(0)
            self._segments, self._bases = [segment], [0]
            return LogRecovery()
        truncated = dropped = 0
        rebuilt: list[int] = []
        reasons: list[str] = []
        try:
            for i, base in enumerate(bases):
                segment, rec = LogSegment.open(
                    self._directory, base, self._segment_settings, active=i == len(bases) - 1
                )
                self._segments.append(segment)
                self._bases.append(base)
                truncated += rec.truncated_bytes
                dropped += rec.dropped_index_entries
                if rec.index_rebuilt:
                    rebuilt.append(base)
                if rec.reason:
                    reasons.append(f"{base:020d}{LOG_SUFFIX}: {rec.reason}")
            for before, after in itertools.pairwise(self._segments):
                if before.next_offset != after.base_offset:
                    raise OSError(
                        f"{self._directory}: segment {before.log_path.name} ends at "
                        f"offset {before.next_offset} but the next one starts at "
                        f"{after.base_offset}"
                    )
        except BaseException:
            for segment in self._segments:
                segment.close()
            raise
        self._size_bytes = sum(s.size_bytes for s in self._segments)
        cut_at = self._segments[-1].next_offset if truncated else -1
        recovery = LogRecovery(truncated, cut_at, dropped, tuple(rebuilt), tuple(reasons))
        if truncated:
            log.warning(
                "partition log %s: recovery cut the log at offset %d, dropping %d bytes (%s)",
                self._directory,
                cut_at,
                truncated,
                "; ".join(reasons),
            )
        elif reasons:
            log.info("partition log %s: recovery repaired %s", self._directory, "; ".join(reasons))
        return recovery

    # ------------------------------------------------------------ state

    @property
    def directory(self) -> Path:
        return self._directory

    @property
    def log_start_offset(self) -> int:
        """The first offset in the log. O(1)."""
        return self._segments[0].base_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets. O(1): the log end's metadata, kept
        current by every append, roll and truncation."""
        return self._end_metadata.offset

    @property
    def log_end_metadata(self) -> LogOffsetMetadata:
        """The log end's place: its offset, the last segment, that segment's size.
        Current after every append, roll and truncation; O(1), reads nothing."""
        return self._end_metadata

    def _current_end(self) -> LogOffsetMetadata:
        last = self._segments[-1]
        return LogOffsetMetadata(last.next_offset, last.base_offset, last.size_bytes)

    def _remember_end(self, end: LogOffsetMetadata | None = None) -> None:
        """Set the log end's metadata (``end``, which an append knows, or read from the
        last segment) and remember it as a recent boundary. O(1)."""
        if end is None:
            end = self._current_end()
        self._end_metadata = end
        recent = self._recent
        recent[end.offset] = end
        if len(recent) > RECENT_BOUNDARIES:
            recent.popitem(last=False)

    @property
    def size_bytes(self) -> int:
        """Bytes in all segments. O(1)."""
        return self._size_bytes

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """The segments, oldest first (for inspection; do not mutate them)."""
        return tuple(self._segments)

    @property
    def recovery(self) -> LogRecovery:
        """What opening the directory repaired."""
        return self._recovery

    @property
    def flush_messages(self) -> int | None:
        """Kafka's ``flush.messages``: flush after this many offsets (None: never)."""
        return self._flush_messages

    @property
    def flush_ms(self) -> int | None:
        """Kafka's ``flush.ms``: flush this long after the first unflushed write."""
        return self._flush_ms

    @property
    def unflushed_messages(self) -> int:
        """Offsets appended since the last flush. O(1)."""
        return self.log_end_offset - self._flushed_offset

    @property
    def flush_due_ms(self) -> int | None:
        """When ``flush_ms`` makes a flush due (clock ms), or None: no time rule, or
        nothing unflushed. O(1)."""
        if self._dirty_since_ms is None or self._flush_ms is None:
            return None
        return self._dirty_since_ms + self._flush_ms

    @property
    def flush_count(self) -> int:
        """How many flushes synced something (``fsync`` rounds), ever. O(1)."""
        return self._flush_count

    @property
    def closed(self) -> bool:
        return self._closed

    def _require_open(self) -> None:
        if self._closed:
            raise ValueError(f"log {self._directory} is closed")

    # ------------------------------------------------------------ appending

    def append(
        self,
        batch: BytesLike,
        *,
        leader_epoch: int | None = None,
        assign_offsets: bool = True,
        check_crc: bool = True,
    ) -> tuple[int, int]:
        """Append one v2 batch; return its (base offset, last offset).

        With ``assign_offsets`` (a leader's append) the batch gets offsets from
        the log end on; without (a follower copying the leader's batches) its base
        offset must already equal the log end. The batch is validated first
        (:func:`~.records.check_batch`, raising ``CorruptRecordError``); a
        batch larger than ``segment_bytes`` raises
        :class:`RecordBatchTooLargeError`. The batch is in the segment file when
        this returns (written through, see :mod:`.segment`). O(len(batch)).
        """
        self._require_open()
        data = batch if type(batch) is bytes else bytes(batch)
        batch_base_offset, size, last_offset_delta = check_batch(data, check_crc)
        if size > self._segment_bytes:
            raise RecordBatchTooLargeError(
                f"batch of {size} bytes is larger than segment_bytes {self._segment_bytes}"
            )
        base_offset = self.log_end_offset
        if not assign_offsets and batch_base_offset != base_offset:
            raise ValueError(
                f"batch base offset {batch_base_offset} is not the log end offset {base_offset}"
            )
        last_offset = base_offset + last_offset_delta
        segment = self._segments[-1]
        if segment.should_roll(size, last_offset, self._segment_bytes):
            segment = self._roll(base_offset)
        if base_offset != batch_base_offset or leader_epoch is not None:
            data = with_base_offset(data, base_offset, leader_epoch)
        segment.append(data, last_offset)
        self._size_bytes += size
        # tuple.__new__: no Python frame (see the module doc of ..delayed)
        self._remember_end(
            tuple.__new__(
                LogOffsetMetadata, (last_offset + 1, segment.base_offset, segment.size_bytes)
            )
        )
        self._written()
        flush_messages = self._flush_messages
        if flush_messages is not None and last_offset + 1 - self._flushed_offset >= flush_messages:
            self.flush()
        return base_offset, last_offset

    def _written(self) -> None:
        """Note a write for the ``flush_ms`` rule (one clock read per dirtying write)."""
        if self._dirty_since_ms is None and self._flush_ms is not None:
            self._dirty_since_ms = self._clock.now_ms()

    def _roll(self, base_offset: int) -> LogSegment:
        """Start a segment at ``base_offset``; on failure (EMFILE) nothing changed."""
        segment = self._new_segment(base_offset)
        rolled = self._segments[-1]
        try:
            rolled.roll()
        except BaseException:
            segment.delete()
            raise
        if rolled.needs_sync:
            self._rolled_unflushed.append(rolled)
        self._segments.append(segment)
        self._bases.append(base_offset)
        self._remember_end()  # the log end's offset, now at position 0 of the new segment
        return segment

    def roll(self) -> None:
        """Start a new segment at the log end now (no-op if the last is empty). O(1)."""
        self._require_open()
        if not self._segments[-1].is_empty:
            self._roll(self.log_end_offset)

    # ------------------------------------------------------------ reading

    def _check_range(self, offset: int) -> None:
        if not self.log_start_offset <= offset <= self.log_end_offset:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, self.log_end_offset)

    def _segment_index_for(self, offset: int) -> int:
        return bisect.bisect_right(self._bases, offset) - 1

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> bytes:
        """Whole batches from the one containing ``offset``; see the module doc.

        ``max_offset`` (exclusive, default the log end) stops before the first
        batch whose last offset reaches it; ``max_bytes`` (>= 0) bounds the total
        except for the first batch. Raises :class:`OffsetOutOfRangeError` outside
        ``[log_start_offset, log_end_offset]``. O(bytes read) from a recent batch
        boundary (see :meth:`offset_metadata`), else O(log n + bytes read).
        """
        self._require_open()
        self._check_range(offset)
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, not {max_bytes}")
        end_offset = self.log_end_offset
        if max_offset is None or max_offset > end_offset:
            max_offset = end_offset
        if offset >= max_offset:
            return b""
        segments = self._segments
        start = self.offset_metadata(offset)
        i = self._segment_index_for(start.segment_base_offset)
        chunks: list[bytes] = []
        remaining = max_bytes
        position = start.position
        while True:
            data, stopped = segments[i].read(position, remaining, max_offset, not chunks)
            if data:
                chunks.append(data)
                remaining = max(0, remaining - len(data))
            i += 1
            if stopped or remaining == 0 or i >= len(segments):
                break
            position = 0
        return b"".join(chunks)

    def readable_bytes(self, offset: int, max_offset: int | None = None) -> int:
        """The bytes :meth:`read` would return for ``offset`` with no byte limit.

        For a DelayedFetch's ``min_bytes`` check: counts whole batches from the one
        containing ``offset`` up to the first whose last offset reaches
        ``max_offset`` (exclusive, default the log end). O(log n) per segment
        spanned: two index lookups and short walks, no data read.
        """
        self._require_open()
        self._check_range(offset)
        end_offset = self.log_end_offset
        if max_offset is None or max_offset > end_offset:
            max_offset = end_offset
        if offset >= max_offset:
            return 0
        start = self._position_of(offset)
        stop = self._position_of(max_offset)
        total = 0
        for i in range(start[0], stop[0] + 1):
            begin = start[1] if i == start[0] else 0
            end = stop[1] if i == stop[0] else self._segments[i].size_bytes
            total += end - begin
        return total

    def offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """``offset``'s place in the log (see the module doc); raises
        :class:`OffsetOutOfRangeError` outside ``[log_start_offset, log_end_offset]``.

        O(1) for the log end and the recent batch boundaries; otherwise an index
        lookup and a header walk (O(log n), reading about ``index_interval_bytes``).
        """
        self._require_open()
        known = self._recent.get(offset)
        if known is not None:
            return known
        self._check_range(offset)
        i, position = self._position_of(offset)
        return LogOffsetMetadata(offset, self._segments[i].base_offset, position)

    def _position_of(self, offset: int) -> tuple[int, int]:
        """(segment number, position) of the first batch whose last offset >= offset."""
        segments = self._segments
        i = self._segment_index_for(offset)
        while True:
            info = segments[i].translate_offset(offset)
            if info is not None:
                return i, info.position
            if i == len(segments) - 1:
                return i, segments[i].size_bytes
            i += 1

    # ------------------------------------------------------------ truncation

    def truncate_to(self, offset: int) -> None:
        """Remove every batch whose last offset is >= ``offset``.

        A batch straddling ``offset`` (base < offset <= last) is removed whole,
        so afterwards ``log_end_offset <= offset``. At or below the log start the
        log is emptied and restarts at ``offset``; at or past the log end nothing
        changes. O(dropped segments + log n).
        """
        self._require_open()
        if offset < 0:
            raise ValueError(f"offset must be >= 0, not {offset}")
        if offset >= self.log_end_offset:
            return
        self._written()
        try:
            self._truncate(offset)
        finally:  # forget the boundaries that are gone (all of them if all is gone)
            start, end = self.log_start_offset, self._segments[-1].next_offset
            self._recent = OrderedDict((o, m) for o, m in self._recent.items() if start <= o < end)
            self._remember_end()

    def _truncate(self, offset: int) -> None:
        segments = self._segments
        if offset <= self.log_start_offset:
            for segment in segments:
                segment.delete()
            segments.clear()
            self._bases.clear()
            self._rolled_unflushed.clear()
            segments.append(self._new_segment(offset))
            self._bases.append(offset)
            self._size_bytes = 0
            self._flushed_offset = offset
            return
        while segments[-1].base_offset >= offset:
            segment = segments.pop()
            self._bases.pop()
            self._size_bytes -= segment.size_bytes
            segment.delete()
        last = segments[-1]
        last.reactivate()
        self._size_bytes -= last.truncate_to(offset)
        unflushed = self._rolled_unflushed
        while unflushed and unflushed[-1].base_offset >= last.base_offset:
            unflushed.pop()  # deleted, or the active segment again
        self._flushed_offset = min(self._flushed_offset, last.next_offset)

    # ------------------------------------------------------------ lifecycle

    def flush(self) -> None:
        """``fsync`` every segment written since the last flush (see the module doc).

        O(segments written since the last flush + their dirty pages).
        """
        self._require_open()
        synced = False
        for segment in self._rolled_unflushed:
            segment.flush()
            synced = True
        self._rolled_unflushed.clear()
        active = self._segments[-1]
        if active.needs_sync:
            active.flush()
            synced = True
        self._flush_count += int(synced)
        self._flushed_offset = self.log_end_offset
        self._dirty_since_ms = None

    def maybe_flush(self, now_ms: int) -> bool:
        """Flush if the policy says so at clock time ``now_ms``; whether it flushed.

        Due when ``flush_messages`` offsets are unflushed or ``flush_due_ms`` has
        come. O(1) when not due, else as :meth:`flush`.
        """
        self._require_open()
        due_ms = self.flush_due_ms
        messages = self._flush_messages
        if (due_ms is not None and now_ms >= due_ms) or (
            messages is not None and self.unflushed_messages >= messages
        ):
            self.flush()
            return True
        return False

    def close(self) -> None:
        """Flush if a flush policy is set; trim every index, close the files.

        Idempotent; O(segments).
        """
        if self._closed:
            return
        try:
            if self._flush_messages is not None or self._flush_ms is not None:
                self.flush()
        finally:
            self._closed = True
            for segment in self._segments:
                segment.close()

    def __enter__(self) -> PartitionLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _check_invariants(self, *, deep: bool = True) -> None:
        """Check the segment chain, sizes and every segment. O(log size) if deep."""
        segments = self._segments
        assert segments, "a log has at least one segment"
        assert self._bases == [s.base_offset for s in segments], "stale base list"
        for before, after in itertools.pairwise(segments):
            assert before.next_offset == after.base_offset, "segments not contiguous"
            assert not before.is_empty, "an empty segment before the last"
            if not self._closed:
                assert before.index_is_full, "a rolled segment's index is not trimmed"
                assert not before.is_active, "a rolled segment holds its own descriptor"
        assert self._closed or segments[-1].is_active, "the last segment is not active"
        assert self._size_bytes == sum(s.size_bytes for s in segments), "size drifted"
        assert self._end_metadata == self._current_end(), "stale log end metadata"
        assert len(self._recent) <= RECENT_BOUNDARIES, "too many recent boundaries"
        for offset, known in self._recent.items():
            assert known.offset == offset, "recent boundary under the wrong offset"
            assert self.log_start_offset <= offset <= self.log_end_offset, "stale boundary"
            if deep and not self._closed:
                i, position = self._position_of(offset)
                assert (segments[i].base_offset, position) == (
                    known.segment_base_offset,
                    known.position,
                ) or (known.position == segments[i - 1].size_bytes and position == 0), (
                    f"recent boundary {known} is not where offset {offset} is"
                )
        assert self._flushed_offset <= self.log_end_offset, "flushed past the log end"
        assert all(s in segments[:-1] for s in self._rolled_unflushed), "stale unflushed list"
        if self._flush_ms is None:
            assert self._dirty_since_ms is None
        for segment in segments:
            segment._check_invariants(deep=deep)

    def __repr__(self) -> str:
        return (
            f"<PartitionLog {self._directory} offsets [{self.log_start_offset}, "
            f"{self.log_end_offset}) segments={len(self._segments)} "
            f"size_bytes={self._size_bytes}>"
        )
