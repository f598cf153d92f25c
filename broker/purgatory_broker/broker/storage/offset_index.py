"""Kafka's offset index: a sparse, memory-mapped map from offsets to file positions.

Each log segment has one. An entry is 8 bytes, big-endian: the offset relative to
the segment's base offset (i32) and the byte position of a batch in the segment's
log file (i32). Entries are appended in increasing order of both, about one per
``index_interval_bytes`` of log, so the index is small and a lookup is a binary
search followed by a short forward scan of the log.

The file is preallocated to ``max_index_size_bytes`` (rounded down to a multiple
of 8) and memory-mapped; :meth:`OffsetIndex.close` trims it to ``entries * 8``
bytes. Descriptors: the file is opened only to size and map it, then closed;
but CPython's map keeps a ``dup`` of the descriptor while it lives (until
Python 3.13's ``trackfd=False``), so a map *is* an open file. Given an
:class:`~.open_files.OpenFiles`, the index registers its map there on every
use, and when that set evicts it the map is closed and made again on the next
use (open, map, close: the file's pages stay in the OS page cache meanwhile, and
:meth:`OffsetIndex.flush` of an unmapped index calls ``fsync`` on the file). Without one
the map stays for the index's life. Opening a file finds its entries:

* a trimmed file (shorter than the maximum) holds exactly ``size / 8`` entries;
  they must increase strictly, else :class:`CorruptIndexError`;
* a file at (or above) the maximum size was not trimmed: the process stopped
  without closing it. Its entries are the prefix that increases strictly, ending
  at the first all-zero slot after slot 0 (a real entry after slot 0 has a
  relative offset of at least 1, so it is never all zero). Truncation zeroes the
  slots it drops, so stale entries cannot reappear. A lone ``(0, 0)`` in slot 0
  of an untrimmed file reads as empty, which answers every lookup the same way.

Lookup: the warm section
------------------------
Readers mostly ask for the newest offsets (consumers and followers at the tail).
A plain binary search over all ``n`` entries first reads entries ``n/2``,
``3n/4``, ``7n/8``, ...: pages spread over the whole file, and when the index
grows by one 4 KiB page (512 entries) those probes move to other pages, which the
OS page cache has often evicted, so a tail read blocks on a page fault. Kafka's
remedy: treat the last 8192 bytes (1024 entries) as the *warm section*::

    first_hot = max(0, n - 1 - 1024)
    if entry[first_hot] < target:  search [first_hot, n - 1]   (warm: <= 3 pages)
    elif entry[0] > target:        not found (below the first entry)
    else:                          search [0, first_hot]

The binary search takes the upper midpoint ``(lo + hi + 1) // 2`` so that
``lo = mid`` always makes progress when looking for the largest entry <= target.
One deliberate difference from Kafka: the search also checks its first slot for
an exact match (Kafka's misses it when the range starts at slot 0 and the loop
never compares it, so its smallest-upper-bound of exactly ``entry[0]`` answers
``entry[1]``, or nothing for a one-entry index). That slot is always read
anyway, so the pages a lookup touches are the same.

Worked example, base offset 100, entries (relative offset, position)
``(5, 0) (9, 4100) (20, 8300)``, so absolute offsets 105, 109, 120::

    lookup(110)        -> (109, 4100)   largest entry <= 110
    lookup(104)        -> (100, 0)      below the first entry: the segment start
    lookup_upper(110)  -> (120, 8300)   smallest entry >= 110
    lookup_upper(121)  -> None
    truncate_to(109)   -> entries (5, 0); slots 1 and 2 zeroed

Page accounting: set :attr:`OffsetIndex.page_hook` to a callable and every entry a
lookup reads reports its 4 KiB page number (``slot * 8 // 4096``) to it. With the
hook unset the lookup takes a path without the call.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from .open_files import OpenFiles

__all__ = [
    "DEFAULT_MAX_INDEX_SIZE_BYTES",
    "ENTRY_BYTES",
    "PAGE_BYTES",
    "WARM_SECTION_BYTES",
    "CorruptIndexError",
    "IndexFullError",
    "InvalidOffsetError",
    "OffsetIndex",
    "OffsetIndexError",
    "OffsetPosition",
]

#: Size of one entry: i32 relative offset + i32 position.
ENTRY_BYTES = 8
#: Kafka's default ``segment.index.bytes``.
DEFAULT_MAX_INDEX_SIZE_BYTES = 10 * 1024 * 1024
#: The tail of the index searched first (Kafka: 8192 bytes, fits one or two pages).
WARM_SECTION_BYTES = 8192
#: Entries in the warm section.
WARM_ENTRIES = WARM_SECTION_BYTES // ENTRY_BYTES
#: The page size the page hook counts in.
PAGE_BYTES = 4096

_INT32_MAX = 2**31 - 1
_ENTRY = struct.Struct(">ii")
_REL = struct.Struct(">i")
_ZERO_SLOT = bytes(ENTRY_BYTES)


class OffsetIndexError(Exception):
    """Base class of the offset index's errors."""


