"""One row per RTRS request, as columns: what the IO table, the RNBD view, the
report and the live view are made of.

Every request the summary counts becomes exactly one row, once its fate is
known: answered (with its response), replaced by a newer request with the same
buf_id (failed over or reused), aborted by a reconnect of its path, or still in
flight when the capture ends.  Rows come out in batches of numpy columns
(``COLUMNS``); names (session, device) are resolved by whoever writes them.
"""

import numpy as np

from ..engine.distinct import distinct
from .spill import SpilledList

#: (name, meaning) of the numeric columns of a batch of IO rows
COLUMNS = (
    ("time_ns", "capture time of the request (its immediate), ns since the epoch"),
    ("frame", "frame of the request's immediate"),
    ("first_frame", "frame of the request's first packet (-1: before the capture)"),
    ("path", "path id (Analyzer.path_list)"),
    ("cid", "connection id (-1: handshake not captured)"),
    ("op", "1 read, 2 write"),
    ("buf_id", "the permit (chunk) of the request"),
    ("bytes", "data_len + usr_len, the kernel's stats/rdma accounting"),
    ("partial", "1: the request's first packets precede the capture"),
    ("rnbd_type", "RNBD message type of the user header (-1: none)"),
    ("rnbd_op", "RNBD IO operation (-1: not an IO)"),
    ("device_id", "RNBD device id of an IO or a CLOSE (-1: other messages)"),
    ("sector", "first 512-byte sector of an IO"),
    ("bi_size", "bytes of an IO"),
    ("outcome", "0 answered, 1 replaced by a newer request, 2 aborted, 3 in flight at end"),
    ("response_frame", "frame of the response (-1: none)"),
    ("response_ns", "capture time of the response (-1: none)"),
    ("latency_ns", "response time minus the first send (-1: none)"),
    ("errno", "the response's errno, negative (0: success or no response)"),
    ("failover_from", "frame of the first send of a request failed over (-1: none)"),
    ("failover_of", "frame of the request this one re-sends after a failover (-1: none)"),
    ("failed_over", "1: this request was re-sent on another path (its IO counts there)"),
    ("delivered", "1 the client acknowledged the response, 0 never, -1 unknown or none"),
    ("request_first_ns", "capture time of the request's first packet (-1: before the capture)"),
    ("data_first_ns", "capture time of the first packet of a read's data (-1: none seen)"),
    ("data_last_ns", "capture time of the last packet of a read's data (-1: none seen)"),
    ("response_first_ns", "capture time of the response's first packet (-1: none)"),
    ("desc_key", "rkey of a read's buffer desc[0], where the server writes its data (-1: none)"),
)
NAMES = tuple(name for name, _ in COLUMNS)
ANSWERED, REPLACED, ABORTED, IN_FLIGHT = range(4)
OUTCOMES = ("answered", "replaced", "aborted", "in_flight")


def from_requests(table, index, outcome):
    """Rows of the requests ``index`` of a pairing table, without a response."""
    n = len(index)
    none = np.full(n, -1, dtype=np.int64)
    return {
        "time_ns": table["stamp"][index], "frame": table["frame"][index],
        "first_frame": table["request_first"][index], "path": table["path"][index],
        "cid": table["cid"][index], "op": table["op"][index], "buf_id": table["key"][index],
        "bytes": table["bytes"][index], "partial": table["partial"][index],
        "rnbd_type": table["rnbd_type"][index], "rnbd_op": table["rnbd_op"][index],
        "device_id": table["device_id"][index],
        "sector": table["sector"][index], "bi_size": table["bi_size"][index],
        "outcome": np.full(n, outcome, dtype=np.int64), "response_frame": none,
        "response_ns": none, "latency_ns": none, "errno": np.zeros(n, dtype=np.int64),
        "failover_from": none, "failover_of": none,
        "failed_over": np.zeros(n, dtype=np.int64), "delivered": none,
        "request_first_ns": table["request_first_ns"][index], "data_first_ns": none,
        "data_last_ns": none, "response_first_ns": none, "desc_key": table["desc_key"][index],
    }


def concat(batches):
    """One batch from several (the columns of the first); where one holds every row, its
    columns themselves (a batch's arrays are not written to once it is made: most
    batches of answered IO come with no row replaced)."""
    full = [b for b in batches if len(next(iter(b.values())))]
    if len(full) == 1:
        return {name: full[0][name] for name in batches[0]}
    return {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}


