"""What the client matrix (``test_matrix_kcat.py``, ``test_matrix_python.py``) shares:
the produce variants, the read-back check, the broker-side checks of stored batches
and parked fetches, and group members running in child processes.

Every client produces the same :data:`VARIANTS` (acks 0, 1 and all; the idempotent
producer; each compression codec; a record of about 1 MB), one topic each, reads
them back and :func:`check_read_back` compares keys, values, headers and the order
per partition; :func:`check_stored_batches` then reads the broker's log to see
that the client did what the variant asked (the batches' codec bits, a producer id
only when idempotent).
"""

from __future__ import annotations

import random
import re
import shutil
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest
from purgatory_broker.broker import RecordBatchHeader, iter_batches
from purgatory_broker.broker.storage import CompressionType
from purgatory_broker.wire import BrokerThread, KafkaWireBroker, WireConfig

from broker_tests.childproc import Child
from purgatory import TopicPartition

from .group_members import Consuming
from .test_groups import PARTITIONS as GROUP_PARTITIONS
from .test_groups import (
    committed,
    group_config,
    high_watermarks,
    produce,
    split,
    total,
    wait_until,
)

PARTITIONS = 3
DEADLINE_S = 60.0  # hang guard of every wait; never a measure of speed
#: sessions of the members that are killed or leave; the survivor's is longer so a
#: busy machine does not expire it by mistake
SESSION_MS = 2000
SURVIVOR_SESSION_MS = 6000
CODECS = ("gzip", "snappy", "lz4", "zstd")
BIG_VALUE_BYTES = 1_000_000
#: the clients' producer request / message size limit, raised for the big record
MAX_MESSAGE_BYTES = 2_000_000
RECORDS_PER_VARIANT = 12

#: the long-poll scenario: a consumer of partition 0 waits up to FETCH_MAX_WAIT_MS
#: for FETCH_MIN_BYTES; a small record does not wake it, a larger one does
LONG_POLL_TOPIC = "parked"
FETCH_MAX_WAIT_MS = 25_000
FETCH_MIN_BYTES = 1024
SMALL_VALUE = b"s" * 100
LARGE_VALUE = b"L" * 4096

KCAT_INSTALL = "broker/broker_tests/wire/clients/install.sh"

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class Variant:
    """One way of producing: acks (-1 is all), idempotence, codec, the big record."""

    name: str
    acks: int
    idempotent: bool = False
    codec: str = "none"
    big: bool = False


VARIANTS = (
    Variant("acks0", 0),
    Variant("acks1", 1),
    Variant("acksall", -1),
    Variant("idempotent", -1, idempotent=True),
    *(Variant(codec, -1, codec=codec) for codec in CODECS),
    Variant("big", 1, big=True),
)


@dataclass(frozen=True, slots=True)
class Sent:
    """A record as produced; ``partition`` and ``offset`` when the client says."""

    key: bytes
    value: bytes
    headers: Headers
    partition: int | None = None
    offset: int | None = None


@dataclass(frozen=True, slots=True)
class Read:
    """A record as consumed."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: Headers


def matrix_config(**changes: object) -> WireConfig:
    """Groups fast (no initial rebalance delay, 1 s minimum session); followers poll
    for 30 s, so a test's fetch purgatory expires only what a client parked."""
    base: dict[str, object] = {"partitions": PARTITIONS, "follower_max_wait_ms": 30_000}
    base.update(changes)
    return group_config(group_initial_rebalance_delay_ms=0, **base)


def topic_of(client: str, variant: Variant) -> str:
    return f"{client}-{variant.name}"


def big_value(seed: str) -> bytes:
    """BIG_VALUE_BYTES of ASCII letters (safe as a kcat input line), from ``seed``."""
    letters = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" * 5  # 260 >= 256
    return random.Random(seed).randbytes(BIG_VALUE_BYTES).translate(letters[:256])


def records(client: str, variant: Variant, *, seq_header: bool = True) -> list[Sent]:
    """What a client produces for ``variant``: keys repeat (7 of them), values are
    unique and compress well (kafka-python sends a batch uncompressed when the codec
    does not make it smaller); headers name the client and variant, and
    (``seq_header``) the record. The big variant: one record of BIG_VALUE_BYTES,
    then a small one."""
    count = 2 if variant.big else RECORDS_PER_VARIANT
    out = []
    for i in range(count):
        value = f"{client}-{variant.name}-{i:04d}-".encode() + b"z" * 200
        if variant.big and i == 0:
            value = big_value(client) + value
        headers: Headers = (("client", client.encode()), ("variant", variant.name.encode()))
        if seq_header:
            headers += (("seq", str(i).encode()),)
        out.append(Sent(f"key-{i % 7}".encode(), value, headers))
    return out


