"""Group consumers of three client libraries behind one small interface, each polling in
its own thread, for the consumer-group tests.

A :class:`Member` subscribes to one topic in one group, polls until stopped,
records every record it got as ``(partition, offset)`` and commits after each
non-empty poll (auto-commit off, so what is committed is exactly what was
consumed). ``assigned`` is its current assignment as the client reports it.
``close()`` stops the thread and closes the consumer, which leaves the group
(LeaveGroup).

Run as a program (``python -m broker_tests.wire.group_members
BOOTSTRAP GROUP TOPIC SESSION_MS [CLIENT]``) it is a member of CLIENT (default
kafka-python) that prints ``assigned p,p`` on every assignment change and
``consumed p o`` for each record once its poll's batch is committed: the crash
tests' member, killed with SIGKILL. On SIGTERM it closes the consumer (LeaveGroup),
prints ``left`` and exits 0.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, Protocol

HEARTBEAT_MS = 300
METADATA_MAX_AGE_MS = 1000
POLL_MS = 100


def python_options(bootstrap: str, group: str, session_ms: int) -> dict[str, Any]:
    """kafka-python's and aiokafka's consumer options (the same names in both)."""
    return {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        "session_timeout_ms": session_ms,
        "heartbeat_interval_ms": HEARTBEAT_MS,
        # a leader that assigned before it had the topic's metadata (a client-side race)
        # learns of the partitions within a second and rebalances, not in 5 minutes
        "metadata_max_age_ms": METADATA_MAX_AGE_MS,
    }


class Consuming(Protocol):
    """A group member seen from the test: a :class:`Member`, or one in a child process."""

    def snapshot(self) -> tuple[frozenset[int], list[tuple[int, int]]]:
        """Its assignment and what it consumed, ``(partition, offset)``."""
        ...


class Member:
    """One group consumer in a thread; subclasses implement the client calls."""

    def __init__(self, bootstrap: str, group: str, topic: str, session_ms: int) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic
        self.session_ms = session_ms
        self.consumed: list[tuple[int, int]] = []
        self.assigned: frozenset[int] = frozenset()
        self.error: Exception | None = None
        #: called in the member's thread after each poll (and commit), before the
        #: snapshot is updated: ``(records, assignment)``
        self.on_record: Callable[[list[tuple[int, int]], frozenset[int]], None] | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"member-{group}", daemon=True)

    def start(self) -> Member:
        self._thread.start()
        return self

    def snapshot(self) -> tuple[frozenset[int], list[tuple[int, int]]]:
        """The assignment and a copy of what was consumed, together."""
        with self._lock:
            return self.assigned, list(self.consumed)

    def close(self, timeout_s: float = 20.0) -> None:
        """Stop polling, close the consumer (LeaveGroup), wait for the thread."""
        self._stop.set()
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), "the member did not stop"
        if self.error is not None:
            raise self.error

    def _record(self, records: list[tuple[int, int]], assigned: frozenset[int]) -> None:
        if self.on_record is not None:
            self.on_record(records, assigned)
        with self._lock:
            self.consumed += records
            self.assigned = assigned

    def _run(self) -> None:
        try:
            self.open()
            try:
                while not self._stop.is_set():
                    records = self.poll()
                    if records:
                        self.commit()
                    self._record(records, self.assignment())
            finally:
                self.shutdown()
        except Exception as exc:  # noqa: BLE001 (reported by close())
            self.error = exc

    # -- the client ------------------------------------------------------------

    def open(self) -> None:
        raise NotImplementedError

    def poll(self) -> list[tuple[int, int]]:
        raise NotImplementedError

    def assignment(self) -> frozenset[int]:
        raise NotImplementedError

    def commit(self) -> None:
        raise NotImplementedError

    def shutdown(self) -> None:
        raise NotImplementedError


class KafkaPythonMember(Member):
    def open(self) -> None:
        from kafka import KafkaConsumer

        self.consumer = KafkaConsumer(
            self.topic, **python_options(self.bootstrap, self.group, self.session_ms)
        )
        # the topic's metadata before the first poll() joins the group. kafka-python
        # 3.0.12 can lose a member otherwise: a leader that assigned without it rejoins
        # once it has it (its metadata snapshot differs from the one it assigned from);
        # when that join outlasts one poll(), the assignment it makes equalises the
        # snapshots, so the next poll() finds nothing to rejoin, never applies the
        # assignment nor heartbeats again, and the session runs out (seen with two
        # CPU-bound processes beside the suite: 2 runs in 25, the survivor never owning
        # a partition)
        self.consumer.partitions_for_topic(self.topic)

    def poll(self) -> list[tuple[int, int]]:
        batches = self.consumer.poll(timeout_ms=POLL_MS)
        return [(tp.partition, m.offset) for tp, ms in batches.items() for m in ms]

    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())

    def commit(self) -> None:
        self.consumer.commit()

    def shutdown(self) -> None:
        self.consumer.close()


class ConfluentMember(Member):
    def open(self) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": self.session_ms,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "topic.metadata.refresh.interval.ms": METADATA_MAX_AGE_MS,
                "broker.address.family": "v4",
            }
        )
        self.consumer.subscribe([self.topic])

    def poll(self) -> list[tuple[int, int]]:
        messages = self.consumer.consume(num_messages=500, timeout=POLL_MS / 1000)
        return [(m.partition() or 0, m.offset() or 0) for m in messages if m.error() is None]

    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())

    def commit(self) -> None:
        self.consumer.commit(asynchronous=False)

    def shutdown(self) -> None:
        self.consumer.close()


class AiokafkaMember(Member):
    """aiokafka on its own event loop in the member's thread."""

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except Exception as exc:  # noqa: BLE001 (reported by close())
            self.error = exc

    async def _main(self) -> None:
        from aiokafka import AIOKafkaConsumer

        consumer = AIOKafkaConsumer(
            self.topic, **python_options(self.bootstrap, self.group, self.session_ms)
        )
        await consumer.start()
        try:
            while not self._stop.is_set():
                batches = await consumer.getmany(timeout_ms=POLL_MS)
                records = [(tp.partition, m.offset) for tp, ms in batches.items() for m in ms]
                if records:
                    await consumer.commit()
                assigned = frozenset(tp.partition for tp in consumer.assignment())
                self._record(records, assigned)
        finally:
            await consumer.stop()


MEMBERS: dict[str, Callable[[str, str, str, int], Member]] = {
    "aiokafka": AiokafkaMember,
    "kafka-python": KafkaPythonMember,
    "confluent-kafka": ConfluentMember,
}


def main(argv: list[str]) -> int:
    """The crash tests' member: see the module doc."""
    bootstrap, group, topic, session_ms = argv[0], argv[1], argv[2], int(argv[3])
    member = MEMBERS[argv[4] if len(argv) > 4 else "kafka-python"](
        bootstrap, group, topic, session_ms
    )
    shown: list[frozenset[int] | None] = [None]

    def show(records: list[tuple[int, int]], assigned: frozenset[int]) -> None:
        if assigned != shown[0]:
            shown[0] = assigned
            print("assigned " + ",".join(map(str, sorted(assigned))), flush=True)
        for p, o in records:  # committed by now
            print(f"consumed {p} {o}", flush=True)

    member.on_record = show
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    member.start()
    while not stop.wait(0.05) and member._thread.is_alive():
        pass
    member.close()  # LeaveGroup; raises what stopped the member
    print("left", flush=True)
    return 0


if __name__ == "__main__":
    import warnings

    warnings.filterwarnings("ignore", category=DeprecationWarning)
    sys.exit(main(sys.argv[1:]))
