"""The client matrix for the Python clients (aiokafka, kafka-python, confluent-kafka)
against the wire broker; see ``matrix_kit`` for the variants and checks.

Per client:

* produce with acks 0, 1 and all, the idempotent producer, each codec (gzip,
  snappy, lz4, zstd) and a 1,000,000-byte value, keys and per-record headers, to an
  explicit partition; read back (keys, values, headers, offsets as acknowledged,
  order per partition) and check the stored batches (codec bits, producer id);
* a long-poll fetch (max wait 25 s, min bytes 1 KiB) parks, a small record leaves it
  parked, a larger one wakes it: the fetch purgatory completed it early, none expired;
* a group: a member in this process and one in a child process split the
  partitions (the client's admin lists the group as "consumer" and describes it
  Stable with two members); SIGKILL of the child: this one takes all partitions
  once the child's session runs out; a second child joins, then leaves on SIGTERM
  (LeaveGroup: a rebalance, no session expiry); every record consumed once between
  them; after a broker restart on the same data dir the admin reads the committed
  offsets back.

What a client does not offer: under acks=0 none learns its records' offsets (aiokafka
gives no metadata, confluent-kafka -1, kafka-python -1 plus the record's index in its
batch, which looks like an offset and is not), so only the read-back has them;
confluent-kafka's admin
says whether a group is "simple" (protocol type "") rather than naming the protocol
type, so "consumer" is read as not simple. Snappy, lz4 and zstd need python-snappy,
lz4 and zstandard (kafka-python) and cramjam (aiokafka): the ``dev`` extra has them.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from purgatory_broker.wire import BrokerThread

from .group_members import MEMBERS, Member
from .matrix_kit import (
    DEADLINE_S,
    FETCH_MAX_WAIT_MS,
    FETCH_MIN_BYTES,
    LONG_POLL_TOPIC,
    MAX_MESSAGE_BYTES,
    PARTITIONS,
    SURVIVOR_SESSION_MS,
    VARIANTS,
    ChildMember,
    Headers,
    Read,
    Sent,
    Variant,
    check_long_poll,
    check_read_back,
    check_stored_batches,
    group_scenario,
    matrix_config,
    records,
    topic_of,
)
from .test_groups import PARTITIONS as GROUP_PARTITIONS
from .test_groups import TOPIC as GROUP_TOPIC
from .test_groups import high_watermarks

CLIENTS = ("aiokafka", "kafka-python", "confluent-kafka")
ACKS: dict[int, Any] = {0: 0, 1: 1, -1: "all"}
Assignment = Sequence[tuple[str, int]]  # (topic, partition), each read from offset 0
Sink = list[tuple[str, Read]]


def _headers(headers: Any) -> Headers:
    """A client's record headers (a list of (name, value) or None) as a tuple."""
    return tuple((k, bytes(v)) for k, v in headers or ())


def _placed(batch: list[Sent], metas: Sequence[Any], acks: int) -> list[Sent]:
    """``batch`` with the partition each record was sent to (the i-th: i % PARTITIONS)
    and the offset its producer was told, except under acks=0 (no answer, so none:
    aiokafka gives no metadata, confluent-kafka -1, kafka-python -1 plus the record's
    index in its batch). ``metas``: the clients' record metadata (``partition``,
    ``offset``), or None."""
    placed = []
    for i, (s, m) in enumerate(zip(batch, metas, strict=True)):
        if m is not None:
            assert m.partition == i % PARTITIONS, (i, m)
        offset = None if acks == 0 else m.offset
        placed.append(Sent(s.key, s.value, s.headers, i % PARTITIONS, offset))
    return placed


# -- produce ------------------------------------------------------------------------


