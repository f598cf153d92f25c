"""The one exact-quantile rule: rank ``max(1, ceil(q * n))``, checked against its definition."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from purgatory.core import exact_quantile, quantile_rank


def test_the_worked_example() -> None:
    values = list(range(1, 201))  # rank r holds the value r
    assert [exact_quantile(values, q) for q in (0, 0.5, 0.99, 0.999, 1)] == [1, 100, 198, 200, 200]


def test_float_noise_does_not_move_a_whole_rank() -> None:
    assert 0.07 * 100 > 7  # binary floating point
    assert quantile_rank(0.07, 100) == 7
    assert quantile_rank(0.29, 100) == 29


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one value"):
        exact_quantile([], 0.5)
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        quantile_rank(1.5, 10)
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        quantile_rank(-0.1, 10)


@given(st.integers(0, 1000), st.integers(1, 10**6))
def test_the_rank_is_the_smallest_covering_q_n_values(per_mille: int, n: int) -> None:
    """With q in thousandths, exact rational arithmetic gives the rank by definition:
    the smallest r >= 1 with r >= q * n."""
    q = per_mille / 1000
    exact = Fraction(per_mille, 1000) * n
    expected = max(1, -(-exact.numerator // exact.denominator))
    assert quantile_rank(q, n) == expected


@given(st.lists(st.integers(-(10**6), 10**6), min_size=1, max_size=400), st.floats(0, 1))
def test_at_least_q_of_the_values_are_at_or_below_it(xs: list[int], q: float) -> None:
    ordered = sorted(xs)
    value = exact_quantile(ordered, q)
    assert value in xs
    at_or_below = sum(x <= value for x in xs)
    assert at_or_below >= round(q * len(xs), 9)
    below = sum(x < value for x in xs)
    assert below < max(1, round(q * len(xs), 9))  # and it is the smallest such value
