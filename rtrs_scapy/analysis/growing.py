"""One growing integer array in place of a list of small ones.

What the analysis keeps per IO row until the capture ends (latencies for exact
percentiles, the failovers' log of requests) grows with the capture: kept as one
array per figure, in the smallest integer type its values so far need, it costs a
few bytes a row, without an array object per batch nor a concatenation of all of
them at the end.
"""

import numpy as np

from .iorows import narrow

#: the capacity grows by half each time it is full (amortized copies, a bounded slack)
GROWTH = 1.5


class Growing:
    """An integer array appended to at its end and, as a bounded log, dropped from at
    its start; ``values()`` is a view of what it holds."""

    def __init__(self):
        self.data = np.zeros(0, dtype=np.int8)
        self.start = self.stop = 0

    def __len__(self):
        return self.stop - self.start

    def extend(self, values):
        """``values`` appended (the same values; the array widens when they need it)."""
        if not len(values):
            return
        values = narrow(values)
        kind = np.promote_types(self.data.dtype, values.dtype)
        if kind != self.data.dtype or self.stop + len(values) > len(self.data):
            live = len(self) + len(values)
            grown = np.empty(max(int(live * GROWTH), 64), dtype=kind)
            grown[:len(self)] = self.values()
            self.data, self.start, self.stop = grown, 0, len(self)
        self.data[self.stop:self.stop + len(values)] = values
        self.stop += len(values)

    def drop(self, count):
        """The first ``count`` values gone (their room is reused when the array grows)."""
        self.start += count

    def values(self):
        return self.data[self.start:self.stop]

    def replace(self, values):
        """Hold exactly ``values`` (an array of the same values, reordered)."""
        self.data, self.start, self.stop = values, 0, len(values)