def produce_kafka_python(
    bootstrap: str, topic: str, variant: Variant, batch: list[Sent]
) -> list[Sent]:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks=ACKS[variant.acks],
        enable_idempotence=variant.idempotent,  # on by default in 3.x
        compression_type=None if variant.codec == "none" else variant.codec,
        max_request_size=MAX_MESSAGE_BYTES,
    )
    try:
        futures = [
            producer.send(topic, s.value, s.key, list(s.headers), i % PARTITIONS)
            for i, s in enumerate(batch)
        ]
        producer.flush(timeout=DEADLINE_S)
        metas = [f.get(timeout=DEADLINE_S) for f in futures]
    finally:
        producer.close(timeout=5)
    return _placed(batch, metas, variant.acks)


def produce_aiokafka(bootstrap: str, topic: str, variant: Variant, batch: list[Sent]) -> list[Sent]:
    from aiokafka import AIOKafkaProducer

    async def run() -> list[Sent]:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks=ACKS[variant.acks],
            enable_idempotence=variant.idempotent,
            compression_type=None if variant.codec == "none" else variant.codec,
            max_request_size=MAX_MESSAGE_BYTES,
        )
        await producer.start()
        try:
            futures = [
                await producer.send(topic, s.value, s.key, i % PARTITIONS, headers=list(s.headers))
                for i, s in enumerate(batch)
            ]
            metas = await asyncio.wait_for(asyncio.gather(*futures), DEADLINE_S)
        finally:
            await producer.stop()
        return _placed(batch, metas, variant.acks)

    return asyncio.run(run())


def produce_confluent(
    bootstrap: str, topic: str, variant: Variant, batch: list[Sent]
) -> list[Sent]:
    from confluent_kafka import KafkaError, Message, Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "broker.address.family": "v4",
            "acks": str(ACKS[variant.acks]),
            "enable.idempotence": variant.idempotent,
            "compression.type": variant.codec,
            "message.max.bytes": MAX_MESSAGE_BYTES,
        }
    )
    reports: dict[int, Message[bytes, bytes]] = {}
    errors: list[KafkaError] = []

    def on_delivery(i: int) -> Callable[[KafkaError | None, Message[bytes, bytes]], None]:
        def report(err: KafkaError | None, msg: Message[bytes, bytes]) -> None:
            if err is not None:
                errors.append(err)
            reports[i] = msg

        return report

    for i, s in enumerate(batch):
        producer.produce(
            topic,
            s.value,
            s.key,
            partition=i % PARTITIONS,
            headers=list(s.headers),
            on_delivery=on_delivery(i),
        )
    assert producer.flush(DEADLINE_S) == 0
    assert not errors, errors
    metas = [
        SimpleNamespace(partition=reports[i].partition(), offset=reports[i].offset())
        for i in range(len(batch))
    ]
    return _placed(batch, metas, variant.acks)


# -- consume (manual assignment, from offset 0) -------------------------------------


def _assign_from_the_start(consumer: Any, tps: list[Any]) -> float:
    """Assign ``tps`` (kafka-python's or aiokafka's consumer: the same calls), each read
    from offset 0; the monotonic deadline of the read."""
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, 0)
    return time.monotonic() + DEADLINE_S


def _records(polled: Mapping[Any, list[Any]]) -> Sink:
    """What one poll returned (kafka-python's and aiokafka's records alike), as sunk."""
    return [
        (tp.topic, Read(m.partition, m.offset, m.key, m.value, _headers(m.headers)))
        for tp, records in polled.items()
        for m in records
    ]


def consume_kafka_python(
    bootstrap: str, assignment: Assignment, count: int, sink: Sink, options: dict[str, Any]
) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, **options
    )
    try:
        deadline = _assign_from_the_start(consumer, [KTP(t, p) for t, p in assignment])
        while len(sink) < count and time.monotonic() < deadline:
            sink.extend(_records(consumer.poll(timeout_ms=100)))
    finally:
        consumer.close()


def consume_aiokafka(
    bootstrap: str, assignment: Assignment, count: int, sink: Sink, options: dict[str, Any]
) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATP

    async def run() -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, **options
        )
        await consumer.start()
        try:
            deadline = _assign_from_the_start(consumer, [ATP(t, p) for t, p in assignment])
            while len(sink) < count and time.monotonic() < deadline:
                sink.extend(_records(await consumer.getmany(timeout_ms=100)))
        finally:
            await consumer.stop()

    asyncio.run(run())


