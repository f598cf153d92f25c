"""The exact reference's vectorised quantiles against the one rule, on random data.

:func:`purgatory_broker.analytics.exact.group_quantiles` sorts all groups at once and
reads each group's ranks by index; every value it returns must be what
:func:`purgatory.core.exact_quantile` gives on that group's sorted values.
"""

from __future__ import annotations

import random

import pytest

pd = pytest.importorskip("pandas")
np = pytest.importorskip("numpy")

from purgatory_broker.analytics.exact import group_quantiles  # noqa: E402

from purgatory.core import exact_quantile  # noqa: E402

QS = {"p0": 0.0, "p07": 0.07, "p29": 0.29, "p50": 0.5, "p99": 0.99, "p999": 0.999, "p100": 1.0}


@pytest.mark.parametrize("seed", range(20))
def test_group_quantiles_are_exact_quantile_per_group(seed: int) -> None:
    rng = random.Random(seed)
    rows = []
    for group in range(rng.randint(1, 40)):
        size = rng.choice([1, 2, 3, 7, 100, rng.randint(1, 3000)])
        rows += [(group % 3, group, rng.randint(-500, 10**6)) for _ in range(size)]
    rng.shuffle(rows)
    frame = pd.DataFrame(rows, columns=["a", "b", "value"]).astype({"value": "float64"})
    frame.loc[frame.sample(frac=0.1, random_state=seed).index, "value"] = np.nan  # skipped
    out = group_quantiles(frame, ["a", "b"], "value", QS, "v")
    groups = {
        key: sorted(int(v) for v in sub["value"].dropna()) for key, sub in frame.groupby(["a", "b"])
    }
    groups = {key: values for key, values in groups.items() if values}
    assert sorted(out.index) == sorted(groups)
    for key, values in groups.items():
        for name, q in QS.items():
            assert out.loc[key, f"v_{name}_ms"] == exact_quantile(values, q), (key, q)
        assert out.loc[key, "v_max_ms"] == values[-1]
