"""OffsetIndex: Kafka's OffsetIndexTest scenarios, warm-section properties, crashes, pages."""

from __future__ import annotations

import bisect
import os
import random
import shutil
import struct
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from purgatory_broker.broker.storage.offset_index import (
    ENTRY_BYTES,
    PAGE_BYTES,
    CorruptIndexError,
    IndexFullError,
    InvalidOffsetError,
    OffsetIndex,
    OffsetPosition,
)
from purgatory_broker.broker.storage.open_files import OpenFiles

BASE = 45
SLOTS = 30
ENTRIES_PER_PAGE = PAGE_BYTES // ENTRY_BYTES


@pytest.fixture
def idx(tmp_path: Path) -> Iterator[OffsetIndex]:
    index = OffsetIndex(tmp_path / "00000000000000000045.index", BASE, SLOTS * ENTRY_BYTES)
    yield index
    index.close()


def monotonic_seq(base: int, length: int, seed: int = 1) -> list[int]:
    """``length`` strictly increasing ints after ``base``, steps of 1..15."""
    rng = random.Random(seed)
    out = []
    last = base
    for _ in range(length):
        last += rng.randint(1, 15)
        out.append(last)
    return out


def floor_model(offsets: list[int], positions: list[int], target: int) -> OffsetPosition:
    i = bisect.bisect_right(offsets, target) - 1
    return OffsetPosition(offsets[i], positions[i]) if i >= 0 else OffsetPosition(BASE, 0)


def ceil_model(offsets: list[int], positions: list[int], target: int) -> OffsetPosition | None:
    i = bisect.bisect_left(offsets, target)
    return OffsetPosition(offsets[i], positions[i]) if i < len(offsets) else None


# ------------------------------------------------------------ Kafka's scenarios


def test_random_lookup(idx: OffsetIndex) -> None:
    assert idx.lookup(92) == (BASE, 0), "an empty index answers the base offset"
    offsets = monotonic_seq(BASE + 1, idx.max_entries)
    positions = monotonic_seq(0, idx.max_entries, seed=2)
    for offset, position in zip(offsets, positions, strict=True):
        idx.append(offset, position)
    idx._check_invariants()
    for offset, position in zip(offsets, positions, strict=True):
        assert idx.lookup(offset) == (offset, position)
        assert idx.lookup_upper(offset) == (offset, position)
    rng = random.Random(3)
    candidates = list(range(BASE, offsets[-1]))
    rng.shuffle(candidates)
    for target in candidates[:30]:
        assert idx.lookup(target) == floor_model(offsets, positions, target)
        assert idx.lookup_upper(target) == ceil_model(offsets, positions, target)


def test_lookup_extreme_cases(idx: OffsetIndex) -> None:
    assert idx.lookup(BASE) == (BASE, 0), "lookup on an empty index"
    assert idx.lookup_upper(BASE) is None
    for i in range(idx.max_entries):
        idx.append(BASE + i + 1, i)
    assert idx.lookup(BASE) == (BASE, 0), "below the first entry"
    assert idx.lookup(BASE + SLOTS) == (BASE + SLOTS, SLOTS - 1), "the last entry"
    assert idx.lookup(BASE + 10 * SLOTS) == (BASE + SLOTS, SLOTS - 1)
    assert idx.lookup_upper(BASE) == (BASE + 1, 0)
    assert idx.lookup_upper(BASE + SLOTS + 1) is None
    assert idx.lookup(0) == (BASE, 0), "a target below the base offset"


@pytest.mark.parametrize("entries", [1, 2, 1025])
def test_upper_bound_of_exactly_the_first_entry(tmp_path: Path, entries: int) -> None:
    """Kafka's search answers entry[1] (or nothing) here; ours answers entry[0]."""
    with OffsetIndex(tmp_path / "u", BASE, entries * ENTRY_BYTES) as index:
        for i in range(entries):
            index.append(BASE + 2 * i, 10 * i)
        assert index.lookup_upper(BASE) == (BASE, 0)
        assert index.lookup_upper(BASE, warm_section=False) == (BASE, 0)
        assert index.lookup(BASE) == (BASE, 0)


def test_append_too_many(idx: OffsetIndex) -> None:
    for i in range(idx.max_entries):
        assert not idx.is_full
        idx.append(BASE + i + 1, i)
    assert idx.is_full and idx.entries == SLOTS
    with pytest.raises(IndexFullError, match="full"):
        idx.append(BASE + SLOTS + 1, SLOTS)
    assert idx.entries == SLOTS
    idx._check_invariants()