def consume_confluent(
    bootstrap: str, assignment: Assignment, count: int, sink: Sink, options: dict[str, Any]
) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP

    # a group.id is required even with assign(); nothing is committed
    config = {
        "bootstrap.servers": bootstrap,
        "broker.address.family": "v4",
        "group.id": "matrix-reader",
        "enable.auto.commit": False,
    }
    consumer = Consumer({**config, **options})
    try:
        consumer.assign([CTP(t, p, 0) for t, p in assignment])
        deadline = time.monotonic() + DEADLINE_S
        while len(sink) < count and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=500, timeout=0.1):
                assert m.error() is None, m.error()
                topic, value = m.topic(), m.value()
                assert topic is not None and value is not None
                read = Read(
                    m.partition() or 0, m.offset() or 0, m.key(), value, _headers(m.headers())
                )
                sink.append((topic, read))
    finally:
        consumer.close()


# -- admin ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupView:
    """What a client's admin says of a group: ListGroups (group -> protocol type),
    DescribeGroups (state, lower case; member count), OffsetFetch (partition -> offset)."""

    listed: dict[str, str]
    state: str
    members: int
    offsets: dict[int, int]


def admin_kafka_python(bootstrap: str, group: str) -> GroupView:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        listed = {g["group_id"]: g["protocol_type"] for g in admin.list_groups()}
        described = admin.describe_groups([group])[group]
        offsets = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return GroupView(
        listed,
        described["group_state"].lower(),
        len(described["members"]),
        {tp.partition: o.offset for tp, o in offsets.items() if tp.topic == GROUP_TOPIC},
    )


def admin_aiokafka(bootstrap: str, group: str) -> GroupView:
    from aiokafka.admin import AIOKafkaAdminClient

    async def run() -> GroupView:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            listed = {g[0]: g[1] for g in await admin.list_consumer_groups()}
            [response] = await admin.describe_consumer_groups([group])
            [described] = response.groups  # (error, group, state, protocol type, ...)
            offsets = await admin.list_consumer_group_offsets(group)
        finally:
            await admin.close()
        assert described[0] == 0 and described[1] == group, described
        return GroupView(
            listed,
            described[2].lower(),
            len(described[5]),
            {tp.partition: o.offset for tp, o in offsets.items() if tp.topic == GROUP_TOPIC},
        )

    return asyncio.run(run())


def admin_confluent(bootstrap: str, group: str) -> GroupView:
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    result = admin.list_consumer_groups(request_timeout=DEADLINE_S).result()
    assert not result.errors, result.errors
    # the admin says "simple" (protocol type "") or not, not the protocol type
    listed = {g.group_id: "" if g.is_simple_consumer_group else "consumer" for g in result.valid}
    described = admin.describe_consumer_groups([group])[group].result()
    spec = [ConsumerGroupTopicPartitions(group)]
    offsets = admin.list_consumer_group_offsets(spec)[group].result().topic_partitions
    return GroupView(
        listed,
        described.state.name.lower(),
        len(described.members),
        {tp.partition: tp.offset for tp in offsets if tp.topic == GROUP_TOPIC},
    )


@dataclass(frozen=True, slots=True)
class Client:
    produce: Callable[[str, str, Variant, list[Sent]], list[Sent]]
    consume: Callable[[str, Assignment, int, Sink, dict[str, Any]], None]
    admin: Callable[[str, str], GroupView]
    long_poll: dict[str, Any]  # the consumer options of the long-poll scenario


