"""purgatory.contrib.prometheus: a scrape gives each purgatory's statistics(), as they
are at the scrape, under the families the module lists."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from purgatory import DelayedOperation, DelayedOperationPurgatory, SystemTimer
from purgatory.contrib.prometheus import FAMILIES, PurgatoryCollector
from purgatory.testing import ManualClock


class Never(DelayedOperation[None]):
    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        return None


def scrape(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    text = generate_latest(registry).decode()
    return {
        (sample.name, sample.labels["purgatory"]): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def expected(purgatory: DelayedOperationPurgatory[Never], namespace: str) -> dict[str, float]:
    stats = purgatory.statistics()
    return {
        f"{namespace}_{suffix}" + ("_total" if kind == "counter" else ""): float(
            getattr(stats, field)
        )
        for suffix, kind, field, _ in FAMILIES
    }


@pytest.mark.asyncio
async def test_a_scrape_reads_every_purgatorys_statistics() -> None:
    produce = DelayedOperationPurgatory[Never]("produce")
    fetch = DelayedOperationPurgatory[Never]("fetch")
    registry = CollectorRegistry()
    registry.register(PurgatoryCollector(produce, fetch, namespace="kafka"))
    async with produce, fetch:
        ops = [Never(60_000) for _ in range(3)]
        for i, op in enumerate(ops):
            produce.try_complete_else_watch(op, [f"k{i}", "all"])
        ops[0].force_complete()
        ops[1].cancel()
        fetch.try_complete_else_watch(Never(60_000), ["x"])
        got = scrape(registry)
        for purgatory in (produce, fetch):
            want = expected(purgatory, "kafka")
            assert {n: v for (n, p), v in got.items() if p == purgatory.name} == want
        assert got[("kafka_delayed", "produce")] == 1.0
        assert got[("kafka_watched", "produce")] == 6.0
        assert got[("kafka_completed_early_total", "produce")] == 1.0
        assert got[("kafka_cancelled_total", "produce")] == 1.0
    assert scrape(registry)[("kafka_cancelled_total", "produce")] == 2.0  # closed: now


@pytest.mark.parametrize("may_expire_early", [False, True])
def test_an_early_expiry_is_exported(may_expire_early: bool) -> None:
    """Added at 3 with 25 ms on a 10 ms tick: Kafka's filing expires it at 20, five
    ms early (exported as early, lateness 0); the default at 30, 2 ms late."""
    clock = ManualClock(3)
    timer = SystemTimer("t", tick_ms=10, clock=clock, may_expire_early=may_expire_early)
    purgatory = DelayedOperationPurgatory[Never]("p", timer=timer, reaper_enabled=False)
    registry = CollectorRegistry()
    registry.register(PurgatoryCollector(purgatory))
    purgatory.try_complete_else_watch(Never(25), ["k"])
    while purgatory.num_delayed:
        clock.advance(1)
        timer.poll()
    got = scrape(registry)
    assert got[("purgatory_expired_total", "p")] == 1.0
    assert got[("purgatory_expired_early_total", "p")] == (1.0 if may_expire_early else 0.0)
    assert got[("purgatory_expiry_lateness_max_ms", "p")] == (0.0 if may_expire_early else 2.0)
    assert clock.now_ms() == (20 if may_expire_early else 30)


def test_names_are_checked() -> None:
    with pytest.raises(ValueError, match="at least one purgatory"):
        PurgatoryCollector()
    one, other = DelayedOperationPurgatory[Never]("p"), DelayedOperationPurgatory[Never]("p")
    with pytest.raises(ValueError, match="distinct"):
        PurgatoryCollector(one, other)
    registry = CollectorRegistry()
    registry.register(PurgatoryCollector(one))
    with pytest.raises(ValueError, match="Duplicated timeseries"):  # describe() names them
        registry.register(PurgatoryCollector(other))