def test_append_out_of_order(idx: OffsetIndex) -> None:
    idx.append(51, 0)
    with pytest.raises(InvalidOffsetError, match="not larger"):
        idx.append(50, 1)
    with pytest.raises(InvalidOffsetError, match="not larger"):
        idx.append(51, 1)
    assert idx.entries == 1
    idx._check_invariants()


def test_append_not_representable(idx: OffsetIndex) -> None:
    with pytest.raises(InvalidOffsetError, match="not representable"):
        idx.append(BASE - 1, 0)
    with pytest.raises(InvalidOffsetError, match="not representable"):
        idx.append(BASE + 2**31, 0)
    idx.append(BASE + 2**31 - 1, 0)  # the largest relative offset fits
    assert idx.lookup(BASE + 2**31) == (BASE + 2**31 - 1, 0)


def test_append_position_must_increase(idx: OffsetIndex) -> None:
    idx.append(50, 100)
    with pytest.raises(ValueError, match="position"):
        idx.append(51, 100)
    with pytest.raises(ValueError, match="position"):
        idx.append(51, 2**31)
    idx._check_invariants()


def test_sanity_with_single_message(tmp_path: Path) -> None:
    with OffsetIndex(tmp_path / "i", 20, 10 * ENTRY_BYTES) as index:
        index.append(20, 0)
        index._check_invariants()
        assert index.lookup(20) == (20, 0)


def test_reopen_trims_to_entries(idx: OffsetIndex) -> None:
    assert idx.path.stat().st_size == SLOTS * ENTRY_BYTES, "preallocated"
    idx.append(51, 0)
    idx.append(52, 1)
    idx.close()
    assert idx.path.stat().st_size == 2 * ENTRY_BYTES, "trimmed to entries * 8 on close"
    with OffsetIndex(idx.path, BASE, SLOTS * ENTRY_BYTES) as reopened:
        reopened._check_invariants()
        assert reopened.entries == 2
        assert reopened.lookup(51) == (51, 0)
        assert reopened.lookup(52) == (52, 1)
        assert reopened.last_offset == 52
        reopened.append(53, 2)  # unlike Kafka's read-only reopen, ours stays appendable
        assert reopened.entries == 3
    assert idx.path.stat().st_size == 3 * ENTRY_BYTES


def test_truncate(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "t", 0, 10 * ENTRY_BYTES)
    index.truncate()
    for i in range(1, 10):
        index.append(i, i)
    index.truncate_to(12)
    assert index.lookup(10) == (9, 9), "truncating past the end changes nothing"
    assert index.last_offset == 9
    index.append(10, 10)
    index.truncate_to(10)
    assert index.lookup(10) == (9, 9), "truncating at an entry drops it"
    assert index.last_offset == 9
    index.append(10, 10)
    index.truncate_to(9)
    assert index.lookup(10) == (8, 8)
    assert index.last_offset == 8
    index.append(9, 9)
    index.truncate_to(5)
    assert index.lookup(10) == (4, 4)
    assert index.last_offset == 4
    index.append(5, 5)
    index._check_invariants()
    index.truncate()
    assert index.entries == 0
    index.append(0, 0)
    index._check_invariants()
    index.close()


@pytest.mark.parametrize(
    ("truncate_to", "remaining"),
    [
        (60, [50, 55]),  # to an entry: it goes
        (58, [50, 55]),  # between entries
        (45, []),  # below the first entry
        (50, []),  # at the first entry
        (71, [50, 55, 60, 65, 70]),  # above the last: unchanged
    ],
)
def test_truncate_to_cases(idx: OffsetIndex, truncate_to: int, remaining: list[int]) -> None:
    for i, offset in enumerate((50, 55, 60, 65, 70)):
        idx.append(offset, 100 * i)
    idx.truncate_to(truncate_to)
    idx._check_invariants()
    assert [e.offset for e in idx.iter_entries()] == remaining
    assert idx.last_offset == (remaining[-1] if remaining else BASE)
    idx.append(truncate_to if truncate_to > idx.last_offset else idx.last_offset + 1, 10_000)
    idx._check_invariants()


def test_resize_and_trim(idx: OffsetIndex) -> None:
    for i in range(5):
        idx.append(BASE + i, i)
    idx.trim_to_valid_size()
    assert idx.is_full and idx.path.stat().st_size == 5 * ENTRY_BYTES
    idx._check_invariants()
    with pytest.raises(IndexFullError):
        idx.append(BASE + 5, 5)
    with pytest.raises(ValueError, match="holds 5 entries"):
        idx.resize(4 * ENTRY_BYTES)
    idx.resize(100)  # rounded down to 96 bytes
    assert idx.max_entries == 12
    idx.append(BASE + 5, 5)
    assert idx.lookup(BASE + 5) == (BASE + 5, 5)
    idx._check_invariants()


