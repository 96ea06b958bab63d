"""One growing integer array in place of a list of small ones.

What the analysis keeps per IO row until the capture ends (latencies for exact
percentiles, the failovers' log of requests) grows with the capture: kept as one
array per figure, in the smallest integer type its values so far need, it costs a
few bytes a row, without an array object per batch nor a concatenation of all of
them at the end.  Times (ns) are kept in µs while every one is a whole number of
them (a capture of µs timestamps), and instants as the time since the first one:
a latency of a few ms then fits two bytes, an instant four.
"""

import numpy as np

from .iorows import narrow, narrow_type

#: the capacity grows by half each time it is full (amortized copies, a bounded slack)
GROWTH = 1.5


def capacity_for(need, least=64):
    """The room to allocate when ``need`` values no longer fit (this module's
    arrays and the message records' columns, analysis/columns.py)."""
    return max(int(need * GROWTH), least)


#: a Growing's first room: a short session's figures hold a few values each, and a
#: capture of thousands of sessions keeps a dozen of them per session
FIRST_ROOM = 8
#: ns per µs: the unit of times kept while all of them are whole µs
MICRO = 1000
#: what every Growing holds before its first values (never written: it has no room)
NOTHING = np.zeros(0, dtype=np.int8)


class Growing:
    """An integer array appended to at its end and, as a bounded log, dropped from at
    its start.  ``times``: ns values, kept in µs while they allow it; ``instants``:
    kept as the difference to the first value (both exact: ``values()`` gives back
    the values appended)."""

    __slots__ = ("data", "start", "stop", "unit", "instants", "base")

    def __init__(self, times=False, instants=False):
        self.data = NOTHING
        self.start = self.stop = 0
        self.unit = MICRO if times else 1
        self.instants = instants
        self.base = 0

    def __len__(self):
        return self.stop - self.start

    def extend(self, values):
        """``values`` appended (the same values; the array widens when they need it)."""
        if not len(values):
            return
        if self.instants and not self.stop:
            self.base = int(values[0])
        values = values.astype(np.int64, copy=False)
        if self.base:
            values = values - self.base
        if self.unit != 1:
            whole = values // self.unit     # (np.divmod: twice the time)
            if np.any(whole * self.unit != values):
                self._exact()
            else:
                values = whole
        kind = np.promote_types(self.data.dtype,
                                narrow_type(values.min(), values.max()) or np.int64)
        if kind != self.data.dtype or self.stop + len(values) > len(self.data):
            live = len(self) + len(values)
            grown = np.empty(capacity_for(live, FIRST_ROOM), dtype=kind)
            grown[:len(self)] = self._raw()
            self.data, self.start, self.stop = grown, 0, len(self)
        self.data[self.stop:self.stop + len(values)] = values
        self.stop += len(values)

    def _exact(self):
        """A value is no whole number of the unit: all are kept in ns from now on."""
        kept = self._raw().astype(np.int64) * self.unit
        self.data, self.start, self.stop, self.unit = narrow(kept), 0, len(kept), 1

    def _raw(self):
        return self.data[self.start:self.stop]

    def drop(self, count):
        """The first ``count`` values gone (their room is reused when the array grows)."""
        self.start += count

    def values(self):
        """The values held (a view when they are kept as they are, else an int64 copy)."""
        return self._widen(self._raw())

    def kept(self):
        """The values as kept, and the ns (or unit) each stands for: kept × unit are
        the values appended (of a Growing that is not of instants)."""
        return self._raw(), self.unit

    def take(self, at):
        """The values at positions ``at``."""
        return self._widen(self._raw()[at])

    def at(self, k):
        """The value at position ``k``, an int."""
        return int(self._raw()[k]) * self.unit + self.base

    def _widen(self, raw):
        if self.unit == 1 and not self.base:
            return raw
        return raw.astype(np.int64) * self.unit + self.base

    def reorder(self, order):
        """The values held put in ``order`` (positions)."""
        self.data = self._raw()[order]
        self.start, self.stop = 0, len(self.data)


#: the rows of batches gathered before a Gathered's arrays are extended with them (and
#: before the RNBD view takes them in, rnbd_view.py)
GATHER = 1 << 14


class Gathered:
    """Growing arrays (``columns``: name -> Growing) appended to together, a batch of
    rows at a time, read once the capture is read: the batches are gathered into
    blocks of GATHER rows first.  An extend costs a dozen numpy calls whatever its
    length, and the figures kept this way (the failovers' log, the spans in flight)
    were extended a column at a time for every batch of IO rows.  The arrays of a
    batch are held, not copied: their owner does not change them (as the IO rows'
    other sinks)."""

    def __init__(self, columns):
        self.columns = columns
        self.waiting = []
        self.rows = 0

    def extend(self, batch):
        """``batch``: name -> values, one array per column."""
        self.waiting.append(batch)
        self.rows += len(next(iter(batch.values())))
        if self.rows >= GATHER:
            self.flush()

    def flush(self):
        """Every batch gathered so far into the arrays."""
        if not self.waiting:
            return
        for name, column in self.columns.items():
            parts = [batch[name] for batch in self.waiting]
            column.extend(np.concatenate(parts) if len(parts) > 1 else parts[0])
        self.waiting, self.rows = [], 0
