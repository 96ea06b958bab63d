"""The distinct values of a batch's ids (paths, devices, connections, operations, chunks;
the lines' errnos, queue pairs, seconds).

``np.unique`` hashes or sorts every value: 100 µs for the 4,500 path ids of a batch of
load.  A batch's ids are a few small integers, and a count over their span finds them in
a tenth of that; values spread wider than the count is worth fall back to a sort
(``np.unique``'s result, without its import of numpy.ma).
"""

import numpy as np

#: fewer values than this: a sort (it costs a few µs there, as the count does)
FEW = 256
#: the widest span counted, as a multiple of the number of values
SPAN_PER_VALUE = 4


def _span(values):
    """(least value, span) when the values are worth counting (integers that a count's
    index holds: not 64-bit unsigned), else None."""
    kind = values.dtype
    if len(values) < FEW or not (kind.kind == "i" or kind.kind == "u" and kind.itemsize < 8):
        return None
    low, high = int(values.min()), int(values.max())
    span = high - low + 1
    return (low, span) if span <= SPAN_PER_VALUE * len(values) else None


def distinct(values):
    """The distinct values of an integer array, sorted (``np.unique(values)``)."""
    counted = _span(values)
    if counted is None:
        return _sorted_distinct(values)
    low, _ = counted
    return (np.flatnonzero(np.bincount(_offsets(values, low))) + low).astype(
        values.dtype, copy=False)


def _sorted_distinct(values):
    """``np.unique(values)`` by a sort: np.unique asks ``np.ma`` whether the values
    are masked, and importing numpy.ma costs every command 9 ms."""
    ordered = np.sort(values)
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    return ordered[first]


def distinct_inverse(values):
    """``np.unique(values, return_inverse=True)``: the distinct values, sorted, and the
    place of each value among them."""
    counted = _span(values)
    if counted is None:
        return np.unique(values, return_inverse=True)
    low, span = counted
    offsets = _offsets(values, low)
    present = np.flatnonzero(np.bincount(offsets))
    place = np.zeros(span, dtype=np.intp)
    place[present] = np.arange(len(present))
    return (present + low).astype(values.dtype, copy=False), place[offsets]


def _offsets(values, low):
    """Each value less ``low``, in 64 bits (a narrow type would wrap)."""
    return np.subtract(values, low, dtype=np.int64)


#: wanted values beyond which ``among`` is np.isin
FEW_WANTED = 8


def among(values, wanted):
    """``np.isin(values, wanted)``: one comparison per wanted value when they are a
    few (a batch's rows against its paths or a handful of kinds), where np.isin sorts
    both sides (100 µs for a batch of load)."""
    if len(wanted) > FEW_WANTED:
        return np.isin(values, wanted)
    found = np.zeros(np.shape(values), dtype=bool)
    for value in wanted:
        found |= values == value
    return found


def places(keys, values):
    """The place of each value among sorted unique ``keys``, -1 where it is not one:
    a batch looked up in keys sorted once (np.isin would sort both every time)."""
    if not len(keys):
        return np.full(np.shape(values), -1, dtype=np.intp)
    at = np.minimum(np.searchsorted(keys, values), len(keys) - 1)
    return np.where(keys[at] == values, at, -1)


#: the room of one packed key (``lexsort``): 63 bits, its sign left clear
PACKED = 1 << 63


def lexsort(keys):
    """``np.lexsort(keys)`` (the last key sorts first, equal rows keep their order) for
    integer keys: packed into one integer, the row's position last, when their spans
    fit 63 bits, and sorted once by numpy's vectorized sort (a quarter of the time of
    a stable sort per key); else np.lexsort."""
    n = len(keys[0]) if len(keys) else 0
    packed = np.arange(n, dtype=np.int64)
    scale = n
    for key in keys:
        key = np.asarray(key)
        if not n or key.dtype.kind not in "biu":
            return np.lexsort(keys)
        if key.dtype.kind == "b":
            key = key.view(np.uint8)
        low, high = int(key.min()), int(key.max())
        if high >= PACKED or scale * (high - low + 1) >= PACKED:
            # a wide key (rkeys, say): each value's place among the distinct ones
            values, key = distinct_inverse(key)
            low, high = 0, len(values) - 1
            if scale * len(values) >= PACKED:
                return np.lexsort(keys)
        packed += (key.astype(np.int64) - low) * scale
        scale *= high - low + 1
    return np.argsort(packed)


def runs(ordered):
    """(value, start, stop) of each run of equal values of a sorted integer array."""
    return [(int(ordered[start]), start, stop) for start, stop in group_runs(ordered)]


def group_runs(*columns):
    """(start, stop) of each run of equal rows of columns sorted together (lexsort)."""
    if not len(columns[0]):
        return []
    change = np.zeros(len(columns[0]) - 1, dtype=bool)
    for column in columns:
        change |= column[1:] != column[:-1]
    cuts = (np.flatnonzero(change) + 1).tolist()
    return list(zip([0] + cuts, cuts + [len(columns[0])]))
