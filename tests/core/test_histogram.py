"""The lateness histogram against the exact quantiles of the recorded values."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from purgatory.core.histogram import Histogram
from purgatory.core.quantile import exact_quantile

values = st.lists(
    st.one_of(st.integers(-5, 70), st.integers(0, 10**7), st.integers(0, 2**70)),
    min_size=1,
    max_size=300,
)


@given(values, st.floats(0.0, 1.0))
def test_quantile_is_the_true_one_or_at_most_an_eighth_over(xs: list[int], q: float) -> None:
    h = Histogram()
    for x in xs:
        h.record(x)
    h._check_invariants()
    clipped = sorted(max(x, 0) for x in xs)
    assert h.count == len(xs)
    assert h.max == clipped[-1]
    true = exact_quantile(clipped, q)
    got = h.quantile(q)
    if true < 64:
        assert got == true  # exact below 64
    else:
        assert true <= got <= true * 1.125


def test_an_empty_histogram_reports_zero() -> None:
    h = Histogram()
    h._check_invariants()
    assert h.count == 0 and h.max == 0 and h.quantile(0.99) == 0