def test_empty_index_trimmed_to_zero_bytes(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "e", 0, 64)
    index.trim_to_valid_size()
    index._check_invariants()
    assert index.max_entries == 0 and index.is_full
    assert index.lookup(5) == (0, 0) and index.lookup_upper(5) is None
    index.close()
    assert (tmp_path / "e").stat().st_size == 0


def test_bad_arguments_and_closed(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one"):
        OffsetIndex(tmp_path / "a", 0, 7)
    with pytest.raises(ValueError, match="base_offset"):
        OffsetIndex(tmp_path / "a", -1, 80)
    index = OffsetIndex(tmp_path / "a", 0, 80)
    index.close()
    index.close()  # idempotent
    index._check_invariants()
    with pytest.raises(ValueError, match="closed"):
        index.lookup(0)
    with pytest.raises(ValueError, match="closed"):
        index.append(1, 1)
    with pytest.raises(IndexError):
        OffsetIndex(tmp_path / "b", 0, 80).entry(0)


# ------------------------------------------------------------ crashes and corruption


def _crash_copy(index: OffsetIndex, tmp_path: Path, name: str = "crashed.index") -> Path:
    """The index file as a crash would leave it: preallocated, untrimmed."""
    copy = tmp_path / name
    shutil.copyfile(index.path, copy)
    return copy


def test_reopen_untrimmed_file_finds_the_entries(idx: OffsetIndex, tmp_path: Path) -> None:
    for i in range(7):
        idx.append(BASE + 3 * i, 10 * i)
    copy = _crash_copy(idx, tmp_path)
    assert copy.stat().st_size == SLOTS * ENTRY_BYTES
    with OffsetIndex(copy, BASE, SLOTS * ENTRY_BYTES) as reopened:
        reopened._check_invariants()
        assert list(reopened.iter_entries()) == list(idx.iter_entries())
    assert copy.stat().st_size == 7 * ENTRY_BYTES


def test_untrimmed_file_with_garbage_after_the_entries(tmp_path: Path) -> None:
    path = tmp_path / "g.index"
    slots = [(1, 0), (5, 100), (9, 200), (3, 50), (12, 300), (0, 0), (77, 1)]
    path.write_bytes(b"".join(struct.pack(">ii", *s) for s in slots) + bytes(8 * 3))
    with OffsetIndex(path, 1000, 10 * ENTRY_BYTES) as index:
        assert index.entries == 3  # (3, 50) does not increase: the end
        index._check_invariants()  # and the garbage after it was zeroed
        assert index.lookup(1_000_100) == (1009, 200)


def test_stale_entries_do_not_come_back_after_truncation(idx: OffsetIndex, tmp_path: Path) -> None:
    for i in range(10):
        idx.append(BASE + 10 * i, 100 * i)
    idx.truncate_to(BASE + 40)
    idx.append(BASE + 41, 401)
    with OffsetIndex(_crash_copy(idx, tmp_path), BASE, SLOTS * ENTRY_BYTES) as reopened:
        assert [e.offset for e in reopened.iter_entries()] == [45, 55, 65, 75, 86]


def test_lone_zero_entry_in_untrimmed_file_reads_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "z.index"
    path.write_bytes(bytes(80))
    with OffsetIndex(path, 7, 80) as index:
        assert index.entries == 0
        assert index.lookup(100) == (7, 0)
    path.write_bytes(struct.pack(">ii", 0, 0) + struct.pack(">ii", 4, 90) + bytes(64))
    with OffsetIndex(path, 7, 80) as index:
        assert list(index.iter_entries()) == [(7, 0), (11, 90)]


def test_full_untrimmed_file(tmp_path: Path) -> None:
    path = tmp_path / "f.index"
    path.write_bytes(b"".join(struct.pack(">ii", i + 1, i) for i in range(10)))
    with OffsetIndex(path, 0, 80) as index:  # larger than max: kept whole, full
        assert index.entries == 10 and index.is_full
        index._check_invariants()


@pytest.mark.parametrize(
    "content",
    [
        b"\x00" * 12,  # not a multiple of 8
        struct.pack(">ii", 5, 0) + struct.pack(">ii", 5, 10),  # offset repeats
        struct.pack(">ii", 5, 10) + struct.pack(">ii", 6, 10),  # position repeats
        struct.pack(">ii", -1, 0),  # negative relative offset
    ],
)
def test_corrupt_trimmed_file_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "c.index"
    path.write_bytes(content)
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, 10 * ENTRY_BYTES)


# ------------------------------------------------------------ warm section vs bisect


