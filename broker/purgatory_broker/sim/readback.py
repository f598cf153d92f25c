"""The read-back: every acknowledged record must be in the reopened logs.

After the run the broker is closed and every partition log is *reopened from
disk* (:class:`~purgatory_broker.broker.PartitionLog`, which recovers a torn tail) and
read from its start. Checked, per partition:

* every record acknowledged with NONE is there, at its acknowledged offset
  (the batch's base offset + its index), with its value;
* each producer's acknowledged batches have increasing base offsets, in the
  order it sent them;
* reopening cut nothing (a cut is a lost acknowledged write).

The steps (:func:`read_back`): group the acknowledged batches by partition, checking
each producer's order on the way (:meth:`_ReadBack.take_acks`); then for each
partition rebuild the expected records in offset order (:func:`_expected_records`)
and walk its reopened log once beside them (:meth:`_ReadBack.check_partition`): a
record of the log that was expected is checked and counted, an expected offset the
log skipped is missing, and what is still expected when the log ends is missing too.

Problems are listed (up to 20, with the partition and offset); the read is one
pass over each log, O(log bytes + acknowledged records log acknowledged records).
The acknowledged values are not kept: each batch's are rebuilt from its producer,
sequence number and size (:func:`.clients.record_values`) when the read reaches
it, so the check holds one batch of values at a time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from purgatory import TopicPartition
from purgatory_broker.broker import (
    CorruptRecordError,
    ErrorCode,
    PartitionLog,
    RecordBatchHeader,
    iter_batches,
    iter_records,
)

from .clients import Ack

__all__ = ["MAX_PROBLEMS", "ReadBack", "read_back"]

#: problems listed at most (the count of records read back says the rest)
MAX_PROBLEMS = 20
#: bytes of log read at a time
_READ_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class ReadBack:
    """What the read-back found; :meth:`figures` gives the summary's keys."""

    acked_records: int  # records acknowledged with NONE
    failed_produces: int  # requests answered with an error
    read_back_records: int  # of the acknowledged records, found at their offsets
    recovery_truncated_bytes: int  # cut when the logs were opened, first or again
    problems: tuple[str, ...]  # at most MAX_PROBLEMS

    @property
    def ok(self) -> bool:
        """Every acknowledged record read back, and nothing wrong. O(1)."""
        return not self.problems and self.read_back_records == self.acked_records

    def figures(self) -> dict[str, Any]:
        """The summary's read-back keys. O(problems)."""
        return {
            "acked_records": self.acked_records,
            "failed_produces": self.failed_produces,
            "read_back_records": self.read_back_records,
            "read_back_ok": self.ok,
            "recovery_truncated_bytes": self.recovery_truncated_bytes,
            "read_back_problems": list(self.problems),
        }


def _expected_records(batches: list[tuple[int, Ack]]) -> Iterator[tuple[int, bytes]]:
    """(offset, value) of every record of ``batches``, in offset order, the values of
    one batch rebuilt at a time. O(records log batches)."""
    batches.sort(key=lambda pair: pair[0])
    for base, ack in batches:
        for i, value in enumerate(ack.values):
            yield base + i, value


class _ReadBack:
    """The read-back's state while it runs: what was found, what is wrong."""

    def __init__(self, opened_truncated_bytes: int) -> None:
        self.acked: dict[TopicPartition, list[tuple[int, Ack]]] = defaultdict(list)
        self.failed = 0
        self.checked = 0
        self.truncated = opened_truncated_bytes
        self.problems: list[str] = []

    def take_acks(self, acks: Sequence[Ack]) -> None:
        """Keep the batches acknowledged with NONE by partition (with their base
        offsets); count the failed ones; check each producer's order. O(acks)."""
        last_seen: dict[tuple[int, TopicPartition], tuple[int, int]] = {}
        for ack in acks:
            if ack.error_code != ErrorCode.NONE:
                self.failed += 1
                continue
            key = (ack.producer, ack.tp)
            previous = last_seen.get(key)
            if previous is not None and previous[1] >= ack.base_offset:
                self.problems.append(
                    f"producer {ack.producer} seq {ack.seq} at offset {ack.base_offset} "
                    f"in {ack.tp} is not after seq {previous[0]} at {previous[1]}"
                )
            last_seen[key] = (ack.seq, ack.base_offset)
            self.acked[ack.tp].append((ack.base_offset, ack))

    def check_partition(self, tp: TopicPartition, data_dir: Path) -> None:
        """Reopen ``tp``'s log and walk it beside its expected records. O(log bytes +
        its acknowledged records)."""
        expected = _expected_records(self.acked.get(tp, []))
        log = PartitionLog(data_dir / str(tp))
        recovery = log.recovery
        if recovery.truncated_bytes:
            self.truncated += recovery.truncated_bytes
            self.problems.append(
                f"{tp}: reopening cut {recovery.truncated_bytes} bytes at offset "
                f"{recovery.truncated_at_offset}"
            )
        try:
            current = self._walk_log(tp, log, expected)
        finally:
            log.close()
        while current is not None and len(self.problems) <= MAX_PROBLEMS:
            self.problems.append(f"{tp} offset {current[0]} missing")
            current = next(expected, None)

    def _walk_log(
        self, tp: TopicPartition, log: PartitionLog, expected: Iterator[tuple[int, bytes]]
    ) -> tuple[int, bytes] | None:
        """Check the log's records against ``expected`` until either ends; the first
        expected record not reached. O(log bytes + records)."""
        current = next(expected, None)
        offset = log.log_start_offset
        try:
            while current is not None and offset < log.log_end_offset:
                for batch in iter_batches(log.read(offset, _READ_BYTES)):
                    for record in iter_records(batch):
                        while current is not None and current[0] < record.offset:
                            self.problems.append(f"{tp} offset {current[0]} missing")
                            current = next(expected, None)
                        if current is not None and current[0] == record.offset:
                            if record.value != current[1]:
                                self.problems.append(f"{tp} offset {record.offset}: wrong value")
                            current = next(expected, None)
                            self.checked += 1
                    offset = RecordBatchHeader.parse(batch).next_offset
        except (CorruptRecordError, OSError) as exc:
            self.problems.append(f"{tp}: cannot read at offset {offset}: {exc}")
        return current

    def result(self) -> ReadBack:
        acked_records = sum(ack.records for batches in self.acked.values() for _, ack in batches)
        return ReadBack(
            acked_records=acked_records,
            failed_produces=self.failed,
            read_back_records=self.checked,
            recovery_truncated_bytes=self.truncated,
            problems=tuple(self.problems[:MAX_PROBLEMS]),
        )


def read_back(
    acks: Sequence[Ack],
    data_dir: Path,
    partitions: Sequence[TopicPartition],
    opened_truncated_bytes: int,
) -> ReadBack:
    """Reopen the logs of ``partitions`` under ``data_dir`` and check every answered
    request in ``acks`` (each producer's in the order it sent them);
    ``opened_truncated_bytes`` is what recovery cut when the broker first opened them.
    See the module doc. O(log bytes + acknowledged records log acknowledged records)."""
    check = _ReadBack(opened_truncated_bytes)
    check.take_acks(acks)
    for tp in partitions:
        check.check_partition(tp, data_dir)
    return check.result()
