"""The client matrix for kcat (librdkafka) against the wire broker; see ``matrix_kit``
for the variants and checks. kcat is installed by
``broker/broker_tests/wire/clients/install.sh``; without it these tests fail.

* ``kcat -P`` with ``-X acks=0|1|all``, ``-X enable.idempotence=true``, ``-z gzip|snappy|
  lz4|zstd`` and a 1,000,000-byte value (``-X message.max.bytes``), keys (``-K:``) and
  headers (``-H``); ``kcat -C -J -e`` reads each topic back (keys, values, headers,
  order per partition) and the stored batches show the codec and the producer id;
* ``kcat -C`` long-polls (``fetch.wait.max.ms`` 25 s, ``fetch.min.bytes`` 1 KiB): its
  fetch parks, a small record leaves it parked, a larger one wakes it;
* ``kcat -G``: two members split the partitions, SIGKILL of one, the other takes
  over once the session ran out, a new member joins and leaves on SIGTERM (kcat
  closes its consumer: LeaveGroup, and commits), offsets committed survive a broker
  restart on the same data dir: a new member resumes from them.

What kcat does not offer: no admin of groups (no ListGroups, DescribeGroups or
committed-offset listing: ``-L`` shows brokers, topics and partitions only, checked
here); ``-P`` prints no delivery offsets and picks partitions by key (librdkafka's
partitioner), so the read-back checks order per partition, not where each record
went; ``-H`` gives every record of one run the same headers; ``-X
auto.commit.interval.ms`` sets librdkafka's legacy topic property, not the group
consumer's, so ``kcat -G`` auto-commits every 5 s (the scenario waits for it once).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest
from purgatory_broker.wire import BrokerThread, KafkaWireBroker
from purgatory_broker.wire import _codec as codec
from purgatory_broker.wire._codec import ADVERTISED_PRODUCE_MIN_VERSION

from broker_tests.childproc import Child

from .matrix_kit import (
    DEADLINE_S,
    FETCH_MAX_WAIT_MS,
    FETCH_MIN_BYTES,
    LONG_POLL_TOPIC,
    MAX_MESSAGE_BYTES,
    SESSION_MS,
    SURVIVOR_SESSION_MS,
    VARIANTS,
    ChildMember,
    Read,
    Sent,
    Variant,
    check_long_poll,
    check_read_back,
    check_stored_batches,
    group_scenario,
    kcat,
    matrix_config,
    records,
    topic_of,
    wait_readable,
)
from .rawclient import RawClient
from .test_groups import PARTITIONS as GROUP_PARTITIONS
from .test_groups import TOPIC as GROUP_TOPIC
from .test_groups import committed, high_watermarks, produce, wait_until

pytestmark = pytest.mark.system  # kcat

ACKS = {0: "0", 1: "1", -1: "all"}
V4 = ["-X", "broker.address.family=v4"]


def run_kcat(args: list[str], stdin: bytes = b"") -> bytes:
    """Run kcat to the end (DEADLINE_S at most; killed by pid if still running)."""
    proc = subprocess.Popen(
        [kcat(), *V4, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        out, err = proc.communicate(stdin, timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, (args[:8], err.decode(errors="replace")[-2000:])
    return out


def produce_kcat(bootstrap: str, topic: str, variant: Variant, batch: list[Sent]) -> None:
    """``kcat -P``, one record per line, ``key:value``; every record gets the headers of
    the first (``-H`` applies to the whole run)."""
    args = ["-P", "-b", bootstrap, "-t", topic, "-K:", "-X", f"acks={ACKS[variant.acks]}"]
    args += [f"-H{k}={v.decode()}" for k, v in batch[0].headers]
    args += ["-X", f"message.max.bytes={MAX_MESSAGE_BYTES}"]
    if variant.codec != "none":
        args += ["-z", variant.codec]
    if variant.idempotent:
        args += ["-X", "enable.idempotence=true"]
    assert all(s.headers == batch[0].headers for s in batch)
    run_kcat(args, b"".join(s.key + b":" + s.value + b"\n" for s in batch))


def read_json(line: bytes | str) -> Read:
    """One record of ``kcat -J``: headers are a flat [name, value, ...] list."""
    m = json.loads(line)
    flat = m.get("headers") or []  # absent when the record has none
    headers = tuple((flat[i], flat[i + 1].encode()) for i in range(0, len(flat), 2))
    key = None if m["key"] is None else m["key"].encode()
    return Read(m["partition"], m["offset"], key, m["payload"].encode(), headers)


def consume_kcat(bootstrap: str, topic: str) -> list[Read]:
    """``kcat -C -e``: every partition of ``topic`` from the beginning to the end it
    finds (so after an acks=0 produce, only once the broker has the records:
    :func:`~.matrix_kit.wait_readable`)."""
    out = run_kcat(["-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-J", "-q"])
    return [read_json(line) for line in out.splitlines()]


def test_every_produce_variant_reads_back() -> None:
    kcat()
    with BrokerThread(matrix_config()) as bt:
        for variant in VARIANTS:
            topic = topic_of("kcat", variant)
            sent = records("kcat", variant, seq_header=False)
            produce_kcat(bt.bootstrap_servers, topic, variant, sent)
            wait_readable(bt, topic, len(sent))  # kcat -C -e stops at the end it finds
            check_read_back(sent, consume_kcat(bt.bootstrap_servers, topic))
            check_stored_batches(bt, topic, variant)
        assert bt.call(lambda wb: wb.stats.internal_errors) == 0


@pytest.mark.asyncio
async def test_api_versions_lists_produce_from_v0_yet_produce_v2_is_refused(
    wire: KafkaWireBroker,
) -> None:
    """What made kcat's gzip, snappy and lz4 work (the codec bits checked above): its
    librdkafka (2.0.2) compresses with them only if ApiVersions lists Produce v0, else
    sends the batches uncompressed without a word (librdkafka issue 4956). Kafka 4
    lists v0-v2 and refuses them (KAFKA-18659); so does this broker."""
    client = await RawClient.connect(wire.bootstrap_servers)
    try:
        spec = codec.SUPPORTED_APIS[codec.API_VERSIONS]
        answer = await client.request(
            spec.request(version=3, client_software_name="t", client_software_version="1")
        )
        ranges = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
        produce_max = codec.SUPPORTED_APIS[codec.PRODUCE].max_version
        assert ADVERTISED_PRODUCE_MIN_VERSION == 0
        assert ranges[codec.PRODUCE] == (0, produce_max)
        assert codec.SUPPORTED_APIS[codec.PRODUCE].min_version == 3
        # a Produce v2 header (key 0, version 2, correlation 9, client "t"): closed
        frame = b"\x00\x00\x00\x02\x00\x00\x00\x09\x00\x01t" + b"\x00" * 16
        await client.write_raw(len(frame).to_bytes(4, "big") + frame)
        with pytest.raises(asyncio.IncompleteReadError):
            await asyncio.wait_for(client.read_frame(), DEADLINE_S)
    finally:
        await client.close()


def test_a_parked_long_poll_is_woken_by_a_produce() -> None:
    with BrokerThread(matrix_config()) as bt:
        bootstrap = bt.bootstrap_servers
        bt.call(lambda wb: wb.handler.topic(LONG_POLL_TOPIC))
        args = ["-C", "-b", bootstrap, "-t", LONG_POLL_TOPIC, "-p", "0", "-o", "beginning"]
        args += ["-c", "2", "-u", "-J", "-q", *V4]
        args += ["-X", f"fetch.wait.max.ms={FETCH_MAX_WAIT_MS}"]
        args += ["-X", f"fetch.min.bytes={FETCH_MIN_BYTES}"]
        consumer = ChildMember(Child(args, program=kcat()))  # its records: other_lines()
        try:

            def send(value: bytes) -> None:
                topic = LONG_POLL_TOPIC
                run_kcat(["-P", "-b", bootstrap, "-t", topic, "-p", "0", "-X", "acks=all"], value)

            def read() -> list[tuple[int, int, bytes]]:
                got = map(read_json, consumer.other_lines())
                return [(r.partition, r.offset, r.value) for r in got]

            check_long_poll(bt, send, read)
        finally:
            consumer.close()


def check_metadata_listing(bootstrap: str) -> None:
    """kcat's only admin view: ``-L`` lists the broker and the topic's partitions."""
    listing = json.loads(run_kcat(["-L", "-J", "-b", bootstrap, "-t", GROUP_TOPIC]))
    assert [b["id"] for b in listing["brokers"]] == [0]
    [topic] = listing["topics"]
    assert topic["topic"] == GROUP_TOPIC
    assert sorted(p["partition"] for p in topic["partitions"]) == list(range(GROUP_PARTITIONS))


def test_group_split_sigkill_leave_and_offsets_across_a_restart(tmp_path: Path) -> None:
    config = matrix_config(partitions=GROUP_PARTITIONS, data_dir=str(tmp_path))
    group = "kcat-matrix"
    with BrokerThread(config) as bt:
        bootstrap = bt.bootstrap_servers
        bt.call(lambda wb: wb.handler.topic(GROUP_TOPIC))
        a = ChildMember.kcat(bootstrap, group, GROUP_TOPIC, SURVIVOR_SESSION_MS)
        try:
            group_scenario(
                bt,
                group,
                a,
                lambda: ChildMember.kcat(bootstrap, group, GROUP_TOPIC, SESSION_MS),
                lambda: check_metadata_listing(bootstrap),
            )
            a.leave()  # kcat commits as it closes (its auto-commit timer runs every 5 s)
        finally:
            a.close()
        before = high_watermarks(bt)
    with BrokerThread(config) as bt:
        assert committed(bt, group) == before
        produce(bt.bootstrap_servers, 20, start=160)
        d = ChildMember.kcat(bt.bootstrap_servers, group, GROUP_TOPIC, SESSION_MS)
        try:
            wait_until(lambda: len(d.snapshot()[1]) >= 20, "the 20 new records consumed")
        finally:
            d.close()
        first: dict[int, int] = {}
        for p, o in d.consumed:
            first.setdefault(p, o)
        assert first == before  # resumed at the committed offsets, not at 0
        assert len(d.consumed) == 20
