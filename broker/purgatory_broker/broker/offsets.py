"""Committed offsets, durable: a log of commits in the data directory (Kafka keeps them
in the compacted ``__consumer_offsets`` topic; this is the one-broker equivalent).

The file ``<data_dir>/__consumer_offsets/commits.jsonl`` holds one JSON object per
line, each a whole OffsetCommit (or an expiry)::

    {"g": "my-group", "ts": 1732440000000, "o": [["orders", 0, 42, -1, ""], ...]}

an entry being ``[topic, partition, offset, leader epoch, metadata]``, with offset
``null`` for a tombstone (an expired offset). A line may also carry the group's
protocol type, ``"pt": "consumer"`` (Kafka keeps a group's metadata in
``__consumer_offsets`` beside its offsets, so ListGroups still says "consumer"
after a restart): a commit writes it when the group's type is new to the store
(then not again), compaction writes it on the group's first line, and the group's
type is forgotten with its last offset. A line without it (older files, or a
consumer outside group management) leaves the type as it was; a group never
managed has none. :meth:`OffsetStore.commit` writes
the line with one ``write`` to a file opened in append mode *before* it returns,
so an acknowledged commit is in the operating system's page cache when the
client hears of it: killing the broker loses none (as for records, see
:mod:`purgatory_broker.broker.storage`; a machine crash is what ``fsync=True`` is for).
At open, the lines are replayed in order, the last value of each (group,
partition) winning; a torn last line (a crash inside ``write``) is cut off.

Compaction: when the file holds more than :data:`COMPACT_FACTOR` times as many
entries as are live (and at least :data:`COMPACT_MIN_ENTRIES`), the live ones
are written to a new file, flushed, and renamed over the old one, so the file
stays O(live offsets) and a crash during compaction leaves one whole file.

Retention (Kafka's ``offsets.retention.minutes``): :meth:`OffsetStore.expire`
drops the offsets of the groups the caller names (those without members) whose
commit, and whose group's last state change, are older than the retention;
timestamps are wall-clock milliseconds, so they keep meaning across restarts.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from purgatory import TopicPartition

__all__ = [
    "COMPACT_FACTOR",
    "COMPACT_MIN_ENTRIES",
    "CommittedOffset",
    "OffsetStore",
]

log = logging.getLogger(__name__)

#: compact when the file holds this many times the live entries ...
COMPACT_FACTOR = 4
#: ... and at least this many entries
COMPACT_MIN_ENTRIES = 10_000

OFFSETS_DIR = "__consumer_offsets"
COMMITS_FILE = "commits.jsonl"


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """One committed offset: the next offset to consume, with the client's extras."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_ms: int = 0  # wall clock of the commit


