"""numpy columns as Arrow arrays, for the tables built from columns (``ios``,
``messages``): no Python per row, only per distinct value."""

import pyarrow as pa

from ..engine.distinct import distinct_inverse


def nullable(values, missing):
    """A numpy column as Arrow, null where ``missing``."""
    return pa.array(values, mask=missing)


def lookup(table, codes):
    """``table[codes]`` as an Arrow array."""
    return table.take(pa.array(codes))


def by_key(keys, name, missing=None):
    """``name(key)`` per row as an Arrow string array, computed once per distinct
    key; null where ``missing``.  Also the names by key."""
    uniq, inverse = distinct_inverse(keys)
    values = [name(k) for k in uniq.tolist()]
    return pa.array(values, pa.string()).take(pa.array(inverse.reshape(-1), mask=missing)), \
        dict(zip(uniq.tolist(), values))
