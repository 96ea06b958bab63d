"""The message records' columns in compiled code (analysis/records.py): a batch's
records written from its rows, and the closed records' requests and responses paired
by frame for the lines and tables.

A batch's records: each kept row's frame, time and destination QP, and the ids of its
source and destination addresses.

The records number each address as it first comes (analysis/records.py).  A batch of
load has a few addresses over thousands of rows; finding them by sorting each batch's
64-bit halves and writing the columns by numpy's gathers took a fifth of the records'
time in ``export`` of 3 M load packets.  Here every address numbered is held in an
open-addressing table (:class:`AddressIds`), looked up a row at a time while the row's
other columns are written; where a batch names addresses the table does not hold yet
(a new session's), a second pass numbers them in the order their rows come, the
batch's sources before its destinations.
"""

import numpy as np

from ..capture.jit import compiled, helper
from . import transport as T

#: the table's first size (slots; a power of two), doubled when half full
FIRST_SLOTS = 64


@helper
def _slot(keys, ids, hi, lo):
    """The slot of the address (hi, lo): where the table holds it, else the free slot
    it would take (its id there is -1)."""
    mask = ids.shape[0] - 1
    at = T.key_slot(hi, lo, 0, mask)
    while ids[at] >= 0 and not (keys[at, 0] == hi and keys[at, 1] == lo):
        at = (at + 1) & mask
    return at


@helper
def _find(keys, ids, hi, lo):
    """The id of the address (hi, lo), -1 when the table does not hold it."""
    return ids[_slot(keys, ids, hi, lo)]


@compiled
def add_addresses(keys, ids, his, los, values):
    """The addresses (``his``, ``los``) numbered ``values`` put in the table, those it
    holds already left as they are (the caller keeps it at most half full); returns
    how many were new."""
    added = 0
    for k in range(his.shape[0]):
        at = _slot(keys, ids, his[k], los[k])
        if ids[at] < 0:
            keys[at, 0], keys[at, 1] = his[k], los[k]
            ids[at] = values[k]
            added += 1
    return added


@compiled
def record_rows(rows, keep, first, frame, time, qpn, src, dst, keys, ids):
    """Rows ``keep`` of the transport's ``rows`` written as records ``first`` on in the
    records' columns: frame, time (s), destination QP, and the source and destination
    address ids (-1 where the table has none); returns how many are -1."""
    unknown = 0
    for k in range(keep.shape[0]):
        r = keep[k]
        at = first + k
        frame[at] = rows[r, T.R_LAST_FRAME]
        time[at] = rows[r, T.R_LAST_TS] / 1e9
        qpn[at] = rows[r, T.R_QPN]
        s = _find(keys, ids, rows[r, T.R_SRC_HI], rows[r, T.R_SRC_LO])
        d = _find(keys, ids, rows[r, T.R_DST_HI], rows[r, T.R_DST_LO])
        src[at], dst[at] = s, d
        unknown += (s < 0) + (d < 0)
    return unknown


@compiled
def number_addresses(rows, keep, hi, lo, keys, ids, found, first, start, next_id, new_his,
                     new_los):
    """The rows ``keep[k]`` (``k`` from ``start`` on) whose id ``found[first + k]`` is
    -1: their address (columns ``hi``, ``lo``) looked up again, and where the table does
    not hold it, numbered ``next_id`` on in the order the rows come, put in the table
    and listed in ``new_his``, ``new_los``.  No more are numbered than those have room
    for (the caller keeps the table at most half full).  Returns (the ``k`` it stopped
    at, how many it numbered)."""
    added = 0
    for k in range(start, keep.shape[0]):
        if found[first + k] >= 0:
            continue
        h, l = rows[keep[k], hi], rows[keep[k], lo]
        at = _slot(keys, ids, h, l)
        if ids[at] < 0:
            if added == new_his.shape[0]:
                return k, added
            keys[at, 0], keys[at, 1] = h, l
            ids[at] = next_id + added
            new_his[added], new_los[added] = h, l
            added += 1
        found[first + k] = ids[at]
    return keep.shape[0], added