def check_read_back(sent: Sequence[Sent], read: Sequence[Read]) -> None:
    """Every record read exactly once with its key and headers, at the partition and
    offset the producer was told (if it was); per partition, offsets rise in arrival
    order and records keep their send order. O(n)."""
    index = {s.value: i for i, s in enumerate(sent)}
    assert len(index) == len(sent), "values must be unique"
    seen: set[int] = set()
    last: dict[int, tuple[int, int]] = defaultdict(lambda: (-1, -1))  # (offset, index)
    for r in read:
        i = index.get(r.value)
        assert i is not None, f"read a record never sent: {r.value[:40]!r}"
        assert i not in seen, f"{r.value[:40]!r} read twice"
        seen.add(i)
        s = sent[i]
        assert (r.key, r.headers) == (s.key, s.headers), (r.value[:40], r.key, r.headers)
        if s.partition is not None:
            assert r.partition == s.partition, (r.value[:40], r.partition, s.partition)
        if s.offset is not None:
            assert r.offset == s.offset, (r.value[:40], r.offset, s.offset)
        offset, before = last[r.partition]
        assert r.offset > offset, f"partition {r.partition}: offset {r.offset} after {offset}"
        assert i > before, f"partition {r.partition}: {r.value[:40]!r} out of send order"
        last[r.partition] = (r.offset, i)
    missing = [s.value[:40] for i, s in enumerate(sent) if i not in seen]
    assert not missing, f"{len(missing)} records not read: {missing[:5]}"


def stored_batches(bt: BrokerThread, topic: str) -> list[RecordBatchHeader]:
    """The headers of every batch the broker holds for ``topic``."""

    def read(wb: KafkaWireBroker) -> list[RecordBatchHeader]:
        headers = []
        for p in range(PARTITIONS):
            partition = wb.broker.partition(TopicPartition(topic, p))
            if partition is None or partition.log.log_end_offset == 0:
                continue
            data = partition.log.read(partition.log.log_start_offset, 1 << 30)
            headers += [RecordBatchHeader.parse(b) for b in iter_batches(data)]
        return headers

    return bt.call(read)


def readable(bt: BrokerThread, topic: str) -> int:
    """How many offsets of ``topic`` a consumer can read (its high watermarks' sum)."""

    def read(wb: KafkaWireBroker) -> int:
        parts = (wb.broker.partition(TopicPartition(topic, p)) for p in range(PARTITIONS))
        return sum(p.high_watermark for p in parts if p is not None)

    return bt.call(read)


def wait_readable(bt: BrokerThread, topic: str, count: int) -> None:
    """Wait (DEADLINE_S at most) until ``count`` records of ``topic`` can be read. A
    producer that returns after acks=0 has only written its requests to the socket: the
    broker may not have appended them yet, so a reader that stops at the end of each
    partition (``kcat -C -e``) must not start before this."""
    wait_until(lambda: readable(bt, topic) >= count, f"{count} records of {topic} readable")


def check_stored_batches(bt: BrokerThread, topic: str, variant: Variant) -> None:
    """The batches are compressed with the variant's codec, and carry a producer id
    (and sequence numbers) if and only if the producer was idempotent."""
    batches = stored_batches(bt, topic)
    assert batches, f"nothing stored for {topic}"
    codecs = {CompressionType.NAMES[b.compression] for b in batches}
    assert codecs == {variant.codec}, (topic, codecs)
    ids = {b.producer_id >= 0 for b in batches}
    assert ids == {variant.idempotent}, (topic, [b.producer_id for b in batches])
    if variant.idempotent:
        assert all(b.base_sequence >= 0 for b in batches), topic


# -- the long poll ----------------------------------------------------------------


def parked(bt: BrokerThread, partition: int = 0) -> bool:
    """A consumer's fetch of LONG_POLL_TOPIC waits in the fetch purgatory (consumer
    fetches are watched by partition; the followers' by replica key)."""
    key = TopicPartition(LONG_POLL_TOPIC, partition)
    return bt.call(lambda wb: key in wb.broker.fetch_purgatory.watched_keys())


def fetch_counts(bt: BrokerThread) -> tuple[int, int]:
    """The fetch purgatory's (completed early, expired) counts."""
    stats = bt.call(lambda wb: wb.broker.fetch_purgatory.statistics())
    return stats.completed_early, stats.expired


