"""TopicPartition: Kafka's usual watch key."""

from __future__ import annotations

from purgatory import TopicPartition


def test_a_topic_partition_is_a_hashable_ordered_value_printed_topic_dash_n() -> None:
    a, b = TopicPartition("orders", 1), TopicPartition("orders", 0)
    assert str(a) == "orders-1" and sorted([a, b]) == [b, a]
    assert {a: 1}[TopicPartition("orders", 1)] == 1
