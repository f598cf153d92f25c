"""Which 4 KiB pages of an offset index do lookups touch? Warm section vs plain search.

Kafka searches the last 8192 bytes of an offset index (the *warm section*) first,
because readers ask mostly for the newest offsets. This report shows why, with a
real :class:`~purgatory_broker.broker.storage.offset_index.OffsetIndex` and its page hook:

1. **Growth.** The index grows one page (512 entries) at a time; after each step
   we look up the newest offset and list the pages each search reads. Plain binary
   search probes ``n/2, 3n/4, ...``: pages all over the file, and a step of growth
   moves those probes to pages it did not read at the previous step. The warm
   search stays on the last two or three pages.
2. **Tail readers through a page cache.** The index grows entry by entry while
   readers look up offsets a little behind the end. Every page read goes through
   an LRU cache of a few pages (standing in for the OS page cache under memory
   pressure); each append touches the tail page too. Misses are what would be
   page faults.

Run: ``python broker/benchmarks/index_pages.py`` (``--help`` for the options). Runs in
a few seconds; deterministic for a given ``--seed``.
"""

from __future__ import annotations

import argparse
import platform
import random
import tempfile
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from _machine import cpu_model
from purgatory_broker.broker.storage.offset_index import ENTRY_BYTES, PAGE_BYTES, OffsetIndex

ENTRIES_PER_PAGE = PAGE_BYTES // ENTRY_BYTES


class LruPages:
    """An LRU set of page numbers that counts hits and misses."""

    def __init__(self, capacity_pages: int) -> None:
        self.capacity_pages = capacity_pages
        self._pages: OrderedDict[int, None] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def touch(self, page: int) -> None:
        if page in self._pages:
            self._pages.move_to_end(page)
            self.hits += 1
            return
        self.misses += 1
        self._pages[page] = None
        if len(self._pages) > self.capacity_pages:
            self._pages.popitem(last=False)


def pages_of_lookup(index: OffsetIndex, target: int, *, warm_section: bool) -> list[int]:
    """The distinct pages one lookup reads, in first-read order."""
    touched: list[int] = []
    index.page_hook = touched.append
    try:
        index.lookup(target, warm_section=warm_section)
    finally:
        index.page_hook = None
    return list(dict.fromkeys(touched))


@dataclass(frozen=True)
class GrowthStep:
    entries: int
    plain_pages: list[int]
    warm_pages: list[int]
    plain_new: int  # pages not read by the previous step's lookup
    warm_new: int


def growth_steps(directory: Path, start_pages: int, steps: int) -> list[GrowthStep]:
    """Grow an index a page at a time; record the pages of a newest-offset lookup."""
    total = (start_pages + steps) * ENTRIES_PER_PAGE
    index = OffsetIndex(directory / "growth.index", 0, total * ENTRY_BYTES)
    result: list[GrowthStep] = []
    try:
        previous_plain: set[int] = set()
        previous_warm: set[int] = set()
        offset = 0
        for step in range(steps + 1):
            target_entries = (start_pages + step) * ENTRIES_PER_PAGE
            while index.entries < target_entries:
                offset += 1
                index.append(offset, offset * 100)
            plain = pages_of_lookup(index, offset, warm_section=False)
            warm = pages_of_lookup(index, offset, warm_section=True)
            result.append(
                GrowthStep(
                    index.entries,
                    plain,
                    warm,
                    len(set(plain) - previous_plain) if step else 0,
                    len(set(warm) - previous_warm) if step else 0,
                )
            )
            previous_plain, previous_warm = set(plain), set(warm)
    finally:
        index.close()
    return result


@dataclass(frozen=True)
class ReplayResult:
    capacity_pages: int
    lookups: int
    plain_misses: int
    warm_misses: int
    max_warm_pages_per_lookup: int
    max_plain_pages_per_lookup: int


