"""The driver's side of the fold: exact percentiles from weighted cells, and the
row check from the reasons' bitmask.

:func:`purgatory_broker.analytics._fold.cell_quantiles` reads every group's
percentiles from (value, count) cells; expanded back into one value per row,
each group must give what :func:`purgatory.core.exact_quantile` gives on its
sorted values (seeded random cells, groups of one cell to thousands of rows).
"""

from __future__ import annotations

import random

import pytest

pd = pytest.importorskip("pandas")

from purgatory_broker.analytics._fold import cell_quantiles, row_check  # noqa: E402
from purgatory_broker.analytics._trace import REASONS  # noqa: E402

from purgatory.core import exact_quantile  # noqa: E402

QS = {"p0": 0.0, "p07": 0.07, "p50": 0.5, "p99": 0.99, "p999": 0.999, "p100": 1.0}


@pytest.mark.parametrize("seed", range(20))
def test_cell_quantiles_are_exact_quantile_of_the_expanded_cells(seed: int) -> None:
    rng = random.Random(seed)
    cells: list[tuple[str, int, int | None, int]] = []
    for group in range(rng.randint(1, 30)):
        values = rng.sample(range(-500, 10**5), rng.choice([1, 2, 5, rng.randint(1, 400)]))
        cells += [(f"g{group % 4}", group, v, rng.choice([1, 1, 2, 50])) for v in values]
    cells.append(("g0", 10**6, None, 7))  # a cell without a value: skipped, no group
    rng.shuffle(cells)
    frame = pd.DataFrame(cells, columns=["a", "b", "value_ms", "rows"])
    out = cell_quantiles(frame, ["a", "b"], QS, "v")
    expanded: dict[tuple[str, int], list[int]] = {}
    for a, b, value, rows in cells:
        if value is not None:
            expanded.setdefault((a, b), []).extend([value] * rows)
    assert sorted(out.index) == sorted(expanded)
    for key, values in expanded.items():
        values.sort()
        for name, q in QS.items():
            assert out.loc[key, f"v_{name}_ms"] == exact_quantile(values, q), (key, q)
        assert out.loc[key, "v_max_ms"] == values[-1]


def test_row_check_counts_each_reason_and_each_bad_row_once() -> None:
    first, second = (1 << i for i in range(2))
    cells = pd.DataFrame(
        {
            "flags": [0, 0, first, first | second, second],
            "rows": [10, 5, 2, 3, 4],
            "last_created_ms": [70.0, 90.0, None, None, None],
        }
    )
    check = row_check(cells)
    names = list(REASONS)
    assert (check.total, check.bad, check.valid, check.last_created_ms) == (24, 9, 15, 90)
    assert check.reasons[names[0]] == 5
    assert check.reasons[names[1]] == 7
    assert sum(check.reasons.values()) == 12  # the row with two problems counts twice