class AddressIds:
    """The ids of the addresses numbered, by their (hi, lo) halves, for
    :func:`record_rows`: the records number them (analysis/records.py), here or by
    :meth:`number`."""

    def __init__(self):
        self.keys = np.zeros((FIRST_SLOTS, 2), dtype=np.int64)
        self.ids = np.full(FIRST_SLOTS, -1, dtype=np.int64)
        self.count = 0

    def add(self, his, los, values):
        """Addresses (distinct) and their ids; those held already stay."""
        his, los, values = (np.array(a, dtype=np.int64) for a in (his, los, values))
        self._room_for(len(his))
        self.count += add_addresses(self.keys, self.ids, his, los, values)

    def number(self, rows, keep, hi, lo, found, first, next_id):
        """The ids of the rows ``keep`` whose ``found[first:]`` is -1 (see
        :func:`number_addresses`); returns the addresses it numbered, (hi, lo) pairs in
        the order of their ids."""
        numbered, start = [], 0
        while start < len(keep):
            self._room_for(1)
            room = min(len(self.ids) // 2 - self.count, len(keep) - start)
            his, los = np.empty(room, dtype=np.int64), np.empty(room, dtype=np.int64)
            start, added = number_addresses(rows, keep, hi, lo, self.keys, self.ids, found,
                                            first, start, next_id + len(numbered), his, los)
            self.count += added
            numbered += zip(his[:added].tolist(), los[:added].tolist())
        return numbered

    def _room_for(self, more):
        """The table grown (doubled until it would be at most half full) to take ``more``
        addresses beyond those it holds."""
        if 2 * (self.count + more) <= len(self.ids):
            return
        held = self.ids >= 0
        pairs, known = self.keys[held], self.ids[held]
        slots = len(self.ids)
        while 2 * (self.count + more) > slots:
            slots *= 2
        self.keys = np.zeros((slots, 2), dtype=np.int64)
        self.ids = np.full(slots, -1, dtype=np.int64)
        add_addresses(self.keys, self.ids, pairs[:, 0].copy(), pairs[:, 1].copy(), known)


@compiled
def split_kinds(kind, frame, paired, rsp_frame, req_frame, req_paired, done):
    """Records (their ``kind`` 1 a response, 2 a request, 0 another; ``frame``,
    ``paired``) appended to the responses' frames and the requests' frames and paired
    frames; ``done`` counts what each holds (its places 1 and 2)."""
    for k in range(kind.shape[0]):
        if kind[k] == 1:
            rsp_frame[done[1]] = frame[k]
            done[1] += 1
        elif kind[k] == 2:
            n = done[2]
            req_frame[n], req_paired[n] = frame[k], paired[k]
            done[2] = n + 1


@compiled
def pair_by_frame(rsp_frame, req_frame, req_paired, response_of, request_of):
    """Requests and responses in frame order paired as the lines pair them: a request
    gets the last response of the frame it was paired with, the requests of one frame
    the one of the last of them that got one; a response the last request paired with
    its frame that got one.  ``response_of`` (per request) and ``request_of`` (per
    response) are places in the other's columns, -1 where none; ``response_of`` may be
    ``req_paired`` itself (each request's paired frame is read before its place is
    written, and not again)."""
    n_rsp, n_req = rsp_frame.shape[0], req_frame.shape[0]
    for r in range(n_rsp):
        request_of[r] = -1
    for q in range(n_req):
        hit = _last_at(rsp_frame, req_paired[q])
        response_of[q] = hit
        if hit >= 0:
            request_of[hit] = q
    start = 0
    while start < n_req:        # a frame's requests: its last one paired for all
        stop = start
        while stop < n_req and req_frame[stop] == req_frame[start]:
            stop += 1
        found = -1
        for q in range(stop - 1, start - 1, -1):
            if response_of[q] >= 0:
                found = response_of[q]
                break
        for q in range(start, stop):
            response_of[q] = found
        start = stop
    end = n_rsp
    while end > 0:              # a frame's responses: the request its last one got
        first = end - 1
        while first > 0 and rsp_frame[first - 1] == rsp_frame[end - 1]:
            first -= 1
        for r in range(first, end - 1):
            request_of[r] = request_of[end - 1]
        end = first


@helper
def _last_at(frames, frame):
    """The place of the last of the ascending ``frames`` equal to ``frame``, -1 when
    none is."""
    low, high = 0, frames.shape[0]
    while low < high:           # the first place beyond ``frame``
        middle = (low + high) >> 1
        if frames[middle] <= frame:
            low = middle + 1
        else:
            high = middle
    return low - 1 if low > 0 and frames[low - 1] == frame else -1