def check_long_poll(
    bt: BrokerThread,
    send: Callable[[bytes], None],
    read: Callable[[], Sequence[tuple[int, int, bytes | None]]],
) -> None:
    """A long poll woken by a produce. A consumer of LONG_POLL_TOPIC partition 0 (fetch
    max wait FETCH_MAX_WAIT_MS, min bytes FETCH_MIN_BYTES) is running; ``send``
    produces one record acks=all and returns once acknowledged; ``read`` is what the
    consumer has read so far, (partition, offset, value) each. Checks the events, in
    order (LONG_POLL_EVENTS), the records read, and the fetch purgatory: the fetch
    completed early, none expired."""

    def received() -> int:
        return len(read())

    events = []
    wait_until(lambda: parked(bt), "the consumer's fetch parks in the purgatory")
    early, expired = fetch_counts(bt)
    assert expired == 0
    events.append("parked")
    send(SMALL_VALUE)  # acknowledged: the high watermark covers it, the fetch was tried
    events.append("small produced")
    if parked(bt) and received() == 0:
        events.append("still parked")  # fewer than min bytes
    send(LARGE_VALUE)
    events.append("large produced")
    wait_until(lambda: received() >= 2, "the consumer gets both records")
    events.append(f"received {received()}")
    after_early, after_expired = fetch_counts(bt)
    assert after_early > early, "the parked fetch did not complete early"
    assert after_expired == 0, "a fetch expired: the consumer was not woken by the produce"
    assert events == LONG_POLL_EVENTS
    assert list(read()) == [(0, 0, SMALL_VALUE), (0, 1, LARGE_VALUE)]


LONG_POLL_EVENTS = ["parked", "small produced", "still parked", "large produced", "received 2"]


# -- kcat ------------------------------------------------------------------------


def kcat() -> str:
    """kcat's path; the test fails (one line) if it is not installed."""
    path = shutil.which("kcat")
    if path is None:
        pytest.fail(f"kcat is not installed: run {KCAT_INSTALL}", pytrace=False)
    return path


# -- group members in child processes -------------------------------------------------

_KCAT_PARTITION = re.compile(r"\[(\d+)\]")


class ChildMember:
    """A group member in a child process, followed through its output lines: a
    ``group_members`` program (``assigned p,p`` / ``consumed p o``) or ``kcat -G``
    (``% Group ... rebalanced ...: assigned: t [p], ...`` / ``revoked: ...`` on
    stderr, ``p o`` per record on stdout). :meth:`snapshot` has the shape of
    :meth:`.group_members.Member.snapshot`. Killed (SIGKILL) by :meth:`close`."""

    def __init__(self, child: Child) -> None:
        self.child = child
        self.assigned: frozenset[int] = frozenset()
        self.consumed: list[tuple[int, int]] = []
        self.lines: list[str] = []  # the others, for failure messages

    @classmethod
    def python(cls, client: str, bootstrap: str, group: str, topic: str) -> ChildMember:
        module = "broker_tests.wire.group_members"
        args = [bootstrap, group, topic, str(SESSION_MS), client]
        return cls(Child(["-m", module, *args]))

    @classmethod
    def kcat(cls, bootstrap: str, group: str, topic: str, session_ms: int) -> ChildMember:
        args = ["-b", bootstrap, "-G", group, topic, "-u", "-f", "%p %o\\n"]
        for prop in (
            "broker.address.family=v4",
            f"session.timeout.ms={session_ms}",
            "heartbeat.interval.ms=300",
            "auto.offset.reset=earliest",
            # no auto.commit.interval.ms: kcat sets it as librdkafka's legacy topic
            # property, so the consumer commits every 5 s (its default) whatever it says
            "topic.metadata.refresh.interval.ms=1000",
        ):
            args += ["-X", prop]
        return cls(Child(args, program=kcat(), merge_stderr=True))

    def snapshot(self) -> tuple[frozenset[int], list[tuple[int, int]]]:
        while True:
            try:
                line = self.child.read_line(0.002)
            except TimeoutError:
                break
            if line is None:
                break
            self._parse(line)
        return self.assigned, list(self.consumed)

    def _parse(self, line: str) -> None:
        words = line.split()
        if line.startswith("consumed ") or (len(words) == 2 and all(map(str.isdigit, words))):
            p, o = words[-2:]
            self.consumed.append((int(p), int(o)))
        elif line.startswith("assigned "):
            self.assigned = frozenset(int(p) for p in ",".join(words[1:]).split(",") if p)
        elif line.startswith("% Group ") and "rebalanced" in line:
            revoked = "revoked:" in line
            self.assigned = (
                frozenset() if revoked else frozenset(map(int, _KCAT_PARTITION.findall(line)))
            )
        else:
            self.lines.append(line)

    def other_lines(self) -> list[str]:
        """The lines so far that are neither an assignment nor a record (kcat -J's)."""
        self.snapshot()
        return list(self.lines)

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup; its session must run out."""
        self.child.kill()
        self.snapshot()

    def leave(self) -> None:
        """SIGTERM: the client closes its consumer (LeaveGroup) and exits 0."""
        status = self.child.terminate()
        self.snapshot()
        assert status == 0, (status, self.lines[-5:], self.child.stderr()[-2000:])

    def close(self) -> None:
        self.child.close()


def counts(bt: BrokerThread) -> tuple[int, int]:
    """The coordinator's members removed by LeaveGroup and by a session running out."""
    return bt.call(lambda wb: (wb.coordinator.left_members, wb.coordinator.expired_members))


