"""A broker that produces until it is killed, printing every acknowledged record.

    python -m broker_tests.broker.crash_child DATA_DIR

Leads partitions 0 and 1 of topic ``crash``, each with one follower
(:class:`purgatory_broker.broker.Followers`: one task fetching both, 1 ms apart).
Two producer tasks send one-record batches, alternating acks=-1 and acks=1 and
the two partitions; as soon as a produce is answered with NONE the child prints
``partition offset value`` and flushes, so every line the parent reads names a
record the broker had acknowledged. It runs
until it is killed (the test sends SIGKILL). Values are about 200 bytes, so a
few hundred acknowledged records are far less than any in-process write buffer.
"""

from __future__ import annotations

import asyncio
import sys

from purgatory_broker.broker import Broker, ErrorCode, Followers, build_batch

from purgatory import TopicPartition

TOPIC = "crash"
PARTITIONS = [TopicPartition(TOPIC, p) for p in range(2)]


def value(producer: int, seq: int) -> bytes:
    return f"p{producer}-{seq:06d}-".encode().ljust(200, b"x")


async def producer(broker: Broker, pid: int) -> None:
    seq = 0
    while True:
        tp = PARTITIONS[seq % 2]
        acks = -1 if (seq // 2) % 2 == 0 else 1
        record = value(pid, seq)
        op = broker.produce({tp: build_batch([record])}, acks=acks, timeout_ms=5000)
        response = (await op)[tp]
        if response.error_code == ErrorCode.NONE:
            sys.stdout.write(f"{tp.partition} {response.base_offset} {record.decode()}\n")
            sys.stdout.flush()
        seq += 1


async def main(data_dir: str) -> None:
    broker = Broker(data_dir)
    for tp in PARTITIONS:
        broker.create_partition(tp, [1], min_insync_replicas=1)
    async with broker:
        followers = Followers(broker, [1], lag_ms=1, max_wait_ms=100)
        followers.follow(PARTITIONS)
        await asyncio.gather(producer(broker, 0), producer(broker, 1))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