def _build(tmp_path: Path, entries: int, seed: int) -> tuple[OffsetIndex, list[int], list[int]]:
    offsets = monotonic_seq(BASE, entries, seed)
    positions = monotonic_seq(-1, entries, seed + 1000)
    index = OffsetIndex(tmp_path / f"p{entries}.index", BASE, entries * ENTRY_BYTES)
    for offset, position in zip(offsets, positions, strict=True):
        index.append(offset, position)
    return index, offsets, positions


@pytest.mark.parametrize("entries", [1, 2, 1023, 1024, 1025, 1026, 5000])
def test_every_entry_and_gap_against_bisect(tmp_path: Path, entries: int) -> None:
    index, offsets, positions = _build(tmp_path, entries, seed=entries)
    index._check_invariants()
    targets = {BASE - 1, BASE, offsets[-1] + 1, offsets[-1] + 100}
    for offset in offsets:
        targets.update((offset - 1, offset, offset + 1))
    for target in sorted(targets):
        expected_floor = floor_model(offsets, positions, target)
        expected_ceil = ceil_model(offsets, positions, target)
        for warm in (True, False):
            assert index.lookup(target, warm_section=warm) == expected_floor, (target, warm)
            assert index.lookup_upper(target, warm_section=warm) == expected_ceil, target
    index.close()


@pytest.mark.parametrize("entries", [1023, 1024, 1025, 5000])
def test_lookups_match_bisect_property(tmp_path: Path, entries: int) -> None:
    index, offsets, positions = _build(tmp_path, entries, seed=7 * entries)
    low, high = BASE - 5, offsets[-1] + 5
    warm_boundary = offsets[max(0, entries - 1 - 1024)]

    @settings(derandomize=True, max_examples=200, deadline=None, database=None)
    @given(
        st.one_of(
            st.integers(low, high),
            st.integers(warm_boundary - 20, warm_boundary + 20),  # around first_hot
            st.sampled_from(offsets[:3] + offsets[-3:]),
        )
    )
    def check(target: int) -> None:
        assert index.lookup(target) == floor_model(offsets, positions, target)
        assert index.lookup(target, warm_section=False) == floor_model(offsets, positions, target)
        assert index.lookup_upper(target) == ceil_model(offsets, positions, target)
        assert index.lookup_upper(target, warm_section=False) == ceil_model(
            offsets, positions, target
        )

    check()
    index.close()


@pytest.mark.parametrize("seed", range(4))
def test_random_operation_mix_against_a_model(tmp_path: Path, seed: int) -> None:
    """Appends, truncations, crash-reopens and lookups against a list model."""
    rng = random.Random(seed)
    max_entries = 1100  # crosses the warm-section boundary
    path = tmp_path / "mix.index"
    index = OffsetIndex(path, 1000, max_entries * ENTRY_BYTES)
    model: list[tuple[int, int]] = []
    for step in range(2500):
        op = rng.random()
        if op < 0.8 and len(model) < max_entries:
            offset = (model[-1][0] if model else 999) + rng.randint(1, 4)
            position = (model[-1][1] if model else -1) + rng.randint(1, 9)
            index.append(offset, position)
            model.append((offset, position))
        elif op < 0.85 and model:
            cut = rng.randint(model[0][0] - 2, model[-1][0] + 2)
            index.truncate_to(cut)
            model = [e for e in model if e[0] < cut]
        elif op < 0.87:
            if rng.random() < 0.5:
                index.close()
            else:  # crash: the file stays preallocated
                crashed = _crash_copy(index, tmp_path, f"crash{step}.index")
                index.close()
                shutil.move(crashed, path)
            index = OffsetIndex(path, 1000, max_entries * ENTRY_BYTES)
        else:
            offsets = [e[0] for e in model]
            target = rng.randint(995, (model[-1][0] if model else 1000) + 5)
            i = bisect.bisect_right(offsets, target) - 1
            assert index.lookup(target) == (model[i] if i >= 0 else (1000, 0))
            j = bisect.bisect_left(offsets, target)
            assert index.lookup_upper(target) == (model[j] if j < len(model) else None)
            continue
        index._check_invariants()
        assert list(index.iter_entries()) == model
    index.close()


# ------------------------------------------------------------ page behaviour


def _pages(index: OffsetIndex, target: int, warm: bool) -> set[int]:
    touched: list[int] = []
    index.page_hook = touched.append
    index.lookup(target, warm_section=warm)
    index.page_hook = None
    return set(touched)


