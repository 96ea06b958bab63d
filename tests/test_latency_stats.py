"""The summary's latency figures are nearest-rank percentiles: the value at rank
ceil(p/100 × n) of the sorted latencies, min and max the ends (the definition, written
here with Python's sorted(), against the partition the summary uses)."""

import math

from hypothesis import given, strategies as st

from rtrs_scapy.analysis.summary import latency_stats

SECONDS = st.floats(min_value=0, max_value=60, allow_nan=False)


@given(st.lists(SECONDS, min_size=1, max_size=300))
def test_percentiles_are_the_nearest_ranks_of_the_sorted_values(values):
    ordered = sorted(values)
    n = len(ordered)
    stats = latency_stats(values)
    assert stats["count"] == n
    assert stats["min"] == round(ordered[0] * 1e6, 1)
    assert stats["max"] == round(ordered[-1] * 1e6, 1)
    for name, pct in (("p50", 50), ("p90", 90), ("p99", 99)):
        rank = max(1, math.ceil(pct * n / 100))
        assert stats[name] == round(ordered[rank - 1] * 1e6, 1), name


def test_no_values_give_no_figures():
    assert latency_stats([]) == {"count": 0, "min": None, "p50": None, "p90": None,
                                 "p99": None, "max": None}
