"""Exact quantiles by nearest rank: the value of 1-based rank ``ceil(q * n)``.

Of ``n`` sorted values, the ``q``-quantile is the smallest value with at least
``q * n`` values at or below it: rank ``max(1, ceil(q * n))`` (the "inverted
CDF", type 1 of Hyndman and Fan; Spark's ``percentile_approx`` approximates
it). It is always a value of the data, never an interpolation. With
``n = 200``::

    q       q * n    rank   the value returned
    0       0        1      the minimum (rank 0 does not exist)
    0.5     100      100    the lower of the two middle values
    0.99    198      198
    0.999   199.8    200    the maximum
    1       200      200    the maximum

Float noise: ``0.07 * 100`` is ``7.000000000000001`` in binary floating point,
whose ceiling is 8, not 7. The product is rounded to 9 decimals before the
ceiling, so a product that is a whole number in decimal arithmetic but lands a
hair above it in binary keeps its rank.

This is the one definition of an exact quantile in the project: the broker
simulation's summary, the sweep workload, the data pipeline's exact reference
(:mod:`purgatory_broker.analytics.exact`, which calls :func:`quantile_rank` once per
group) and the benchmarks all use it. Pure Python, standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

__all__ = ["exact_quantile", "quantile_rank"]

T = TypeVar("T")

#: decimals ``q * n`` is rounded to before its ceiling (see the module doc)
_RANK_DECIMALS = 9


def quantile_rank(q: float, n: int) -> int:
    """The 1-based rank of the ``q``-quantile among ``n`` values:
    ``max(1, ceil(q * n))``, in ``[1, n]``. O(1).

    Raises ValueError when ``n < 1`` or ``q`` is not in ``[0, 1]``.
    """
    if n < 1:
        raise ValueError(f"a quantile needs at least one value, not n={n}")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in [0, 1], not {q}")
    return max(1, math.ceil(round(q * n, _RANK_DECIMALS)))


def exact_quantile(sorted_values: Sequence[T], q: float) -> T:
    """The value of rank :func:`quantile_rank` ``(q, len(sorted_values))`` in
    ``sorted_values`` (sorted ascending; not checked). O(1).

    Raises ValueError for an empty sequence or ``q`` outside ``[0, 1]``.
    """
    return sorted_values[quantile_rank(q, len(sorted_values)) - 1]
