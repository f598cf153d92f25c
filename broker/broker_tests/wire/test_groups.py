"""Consumer groups through the wire broker, with unmodified clients (aiokafka,
kafka-python, confluent-kafka): two members split a topic's partitions and consume
everything once between them; a member that leaves hands its partitions over at
once, one killed by SIGKILL after its session timeout; the survivor continues from
the committed offsets; committed offsets survive a broker restart and SIGKILL.

Small timeouts keep it quick: ``group.initial.rebalance.delay.ms`` 200, sessions
of 3 and 6 s (the broker's minimum lowered to 1 s; 30 s for the member that survives a
kill, whose expiry would be a mistake), heartbeats every 300 ms.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from purgatory_broker.wire import BrokerThread, KafkaWireBroker, WireConfig

from broker_tests.childproc import Child
from purgatory import TopicPartition

from .group_members import MEMBERS, Consuming

PARTITIONS = 4
SESSION_MS = 3000
#: the survivor's session: a busy machine that delays its heartbeats does not expire it
#: by mistake (the count of expired members is asserted)
SURVIVOR_SESSION_MS = 10 * SESSION_MS
DEADLINE_S = 60.0  # a hang guard of every wait, not a measure of speed
TOPIC = "orders"


def group_config(**changes: object) -> WireConfig:
    base: dict[str, object] = {
        "port": 0,
        "partitions": PARTITIONS,
        "followers": 1,
        "follower_lag_ms": 5,
        "group_initial_rebalance_delay_ms": 200,
        "group_min_session_timeout_ms": 1000,
    }
    base.update(changes)
    return WireConfig(**base)  # type: ignore[arg-type]


@pytest.fixture
def broker() -> Iterator[BrokerThread]:
    with BrokerThread(group_config()) as bt:
        bt.call(lambda wb: wb.handler.topic(TOPIC))
        yield bt
        assert bt.call(lambda wb: wb.stats.internal_errors) == 0
        bt.call(lambda wb: wb.coordinator.check_invariants())


def produce(bootstrap: str, count: int, start: int = 0) -> None:
    """``count`` records spread over the partitions, acks=all."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        futures = [
            producer.send(TOPIC, b"v%d" % i, partition=i % PARTITIONS)
            for i in range(start, start + count)
        ]
        producer.flush(timeout=DEADLINE_S)
        for f in futures:
            f.get(timeout=DEADLINE_S)
    finally:
        producer.close(timeout=5)