class IoSpans:
    """Per path id its first and last IO row so far, (stamp, frame) each: the timeline's
    first_io and last_io (an analyzer's part; linking.py merges two paths' spans)."""

    def __init__(self):
        self.spans = {}             # path id -> [first (stamp, frame), last (stamp, frame)]

    def add(self, batch):
        for pid in distinct(batch["path"]).tolist():
            mine = batch["path"] == pid
            times, frames = batch["time_ns"][mine], batch["frame"][mine]
            first, last = int(np.argmin(times)), int(np.argmax(times))
            span = self.spans.setdefault(pid, [(times[first], frames[first]),
                                               (times[last], frames[last])])
            span[0] = min(span[0], (times[first], frames[first]))
            span[1] = max(span[1], (times[last], frames[last]))

    def of(self, path_id):
        """[first, last] of a path, or None (no IO row yet)."""
        return self.spans.get(path_id)

    def merge(self, from_id, to_id):
        """The IO of path ``from_id`` is ``to_id``'s (linking.py)."""
        span = self.spans.pop(from_id, None)
        if span is None:
            return
        mine = self.spans.get(to_id)
        self.spans[to_id] = span if mine is None else [min(span[0], mine[0]),
                                                       max(span[1], mine[1])]


#: the integer types a kept column is narrowed to, smallest first: (least, most, type)
_NARROW = tuple((int(np.iinfo(t).min), int(np.iinfo(t).max), np.dtype(t))
                for t in (np.int8, np.int16, np.int32))


def narrow(column):
    """``column`` in the smallest integer type that holds its values (the same
    values: a flag in a byte, a path id in one to four)."""
    if not len(column):
        return column.astype(np.int8)
    kind = narrow_type(column.min(), column.max())
    return column if kind is None else column.astype(kind)


def narrow_type(low, high):
    """The smallest of int8, int16 and int32 that holds ``low`` to ``high``, or None."""
    low, high = int(low), int(high)     # Python's comparisons, not numpy scalars'
    for least, most, kind in _NARROW:
        if least <= low and high <= most:
            return kind
    return None


#: a Kept's batches joined into one block at a time
JOIN = 64


class Kept:
    """An ``io_sink`` keeping only the ``names`` columns of each batch, and those
    ``derive(batch)`` computes from it, each narrowed to the smallest integer type
    that holds the batch's values: a view that reads all the rows at the end
    (iostat, the report) keeps a few bytes per row, not 28 columns of 8.

    Every JOIN batches are joined into one block (a capture of thousands of short
    sessions hands over batches of a few rows, whose arrays' own ~100 bytes would
    outweigh their rows), and blocks beyond the newest two go to disk
    (spill.py): while the capture is read, the rows kept do not add to the
    analysis' memory.  ``take()`` joins them column by column (a column's type is
    its widest batch's), letting each block's column go as it is copied."""

    def __init__(self, names=NAMES, derive=None):
        self.names = tuple(names)
        self.derive = derive
        self.blocks = SpilledList(1, "the IO rows")
        self.pending = []           # batches not yet joined into a block

    def __call__(self, rows):
        kept = {name: narrow(rows[name]) for name in self.names}
        if self.derive is not None:
            kept.update((name, narrow(column)) for name, column in self.derive(rows).items())
        self.pending.append(kept)
        if len(self.pending) >= JOIN:
            self.blocks.append(concat(self.pending))
            self.pending = []

    @classmethod
    def of(cls, batches, names=NAMES, derive=None):
        """The rows of ``batches`` (a list of IO row batches), or ``batches`` itself
        when it is a Kept already fed."""
        if isinstance(batches, cls):
            return batches
        kept = cls(names, derive)
        for batch in batches:
            kept(batch)
        return kept

    def take(self):
        """The rows kept, one array per column (none: empty columns)."""
        if not len(self.blocks) and not self.pending:
            self({name: np.zeros(0, dtype=np.int64) for name in NAMES})
        blocks = [self.blocks[k] for k in range(len(self.blocks))] + self.pending
        self.blocks, self.pending = SpilledList(1, "the IO rows"), []
        return {name: np.concatenate([b.pop(name) for b in blocks]) for name in list(blocks[0])}


class Wide:
    """Columns a Kept narrowed, read back as int64: the code reading them computes as
    on the analysis' own rows (a sector plus a size overflows no 16 bits); each
    read is a copy of one column, gone with the expression that reads it."""

    def __init__(self, columns):
        self.columns = columns

    def __getitem__(self, name):
        return self.columns[name].astype(np.int64, copy=False)

    def __contains__(self, name):
        return name in self.columns

    def take(self, at):
        """The rows at positions ``at`` (still narrow)."""
        return Wide({name: column[at] for name, column in self.columns.items()})