CLIENT = {
    "kafka-python": Client(
        produce_kafka_python,
        consume_kafka_python,
        admin_kafka_python,
        {"fetch_max_wait_ms": FETCH_MAX_WAIT_MS, "fetch_min_bytes": FETCH_MIN_BYTES},
    ),
    "aiokafka": Client(
        produce_aiokafka,
        consume_aiokafka,
        admin_aiokafka,
        {
            "fetch_max_wait_ms": FETCH_MAX_WAIT_MS,
            "fetch_min_bytes": FETCH_MIN_BYTES,
            "request_timeout_ms": FETCH_MAX_WAIT_MS + 10_000,
        },
    ),
    "confluent-kafka": Client(
        produce_confluent,
        consume_confluent,
        admin_confluent,
        {"fetch.wait.max.ms": FETCH_MAX_WAIT_MS, "fetch.min.bytes": FETCH_MIN_BYTES},
    ),
}


def check_stable_group(view: GroupView, group: str) -> None:
    assert (view.state, view.members) == ("stable", 2), view
    assert view.listed.get(group) == "consumer", view.listed


# -- the tests ------------------------------------------------------------------------


@pytest.mark.parametrize("name", CLIENTS)
def test_every_produce_variant_reads_back(name: str) -> None:
    client = CLIENT[name]
    with BrokerThread(matrix_config()) as bt:
        bootstrap = bt.bootstrap_servers
        sent = {
            topic_of(name, v): client.produce(bootstrap, topic_of(name, v), v, records(name, v))
            for v in VARIANTS
        }
        sink: Sink = []
        assignment = [(t, p) for t in sent for p in range(PARTITIONS)]
        client.consume(bootstrap, assignment, sum(map(len, sent.values())), sink, {})
        for variant in VARIANTS:
            topic = topic_of(name, variant)
            check_read_back(sent[topic], [r for t, r in sink if t == topic])
            check_stored_batches(bt, topic, variant)
        assert bt.call(lambda wb: wb.stats.internal_errors) == 0


@pytest.mark.parametrize("name", CLIENTS)
def test_a_parked_long_poll_is_woken_by_a_produce(name: str) -> None:
    client = CLIENT[name]
    acks_all = Variant("long-poll", -1)
    with BrokerThread(matrix_config()) as bt:
        bootstrap = bt.bootstrap_servers
        bt.call(lambda wb: wb.handler.topic(LONG_POLL_TOPIC))
        sink: Sink = []
        consumer = threading.Thread(
            target=client.consume,
            args=(bootstrap, [(LONG_POLL_TOPIC, 0)], 2, sink, client.long_poll),
            daemon=True,
        )
        consumer.start()
        try:

            def send(value: bytes) -> None:
                client.produce(bootstrap, LONG_POLL_TOPIC, acks_all, [Sent(b"k", value, ())])

            check_long_poll(bt, send, lambda: [(r.partition, r.offset, r.value) for _, r in sink])
        finally:
            consumer.join(DEADLINE_S)
        assert not consumer.is_alive()


@pytest.mark.parametrize("name", CLIENTS)
def test_group_split_sigkill_leave_and_offsets_across_a_restart(name: str, tmp_path: Path) -> None:
    client = CLIENT[name]
    config = matrix_config(partitions=GROUP_PARTITIONS, data_dir=str(tmp_path))
    group = f"{name}-matrix"
    with BrokerThread(config) as bt:
        bootstrap = bt.bootstrap_servers
        bt.call(lambda wb: wb.handler.topic(GROUP_TOPIC))
        a: Member = MEMBERS[name](bootstrap, group, GROUP_TOPIC, SURVIVOR_SESSION_MS).start()
        try:
            group_scenario(
                bt,
                group,
                a,
                lambda: ChildMember.python(name, bootstrap, group, GROUP_TOPIC),
                lambda: check_stable_group(client.admin(bootstrap, group), group),
            )
        finally:
            a.close()
        before = high_watermarks(bt)
    with BrokerThread(config) as bt:
        view = client.admin(bt.bootstrap_servers, group)
        assert view.offsets == before
        assert (view.state, view.members) == ("empty", 0)
        # a group that had members is still of protocol type "consumer" (as in Kafka,
        # which keeps it with the offsets)
        assert view.listed.get(group) == "consumer", view.listed
