"""The distinct ids of a batch, by a count over their span, are numpy's own: the same
values, order, type and inverse as ``np.unique`` for every integer type, wide and narrow
spans, negative values and empty arrays; ``among`` is ``np.isin``, ``runs`` cover a
sorted array value by value and ``group_runs`` columns sorted together pair by pair,
``places`` finds each value among sorted keys, and ``lexsort`` is ``np.lexsort``
(hypothesis)."""

import numpy as np
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

from rtrs_scapy.engine import distinct as D

KINDS = st.sampled_from([np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                         np.uint32, np.uint64])


@st.composite
def ids(draw):
    kind = np.dtype(draw(KINDS))
    info = np.iinfo(kind)
    low = draw(st.integers(info.min, info.max))
    span = draw(st.sampled_from([1, 3, 50, 5000, 1 << 40]))
    high = min(info.max, low + span)
    size = draw(st.sampled_from([0, 1, 7, D.FEW, 2 * D.FEW + 3]))
    return draw(hnp.arrays(kind, size, elements=st.integers(low, high)))


@given(ids())
def test_the_distinct_values_are_numpys(values):
    expected = np.unique(values)
    got = D.distinct(values)
    assert got.dtype == expected.dtype and np.array_equal(got, expected)
    expected, where = np.unique(values, return_inverse=True)
    got, place = D.distinct_inverse(values)
    assert got.dtype == expected.dtype and np.array_equal(got, expected)
    assert place.shape == where.shape and np.array_equal(place, where)


def test_a_batch_of_path_ids_is_counted():
    """A batch's path ids (a narrow span) go by the count, not by np.unique."""
    values = np.full(2 * D.FEW, 7, dtype=np.int64)
    values[::5] = 3
    assert D._span(values) == (3, 5)
    assert D.distinct(values).tolist() == [3, 7]
    assert D._span(np.array([0, 1 << 40] * D.FEW, dtype=np.int64)) is None


@given(ids(), st.lists(st.integers(-300, 300), max_size=2 * D.FEW_WANTED))
def test_among_is_numpys_isin(values, wanted):
    wanted = [w for w in wanted if np.can_cast(np.min_scalar_type(w), values.dtype)]
    assert np.array_equal(D.among(values, wanted), np.isin(values, wanted))
    assert np.array_equal(D.among(values, values[:3]), np.isin(values, values[:3]))


@given(ids())
def test_runs_cover_a_sorted_array_value_by_value(values):
    ordered = np.sort(values)
    got = D.runs(ordered)
    assert [value for value, _, _ in got] == np.unique(values).tolist()
    assert [stop - start for _, start, stop in got] == \
        np.unique(values, return_counts=True)[1].tolist()
    assert all(ordered[start] == ordered[stop - 1] == value for value, start, stop in got)


@given(hnp.arrays(np.int64, st.integers(0, 60), elements=st.integers(-3, 3)),
       hnp.arrays(np.int64, st.integers(0, 60), elements=st.integers(-3, 3)))
def test_group_runs_cover_rows_sorted_together_pair_by_pair(a, b):
    n = min(len(a), len(b))
    order = np.lexsort((b[:n], a[:n]))
    a, b = a[:n][order], b[:n][order]
    got = D.group_runs(a, b)
    pairs = sorted(set(zip(a.tolist(), b.tolist())))
    assert [(int(a[start]), int(b[start])) for start, _ in got] == pairs
    assert all(len(set(zip(a[start:stop].tolist(), b[start:stop].tolist()))) == 1
               for start, stop in got)
    assert [start for start, _ in got[1:]] == [stop for _, stop in got[:-1]]
    assert (got[0][0], got[-1][1]) == (0, n) if n else got == []


@given(hnp.arrays(np.int64, st.integers(0, 40), elements=st.integers(-50, 50)),
       hnp.arrays(np.int64, st.integers(0, 60), elements=st.integers(-60, 60)))
def test_places_are_the_index_of_each_value_among_sorted_keys(keys, values):
    keys = np.unique(keys)
    where = {int(k): i for i, k in enumerate(keys)}
    assert D.places(keys, values).tolist() == [where.get(int(v), -1) for v in values]



@st.composite
def sort_keys(draw):
    """One to four keys of a length, each of any integer type and span, or bools."""
    size = draw(st.sampled_from([0, 1, 7, D.FEW, 2 * D.FEW + 3]))
    keys = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            keys.append(draw(hnp.arrays(np.bool_, size)))
            continue
        kind = np.dtype(draw(KINDS))
        info = np.iinfo(kind)
        low = draw(st.integers(info.min, info.max))
        high = min(info.max, low + draw(st.sampled_from([1, 3, 50, 5000, 1 << 40])))
        keys.append(draw(hnp.arrays(kind, size, elements=st.integers(low, high))))
    return tuple(keys)


@given(sort_keys())
def test_lexsort_is_numpys(keys):
    """Keys of every integer type and span, with ties and bools, packed or not: the order
    of np.lexsort, ties in their order."""
    assert np.array_equal(D.lexsort(keys), np.lexsort(keys))


def test_a_batchs_keys_are_sorted_as_one_packed_integer():
    """Session, buf_id and frame of a batch's requests and responses span few enough
    values to be one integer: one vectorized sort, not np.lexsort."""
    rng = np.random.default_rng(7)
    frame = rng.permutation(9000) + 2_000_000
    keys = (frame, rng.integers(0, 512, 9000), np.zeros(9000, dtype=np.int64))
    packed = []
    real_argsort = np.argsort
    try:
        np.argsort = lambda values, *args, **kwargs: packed.append(values) or real_argsort(
            values, *args, **kwargs)
        order = D.lexsort(keys)
    finally:
        np.argsort = real_argsort
    assert len(packed) == 1 and np.array_equal(order, np.lexsort(keys))
