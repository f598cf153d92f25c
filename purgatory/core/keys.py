"""Watch keys: a topic-partition, Kafka's usual key. Any hashable works as a key."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["TopicPartition"]


class TopicPartition(NamedTuple):
    """A topic and a partition number: hashable, immutable, ordered, printed ``topic-N``."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