def test_page_hook_reports_pages_and_is_optional(tmp_path: Path) -> None:
    index, offsets, _ = _build(tmp_path, 3 * ENTRIES_PER_PAGE, seed=5)
    assert index.page_hook is None
    pages = _pages(index, offsets[-1], warm=False)
    assert 0 in pages and 2 in pages  # plain search reads entry 0 first
    assert index.page_hook is None
    index.close()


def test_warm_section_keeps_tail_lookups_on_the_last_pages(tmp_path: Path) -> None:
    """As the index grows a page at a time, plain search wanders; warm stays put."""
    index = OffsetIndex(tmp_path / "grow.index", 0, 48 * PAGE_BYTES)
    offset = 0
    previous_plain: set[int] = set()
    previous_warm: set[int] = set()
    plain_far_new_steps = 0
    steps = 0
    for pages in range(8, 48):
        while index.entries < pages * ENTRIES_PER_PAGE:
            offset += 1
            index.append(offset, offset * 50)
        tail_page = (index.entries - 1) // ENTRIES_PER_PAGE
        last_three = {tail_page - 2, tail_page - 1, tail_page}
        plain = _pages(index, offset, warm=False)
        warm = _pages(index, offset, warm=True)
        assert warm <= last_three, (pages, warm)
        assert len(plain - last_three) >= 2, (pages, plain)  # plain reads far pages
        if previous_plain:
            steps += 1
            assert len(warm - previous_warm) <= 1  # only the new tail page
            if plain - previous_plain - last_three:
                plain_far_new_steps += 1  # pages away from the tail, not read last time
        previous_plain, previous_warm = plain, warm
    assert plain_far_new_steps >= steps // 2, (plain_far_new_steps, steps)
    index.close()


class _Lru:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.pages: OrderedDict[int, None] = OrderedDict()
        self.misses = 0

    def touch(self, page: int) -> None:
        if page in self.pages:
            self.pages.move_to_end(page)
            return
        self.misses += 1
        self.pages[page] = None
        if len(self.pages) > self.capacity:
            self.pages.popitem(last=False)


def test_tail_readers_through_a_small_page_cache(tmp_path: Path) -> None:
    """Tail readers while the index grows: warm search misses only on new pages."""
    entries = 24 * ENTRIES_PER_PAGE
    index = OffsetIndex(tmp_path / "tail.index", 0, entries * ENTRY_BYTES)
    rng = random.Random(11)
    caches = {True: _Lru(4), False: _Lru(4)}
    touched: list[int] = []
    for n in range(1, entries + 1):
        index.append(10 * n, 100 * n)
        for cache in caches.values():
            cache.touch((n - 1) // ENTRIES_PER_PAGE)  # the writer's page
        target = 10 * (n - rng.randint(0, min(200, n - 1))) + rng.randint(0, 9)
        for warm, cache in caches.items():
            touched.clear()
            index.page_hook = touched.append
            index.lookup(target, warm_section=warm)
            index.page_hook = None
            assert not warm or len(set(touched)) <= 3
            for page in touched:
                cache.touch(page)
    index.close()
    pages = entries // ENTRIES_PER_PAGE
    assert caches[True].misses <= pages + 1  # each page misses once, when it is new
    assert caches[False].misses >= 50 * caches[True].misses


def test_maps_in_a_bounded_set_are_closed_and_made_again(tmp_path: Path) -> None:
    """Every map holds a descriptor (CPython dups it); with an OpenFiles of one, using
    an index closes the other's map, which comes back on its next use, unchanged."""
    files = OpenFiles(1)
    baseline = len(os.listdir("/proc/self/fd"))
    indexes = [
        OffsetIndex(tmp_path / f"{i}.index", 100 * i, 4096, open_files=files) for i in range(30)
    ]
    assert len(os.listdir("/proc/self/fd")) - baseline <= 1
    for n, index in enumerate(indexes):
        for k in range(1, 6):
            index.append(100 * n + 10 * k, 1000 * k)
    assert [ix.is_mapped for ix in indexes] == [False] * 29 + [True]
    first = indexes[0]
    assert first.lookup(25) == (20, 2000) and first.is_mapped and not indexes[-1].is_mapped
    indexes[-1].flush()  # unmapped: fsync of the file instead of msync
    first.truncate_to(30)
    assert list(first.iter_entries()) == [(10, 1000), (20, 2000)]
    for index in indexes:
        index._check_invariants()
    assert len(os.listdir("/proc/self/fd")) - baseline <= 1
    for index in indexes:
        index.close()
    assert len(files) == 0 and len(os.listdir("/proc/self/fd")) == baseline
    reopened = OffsetIndex(tmp_path / "0.index", 0, 4096)
    assert list(reopened.iter_entries()) == [(10, 1000), (20, 2000)]
    reopened.close()
