"""The broker tests' partitions and the batches they write to them."""

from __future__ import annotations

from purgatory_broker.broker import build_batch

from purgatory import TopicPartition

A = TopicPartition("t", 0)
B = TopicPartition("t", 1)
#: a partition the brokers of these tests do not hold
GONE = TopicPartition("gone", 0)


def batch(records: int = 1, tag: str = "v") -> bytes:
    """A batch of ``records`` records of 40 bytes each, ``tag`` repeated (timestamp 0)."""
    return build_batch([tag.encode() * 40] * records, base_timestamp_ms=0)