class IndexFullError(OffsetIndexError):
    """An append to an index that has no free slot (the segment must roll)."""


class InvalidOffsetError(OffsetIndexError, ValueError):
    """An offset not above the last entry, or not representable relative to the base."""


class CorruptIndexError(OffsetIndexError):
    """An index file that fails its sanity check on open (rebuild it from the log)."""


class OffsetPosition(NamedTuple):
    """An absolute offset and the byte position of its batch in the segment."""

    offset: int
    position: int


class OffsetIndex:
    """The offset index of one segment: append, lookup, truncate, close.

    ``append``, ``entry`` and ``is_full`` are O(1); ``lookup`` and
    ``lookup_upper`` are O(log n) entry reads; ``truncate_to`` is O(log n) plus
    the zeroing of the dropped slots; opening an untrimmed file is O(n).
    """

    __slots__ = (
        "_base_offset",
        "_closed",
        "_entries",
        "_last_offset",
        "_last_position",
        "_max_entries",
        "_mmap",
        "_open_files",
        "_page_hook",
        "_path",
    )

    def __init__(
        self,
        path: str | os.PathLike[str],
        base_offset: int,
        max_index_size_bytes: int = DEFAULT_MAX_INDEX_SIZE_BYTES,
        *,
        open_files: OpenFiles | None = None,
    ) -> None:
        if type(base_offset) is not int or base_offset < 0:
            raise ValueError(f"base_offset must be a non-negative int, not {base_offset!r}")
        max_size_bytes = _round_size(max_index_size_bytes)
        self._path = Path(path)
        self._base_offset = base_offset
        self._page_hook: Callable[[int], object] | None = None
        self._closed = False
        self._open_files = open_files
        # invariant: None when closed, when _max_entries == 0, or when unmapped to
        # save its descriptor (only while in no open_files set); else a shared map of
        # exactly _max_entries * ENTRY_BYTES bytes of the file, in open_files if given
        self._mmap: mmap.mmap | None = None
        # invariant: 0 <= _entries <= _max_entries; slots [0, _entries) hold
        # strictly increasing relative offsets (>= 0) and positions (>= 0); every
        # byte of slots [_entries, _max_entries) is zero
        self._max_entries = 0
        self._entries = 0
        # invariant: the offset and position of slot _entries - 1, or
        # (base_offset, -1) when empty
        self._last_offset = base_offset
        self._last_position = -1
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self._open(fd, max_size_bytes)
        except BaseException:
            self.close(trim=False)
            raise
        finally:
            os.close(fd)  # the map does not need it

    # ----------------------------------------------------------------- opening

    def _open(self, fd: int, max_size_bytes: int) -> None:
        length = os.fstat(fd).st_size
        if length % ENTRY_BYTES:
            raise CorruptIndexError(
                f"{self._path}: size {length} is not a multiple of {ENTRY_BYTES}"
            )
        if length == 0:
            entries = 0
        else:
            with mmap.mmap(fd, length, access=mmap.ACCESS_WRITE) as view:
                if length < max_size_bytes:
                    entries = length // ENTRY_BYTES
                    bad = _first_non_increasing(view, entries)
                    if bad < entries:
                        raise CorruptIndexError(
                            f"{self._path}: entry {bad} of {entries} does not increase "
                            "(or is negative)"
                        )
                else:
                    entries = _find_untrimmed_end(view, length // ENTRY_BYTES)
                    _zero_garbage(view, entries * ENTRY_BYTES)
        mapped_bytes = max(max_size_bytes, entries * ENTRY_BYTES)
        self._map(mapped_bytes, fd)
        self._entries = entries
        self._refresh_last()

    def _map(self, size_bytes: int, fd: int = -1) -> None:
        """(Re)map the file at ``size_bytes``, resizing it first, through ``fd`` or a
        descriptor opened (and closed) for the purpose."""
        self.close_files()
        own = fd < 0
        if own:
            fd = os.open(self._path, os.O_RDWR)
        try:
            os.ftruncate(fd, size_bytes)
            # the file has the new size: a failed map below is made again lazily
            self._max_entries = size_bytes // ENTRY_BYTES
            if size_bytes:
                self._mmap = mmap.mmap(fd, size_bytes, access=mmap.ACCESS_WRITE)
                if self._open_files is not None:
                    self._open_files.touch(self)
        finally:
            if own:
                os.close(fd)

    def _view(self) -> mmap.mmap:
        """The map, made again if it was closed to save its descriptor. O(1).

        Do not hold it across anything that may map another index of the same
        :class:`~.open_files.OpenFiles` (this one may be closed then).
        """
        view = self._mmap
        if view is None:
            self._require_open()
            assert self._max_entries, "an index without slots has no map"
            fd = os.open(self._path, os.O_RDWR)
            try:
                view = self._mmap = mmap.mmap(
                    fd, self._max_entries * ENTRY_BYTES, access=mmap.ACCESS_WRITE
                )
            finally:
                os.close(fd)
        if self._open_files is not None:
            self._open_files.touch(self)
        return view

    def close_files(self) -> None:
        """Close the map (and the descriptor it holds); the next use maps again. O(1)."""
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None
            if self._open_files is not None:
                self._open_files.forget(self)

    @property
    def is_mapped(self) -> bool:
        """Whether the map (and its descriptor) is open now. O(1)."""
        return self._mmap is not None

    def _refresh_last(self) -> None:
        if self._entries == 0:
            self._last_offset, self._last_position = self._base_offset, -1
        else:
            self._last_offset, self._last_position = self.entry(self._entries - 1)

    # ----------------------------------------------------------------- state

    @property
    def path(self) -> Path:
        return self._path

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def entries(self) -> int:
        """The number of entries. O(1)."""
        return self._entries

    @property
    def max_entries(self) -> int:
        """The number of slots the file has room for. O(1)."""
        return self._max_entries

    @property
    def is_full(self) -> bool:
        """True when no slot is left. O(1)."""
        return self._entries >= self._max_entries

    @property
    def last_offset(self) -> int:
        """The last entry's offset, or the base offset when empty. O(1)."""
        return self._last_offset

    @property
    def size_bytes(self) -> int:
        """``entries * 8``: the file's size once trimmed. O(1)."""
        return self._entries * ENTRY_BYTES

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def page_hook(self) -> Callable[[int], object] | None:
        """Called with the 4 KiB page number of every entry a lookup reads, or None."""
        return self._page_hook

    @page_hook.setter
    def page_hook(self, hook: Callable[[int], object] | None) -> None:
        self._page_hook = hook

    def _require_open(self) -> None:
        if self._closed:
            raise ValueError(f"offset index {self._path} is closed")

    # ----------------------------------------------------------------- reading

    def entry(self, n: int) -> OffsetPosition:
        """The ``n``-th entry with its absolute offset. O(1)."""
        self._require_open()
        if not 0 <= n < self._entries:
            raise IndexError(f"entry {n} out of range [0, {self._entries})")
        relative, position = _ENTRY.unpack_from(self._view(), n * ENTRY_BYTES)
        return OffsetPosition(self._base_offset + relative, position)

    def iter_entries(self) -> Iterator[OffsetPosition]:
        """All entries in order. O(n)."""
        self._require_open()
        if self._entries == 0:
            return
        base = self._base_offset
        view = self._view()[: self._entries * ENTRY_BYTES]  # a copy
        for relative, position in _ENTRY.iter_unpack(view):
            yield OffsetPosition(base + relative, position)

    def _reader(self) -> Callable[[int], int]:
        """A function from slot to relative offset, reporting pages if hooked."""
        view = self._view()
        unpack = _REL.unpack_from
        hook = self._page_hook
        if hook is None:

            def read(slot: int) -> int:
                return int(unpack(view, slot << 3)[0])

            return read

        def read_hooked(slot: int) -> int:
            hook((slot << 3) // PAGE_BYTES)
            return int(unpack(view, slot << 3)[0])

        return read_hooked

    def _slots_for(self, target: int, warm_section: bool) -> tuple[int, int]:
        """(largest slot <= target, smallest slot >= target), -1 where none."""
        n = self._entries
        if n == 0:
            return -1, -1
        read = self._reader()
        relative = target - self._base_offset
        if not warm_section:
            return _binary_search(read, relative, 0, n - 1, n)
        first_hot = max(0, n - 1 - WARM_ENTRIES)
        if read(first_hot) < relative:
            return _binary_search(read, relative, first_hot, n - 1, n)
        if read(0) > relative:
            return -1, 0
        return _binary_search(read, relative, 0, first_hot, n)

    def lookup(self, target: int, *, warm_section: bool = True) -> OffsetPosition:
        """The largest entry with offset <= ``target``; ``(base_offset, 0)`` if none.

        ``warm_section=False`` searches the whole range (for comparison only).
        O(log n).
        """
        self._require_open()
        slot, _ = self._slots_for(target, warm_section)
        if slot < 0:
            return OffsetPosition(self._base_offset, 0)
        return self.entry(slot)

    def lookup_upper(self, target: int, *, warm_section: bool = True) -> OffsetPosition | None:
        """The smallest entry with offset >= ``target``, or None. O(log n)."""
        self._require_open()
        _, slot = self._slots_for(target, warm_section)
        if slot < 0:
            return None
        return self.entry(slot)

    # ----------------------------------------------------------------- writing

    def append(self, offset: int, position: int) -> None:
        """Add an entry after the last one. O(1).

        Raises :class:`IndexFullError` when no slot is left, and
        :class:`InvalidOffsetError` when ``offset`` is not above the last entry
        or ``offset - base_offset`` does not fit an int32. The position must be a
        non-negative int32 above the last entry's (``ValueError``).
        """
        self._require_open()
        n = self._entries
        if n >= self._max_entries:
            raise IndexFullError(
                f"offset index {self._path} is full ({self._max_entries} entries); "
                f"cannot append offset {offset}"
            )
        if n > 0 and offset <= self._last_offset:
            raise InvalidOffsetError(
                f"offset {offset} is not larger than the last entry's {self._last_offset} "
                f"in {self._path}"
            )
        relative = offset - self._base_offset
        if not 0 <= relative <= _INT32_MAX:
            raise InvalidOffsetError(
                f"offset {offset} is not representable relative to base offset "
                f"{self._base_offset} (relative {relative} must be in [0, 2**31))"
            )
        if not self._last_position < position <= _INT32_MAX:
            raise ValueError(
                f"position {position} must be above the last entry's "
                f"{self._last_position} and fit an int32"
            )
        _ENTRY.pack_into(self._view(), n * ENTRY_BYTES, relative, position)
        self._entries = n + 1
        self._last_offset = offset
        self._last_position = position

    def truncate_to(self, offset: int) -> None:
        """Drop every entry with offset >= ``offset``. O(log n + dropped)."""
        self._require_open()
        slot, _ = self._slots_for(offset, True)
        if slot < 0:
            keep = 0
        elif self.entry(slot).offset == offset:
            keep = slot
        else:
            keep = slot + 1
        self.truncate_to_entries(keep)

    def truncate_to_entries(self, entries: int) -> None:
        """Keep the first ``entries`` entries and zero the rest. O(dropped)."""
        self._require_open()
        if not 0 <= entries <= self._entries:
            raise ValueError(f"cannot truncate {self._entries} entries to {entries}")
        if entries < self._entries:
            start = entries * ENTRY_BYTES
            end = self._entries * ENTRY_BYTES
            self._view()[start:end] = bytes(end - start)
            self._entries = entries
            self._refresh_last()

    def truncate(self) -> None:
        """Drop every entry. O(n)."""
        self.truncate_to_entries(0)

    def resize(self, max_index_size_bytes: int) -> None:
        """Remap the file with room for ``max_index_size_bytes // 8`` entries.

        Used to trim a rolled segment's index (:meth:`trim_to_valid_size`) and to
        make it appendable again after a truncation. The new size must hold the
        current entries. O(1) plus the kernel's remap.
        """
        self._require_open()
        size_bytes = max_index_size_bytes - max_index_size_bytes % ENTRY_BYTES
        if size_bytes < self._entries * ENTRY_BYTES:
            raise ValueError(
                f"cannot resize {self._path} to {max_index_size_bytes} bytes: "
                f"it holds {self._entries} entries"
            )
        self._map(size_bytes)

    def trim_to_valid_size(self) -> None:
        """Shrink the file to its entries; the index is then full. O(1)."""
        self.resize(self._entries * ENTRY_BYTES)

    def flush(self) -> None:
        """Write the index's dirty pages to disk: ``msync`` of the map, or ``fsync`` of
        the file when it is unmapped (its pages are in the page cache). O(dirty pages)."""
        self._require_open()
        if self._mmap is not None:
            self._mmap.flush()
        elif self._max_entries:
            fd = os.open(self._path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def close(self, *, trim: bool = True) -> None:
        """Unmap and trim the file to ``entries * 8`` bytes. Idempotent; O(1)."""
        self.close_files()
        if not self._closed:
            self._closed = True
            if trim:
                os.truncate(self._path, self._entries * ENTRY_BYTES)

    def delete(self) -> None:
        """Close without trimming and remove the file. O(1)."""
        self.close(trim=False)
        self._path.unlink(missing_ok=True)

    def __enter__(self) -> OffsetIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _check_invariants(self) -> None:
        """Check ordering, the zeroed tail, and the cached last entry. O(max_entries)."""
        if self._closed:
            assert self._mmap is None, "closed index still mapped"
            return
        assert 0 <= self._entries <= self._max_entries, "entries out of range"
        size_bytes = os.stat(self._path).st_size
        assert size_bytes == self._max_entries * ENTRY_BYTES, "file size != mapped size"
        if self._max_entries == 0:
            assert self._mmap is None
        else:
            files = self._open_files
            assert self._mmap is not None or files is not None, "unmapped, unmanaged"
            assert files is None or (self._mmap is not None) == (self in files), "not tracked"
            view = self._view()
            assert len(view) == self._max_entries * ENTRY_BYTES, "map size"
            bad = _first_non_increasing(view, self._entries)
            assert bad == self._entries, f"entry {bad} does not increase"
            tail = view[self._entries * ENTRY_BYTES :]
            assert tail.count(0) == len(tail), "non-zero bytes after the last entry"
        if self._entries:
            assert (self._last_offset, self._last_position) == tuple(
                self.entry(self._entries - 1)
            ), "stale cached last entry"
        else:
            assert (self._last_offset, self._last_position) == (self._base_offset, -1)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"entries={self._entries}/{self._max_entries}"
        return f"<OffsetIndex {self._path.name} base_offset={self._base_offset} {state}>"


def _round_size(max_index_size_bytes: int) -> int:
    if type(max_index_size_bytes) is not int:
        raise TypeError(f"max_index_size_bytes must be an int, not {max_index_size_bytes!r}")
    size_bytes = max_index_size_bytes - max_index_size_bytes % ENTRY_BYTES
    if size_bytes < ENTRY_BYTES:
        raise ValueError(
            f"max_index_size_bytes must hold at least one {ENTRY_BYTES}-byte entry, "
            f"not {max_index_size_bytes}"
        )
    return size_bytes


def _binary_search(
    read: Callable[[int], int], relative: int, begin: int, end: int, n: int
) -> tuple[int, int]:
    """Search slots [begin, end] for ``relative``; return (lower slot, upper slot).

    Upper midpoint, so ``lo = mid`` always moves. -1 marks "none". The loop
    never compares ``entry[begin]`` itself (``lo`` only moves past entries known
    to be smaller), so an exact match there is caught up front: without that,
    a target equal to ``entry[0]`` in an index of at most 1025 entries gets
    ``(0, 1)``, the wrong upper bound (Kafka's code has this edge case).
    """
    first = read(begin)
    if first > relative:
        return -1, begin
    if first == relative:
        return begin, begin
    lo, hi = begin, end
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        found = read(mid)
        if found > relative:
            hi = mid - 1
        elif found < relative:
            lo = mid
        else:
            return mid, mid
    return lo, (-1 if lo == n - 1 else lo + 1)


def _first_non_increasing(view: mmap.mmap, entries: int) -> int:
    """The first slot in [0, entries) that breaks the ordering, or ``entries``."""
    last_relative = last_position = -1
    for slot, (relative, position) in enumerate(_ENTRY.iter_unpack(view[: entries * ENTRY_BYTES])):
        if relative <= last_relative or position <= last_position:
            return slot
        last_relative, last_position = relative, position
    return entries


def _find_untrimmed_end(view: mmap.mmap, slots: int) -> int:
    """The number of real entries in an untrimmed (preallocated) file. O(slots)."""
    end = slots
    start = ENTRY_BYTES
    while True:
        hit = view.find(_ZERO_SLOT, start)
        if hit < 0:
            break
        if hit % ENTRY_BYTES == 0:
            end = hit // ENTRY_BYTES
            break
        start = hit + 1
    end = _first_non_increasing(view, end)
    if end == 1 and view[:ENTRY_BYTES] == _ZERO_SLOT:
        return 0
    return end


def _zero_garbage(view: mmap.mmap, start: int) -> None:
    """Zero any non-zero bytes after ``start`` (only as far as the last one)."""
    tail = view[start:]
    used = len(tail.rstrip(b"\0"))
    if used:
        view[start : start + used] = bytes(used)
