"""The server's READ data, kept until the response of its request pairs: when
the data of each read crossed the wire (docs/latency.md).

A read's data is the server's RDMA WRITE into the client's buffer ``desc[0]``,
its rkey the request's ``desc[0].key``, on the request's QP, before the
response (docs/PROTOCOL.md#which-operation-carries-what).  So the data of a
read is the latest data message of its path with that key before its response,
if it came after the request (a key comes back with a later IO of the same
buffer).  The table keeps the data messages not yet claimed, as columns, at
most ``size`` of them (the oldest go); a read claims its data when its
response pairs, which is soon.  It is the analyzer's ``read_data`` part
(docs/design.md#the-analyzers-parts): the analyzer adds, io.py looks up.
"""

import numpy as np

from ..engine.distinct import lexsort

_FIELDS = ("key", "first_ns", "last_ns", "frame")


def _key(path, rkey):
    return (np.asarray(path, dtype=np.int64) << 32) | (np.asarray(rkey, dtype=np.int64)
                                                       & 0xFFFFFFFF)


class ReadData:
    def __init__(self, size):
        self.size = size
        self.table = {name: np.zeros(0, dtype=np.int64) for name in _FIELDS}

    def add(self, path, rkey, first_ns, last_ns, frame):
        """Data messages (arrays) of one batch."""
        if not len(path):
            return
        new = {"key": _key(path, rkey), "first_ns": first_ns, "last_ns": last_ns,
               "frame": frame}
        table = {name: np.concatenate((self.table[name], new[name])) for name in _FIELDS}
        keep = np.arange(len(table["key"]))
        if len(keep) > self.size:
            keep = np.sort(np.argsort(table["frame"], kind="stable")[-self.size:])
        self.table = {name: column[keep] for name, column in table.items()}

    def lookup(self, path, rkey, after_frame, before_frame):
        """(first_ns, last_ns) of the data of each read (arrays), -1 where none lies
        between ``after_frame`` and ``before_frame`` with its path and key (and for a
        write: a negative ``rkey``); the messages found are dropped."""
        first = np.full(len(path), -1, dtype=np.int64)
        last = np.full(len(path), -1, dtype=np.int64)
        reads = np.flatnonzero(np.asarray(rkey) >= 0)
        stored = len(self.table["key"])
        if not len(reads) or not stored:
            return first, last
        wanted = _key(np.asarray(path)[reads], np.asarray(rkey)[reads])
        found = self._latest_before(wanted, np.asarray(before_frame)[reads])
        at = np.maximum(found, 0)
        hit = (found >= 0) & (self.table["key"][at] == wanted) \
            & (self.table["frame"][at] > np.asarray(after_frame)[reads])
        first[reads[hit]] = self.table["first_ns"][at[hit]]
        last[reads[hit]] = self.table["last_ns"][at[hit]]
        unclaimed = np.ones(stored, dtype=bool)
        unclaimed[at[hit]] = False
        self.table = {name: column[unclaimed] for name, column in self.table.items()}
        return first, last

    def _latest_before(self, keys, frames):
        """Per read (``keys``, ``frames``): the stored message just before it in the
        (key, frame) order, -1 none (it may be of another key)."""
        stored, n = len(self.table["key"]), len(keys)
        key = np.concatenate((self.table["key"], keys))
        frame = np.concatenate((self.table["frame"], frames))
        is_read = np.arange(stored + n) >= stored
        order = lexsort((is_read, frame, key))
        reads = is_read[order]
        latest = np.maximum.accumulate(np.where(reads, -1, np.arange(len(order))))
        found = np.empty(n, dtype=np.int64)
        found[order[reads] - stored] = np.where(latest[reads] >= 0, order[latest[reads]], -1)
        return found
