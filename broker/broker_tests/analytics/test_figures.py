"""The report's definitions, shared by the Spark job and the exact reference."""

from __future__ import annotations

import itertools
import random

import pytest

np = pytest.importorskip("numpy")

from purgatory_broker.analytics import exact  # noqa: E402
from purgatory_broker.analytics.figures import (  # noqa: E402
    HISTOGRAMS,
    LATENCY_EDGES_MS,
    LATENESS_EDGES_MS,
    SUMMARIES,
    bucket_index,
    window_start_ms,
)


def test_edges_increase_and_lateness_mirrors_latency() -> None:
    for edges in (LATENCY_EDGES_MS, LATENESS_EDGES_MS):
        assert all(a < b for a, b in itertools.pairwise(edges))
    assert [-e for e in LATENESS_EDGES_MS if e < 0][::-1] == list(LATENCY_EDGES_MS[1:])


@pytest.mark.parametrize("edges", [LATENCY_EDGES_MS, LATENESS_EDGES_MS, (0, 10), (5,)])
def test_the_vectorised_bucket_is_bucket_index(edges: tuple[int, ...]) -> None:
    rng = random.Random(len(edges))
    values = [rng.randint(-(10**8), 10**8) for _ in range(2000)] + [*edges, edges[0] - 1]
    vectorised = exact.bucket_indexes(np.array(values), edges)
    assert vectorised.tolist() == [bucket_index(v, edges) for v in values]


def test_bucket_index_by_hand() -> None:
    assert [bucket_index(v, (0, 10, 20)) for v in (-5, 0, 9, 10, 19, 20, 10**9)] == [
        0,
        0,
        0,
        1,
        1,
        2,
        2,
    ]


def test_windows_are_aligned_to_zero() -> None:
    assert [window_start_ms(t, 1000) for t in (0, 999, 1000, 2500)] == [0, 0, 1000, 2000]
    starts = exact.window_starts(np.array([0, 999, 1000, 2500]), 1000)
    assert starts.tolist() == [0, 0, 1000, 2000]


def test_every_figure_has_one_name() -> None:
    names = [s.name for s in SUMMARIES] + [h.name for h in HISTOGRAMS]
    assert len(set(names)) == len(names)
    assert {h.column for h in HISTOGRAMS} == {"latency_ms", "lateness_ms"}