def members(bt: BrokerThread, group: str) -> int:
    """How many members ``group`` has now (0 if the coordinator does not know it)."""

    def count(wb: KafkaWireBroker) -> int:
        metadata = wb.coordinator.group(group)
        return 0 if metadata is None else len(metadata.members)

    return bt.call(count)


def group_scenario(
    bt: BrokerThread,
    group: str,
    survivor: Consuming,
    spawn: Callable[[], ChildMember],
    when_split: Callable[[], None],
) -> None:
    """The group's life with a ``survivor`` member (subscribed to GROUP_TOPIC with a
    long session) and members in child processes made by ``spawn``: the first
    child and the survivor split the partitions (then ``when_split`` runs: the
    admin checks); 100 records are consumed and committed between them; SIGKILL of
    the child: the survivor owns every partition once the child's session ran out;
    a second child joins, the two split, 60 more records; the second child leaves
    (SIGTERM, LeaveGroup): the survivor owns all again, by the leave, not by a
    session expiry. Every record consumed exactly once between them (what the killed
    child consumed is committed before it is killed; the one that leaves commits as
    it closes). The children are killed on the way out."""
    everything = frozenset(range(GROUP_PARTITIONS))
    # settled alone first: the child's join does not overlap the survivor's own
    wait_until(lambda: survivor.snapshot()[0] == everything, "the survivor alone owns all")
    b = spawn()
    children = [b]
    try:
        try:
            wait_until(lambda: split(survivor, b), "the two members split the partitions")
        except AssertionError as exc:  # what the next look at a rare failure needs
            state = f"survivor {sorted(survivor.snapshot()[0])}, child {sorted(b.snapshot()[0])}"
            raise AssertionError(f"{exc}: {state}, members {members(bt, group)}") from None
        when_split()
        produce(bt.bootstrap_servers, 100)
        wait_until(lambda: len(total(survivor, b)) >= 100, "100 records consumed")
        wait_until(lambda: committed(bt, group) == high_watermarks(bt), "all committed")
        left_before, expired_before = counts(bt)
        b.kill()  # no LeaveGroup
        wait_until(lambda: survivor.snapshot()[0] == everything, "the survivor owns all")
        # the child is gone from the group without leaving it: its session ran out (once)
        # or, killed while a rebalance waited for its JoinGroup, the rebalance dropped it
        # (the sessions of a loaded host's members may run out before the kill: counted
        # from here, not from the start)
        left_after, expired_after = counts(bt)
        assert left_after == left_before, (left_before, left_after)
        assert expired_after - expired_before <= 1, (expired_before, expired_after)
        assert members(bt, group) == 1
        c = spawn()
        children.append(c)
        wait_until(lambda: split(survivor, c), "the survivor and a new member split")
        produce(bt.bootstrap_servers, 60, start=100)
        wait_until(lambda: len(total(survivor, b, c)) >= 160, "160 records consumed")
        c.leave()  # commits what it consumed as it closes
        wait_until(lambda: survivor.snapshot()[0] == everything, "the survivor owns all")
        left = counts(bt)
        assert left == (left_after + 1, expired_after), left  # the leave; no session ran out
        consumed = total(survivor, b, c)
        assert len(consumed) == len(set(consumed)) == 160  # once each between them
    finally:
        for child in children:
            child.close()