class OffsetStore:
    """Committed offsets by group and partition, written through to ``data_dir``.

    ``wall_clock_ms`` stamps commits (default: the system's wall clock).
    ``fsync``: also fsync each commit (survives a machine crash, costs a disk flush).
    ``compact_min_entries``: see :data:`COMPACT_MIN_ENTRIES`. Not thread-safe.
    """

    def __init__(
        self,
        data_dir: str | Path,
        *,
        wall_clock_ms: Callable[[], int] | None = None,
        fsync: bool = False,
        compact_min_entries: int = COMPACT_MIN_ENTRIES,
    ) -> None:
        self.directory = Path(data_dir) / OFFSETS_DIR
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / COMMITS_FILE
        self.wall_clock_ms: Callable[[], int] = wall_clock_ms or _wall_clock_ms
        self.fsync = fsync
        self.compact_min_entries = compact_min_entries
        self.compactions = 0
        self._offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        self._protocol_types: dict[str, str] = {}  # of groups with offsets, if known
        self._entries = 0  # entries in the file (live, overwritten and tombstones)
        self._load()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    # -- queries ---------------------------------------------------------------

    def groups(self) -> list[str]:
        """Groups with at least one committed offset. O(groups)."""
        return list(self._offsets)

    def fetch(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, CommittedOffset]:
        """The group's committed offsets: of ``partitions`` (those committed), or all.
        O(partitions asked), O(committed) for all."""
        committed = self._offsets.get(group_id, {})
        if partitions is None:
            return dict(committed)
        return {tp: committed[tp] for tp in partitions if tp in committed}

    def protocol_type(self, group_id: str) -> str | None:
        """The protocol type stored with the group's offsets ("consumer"), or None: no
        offsets, or committed outside group management only. O(1)."""
        return self._protocol_types.get(group_id)

    def __len__(self) -> int:
        """Live offsets. O(groups)."""
        return sum(len(g) for g in self._offsets.values())

    # -- changes -----------------------------------------------------------------

    def commit(
        self,
        group_id: str,
        offsets: dict[TopicPartition, CommittedOffset],
        *,
        protocol_type: str | None = None,
    ) -> None:
        """Store ``offsets`` (their ``commit_ms`` is replaced by now), written to the file
        before returning; raises OSError if the write fails (nothing is stored then).
        ``protocol_type``: the group's (kept with its offsets, see the module doc); None
        leaves what is stored. O(len(offsets))."""
        now = self.wall_clock_ms()
        stamped = {
            tp: CommittedOffset(o.offset, o.leader_epoch, o.metadata, now)
            for tp, o in offsets.items()
        }
        entries = [_entry(tp, o) for tp, o in stamped.items()]
        line: dict[str, object] = {"g": group_id, "ts": now, "o": entries}
        known = self._protocol_types.get(group_id)
        if protocol_type is not None and protocol_type != known and entries:
            line["pt"] = protocol_type
        self._write(line)
        self._offsets.setdefault(group_id, {}).update(stamped)
        if protocol_type is not None and "pt" in line:
            self._protocol_types[group_id] = protocol_type
        self._entries += len(entries)
        self._maybe_compact()

    def expire(self, idle_groups: dict[str, int], retention_ms: int) -> int:
        """Drop the offsets of the groups in ``idle_groups`` (group id -> wall clock of its
        last state change, 0 if unknown) committed and idle for ``retention_ms`` or
        longer; returns how many. O(offsets of those groups)."""
        now = self.wall_clock_ms()
        dropped = 0
        for group_id, since_ms in idle_groups.items():
            committed = self._offsets.get(group_id)
            if not committed:
                continue
            old = [
                tp
                for tp, o in committed.items()
                if now - max(o.commit_ms, since_ms) >= retention_ms
            ]
            if not old:
                continue
            tombstones = [[tp.topic, tp.partition, None, -1, ""] for tp in old]
            self._write({"g": group_id, "ts": now, "o": tombstones})
            for tp in old:
                del committed[tp]
            if not committed:
                del self._offsets[group_id]
                self._protocol_types.pop(group_id, None)
            self._entries += len(old)
            dropped += len(old)
        self._maybe_compact()
        return dropped

    def close(self) -> None:
        """Close the file. Idempotent."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    # -- the file --------------------------------------------------------------------

    def _write(self, line: dict[str, object]) -> None:
        data = (json.dumps(line, separators=(",", ":")) + "\n").encode()
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        if self.fsync:
            os.fsync(self._fd)

    def _load(self) -> None:
        if not self.path.exists():
            return
        raw = self.path.read_bytes()
        good = 0
        for line in raw.splitlines(keepends=True):
            try:
                if not line.endswith(b"\n"):
                    raise ValueError("torn line")
                self._apply(json.loads(line))
            except (ValueError, TypeError, KeyError, IndexError) as exc:
                log.warning(
                    "%s: dropping %d bytes from byte %d (%s)", self.path, len(raw) - good, good, exc
                )
                os.truncate(self.path, good)
                break
            good += len(line)

    def _apply(self, line: dict[str, object]) -> None:
        group_id = line["g"]
        ts = line["ts"]
        entries = line["o"]
        protocol_type = line.get("pt")
        if not (isinstance(group_id, str) and isinstance(ts, int) and isinstance(entries, list)):
            raise ValueError("not a commit line")
        if not (protocol_type is None or isinstance(protocol_type, str)):
            raise ValueError("not a protocol type")
        committed = self._offsets.setdefault(group_id, {})
        for topic, partition, offset, epoch, metadata in entries:
            tp = TopicPartition(str(topic), int(partition))
            if offset is None:
                committed.pop(tp, None)
            else:
                committed[tp] = CommittedOffset(int(offset), int(epoch), str(metadata), ts)
            self._entries += 1
        if protocol_type is not None:
            self._protocol_types[group_id] = protocol_type
        if not committed:
            del self._offsets[group_id]
            self._protocol_types.pop(group_id, None)

    def _maybe_compact(self) -> None:
        live = len(self)
        if self._entries < self.compact_min_entries or self._entries <= COMPACT_FACTOR * live:
            return
        tmp = self.directory / (COMMITS_FILE + ".compacting")
        with open(tmp, "wb") as f:
            for group_id, committed in self._offsets.items():
                by_ts: dict[int, list[list[object]]] = {}
                for tp, o in committed.items():
                    by_ts.setdefault(o.commit_ms, []).append(_entry(tp, o))
                protocol_type = self._protocol_types.get(group_id)
                for ts, entries in sorted(by_ts.items()):
                    line: dict[str, object] = {"g": group_id, "ts": ts, "o": entries}
                    if protocol_type is not None:
                        line["pt"] = protocol_type
                        protocol_type = None  # on the group's first line only
                    f.write((json.dumps(line, separators=(",", ":")) + "\n").encode())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._entries = live
        self.compactions += 1


def _entry(tp: TopicPartition, o: CommittedOffset) -> list[object]:
    return [tp.topic, tp.partition, o.offset, o.leader_epoch, o.metadata]


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000
