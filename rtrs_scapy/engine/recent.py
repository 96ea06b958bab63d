"""The recent items of each key, in compiled code: per key, the last few (frame, value)
pairs added, and of those the latest before a frame taken out.  A READ's client
buffer is invalidated by the server's SEND WITH INVALIDATE of its key
(docs/PROTOCOL.md#which-operation-carries-what): the message records link the two this way, a hundred
thousand times on 3 M packets of load, where a Python loop over lists cost a tenth
of a second.

Items and takes given together are played in frame order (:meth:`Recent.play`): a
key's row keeps only its last ``depth`` items, so a batch's items all added before its
takes would push out, beyond ``depth`` reads of one key in the batch, the ones its
takes are for.

Each key has a row of ``depth`` places, its items in the order they came.  The
keys seen are kept sorted beside their rows in a few levels, each at least eight times
the next, and a batch's distinct keys are looked up in each at once (a dict
looked up key by key cost 57 ms of the 3 M packets; one sorted array that every
batch's new keys are inserted into is copied whole each time, quadratic in the keys).
"""

import numpy as np

from ..capture.jit import compiled, helper
from .distinct import distinct_inverse, places

#: each level of keys at least this many times the next
SPREAD = 8


class Recent:
    """Per key, the last ``depth`` items added (older ones dropped)."""

    def __init__(self, depth=8, rows=64):
        self.levels = []        # (keys sorted, the row of each), the largest first
        self.frames = np.zeros((rows, depth), dtype=np.int64)
        self.values = np.zeros((rows, depth), dtype=np.int64)
        self.counts = np.zeros(rows, dtype=np.int64)

    def __len__(self):
        """The items held."""
        return int(self.counts[:self.known].sum())

    @property
    def known(self):
        """The keys seen (their rows are 0 … known - 1)."""
        return sum(len(keys) for keys, _ in self.levels)

    def play(self, keys, frames, values, take_keys, take_frames):
        """Items (``keys``, ``frames``, ``values``) added, and takes (``take_keys``,
        ``take_frames``): for each take in turn, the value of its key's latest item
        before that frame, taken out (-1 where none), returned.  Both in frame order,
        merged by frame: an item goes in before the takes of later frames, after those
        of its own (a take finds only earlier frames)."""
        rows = self._rows(keys, make=True)
        take_rows = self._rows(take_keys, make=False)
        out = np.empty(len(take_rows), dtype=np.int64)
        play(rows, _int64(frames), _int64(values), take_rows, _int64(take_frames),
             self.frames, self.values, self.counts, out)
        return out

    def _rows(self, keys, make):
        """The row of each key (-1: none, where not ``make``)."""
        keys = np.asarray(keys, dtype=np.int64)
        if not len(keys):
            return np.empty(0, dtype=np.int64)
        distinct, inverse = distinct_inverse(keys)
        rows = np.full(len(distinct), -1, dtype=np.int64)
        for level_keys, level_rows in self.levels:
            at = places(level_keys, distinct)
            found = at >= 0
            rows[found] = level_rows[at[found]]
        fresh = rows < 0
        if make and fresh.any():
            # new keys get the next rows, in the order of their values
            rows[fresh] = self.known + np.arange(np.count_nonzero(fresh))
            self._keep(distinct[fresh], rows[fresh])
            if self.known > len(self.counts):
                self._grow(self.known)
        return rows[inverse.reshape(-1)]

    def _keep(self, keys, rows):
        """New keys (sorted) and their rows as a level; a level merged with the one
        before while that one is less than ``SPREAD`` times as large: a key is merged
        a few times in all, and the levels stay few (two for the 1,019 keys of 3 M
        load packets)."""
        levels = self.levels
        levels.append((keys, rows))
        while len(levels) > 1 and len(levels[-2][0]) < SPREAD * len(levels[-1][0]):
            (newer_keys, newer_rows), (older_keys, older_rows) = levels.pop(), levels.pop()
            merged = np.concatenate((older_keys, newer_keys))
            order = np.argsort(merged, kind="stable")
            levels.append((merged[order], np.concatenate((older_rows, newer_rows))[order]))

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
def play(rows, frames, values, take_rows, take_frames, row_frames, row_values, counts, out):
    """Items (``rows``, ``frames``, ``values``) appended to their rows, the oldest dropped
    from a full one, and takes (``take_rows``, ``take_frames``), merged by frame: of
    each take, the row's item of the latest frame before it (the first of equals) into
    ``out`` and out of the row; -1 where none."""
    i = 0
    for t in range(take_rows.shape[0]):
        while i < rows.shape[0] and frames[i] < take_frames[t]:
            _add(rows[i], frames[i], values[i], row_frames, row_values, counts)
            i += 1
        out[t] = _take(take_rows[t], take_frames[t], row_frames, row_values, counts)
    while i < rows.shape[0]:
        _add(rows[i], frames[i], values[i], row_frames, row_values, counts)
        i += 1


@helper
def _add(row, frame, value, row_frames, row_values, counts):
    """An item appended to its row, the oldest dropped from a full one."""
    depth = row_frames.shape[1]
    count = counts[row]
    if count == depth:
        for k in range(1, depth):
            row_frames[row, k - 1] = row_frames[row, k]
            row_values[row, k - 1] = row_values[row, k]
        count -= 1
    row_frames[row, count] = frame
    row_values[row, count] = value
    counts[row] = count + 1


@helper
def _take(row, frame, row_frames, row_values, counts):
    """The row's item of the latest frame before ``frame`` (the first of equals), out of
    the row; -1 where none."""
    if row < 0:
        return -1
    best = -1
    for k in range(counts[row]):
        if row_frames[row, k] < frame and (best < 0 or row_frames[row, k] > row_frames[row, best]):
            best = k
    if best < 0:
        return -1
    value = row_values[row, best]
    for k in range(best + 1, counts[row]):
        row_frames[row, k - 1] = row_frames[row, k]
        row_values[row, k - 1] = row_values[row, k]
    counts[row] -= 1
    return value
