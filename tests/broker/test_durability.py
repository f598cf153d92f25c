"""Acknowledged means written: what survives the broker process dying, flush policy,
and recovery that drops data saying so."""

from __future__ import annotations

from pathlib import Path

from purgatory import TopicPartition
from purgatory.broker import PartitionLog, iter_batches, iter_records

from ..childproc import Child

ACKS_BEFORE_KILL = 200


def records_in(directory: Path) -> dict[int, bytes]:
    """Every record of the log in ``directory``, by offset (reopened, so recovered)."""
    with PartitionLog(directory) as log:
        data = log.read(log.log_start_offset, 1 << 30)
    return {r.offset: r.value or b"" for b in iter_batches(data) for r in iter_records(b)}


def test_sigkill_loses_no_acknowledged_record(tmp_path: Path) -> None:
    """A broker process killed with SIGKILL: every record it had acknowledged (acks=-1
    and acks=1) is in its partition's file when the logs are reopened."""
    acked: list[tuple[int, int, bytes]] = []
    with Child(["-m", "tests.broker.crash_child", str(tmp_path)]) as child:
        lines: list[str] = []
        try:
            while len(lines) < ACKS_BEFORE_KILL:
                line = child.read_line(timeout_s=10)
                assert line is not None, "the child exited"
                lines.append(line)
        finally:
            lines += child.kill()
        assert len(lines) >= ACKS_BEFORE_KILL, child.stderr()
    for line in lines:
        partition, offset, value = line.split(" ")
        acked.append((int(partition), int(offset), value.encode()))
    logs = {p: records_in(tmp_path / str(TopicPartition("crash", p))) for p in (0, 1)}
    missing = [(p, o) for p, o, v in acked if logs[p].get(o) != v]
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged records lost"
