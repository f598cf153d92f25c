"""The read-back: every acknowledged record must be in the reopened logs.

After the run the broker is closed and every partition log is *reopened from
disk* (:class:`~purgatory_broker.broker.PartitionLog`, which recovers a torn tail) and
read from its start. Checked, per partition:

* every record acknowledged with NONE is there, at its acknowledged offset
  (the batch's base offset + its index), with its value;
* each producer's acknowledged batches have increasing base offsets, in the
  order it sent them;
* reopening cut nothing (a cut is a lost acknowledged write).

Problems are listed (up to 20, with the partition and offset); the read is one
pass over each log, O(log bytes + acknowledged records log acknowledged records).
The acknowledged values are not kept: each batch's are rebuilt from its producer,
sequence number and size (:func:`.clients.record_values`) when the read reaches
it, so the check holds one batch of values at a time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
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

__all__ = ["MAX_PROBLEMS", "read_back"]

#: problems listed at most (the count of records read back says the rest)
MAX_PROBLEMS = 20


def read_back(
    acks: Sequence[Ack],
    data_dir: Path,
    partitions: Sequence[TopicPartition],
    opened_truncated_bytes: int,
) -> dict[str, Any]:
    """Reopen the logs of ``partitions`` under ``data_dir`` and check every answered
    request in ``acks`` (each producer's in the order it sent them);
    ``opened_truncated_bytes`` is what recovery cut when the broker first opened them.
    Returns the summary's read-back keys (see the module doc).
    O(log bytes + acknowledged records log acknowledged records)."""
    acked: dict[TopicPartition, list[tuple[int, Ack]]] = defaultdict(list)
    last_seen: dict[tuple[int, TopicPartition], tuple[int, int]] = {}
    failed = 0
    problems: list[str] = []
    for ack in acks:
        if ack.error_code != ErrorCode.NONE:
            failed += 1
            continue
        key = (ack.producer, ack.tp)
        previous = last_seen.get(key)
        if previous is not None and previous[1] >= ack.base_offset:
            problems.append(
                f"producer {ack.producer} seq {ack.seq} at offset {ack.base_offset} "
                f"in {ack.tp} is not after seq {previous[0]} at {previous[1]}"
            )
        last_seen[key] = (ack.seq, ack.base_offset)
        acked[ack.tp].append((ack.base_offset, ack))
    total = sum(ack.records for batches in acked.values() for _, ack in batches)
    checked = 0
    truncated = opened_truncated_bytes
    for tp in partitions:
        # the acknowledged records in offset order, values rebuilt one batch at a time
        batches = sorted(acked.get(tp, []), key=lambda pair: pair[0])
        expected = (
            (base + i, value) for base, ack in batches for i, value in enumerate(ack.values)
        )
        current = next(expected, None)
        log = PartitionLog(data_dir / str(tp))
        if log.recovery.truncated_bytes:
            truncated += log.recovery.truncated_bytes
            problems.append(
                f"{tp}: reopening cut {log.recovery.truncated_bytes} bytes at offset "
                f"{log.recovery.truncated_at_offset}"
            )
        try:
            offset = log.log_start_offset
            while current is not None and offset < log.log_end_offset:
                data = log.read(offset, 1 << 20)
                for batch in iter_batches(data):
                    for record in iter_records(batch):
                        while current is not None and current[0] < record.offset:
                            problems.append(f"{tp} offset {current[0]} missing")
                            current = next(expected, None)
                        if current is not None and current[0] == record.offset:
                            if record.value != current[1]:
                                problems.append(f"{tp} offset {record.offset}: wrong value")
                            current = next(expected, None)
                            checked += 1
                    offset = RecordBatchHeader.parse(batch).next_offset
        except (CorruptRecordError, OSError) as exc:
            problems.append(f"{tp}: cannot read at offset {offset}: {exc}")
        finally:
            log.close()
        while current is not None and len(problems) <= MAX_PROBLEMS:
            problems.append(f"{tp} offset {current[0]} missing")
            current = next(expected, None)
    return {
        "acked_records": total,
        "failed_produces": failed,
        "read_back_records": checked,
        "read_back_ok": not problems and checked == total,
        "recovery_truncated_bytes": truncated,
        "read_back_problems": problems[:MAX_PROBLEMS],
    }
