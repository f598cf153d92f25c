"""One log segment: a file of record batches and its offset index.

A segment is named by its base offset, the offset of its first batch, as two
files: ``00000000000000000000.log`` (the batches, back to back, exactly as
received except for their base offset and leader epoch) and
``00000000000000000000.index`` (an :class:`~.offset_index.OffsetIndex`).

Write-through: each append hands its batch to the OS with one ``pwrite`` at
the segment's end before it returns, so once a produce is answered its batch is
in the file (the OS page cache): a broker *process* that dies, even by SIGKILL,
loses nothing it acknowledged. There is no in-process write buffer: an append is
one batch, so a buffer would only delay that one ``pwrite``, never merge two of
them, without holding back the acknowledgement. Reaching the disk is a separate
step, ``fsync``, which the log's flush policy decides (:mod:`.log`). If the
``pwrite`` fails (ENOSPC, EIO) the bytes it may have written are cut again and
the error goes to the caller: the segment is as it was.

The index gets an entry whenever more than ``index_interval_bytes`` of log were
written since the previous one; the entry maps the *last* offset of the batch
being appended to the batch's position, and is written after the batch, so an
entry never names bytes the file does not hold yet.

Finding offset ``t``: the index gives the largest entry ``(o, p)`` with
``o <= t`` (the batch at ``p`` ends at ``o``), then a forward walk over batch
headers from ``p`` stops at the first batch whose last offset is ``>= t``. The
walk covers about ``index_interval_bytes`` of log, read in one or two chunks.

Example, ``index_interval_bytes=100`` and batches of 70 bytes, one offset each::

    append offset 0 at position 0:    since=0    -> no entry; since=70
    append offset 1 at position 70:   since=70   -> no entry; since=140
    append offset 2 at position 140:  since=140  -> entry (2, 140); since=70
    append offset 3 at position 210:  since=70   -> no entry; since=140
    translate(3): index floor (2, 140); walk 140 (last 2), 210 (last 3) -> 210

Reading verifies what it serves (:meth:`LogSegment.read`): every batch about to
be returned is checked (magic, length, inside the file, base offset continuing
the previous batch's) and its CRC-32C computed, whatever segment it is in. Only
opening the active segment checks every batch (below); a rolled segment gets a
cheap check at open, and bytes can go bad after that, so the read path is where
damage in rolled segments is caught. The good batches before a bad one are
served; a read whose first batch is bad raises :class:`CorruptRecordError`
naming the file and position (the broker answers CORRUPT_MESSAGE). The base
offset and leader epoch lie outside the CRC, hence the continuity check. Cost:
one CRC-32C pass over the bytes served; see BENCHMARKS.md. The compiled build
reads each batch's header and computes its CRC-32C in C (``cbatch.pxd``: the
CPU's crc32 instruction on x86-64, else an 8-bytes-a-step table), with no
Python call, object or slice per batch; the pure build calls the ``crc32c``
package (through ``records.crc32c_span``, about 0.4 us per 600-byte batch, call
and slice included).

File descriptors: only the active (last) segment of a log keeps its log file
open for good. A rolled segment's log file is opened when it is read, and every
index's map when it is used; both are registered in an
:class:`~.open_files.OpenFiles`, a bounded LRU shared by the logs that use it
(the broker shares one among all its partitions), which closes the least
recently used when one too many is open. So an idle partition costs one
descriptor, and everything else together at most the set's capacity, however
many segments there are.

Recovery (:meth:`LogSegment.open`): the active (last) segment is scanned in full
and every batch checked (length, magic, CRC, offsets continuing from the one
before); the file is cut at the first bad or torn batch. Its index entries must
point at batch starts with matching last offsets: entries beyond the cut (the
index is a memory map and can outlive unwritten log data) are dropped, and any
other mismatch rebuilds the index from the log. Older segments get a cheaper
check (the index's own ordering check, every position inside the file, the last
entry naming a real batch, a clean walk from there to the end of the file) and
are rebuilt on failure; a torn or corrupt batch inside an older segment is an
error, not something to cut silently.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from .offset_index import CorruptIndexError, OffsetIndex
from .open_files import OpenFiles
from .records import (
    CRC_START,
    HEADER_BYTES,
    LOG_OVERHEAD_BYTES,
    MAGIC,
    CorruptRecordError,
)

try:
    import cython
except ImportError:  # the pure-Python build, with Cython not installed
    from .. import _cython_shim as cython

if not cython.compiled:  # the compiled build cimports them, in C (cbatch.pxd)
    from .records import batch_fields, crc32c_span

__all__ = [
    "INDEX_SUFFIX",
    "LOG_SUFFIX",
    "BatchInfo",
    "LogSegment",
    "SegmentRecovery",
    "SegmentSettings",
    "segment_file_name",
]

#: Called with (log path, position, size) before every read of log bytes, when set
#: (for tests and tools that count reads); None by default. A module attribute, not
#: one of :class:`LogSegment`'s: the compiled build's class cannot take new values.
#: Set it here, on this module (it is not in ``__all__``: a re-exported copy would
#: not be the one the reads call).
read_hook: Callable[[Path, int, int], None] | None = None

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
#: How much log a header walk reads per ``pread``.
SCAN_CHUNK_BYTES = 16 * 1024
#: How much log a recovery scan reads per ``pread``.
RECOVERY_CHUNK_BYTES = 1024 * 1024

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
_BASE_AND_LENGTH = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")


def _header_problem(chunk: bytes, rel: int, position: int, size: int, expected: int) -> str:
    """Why the batch header at ``chunk[rel:]`` (file ``position``) is bad, or ''.

    Checks that the header is whole, the magic, the length and last offset delta,
    that the batch ends within ``size``, and (unless ``expected`` is -1) that its
    base offset is ``expected``. O(1).
    """
    if rel + HEADER_BYTES > len(chunk):
        return f"torn batch header at position {position}"
    base_offset, batch_length = _BASE_AND_LENGTH.unpack_from(chunk, rel)
    (delta,) = _INT32.unpack_from(chunk, rel + 23)
    batch_bytes = batch_length + LOG_OVERHEAD_BYTES
    if chunk[rel + 16] != MAGIC:
        return f"bad magic at position {position}"
    if batch_bytes < HEADER_BYTES or delta < 0:
        return f"bad batch length at position {position}"
    if position + batch_bytes > size:
        return f"torn batch at position {position}"
    if expected >= 0 and base_offset != expected:
        return f"batch at position {position} has base offset {base_offset}, expected {expected}"
    return ""


def _crc_problem(chunk: bytes, rel: int, batch_bytes: int, position: int) -> str:
    """'' if the CRC-32C of the whole batch at ``chunk[rel:]`` matches its header.

    O(batch_bytes); the batch must be in ``chunk``.
    """
    (crc,) = _UINT32.unpack_from(chunk, rel + 17)
    if crc32c_span(chunk, rel + CRC_START, rel + batch_bytes) == crc:
        return ""
    return f"CRC mismatch at position {position}"


def segment_file_name(base_offset: int, suffix: str) -> str:
    """``00000000000000000042.log`` for base offset 42 and suffix ``.log``."""
    return f"{base_offset:020d}{suffix}"


class SegmentSettings(NamedTuple):
    """How the segments of a log keep their files (the same for all of them)."""

    index_interval_bytes: int  # bytes of log between two index entries, at least
    max_index_size_bytes: int  # an active index's mapped size
    files: OpenFiles  # where rolled logs and index maps are registered (an LRU)


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """Where a batch sits in a segment and the offsets it covers."""

    position: int
    base_offset: int
    last_offset: int
    size_bytes: int


@dataclass(frozen=True, slots=True)
class SegmentRecovery:
    """What opening a segment repaired."""

    truncated_bytes: int = 0  # bytes cut from the end of the log (torn or bad batches)
    dropped_index_entries: int = 0  # index entries beyond the log's end, removed
    index_rebuilt: bool = False  # the index failed its check and was rebuilt
    reason: str = ""  # why bytes were cut or the index rebuilt, for logs and tests


class LogSegment:
    """A segment's log file and index.

    ``append`` is O(len(batch)), one ``pwrite``; ``translate_offset`` is an
    O(log n) index lookup plus a walk over about ``index_interval_bytes`` of
    headers; ``read`` is O(bytes read).
    """

    __slots__ = (
        "_active",
        "_base_offset",
        "_bytes_since_index_entry",
        "_closed",
        "_fd",
        "_files",
        "_index",
        "_index_interval_bytes",
        "_log_path",
        "_max_index_size_bytes",
        "_needs_sync",
        "_next_offset",
        "_size_bytes",
    )

    def __init__(
        self, directory: Path, base_offset: int, settings: SegmentSettings, *, active: bool
    ) -> None:
        """Open the files as they are (the index is created if missing); use
        :meth:`create` or :meth:`open`. Raises :class:`CorruptIndexError` for an index
        that fails its check at open, and OSError, with nothing left open."""
        self._base_offset = base_offset
        self._log_path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        self._index_interval_bytes = settings.index_interval_bytes
        self._max_index_size_bytes = settings.max_index_size_bytes
        self._files = settings.files
        self._index = OffsetIndex(
            self.index_path, base_offset, self._max_index_size_bytes, open_files=self._files
        )
        self._closed = False
        self._active = active  # takes appends
        # invariant: -1 when closed; while active, a read-write descriptor of the
        # log, held for good; while rolled, -1 or a descriptor registered in _files
        # (which may close it)
        self._fd = -1
        try:
            if active:
                self._fd = os.open(self._log_path, os.O_RDWR | os.O_CREAT, 0o644)
                size_bytes = os.fstat(self._fd).st_size
            else:
                size_bytes = os.stat(self._log_path).st_size
        except BaseException:
            if self._fd >= 0:
                os.close(self._fd)
            self._index.close(trim=False)
            raise
        # invariant: the file holds exactly _size_bytes bytes (every append is
        # written through before it returns)
        self._size_bytes = size_bytes
        # invariant: one past the last offset of the last batch; base_offset if empty
        self._next_offset = base_offset
        # invariant: bytes appended since the batch of the last index entry started
        # (including that batch), or since position 0 when there is no entry
        self._bytes_since_index_entry = 0
        self._needs_sync = False  # written since the last fsync

    # ------------------------------------------------------------ construction

    @property
    def index_path(self) -> Path:
        return self._log_path.with_suffix(INDEX_SUFFIX)

    @classmethod
    def create(cls, directory: Path, base_offset: int, settings: SegmentSettings) -> LogSegment:
        """A new, empty, active segment (any files of that name are emptied)."""
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX):
            (directory / segment_file_name(base_offset, suffix)).unlink(missing_ok=True)
        return cls(directory, base_offset, settings, active=True)

    @classmethod
    def open(
        cls, directory: Path, base_offset: int, settings: SegmentSettings, *, active: bool
    ) -> tuple[LogSegment, SegmentRecovery]:
        """Open an existing segment, check it and repair what a crash can leave.

        ``active`` marks the last segment: it is scanned in full (O(size)) and a
        torn tail is cut. Older segments are checked cheaply and left read-only
        (index trimmed). An index that is missing, or fails its check at open, is
        rebuilt from the log. Raises :class:`CorruptRecordError` for damage inside
        an older segment.
        """
        index_path = directory / segment_file_name(base_offset, INDEX_SUFFIX)
        reason = "" if index_path.exists() else f"{index_path.name} is missing"
        try:
            segment = cls(directory, base_offset, settings, active=active)
        except CorruptIndexError as exc:  # rebuilt: from an empty index
            reason = str(exc)
            index_path.unlink()
            segment = cls(directory, base_offset, settings, active=active)
        try:
            if active:
                recovery = segment._recover_active(reason)
            else:
                recovery = segment._recover_rolled(reason)
                segment._index.trim_to_valid_size()
                segment.close_files()  # idle until read: reopened then
                segment._index.close_files()
        except BaseException:
            segment.close()
            raise
        return segment, recovery

    # ------------------------------------------------------------ state

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def next_offset(self) -> int:
        """One past the last offset in the segment (the base offset when empty)."""
        return self._next_offset

    @property
    def size_bytes(self) -> int:
        """Bytes in the segment (all of them in the file). O(1)."""
        return self._size_bytes

    @property
    def index(self) -> OffsetIndex:
        return self._index

    @property
    def log_path(self) -> Path:
        return self._log_path

    @property
    def is_active(self) -> bool:
        """Whether the segment takes appends (and holds its descriptor for good). O(1)."""
        return self._active

    @property
    def is_empty(self) -> bool:
        return self.size_bytes == 0

    # ------------------------------------------------------------ I/O helpers

    def _write_at(self, data: bytes, position: int) -> None:
        """``pwrite`` all of ``data`` at ``position``; on failure cut what was written.

        One system call in practice (a regular file takes the whole buffer).
        O(len(data)).
        """
        fd = self._fd
        done = os.pwrite(fd, data, position)
        if done == len(data):
            return
        try:
            view = memoryview(data)
            while done < len(view):
                done += os.pwrite(fd, view[done:], position + done)
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, position)
            raise

    def _read_fd(self) -> int:
        """A descriptor to read (or fsync) the log through, opened if a rolled
        segment's was closed. O(1)."""
        fd = self._fd
        if fd < 0:
            if self._closed:
                raise ValueError(f"segment {self._log_path} is closed")
            fd = self._fd = os.open(self._log_path, os.O_RDONLY)
        if not self._active:
            self._files.touch(self)
        return fd

    def close_files(self) -> None:
        """Close a rolled segment's log descriptor (reopened on the next read). O(1)."""
        if not self._active and self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            self._files.forget(self)

    def _pread(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``position`` (fewer only at the segment's end). O(size).

        Every read of log bytes passes here, and through :data:`read_hook` if set.
        """
        hook = read_hook
        if hook is not None:
            hook(self._log_path, position, size)
        end = min(position + size, self._size_bytes)
        chunks = []
        pos = position
        while pos < end:
            chunk = os.pread(self._read_fd(), end - pos, pos)
            if not chunk:
                raise OSError(
                    f"{self._log_path} is shorter than the {self._size_bytes} bytes written"
                )
            chunks.append(chunk)
            pos += len(chunk)
        if len(chunks) == 1:
            return chunks[0]
        return b"".join(chunks)

    def walk(self, position: int = 0, end: int | None = None) -> Iterator[BatchInfo]:
        """The headers of the batches from ``position`` to ``end`` (default: the end).

        Reads headers only, in chunks of :data:`SCAN_CHUNK_BYTES`; no CRC check.
        Raises :class:`CorruptRecordError` on a header that does not fit.
        O(batches walked).
        """
        if end is None:
            end = self.size_bytes
        chunk = b""
        chunk_start = position
        while position < end:
            rel = position - chunk_start
            if rel + HEADER_BYTES > len(chunk):
                chunk = self._pread(position, min(SCAN_CHUNK_BYTES, end - position))
                chunk_start = position
                rel = 0
                if len(chunk) < HEADER_BYTES:
                    raise CorruptRecordError(
                        f"{self._log_path}: truncated batch header at position {position}"
                    )
            base_offset, batch_length = _BASE_AND_LENGTH.unpack_from(chunk, rel)
            (delta,) = _INT32.unpack_from(chunk, rel + 23)
            size = batch_length + LOG_OVERHEAD_BYTES
            if chunk[rel + 16] != MAGIC or size < HEADER_BYTES or delta < 0:
                raise CorruptRecordError(
                    f"{self._log_path}: bad batch header at position {position}"
                )
            if position + size > end:
                raise CorruptRecordError(
                    f"{self._log_path}: batch at position {position} runs past {end}"
                )
            yield BatchInfo(position, base_offset, base_offset + delta, size)
            position += size

    # ------------------------------------------------------------ appending

    def append(self, batch: bytes, last_offset: int) -> None:
        """Append a batch whose offsets are already final; it is in the file on return.

        One ``pwrite`` (see the module doc), then the index entry if one is due.
        The caller (the log) rolls before the segment or its index fills up, and
        passes batches whose base offset is :attr:`next_offset`. O(len(batch)).
        """
        if not self._active or self._closed:
            raise ValueError(f"segment {self._log_path} is closed or rolled")
        position = self._size_bytes
        self._write_at(batch, position)
        self._size_bytes = position + len(batch)
        self._needs_sync = True
        self._next_offset = last_offset + 1
        since = self._bytes_since_index_entry
        if since > self._index_interval_bytes:
            try:
                self._index.append(last_offset, position)
                since = 0
            except OSError:
                # the index map could not be made again (EMFILE): the batch is in,
                # this entry is left out (the index is sparse; lookups walk further)
                # and the next append tries again
                pass
        self._bytes_since_index_entry = since + len(batch)

    # ------------------------------------------------------------ reading

    def translate_offset(self, offset: int) -> BatchInfo | None:
        """The first batch whose last offset is >= ``offset``, or None.

        O(log entries) for the index, then a walk of about
        ``index_interval_bytes`` of headers.
        """
        if offset >= self._next_offset:
            return None
        _, position = self._index.lookup(offset)
        for info in self.walk(position):
            if info.last_offset >= offset:
                return info
        return None  # pragma: no cover - offset < next_offset guarantees a batch

    def read(
        self, position: int, max_bytes: int, max_offset: int, include_first: bool
    ) -> tuple[bytes, bool]:
        """Whole, verified batches from ``position`` (a batch start) while they fit.

        Stops before a batch whose last offset is >= ``max_offset`` or that would
        take the result past ``max_bytes``; with ``include_first`` the first batch
        is returned whole even if larger than ``max_bytes``. Returns the bytes and
        whether a limit stopped the read (False: the segment's end did).

        Nothing damaged is served: every batch returned passed the header checks
        (magic, length, inside the file, base offset continuing the previous one)
        and its CRC-32C. A bad batch ends the read before it; if it is the first,
        :class:`CorruptRecordError` names the file and position. O(bytes read),
        with one ``pread`` in the common case.
        """
        size = self._size_bytes
        data = self._pread(position, min(size - position, max(max_bytes, HEADER_BYTES)))
        # the limits as 64-bit integers (no log reaches the cap), so the loop runs in C
        limit = min(max_bytes, _INT64_MAX)
        stop = min(max(max_offset, 0), _INT64_MAX)
        header_bytes, overhead = HEADER_BYTES, LOG_OVERHEAD_BYTES
        magic_v2, crc_start = MAGIC, CRC_START
        p = 0
        expected = -1  # the base offset the next batch must have; -1 before the first
        while position + p < size:
            if p + header_bytes > len(data):
                if p:
                    return data[:p], True  # the next batch cannot fit in max_bytes
                problem = _header_problem(data, p, position, size, expected)
                raise CorruptRecordError(f"{self._log_path}: {problem}")
            base_offset, batch_length, magic, crc, delta, _ = batch_fields(data, p)
            batch_bytes = batch_length + overhead
            end = p + batch_bytes
            if (
                magic != magic_v2
                or batch_bytes < header_bytes
                or delta < 0
                or position + end > size
                or (expected >= 0 and base_offset != expected)
            ):
                problem = _header_problem(data, p, position + p, size, expected)
            else:
                if base_offset >= stop - delta:  # its last offset reaches max_offset
                    return data[:p], True
                if end > limit:
                    if p or not include_first:
                        return data[:p], True
                    data = self._pread(position, batch_bytes)  # the first, whole
                if crc32c_span(data, p + crc_start, end) == crc:
                    p = end
                    expected = base_offset + delta + 1
                    if p > limit:
                        return data, True  # the oversized first batch
                    continue
                problem = f"CRC mismatch at position {position + p}"
            if p:
                return data[:p], True  # serve the good batches before it
            raise CorruptRecordError(f"{self._log_path}: {problem}")
        return data[:p], False

    # ------------------------------------------------------------ truncation

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= ``offset``; return bytes dropped.

        The segment must be active (:meth:`reactivate` a rolled one first). A batch
        that straddles ``offset`` (base < offset <= last) is dropped
        whole, since a batch cannot be split without breaking its CRC: after
        this, :attr:`next_offset` <= ``offset``. O(log n + dropped index entries).
        """
        if not self._active:
            raise ValueError(f"segment {self._log_path} is rolled; reactivate it first")
        info = self.translate_offset(offset)
        if info is None:
            return 0
        dropped = self._size_bytes - info.position
        os.ftruncate(self._fd, info.position)
        self._size_bytes = info.position
        self._needs_sync = True
        self._index.truncate_to(offset)
        self._next_offset = info.base_offset
        self._reset_bytes_since_index_entry()
        return dropped

    def _reset_bytes_since_index_entry(self) -> None:
        index = self._index
        last_position = index.entry(index.entries - 1).position if index.entries else 0
        self._bytes_since_index_entry = self.size_bytes - last_position

    # ------------------------------------------------------------ rolling

    def roll(self) -> None:
        """Make the segment read-only: trim the index; the log's descriptor is now
        one of the shared set's (which may close it). O(1)."""
        self._index.trim_to_valid_size()
        self._active = False
        if self._fd >= 0:
            self._files.touch(self)

    def reactivate(self) -> None:
        """Make a rolled segment appendable again (after a log truncation). O(1)."""
        if not self._active:
            self.close_files()
            self._fd = os.open(self._log_path, os.O_RDWR)
            self._active = True
        self._index.resize(self._max_index_size_bytes)

    @property
    def index_is_full(self) -> bool:
        return self._index.is_full

    def should_roll(self, size_bytes: int, last_offset: int, segment_bytes: int) -> bool:
        """Whether a batch of ``size_bytes`` ending at ``last_offset`` must start a new
        segment (Kafka's ``shouldRoll``): this one holds something, and the batch would
        take it past ``segment_bytes``, or its index is full, or ``last_offset`` would
        not fit 4 bytes relative to its base offset. One call per append. O(1).
        """
        size = self._size_bytes
        return size != 0 and (
            size + size_bytes > segment_bytes
            or self._index.is_full
            or last_offset - self._base_offset > _INT32_MAX
        )

    # ------------------------------------------------------------ recovery

    def _scan_valid(self) -> tuple[list[BatchInfo], int, str]:
        """Validate every batch from position 0; stop at the first bad one.

        Returns the valid batches, the end of the last valid one and why the scan
        stopped early ("" if it reached the end). O(size).
        """
        size = self._size_bytes
        batches: list[BatchInfo] = []
        expected = self._base_offset
        position = 0
        chunk = b""
        chunk_start = 0
        while position < size:
            rel = position - chunk_start
            if rel + HEADER_BYTES > len(chunk):
                chunk = self._pread(position, min(RECOVERY_CHUNK_BYTES, size - position))
                chunk_start, rel = position, 0
            problem = _header_problem(chunk, rel, position, size, expected)
            if problem:
                return batches, position, problem
            base_offset, batch_length = _BASE_AND_LENGTH.unpack_from(chunk, rel)
            (delta,) = _INT32.unpack_from(chunk, rel + 23)
            batch_bytes = batch_length + LOG_OVERHEAD_BYTES
            if rel + batch_bytes > len(chunk):
                want = max(batch_bytes, min(RECOVERY_CHUNK_BYTES, size - position))
                chunk = self._pread(position, want)
                chunk_start, rel = position, 0
            problem = _crc_problem(chunk, rel, batch_bytes, position)
            if problem:
                return batches, position, problem
            batches.append(BatchInfo(position, base_offset, base_offset + delta, batch_bytes))
            expected = base_offset + delta + 1
            position += batch_bytes
        return batches, position, ""

    def _rebuild_index(self, batches: list[BatchInfo]) -> None:
        """Recreate the index entries from the batches by the append rule. O(n)."""
        index = self._index
        index.truncate()
        since = 0
        interval = self._index_interval_bytes
        for info in batches:
            if since > interval and not index.is_full:
                index.append(info.last_offset, info.position)
                since = 0
            since += info.size_bytes

    def _recover_active(self, index_reason: str) -> SegmentRecovery:
        batches, valid_end, cut_reason = self._scan_valid()
        truncated = self._size_bytes - valid_end
        if truncated:
            os.ftruncate(self._fd, valid_end)
            self._size_bytes = valid_end
            self._needs_sync = True
        last_by_position = {info.position: info.last_offset for info in batches}
        index = self._index
        rebuild = bool(index_reason)
        keep = 0
        if not rebuild:
            for offset, position in index.iter_entries():
                if position >= valid_end:
                    break
                if last_by_position.get(position) != offset:
                    index_reason = f"index entry ({offset}, {position}) names no batch ending there"
                    rebuild = True
                    break
                keep += 1
        dropped = 0
        if rebuild:
            self._rebuild_index(batches)
        else:
            dropped = index.entries - keep
            index.truncate_to_entries(keep)
        self._next_offset = batches[-1].last_offset + 1 if batches else self._base_offset
        self._reset_bytes_since_index_entry()
        reasons = [r for r in (cut_reason, index_reason) if r]
        return SegmentRecovery(truncated, dropped, rebuild, "; ".join(reasons))

    def _recover_rolled(self, index_reason: str) -> SegmentRecovery:
        size = self._size_bytes
        if not index_reason:
            index_reason = self._check_rolled_index(size)
        if index_reason:
            batches, _, cut_reason = self._scan_valid()
            if cut_reason:
                raise CorruptRecordError(
                    f"{self._log_path} is not the last segment but is damaged: {cut_reason}"
                )
            self._rebuild_index(batches)
            self._next_offset = batches[-1].last_offset + 1 if batches else self._base_offset
        self._reset_bytes_since_index_entry()
        return SegmentRecovery(0, 0, bool(index_reason), index_reason)

    def _check_rolled_index(self, size: int) -> str:
        """Cheap check of a rolled segment; sets next_offset. '' if it passes."""
        index = self._index
        last_position = -1
        for _, position in index.iter_entries():
            last_position = position
        if last_position >= size:
            return f"index entry at position {last_position} is past the log's end {size}"
        start = max(0, last_position)
        try:
            infos = self.walk(start)
            first = next(infos, None)
            if index.entries and (first is None or first.last_offset != index.last_offset):
                return f"last index entry names no batch ending at {index.last_offset}"
            last = first
            for last in infos:  # noqa: B007 - walk to the end to find the last batch
                pass
        except CorruptRecordError as exc:
            return str(exc)
        self._next_offset = last.last_offset + 1 if last is not None else self._base_offset
        return ""

    # ------------------------------------------------------------ lifecycle

    @property
    def needs_sync(self) -> bool:
        """Written or truncated since the last :meth:`flush`. O(1)."""
        return self._needs_sync

    def flush(self) -> None:
        """``fsync`` the log and ``msync`` the index if written since the last flush.

        Appends are already in the file; this is what puts them on the disk.
        O(dirty pages).
        """
        if self._needs_sync:
            os.fsync(self._read_fd())
            self._index.flush()
            self._needs_sync = False

    def close(self) -> None:
        """Close the log and the trimmed index (no fsync). Idempotent; O(1)."""
        self._closed = True
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._files.forget(self)
        self._index.close()

    def delete(self) -> None:
        """Close and remove both files. O(1)."""
        self.close()
        self._log_path.unlink(missing_ok=True)
        self.index_path.unlink(missing_ok=True)

    def _check_invariants(self, *, deep: bool = True) -> None:
        """Check sizes, offsets and index against the file. O(size) when ``deep``."""
        self._index._check_invariants()
        if self._closed:
            assert self._fd < 0 and self not in self._files, "closed segment holds its file"
            return
        assert os.stat(self._log_path).st_size == self._size_bytes, "file size drifted"
        if self._active:
            assert self._fd >= 0 and self not in self._files, "active log not held for good"
        else:
            assert (self._fd >= 0) == (self in self._files), "rolled log descriptor untracked"
        assert self._index.entries == 0 or self._index.last_offset < self._next_offset
        if not deep:
            return
        infos = list(self.walk())
        expected = self._base_offset
        for info in infos:
            assert info.base_offset == expected, f"offset gap at position {info.position}"
            expected = info.last_offset + 1
        assert expected == self._next_offset, "next_offset disagrees with the batches"
        assert sum(i.size_bytes for i in infos) == self.size_bytes, "batches do not fill"
        last_by_position = {i.position: i.last_offset for i in infos}
        for offset, position in self._index.iter_entries():
            assert last_by_position.get(position) == offset, (
                f"index entry ({offset}, {position}) names no batch ending there"
            )
        last_position = (
            self._index.entry(self._index.entries - 1).position if (self._index.entries) else 0
        )
        assert self._bytes_since_index_entry == self.size_bytes - last_position

    def __repr__(self) -> str:
        return (
            f"<LogSegment {self._log_path.name} offsets [{self._base_offset}, "
            f"{self._next_offset}) size_bytes={self.size_bytes} "
            f"index_entries={self._index.entries}>"
        )
