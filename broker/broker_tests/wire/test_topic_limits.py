"""Auto-created topics are capped (``max_partitions``), and a broker out of file
descriptors refuses new topics instead of failing requests: UNKNOWN_TOPIC_OR_PARTITION
for what was not created, one log line per shortage, and everyone else served."""

from __future__ import annotations

import errno
import logging
from typing import Any

import pytest
from purgatory_broker.broker import broker as broker_module
from purgatory_broker.broker import build_batch
from purgatory_broker.broker.storage.log import PartitionLog
from purgatory_broker.wire import KafkaWireBroker
from purgatory_broker.wire._handlers import CREATE_PARTITIONS_PER_REQUEST
from purgatory_broker.wire._shortage import fit_descriptor_limit

from purgatory import TopicPartition

from .conftest import fast_config
from .rawclient import RawClient, metadata_request, produce_partition, produce_request

UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5


def warnings_about(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and text in r.getMessage()
    ]


@pytest.mark.asyncio(loop_factories=["asyncio"])
async def test_a_metadata_request_naming_2000_topics_creates_only_up_to_the_cap(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with KafkaWireBroker(fast_config(partitions=2, max_partitions=50)) as wire:
        client = await RawClient.connect(wire.bootstrap_servers)
        try:
            names = [f"flood-{i}" for i in range(2000)]
            response = await client.request(metadata_request(*names))
            codes = [t.error_code for t in response.topics]
            assert codes == [0] * 25 + [UNKNOWN_TOPIC_OR_PARTITION] * 1975
            assert [len(t.partitions) for t in response.topics[:26]] == [2] * 25 + [0]
            assert len(wire.broker.partitions) == 50
            assert wire.handler.topics_refused == 1975
            # the same connection goes on: a known topic is served, a new one refused
            produced = await client.request(produce_request("flood-7", 1, build_batch([b"x"])))
            assert produced.responses[0].partition_responses[0].error_code == 0
            refused = await client.request(produce_request("one-more", 0, build_batch([b"x"])))
            assert produce_partition(refused).error_code == UNKNOWN_TOPIC_OR_PARTITION
        finally:
            await client.close()
        # and a new client is served
        fresh = await RawClient.connect(wire.bootstrap_servers)
        try:
            response = await fresh.request(metadata_request("flood-0", "flood-1999"))
            assert [t.error_code for t in response.topics] == [0, UNKNOWN_TOPIC_OR_PARTITION]
        finally:
            await fresh.close()
        assert wire.stats.internal_errors == 0 and wire.stats.closed_for_bad_input == 0
    assert len(warnings_about(caplog, "partition limit reached")) == 1


@pytest.mark.asyncio(loop_factories=["asyncio"])
async def test_one_request_creates_a_share_of_its_new_topics_and_puts_off_the_rest() -> None:
    share = CREATE_PARTITIONS_PER_REQUEST
    async with KafkaWireBroker(fast_config(partitions=1)) as wire:
        client = await RawClient.connect(wire.bootstrap_servers)
        try:
            names = [f"many-{i}" for i in range(share * 5 // 2)]
            for created in (share, 2 * share, len(names)):
                response = await client.request(metadata_request(*names))
                codes = [t.error_code for t in response.topics]
                assert codes == [0] * created + [LEADER_NOT_AVAILABLE] * (len(names) - created)
                assert len(wire.broker.partitions) == created
        finally:
            await client.close()


@pytest.mark.asyncio(loop_factories=["asyncio"])
async def test_out_of_descriptors_while_creating_partitions(
    wire: KafkaWireBroker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    open_log = PartitionLog
    allowed = [1]  # partition logs that may still be opened

    def short_of_descriptors(*args: Any, **kwargs: Any) -> Any:
        if not allowed[0]:
            raise OSError(errno.EMFILE, "Too many open files")
        allowed[0] -= 1
        return open_log(*args, **kwargs)

    # where the broker opens a partition's files (the compiled build's Broker is an
    # extension type: a method cannot be replaced on an instance)
    monkeypatch.setattr(broker_module, "PartitionLog", short_of_descriptors)
    client = await RawClient.connect(wire.bootstrap_servers)
    try:
        # "cut" gets one of its three partitions, then the descriptors run out
        response = await client.request(metadata_request("cut", "other"))
        assert [t.error_code for t in response.topics] == [UNKNOWN_TOPIC_OR_PARTITION] * 2
        for _ in range(5):
            refused = await client.request(produce_request("other", 0, build_batch([b"x"])))
            assert produce_partition(refused).error_code == UNKNOWN_TOPIC_OR_PARTITION
        assert list(wire.broker.partitions) == [TopicPartition("cut", 0)]
        assert wire.handler.partition_descriptors.failures == 7
        # descriptors free up: the cut topic is finished, the other one made
        allowed[0] = 100
        response = await client.request(metadata_request("cut", "other"))
        assert [(t.error_code, len(t.partitions)) for t in response.topics] == [(0, 3), (0, 3)]
    finally:
        await client.close()
    assert wire.stats.closed_for_bad_input == 0
    assert len(warnings_about(caplog, "cannot create partition")) == 1
    [recovered] = warnings_about(caplog, "creating partitions again")
    assert "7 failed attempts" in recovered


def test_the_command_line_fits_the_cap_to_the_open_file_limit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import resource

    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    hard = before[1]
    log = logging.getLogger("test-limits")
    with fit_descriptor_limit(10, log) as cap:
        assert cap == 10  # fits already: nothing to say
    assert not warnings_about(caplog, "open-file limit")
    if hard != resource.RLIM_INFINITY:  # no hard limit fits this cap: raised, cap lowered
        with fit_descriptor_limit(hard, log) as cap:
            assert cap == hard * 3 // 4 // 3
            assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
        assert len(warnings_about(caplog, "open-file limit")) == 1
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == before  # put back


def test_a_limit_raised_as_far_as_the_cap_needs_keeps_the_cap(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """2000 partitions and the connections need 7024 descriptors: once the soft
    limit is raised that far, the cap stands (it was lowered to 1756, as if the
    limit had stayed short)."""
    import resource

    soft, hard = before = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 7024:
        pytest.skip(f"the hard open-file limit ({hard}) cannot reach 7024")
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 1024), hard))
    try:
        with fit_descriptor_limit(2000, logging.getLogger("test-limits")) as cap:
            assert cap == 2000
            assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == 7024
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == min(soft, 1024)
        assert not warnings_about(caplog, "open-file limit")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, before)
