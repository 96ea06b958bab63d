"""Requests paired with responses, many at once (docs/PROTOCOL.md#pairing-requests-and-responses).

A buf_id is a permit of the client session (shared by all its paths), so
requests and responses are grouped by (session, buf_id) and put in capture
order: a response answers the request just before it in its group; a request
followed by another request was replaced.  That is ``qdepth.pair_events``
done with one sort and one compiled pass in its order (engine/pair_scan.py), and it
carries what stays unanswered to the next batch.  A replaced request whose successor
went out on another path of the session was failed over (counted on the path that
took it over, like the kernel's failover_cnt); on the same path, the buf_id was
reused while still in flight.  The latency of a failed-over IO runs from its first
send.
"""

from dataclasses import dataclass

import numpy as np

from ..capture.jit import int_array
from ..engine.distinct import lexsort
from ..engine.pair_scan import pair_scan

#: the columns a request carries while it waits for its answer
REQUEST_COLUMNS = ("sess", "key", "frame", "stamp", "first_frame", "first_stamp", "path", "op",
                   "cid", "bytes", "partial", "request_first",
                   "rnbd_type", "device_id", "sector", "bi_size", "rnbd_op", "record",
                   "request_first_ns", "desc_key")


@dataclass
class Pairs:
    """The outcome of one batch (positions refer to the batch's request table)."""
    response_request: np.ndarray   # per response: the request it answers, -1 none
    replaced_by: np.ndarray        # per request: the request that replaced it, -1 none
    failover: np.ndarray           # per request: it took over a request of another path
    reused: np.ndarray             # per request: it replaced one of its own path
    first_frame: np.ndarray        # per request: where the IO was first sent
    first_stamp: np.ndarray        # per request: when
    pending: np.ndarray            # per request: still unanswered at the batch end


class Pending:
    """The requests awaiting their response, all sessions: a REQUEST_COLUMNS table
    carried from batch to batch (the analyzer's part that io.py pairs from)."""

    def __init__(self):
        self.table = empty()

    def keep(self, index):
        """Only the requests ``index`` (an index or a mask) wait on."""
        self.table = take(self.table, index)

    def carry_over(self, table, result):
        """What a batch's pairing (``result``, of ``table``) left unanswered waits for
        the next batch, from its first send."""
        self.table = take(table, result.pending)
        self.table["first_frame"] = result.first_frame[result.pending]
        self.table["first_stamp"] = result.first_stamp[result.pending]

    def rename_session(self, old_id, new_id):
        """Two sessions are one (linking.py): the requests of ``old_id`` are ``new_id``'s."""
        self.table["sess"][self.table["sess"] == old_id] = new_id


def concat(a, b):
    return {k: np.concatenate((a[k], b[k])) for k in REQUEST_COLUMNS}


def empty():
    return {k: np.zeros(0, dtype=np.int64) for k in REQUEST_COLUMNS}


def take(table, index):
    return {k: table[k][index] for k in REQUEST_COLUMNS}


def pair(requests, rsp_sess, rsp_key, rsp_frame):
    """Pair ``requests`` (a REQUEST_COLUMNS table: the carried ones first, then the
    batch's) with the batch's responses: one sort, then one compiled pass in that order
    (engine/pair_scan.py)."""
    n_req, n_rsp = len(requests["key"]), len(rsp_key)
    sess = int_array(np.concatenate((requests["sess"], rsp_sess)))
    key = int_array(np.concatenate((requests["key"], rsp_key)))
    order = lexsort((np.concatenate((requests["frame"], rsp_frame)), key, sess))
    result = Pairs(response_request=np.full(n_rsp, -1, dtype=np.int64),
                   replaced_by=np.full(n_req, -1, dtype=np.int64),
                   failover=np.zeros(n_req, dtype=bool), reused=np.zeros(n_req, dtype=bool),
                   first_frame=np.array(requests["first_frame"], dtype=np.int64),
                   first_stamp=np.array(requests["first_stamp"], dtype=np.int64),
                   pending=np.zeros(n_req, dtype=bool))
    pair_scan(int_array(order), sess, key, n_req, int_array(requests["path"]),
              result.response_request, result.replaced_by, result.pending, result.failover,
              result.reused, result.first_frame, result.first_stamp)
    return result
