"""Unmodified Kafka clients against the wire broker: acks=all produce, manual-assignment
consume from earliest; every acknowledged message comes back once, in order per partition."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from purgatory_broker.wire import BrokerThread, KafkaWireBroker

from .readback import Consumed, all_seen, check_read_back, value

MESSAGES = 300
PARTITIONS = 3  # conftest.fast_config
DEADLINE_S = 60.0  # a hang guard of every wait, not a measure of speed


@pytest.mark.asyncio
async def test_aiokafka(wire: KafkaWireBroker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATP

    topic = "aiokafka-topic"
    producer = AIOKafkaProducer(
        bootstrap_servers=wire.bootstrap_servers, acks="all", enable_idempotence=True
    )
    await producer.start()
    try:
        futures = [
            await producer.send(topic, value("aiokafka", i), partition=i % PARTITIONS)
            for i in range(MESSAGES)
        ]
        metas = await asyncio.gather(*futures)
    finally:
        await producer.stop()
    acked = [(m.partition, m.offset, value("aiokafka", i)) for i, m in enumerate(metas)]

    consumer = AIOKafkaConsumer(
        bootstrap_servers=wire.bootstrap_servers, enable_auto_commit=False, group_id=None
    )
    await consumer.start()
    consumed: Consumed = []
    try:
        consumer.assign([ATP(topic, p) for p in range(PARTITIONS)])
        await consumer.seek_to_beginning()
        deadline = time.monotonic() + DEADLINE_S
        while not all_seen(acked, consumed) and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for messages in batches.values():
                consumed += [(m.partition, m.offset, m.value) for m in messages]
    finally:
        await consumer.stop()
    check_read_back(acked, consumed, MESSAGES)


def test_kafka_python(broker_thread: BrokerThread) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    topic = "kafka-python-topic"
    # kafka-python 3.x: idempotence on by default (InitProducerId, sequences)
    producer = KafkaProducer(bootstrap_servers=broker_thread.bootstrap_servers, acks="all")
    try:
        futures = [
            producer.send(topic, value("kafka-python", i), partition=i % PARTITIONS)
            for i in range(MESSAGES)
        ]
        producer.flush(timeout=DEADLINE_S)
        metas = [f.get(timeout=DEADLINE_S) for f in futures]
    finally:
        producer.close(timeout=5)
    acked = [(m.partition, m.offset, value("kafka-python", i)) for i, m in enumerate(metas)]
    assert broker_thread.call(lambda wb: wb.handler.requests_by_api.get("InitProducerId", 0)) >= 1

    consumer = KafkaConsumer(
        bootstrap_servers=broker_thread.bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    consumed: Consumed = []
    try:
        consumer.assign([KTP(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + DEADLINE_S
        while not all_seen(acked, consumed) and time.monotonic() < deadline:
            for messages in consumer.poll(timeout_ms=500).values():
                consumed += [(m.partition, m.offset, m.value) for m in messages]
    finally:
        consumer.close()
    check_read_back(acked, consumed, MESSAGES)


def test_confluent_kafka(broker_thread: BrokerThread) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer
    from confluent_kafka import TopicPartition as CTP

    topic = "confluent-topic"
    bootstrap = broker_thread.bootstrap_servers
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    reports: dict[int, tuple[KafkaError | None, int, int]] = {}

    def on_delivery(i: int) -> Callable[[KafkaError | None, Message[bytes, bytes]], None]:
        def report(err: KafkaError | None, msg: Message[bytes, bytes]) -> None:
            partition, offset = msg.partition(), msg.offset()
            assert partition is not None and offset is not None
            reports[i] = (err, partition, offset)

        return report

    for i in range(MESSAGES):
        producer.produce(
            topic, value("confluent", i), partition=i % PARTITIONS, on_delivery=on_delivery(i)
        )
    assert producer.flush(DEADLINE_S) == 0
    producer.close()
    assert all(err is None for err, _, _ in reports.values()), reports
    acked = [(reports[i][1], reports[i][2], value("confluent", i)) for i in range(MESSAGES)]

    # a group.id is required even with assign(); no coordinator here, so no commits.
    # isolation.level stays at its default, read_committed (LSO = high watermark).
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "wire-test", "enable.auto.commit": False}
    )
    consumed: Consumed = []
    try:
        consumer.assign([CTP(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + DEADLINE_S
        while not all_seen(acked, consumed) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            partition, offset, data = msg.partition(), msg.offset(), msg.value()
            assert partition is not None and offset is not None and data is not None
            consumed.append((partition, offset, data))
    finally:
        consumer.close()
    check_read_back(acked, consumed, MESSAGES)
