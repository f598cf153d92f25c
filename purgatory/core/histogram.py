"""A small log-linear histogram of non-negative integers (milliseconds).

Values below ``2**SUB_BITS`` (64) get a bucket each; above, every power of two is
split into ``2**SUB_BITS_HIGH`` (8) equal buckets, so a reported quantile is
within 12.5% of the true value (and exact below 64 ms, the lateness that
matters most). ``record`` is O(1), allocating only when a value lands beyond every
bucket so far; quantiles are O(buckets).

Example: 100 falls in the power of two [64, 128), split into buckets of 8:
bucket [96, 104); reported as 103, its upper edge (never understated).
"""

from __future__ import annotations

from ._signature import InitSignature, init_doc
from .quantile import quantile_rank

__all__ = ["Histogram"]

_EXACT = 64  # values below this are counted exactly
_SUB = 8  # buckets per power of two above it
_SUB_SHIFT = 3  # log2(_SUB)


def _bucket(value: int) -> int:
    if value < _EXACT:
        return value
    exp = value.bit_length() - 1  # value in [2**exp, 2**(exp+1))
    sub = (value >> (exp - _SUB_SHIFT)) - _SUB  # 0.._SUB-1
    return _EXACT + (exp - 6) * _SUB + sub


def _upper(bucket: int) -> int:
    if bucket < _EXACT:
        return bucket
    exp, sub = divmod(bucket - _EXACT, _SUB)
    exp += 6
    width = 1 << (exp - _SUB_SHIFT)
    return (1 << exp) + (sub + 1) * width - 1


class Histogram:
    """Counts of non-negative ints in log-linear buckets; see the module doc."""

    __slots__ = ("_counts", "count", "max")

    #: the constructor's signature for ``inspect`` and ``help()`` in the compiled core too
    __signature__ = InitSignature()

    def __init__(self) -> None:
        "__init__(self)\n--\n\nAn empty histogram."
        # _counts[b] is bucket b's count; invariant: sums to count. Starts with the
        # exact buckets and grows when a larger value first arrives.
        self._counts: list[int] = [0] * _EXACT
        self.count = 0
        self.max = 0  # invariant: the largest value recorded (0 if none)

    def record(self, value: int) -> None:
        """Count ``value`` (negatives count as 0). O(1) amortized."""
        self.count += 1
        if value < _EXACT:  # the common case, kept short: lateness of a few ms
            if value < 0:
                value = 0
            self._counts[value] += 1
        else:
            b = _bucket(value)
            counts = self._counts
            if b >= len(counts):
                counts.extend([0] * (b + 1 - len(counts)))
            counts[b] += 1
        if value > self.max:
            self.max = value

    def quantile(self, q: float) -> int:
        """The upper edge of the bucket holding the ``q``-quantile (0 if empty). O(buckets)."""
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"q must be within [0, 1], not {q!r}")
        if self.count == 0:
            return 0
        rank = quantile_rank(q, self.count)  # the project's one exact-quantile rule
        seen = 0
        for b, n in enumerate(self._counts):
            seen += n
            if seen >= rank:
                return min(_upper(b), self.max)
        return self.max  # pragma: no cover - rank <= count

    def _check_invariants(self) -> None:
        assert sum(self._counts) == self.count
        assert all(c >= 0 for c in self._counts)


init_doc(Histogram)  # the text signature is for the compiled core only
