"""The recent items of each key, in compiled code: per key, the last few (frame, value)
pairs added, and of those the latest before a frame taken out.  A READ's client
buffer is invalidated by the server's SEND WITH INVALIDATE of its key
(docs/PROTOCOL.md#which-operation-carries-what): the message records link the two this way, a hundred
thousand times on 3 M packets of load, where a Python loop over lists cost a tenth
of a second.

Each key has a row of ``depth`` places, its items in the order they came; the
keys seen are kept sorted beside their rows, and a batch's distinct keys are looked
up among them at once (a dict looked up key by key cost 57 ms of the 3 M packets).
"""

import numpy as np

from ..capture.jit import compiled
from .distinct import distinct_inverse, places


class Recent:
    """Per key, the last ``depth`` items added (older ones dropped)."""

    def __init__(self, depth=8, rows=64):
        self.keys = np.zeros(0, dtype=np.int64)        # the keys seen, sorted
        self.key_rows = np.zeros(0, dtype=np.int64)    # the row of each
        self.frames = np.zeros((rows, depth), dtype=np.int64)
        self.values = np.zeros((rows, depth), dtype=np.int64)
        self.counts = np.zeros(rows, dtype=np.int64)

    def __len__(self):
        """The items held."""
        return int(self.counts[:len(self.keys)].sum())

    def add(self, keys, frames, values):
        """Items (``frames``, ``values``) of ``keys``, in the order given."""
        rows = self._rows(keys, make=True)
        add_items(rows, _int64(frames), _int64(values), self.frames, self.values,
                  self.counts)

    def take_latest(self, keys, frames):
        """For each key in turn, the value of its latest item before that frame, taken
        out; -1 where it has none."""
        rows = self._rows(keys, make=False)
        out = np.empty(len(rows), dtype=np.int64)
        take_latest(rows, _int64(frames), self.frames, self.values, self.counts, out)
        return out

    def _rows(self, keys, make):
        """The row of each key (-1: none, where not ``make``)."""
        keys = np.asarray(keys, dtype=np.int64)
        if not len(keys):
            return np.empty(0, dtype=np.int64)
        distinct, inverse = distinct_inverse(keys)
        at = places(self.keys, distinct)
        known = at >= 0
        rows = np.full(len(distinct), -1, dtype=np.int64)
        rows[known] = self.key_rows[at[known]]
        if make and not known.all():
            # new keys get the next rows, in the order of their values
            fresh = distinct[~known]
            rows[~known] = len(self.keys) + np.arange(len(fresh))
            where = np.searchsorted(self.keys, fresh)
            self.keys = np.insert(self.keys, where, fresh)
            self.key_rows = np.insert(self.key_rows, where, rows[~known])
            if len(self.keys) > len(self.counts):
                self._grow(len(self.keys))
        return rows[inverse.reshape(-1)]

    def _grow(self, need):
        size = max(need, 2 * len(self.counts))
        for name in ("frames", "values", "counts"):
            old = getattr(self, name)
            grown = np.zeros((size,) + old.shape[1:], dtype=old.dtype)
            grown[:len(old)] = old
            setattr(self, name, grown)


def _int64(values):
    return np.ascontiguousarray(values, dtype=np.int64)


@compiled
def add_items(rows, frames, values, row_frames, row_values, counts):
    """Each item appended to its row, the oldest dropped from a full one."""
    depth = row_frames.shape[1]
    for i in range(rows.shape[0]):
        row, count = rows[i], counts[rows[i]]
        if count == depth:
            for k in range(1, depth):
                row_frames[row, k - 1] = row_frames[row, k]
                row_values[row, k - 1] = row_values[row, k]
            count -= 1
        row_frames[row, count] = frames[i]
        row_values[row, count] = values[i]
        counts[row] = count + 1


@compiled
def take_latest(rows, frames, row_frames, row_values, counts, out):
    """For each row in turn, its item of the latest frame before ``frames[i]`` (the
    first of equals) into ``out[i]`` and out of the row; -1 where none."""
    for i in range(rows.shape[0]):
        out[i] = -1
        row = rows[i]
        if row < 0:
            continue
        best = -1
        for k in range(counts[row]):
            if row_frames[row, k] < frames[i] and (
                    best < 0 or row_frames[row, k] > row_frames[row, best]):
                best = k
        if best < 0:
            continue
        out[i] = row_values[row, best]
        for k in range(best + 1, counts[row]):
            row_frames[row, k - 1] = row_frames[row, k]
            row_values[row, k - 1] = row_values[row, k]
        counts[row] -= 1