def replay_tail_readers(
    directory: Path,
    *,
    entries: int,
    readers_per_append: int,
    max_lag_entries: int,
    capacity_pages: int,
    seed: int,
) -> ReplayResult:
    """Grow an index while readers look up offsets near its end, through an LRU."""
    rng = random.Random(seed)
    index = OffsetIndex(directory / f"replay-{capacity_pages}.index", 0, entries * ENTRY_BYTES)
    plain_cache = LruPages(capacity_pages)
    warm_cache = LruPages(capacity_pages)
    plain_touched: list[int] = []
    warm_touched: list[int] = []
    lookups = 0
    max_warm = max_plain = 0
    try:
        for n in range(1, entries + 1):
            index.append(n * 10, n * 100)  # offsets 10, 20, ...: targets fall between
            tail_page = (n - 1) * ENTRY_BYTES // PAGE_BYTES
            plain_cache.touch(tail_page)
            warm_cache.touch(tail_page)
            for _ in range(readers_per_append):
                lag = rng.randint(0, min(max_lag_entries, n - 1))
                target = (n - lag) * 10 + rng.randint(0, 9)
                for warm, cache, touched in (
                    (False, plain_cache, plain_touched),
                    (True, warm_cache, warm_touched),
                ):
                    touched.clear()
                    index.page_hook = touched.append
                    index.lookup(target, warm_section=warm)
                    index.page_hook = None
                    for page in touched:
                        cache.touch(page)
                    distinct = len(set(touched))
                    if warm:
                        max_warm = max(max_warm, distinct)
                    else:
                        max_plain = max(max_plain, distinct)
                lookups += 1
    finally:
        index.close()
    return ReplayResult(
        capacity_pages, lookups, plain_cache.misses, warm_cache.misses, max_warm, max_plain
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--start-pages", type=int, default=16, help="index size (pages) of step 0")
    parser.add_argument("--steps", type=int, default=8, help="one-page growth steps to show")
    parser.add_argument(
        "--entries", type=int, default=40_000, help="entries the replayed index grows to"
    )
    parser.add_argument("--readers", type=int, default=2, help="tail lookups per append")
    parser.add_argument(
        "--max-lag", type=int, default=200, help="readers trail the end by up to this many entries"
    )
    parser.add_argument(
        "--cache-pages",
        type=int,
        nargs="+",
        default=[2, 3, 4, 8, 16],
        help="LRU capacities (pages) to replay through",
    )
    parser.add_argument("--seed", type=int, default=7, help="seed of the readers' lags")
    args = parser.parse_args(argv)

    print(f"machine: {platform.machine()}, {cpu_model()}, Python {platform.python_version()}")
    print(f"page {PAGE_BYTES} B = {ENTRIES_PER_PAGE} entries; warm section = last 1024 entries\n")
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        print("1. Newest-offset lookup as the index grows by one page")
        print(f"{'entries':>8}  {'plain: pages read':<34} new  {'warm: pages read':<18} new")
        for step in growth_steps(directory, args.start_pages, args.steps):
            print(
                f"{step.entries:>8}  {step.plain_pages!s:<34} {step.plain_new:>3}  "
                f"{step.warm_pages!s:<18} {step.warm_new:>3}"
            )
        print(
            f"\n2. Tail readers: index grows to {args.entries} entries "
            f"({args.entries * ENTRY_BYTES // PAGE_BYTES} pages), {args.readers} lookups per "
            f"append, lag 0..{args.max_lag} entries, seed {args.seed}"
        )
        print(
            f"{'LRU pages':>9} {'lookups':>8} {'plain misses':>13} {'warm misses':>12} "
            f"{'plain/warm':>10} {'max pages/lookup plain, warm':>30}"
        )
        for capacity in args.cache_pages:
            r = replay_tail_readers(
                directory,
                entries=args.entries,
                readers_per_append=args.readers,
                max_lag_entries=args.max_lag,
                capacity_pages=capacity,
                seed=args.seed,
            )
            ratio = r.plain_misses / r.warm_misses if r.warm_misses else float("inf")
            print(
                f"{r.capacity_pages:>9} {r.lookups:>8} {r.plain_misses:>13} {r.warm_misses:>12} "
                f"{ratio:>10.1f} {r.max_plain_pages_per_lookup:>23}, "
                f"{r.max_warm_pages_per_lookup}"
            )


if __name__ == "__main__":
    main()