def wait_until(condition: Callable[[], bool], what: str, deadline_s: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {deadline_s} s: {what}")
        time.sleep(0.05)


def split(*members: Consuming) -> bool:
    """Every member has partitions, none shared, all covered."""
    sets = [m.snapshot()[0] for m in members]
    union = frozenset().union(*sets)
    return all(sets) and sum(map(len, sets)) == len(union) == PARTITIONS


def total(*members: Consuming) -> list[tuple[int, int]]:
    return [r for m in members for r in m.snapshot()[1]]


def committed(bt: BrokerThread, group: str) -> dict[int, int]:
    offsets = bt.call(lambda wb: wb.coordinator.fetch_offsets(group))
    return {tp.partition: o.offset for tp, o in offsets.items() if tp.topic == TOPIC}


def high_watermarks(bt: BrokerThread) -> dict[int, int]:
    def read(wb: KafkaWireBroker) -> dict[int, int]:
        parts = (wb.broker.partition(TopicPartition(TOPIC, p)) for p in range(PARTITIONS))
        return {i: p.high_watermark for i, p in enumerate(parts) if p is not None}

    return bt.call(read)


@pytest.mark.parametrize("client", sorted(MEMBERS))
def test_two_members_split_the_topic_and_a_leave_hands_over_at_once(
    broker: BrokerThread, client: str
) -> None:
    group = f"{client}-group"
    make = MEMBERS[client]
    a = make(broker.bootstrap_servers, group, TOPIC, SESSION_MS * 2).start()
    b = make(broker.bootstrap_servers, group, TOPIC, SESSION_MS * 2).start()
    try:
        wait_until(lambda: split(a, b), "the two members split the partitions")
        produce(broker.bootstrap_servers, 200)
        wait_until(lambda: len(total(a, b)) >= 200, "200 records consumed")
        time.sleep(0.3)  # anything consumed twice would show up now
        records = total(a, b)
        assert len(records) == len(set(records)) == 200  # exactly once between them
        assert a.snapshot()[1] and b.snapshot()[1]  # both consumed
        wait_until(lambda: committed(broker, group) == high_watermarks(broker), "all committed")

        expired = broker.call(lambda wb: wb.coordinator.expired_members)
        b.close()  # LeaveGroup: the group rebalances now, not after b's session
        wait_until(lambda: a.snapshot()[0] == frozenset(range(PARTITIONS)), "a owns all")
        counts = broker.call(
            lambda wb: (wb.coordinator.left_members, wb.coordinator.expired_members)
        )
        assert counts == (1, expired)
        assert len(broker.call(lambda wb: wb.coordinator.describe_group(group)).members) == 1
        before = set(total(a, b))
        produce(broker.bootstrap_servers, 40, start=200)
        wait_until(lambda: len(set(total(a, b))) >= 240, "the next 40 consumed by a")
        time.sleep(0.3)
        new = a.snapshot()[1]
        assert len(new) == len(set(new))
        assert not set(new) & (set(b.snapshot()[1]) - set()), "a re-read what b committed"
        assert len(set(total(a, b)) - before) == 40
    finally:
        a.close()
        if b._thread.is_alive():
            b.close()


def test_a_killed_member_expires_and_the_other_continues_from_committed_offsets(
    broker: BrokerThread,
) -> None:
    group = "crash-group"
    args = ["-m", "broker_tests.wire.group_members"]
    child_args = [broker.bootstrap_servers, group, TOPIC, str(SESSION_MS)]
    with Child([*args, *child_args]) as child:
        a = MEMBERS["kafka-python"](
            broker.bootstrap_servers, group, TOPIC, SURVIVOR_SESSION_MS
        ).start()
        try:
            child_records: list[tuple[int, int]] = []
            child_assigned: set[int] = set()
            produced = False
            deadline = time.monotonic() + DEADLINE_S
            while len(child_records) + len(a.snapshot()[1]) < 100:
                if time.monotonic() > deadline:
                    group_now = broker.call(lambda wb: wb.coordinator.describe_group(group))
                    raise AssertionError((child_assigned, len(child_records), group_now))
                mine = a.snapshot()[0]
                if not produced and mine and child_assigned and not mine & child_assigned:
                    produce(broker.bootstrap_servers, 100)  # once the two split the topic
                    produced = True
                try:
                    line = child.read_line(0.1)
                except TimeoutError:
                    continue
                assert line is not None, child.stderr()
                if line.startswith("consumed "):
                    _, p, o = line.split()
                    child_records.append((int(p), int(o)))
                else:
                    child_assigned = {int(p) for p in line.split(" ", 1)[1].split(",") if p}
            assert child_records
            child.kill()  # no LeaveGroup: its session must run out
            wait_until(lambda: a.snapshot()[0] == frozenset(range(PARTITIONS)), "a owns all")
            assert broker.call(lambda wb: wb.coordinator.expired_members) == 1
            produce(broker.bootstrap_servers, 60, start=100)
            wait_until(lambda: len(a.snapshot()[1]) + len(child_records) >= 160, "all read")
            time.sleep(0.3)
            records = a.snapshot()[1] + child_records
            assert len(records) == len(set(records)) == 160  # nothing read twice or lost
        finally:
            a.close()
    assert committed(broker, group) == high_watermarks(broker)


def commit_with_kafka_python(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata
    from kafka import TopicPartition as KTP

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.commit({KTP(TOPIC, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
    finally:
        consumer.close()


def fetch_with_kafka_python(bootstrap: str, group: str) -> dict[int, int | None]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return {p: consumer.committed(KTP(TOPIC, p)) for p in range(PARTITIONS)}
    finally:
        consumer.close()


def test_committed_offsets_survive_a_restart(tmp_path: Path) -> None:
    config = group_config(data_dir=str(tmp_path))
    with BrokerThread(config) as bt:
        commit_with_kafka_python(bt.bootstrap_servers, "durable", {0: 5, 2: 7})
    with BrokerThread(config) as bt:
        got = fetch_with_kafka_python(bt.bootstrap_servers, "durable")
        assert got == {0: 5, 1: None, 2: 7, 3: None}
        assert bt.call(lambda wb: wb.coordinator.list_groups()) == [("durable", "", "Empty")]


def test_an_acknowledged_commit_survives_sigkill(tmp_path: Path) -> None:
    args = ["-m", "purgatory_broker.wire", "--port", "0", "--data-dir", str(tmp_path)]
    with Child(args) as child:
        line = child.read_line(DEADLINE_S)
        assert line is not None and "listening on" in line, child.stderr()
        bootstrap = line.rsplit(" ", 1)[1]
        commit_with_kafka_python(bootstrap, "durable", {1: 11})
        child.kill()
    with BrokerThread(group_config(data_dir=str(tmp_path))) as bt:
        assert fetch_with_kafka_python(bt.bootstrap_servers, "durable")[1] == 11
