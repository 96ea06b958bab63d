"""The batch fast path: the same analysis as ``Analyzer.feed`` frame by frame,
with the packets that only extend a message or acknowledge one handled in bulk
with numpy.

Most RTRS packets are RDMA WRITE MIDDLE (the data of large requests) and plain
ACKs.  For those, the analyzer only checks PSN continuity, adds bytes to the
message in progress and counts acknowledgements.  Here they are located with
vectorised column reads (the BTH columns come from the layout IR through the
struct plan), grouped per stream, and applied as runs just before the next
packet of the same stream that needs the full per-packet logic; a run whose PSNs
are not perfectly consecutive is replayed frame by frame, so gaps, duplicates
and anomalies come out exactly as in the per-frame path (a test holds the two
paths equal).
"""

try:
    import numpy as np
except ImportError:  # pragma: no cover - numpy is optional: per-frame path then
    np = None

from ..layers.ib import AETH, BTH

from ..fastpath.plan import plan
from ..fastpath.reader import rocev2_ipv4_columns
from .analyzer import (
    ACK, AETH_NAK, AETH_RNR, BTH_SIZE, CM_SEND, ICRC_SIZE, SEND_MIDDLE, WRITE_MIDDLE,
)
from .reassembly import PSN_MASK

ETHERNET = 1
MIN_BATCH = 64
_bth = plan(BTH)
_aeth = plan(AETH)


def feed_batch(an, first, ts, buf, starts, ends, link_type):
    """Feed frames ``first .. first+len(starts)-1`` that share ``buf``."""
    count = len(starts)
    if np is None or link_type != ETHERNET or count < MIN_BATCH:
        for i in range(count):
            an.feed(first + i, ts[i], buf, starts[i], ends[i], link_type)
        return
    if an.first_ts is None:
        an.first_ts, an.link_type = ts[0], link_type
    an.link_types.add(link_type)
    b = np.frombuffer(buf, dtype=np.uint8)
    fast, bth, ib_end, src, dst = rocev2_ipv4_columns(
        np, b, np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64))
    at = np.where(fast, bth, 0)
    opcode = _bth.column(np, b, at, "opcode")
    payload_end = ib_end - ICRC_SIZE - _bth.column(np, b, at, "padcount")
    payload_start = bth + BTH_SIZE
    middle = fast & ((opcode == WRITE_MIDDLE) | (opcode == SEND_MIDDLE)) \
        & (payload_end >= payload_start)
    ack = fast & (opcode == ACK) & (payload_start + _aeth.size <= payload_end)
    syndrome = _aeth.column(np, b, np.where(ack, payload_start, 0), "syndrome")
    ack &= (syndrome & (AETH_NAK | AETH_RNR)) == 0
    dqpn = _bth.column(np, b, at, "dqpn")
    psn = _bth.column(np, b, at, "psn")
    key = (dst << 24) | dqpn
    frames = (first, ts, buf, starts, ends, link_type)
    runs = _Runs(an, frames, key, src, dst, middle, psn, payload_start, payload_end)
    columns = [c.tolist() for c in (fast, key, bth, ib_end, src, dst, opcode,
                                    payload_end - payload_start + BTH_SIZE, dqpn, psn)]
    fast_l, key_l, bth_l, end_l, src_l, dst_l, op_l, room_l, qpn_l, psn_l = columns
    pad_l = (ib_end - ICRC_SIZE - payload_end).tolist()
    addresses = {}
    for i in np.flatnonzero(~(middle | ack)).tolist():
        if not fast_l[i]:
            runs.flush_all(i)
            an.feed(first + i, ts[i], buf, starts[i], ends[i], link_type)
            continue
        if op_l[i] == CM_SEND:
            runs.flush_all(i)  # a REP (re)binds streams: earlier packets go first
        else:
            runs.flush(key_l[i], i)
        an.frame_seen(first + i, ts[i], link_type)
        an.ib_frames += 1
        if room_l[i] < BTH_SIZE:  # shorter than BTH + ICRC: feed() reports it
            an.frames -= 1
            an.ib_frames -= 1
            an.feed(first + i, ts[i], buf, starts[i], ends[i], link_type)
            continue
        an.transport(first + i, ts[i], buf, bth_l[i], end_l[i],
                     _address(addresses, src_l[i]), _address(addresses, dst_l[i]),
                     op_l[i], pad_l[i], qpn_l[i], psn_l[i])
    runs.flush_all(count)
    _count_acks(an, first, np.flatnonzero(ack), key, dst)
    an.last_ts = ts[-1]


class _Runs:
    """The bulk MIDDLE packets of a batch, per stream, applied in order."""

    def __init__(self, an, frames, key, src, dst, middle, psn, pstart, pend):
        self.an, self.frames = an, frames
        self.first, self.buf = frames[0], frames[2]
        self.psn, self.pstart, self.pend = psn, pstart, pend
        self.src, self.dst, self.key = src, dst, key
        index = np.flatnonzero(middle)
        order = np.argsort(key[index], kind="stable")
        index = index[order]
        bounds = np.flatnonzero(np.diff(key[index])) + 1
        self.groups = {int(key[g[0]]): g for g in np.split(index, bounds) if len(g)}
        self.done = dict.fromkeys(self.groups, 0)

    def flush(self, k, upto):
        group = self.groups.get(k)
        if group is None:
            return
        start = self.done[k]
        cut = int(np.searchsorted(group, upto))
        if cut > start:
            self.done[k] = cut
            self._apply(group[start:cut])

    def flush_all(self, upto):
        pending = sorted((int(g[self.done[k]]), k) for k, g in self.groups.items()
                         if self.done[k] < len(g) and g[self.done[k]] < upto)
        for _, k in pending:  # in frame order of their first packet
            self.flush(k, upto)

    def _apply(self, run):
        an = self.an
        first_index = int(run[0])
        dst = int(self.dst[first_index]).to_bytes(4, "big")
        qpn = int(self.key[first_index]) & 0xFFFFFF
        stream = an.streams.get((dst, qpn))
        psns = self.psn[run]
        expected = stream.next_psn if stream is not None else None
        if (expected is not None and int(psns[0]) != expected) or (
                len(run) > 1 and np.any((np.diff(psns) & PSN_MASK) != 1)):
            self._replay(run)   # not a clean run: frame by frame, anomalies and all
            return
        if stream is None:
            src = int(self.src[first_index]).to_bytes(4, "big")
            stream = an.new_stream((dst, qpn), src, dst, qpn, self.first + first_index)
        elif stream.src is None:
            stream.src = int(self.src[first_index]).to_bytes(4, "big")
        size = len(run)
        an.frames += size
        an.ib_frames += size
        an.frame = self.first + int(run[-1])
        stream.seen += size
        stream.last_frame = an.frame
        stream.next_psn = (int(psns[-1]) + 1) & PSN_MASK
        if stream.message is not None:
            starts, ends = self.pstart[run], self.pend[run]
            stream.message.add_run(self.buf, starts.tolist(), ends.tolist(),
                                   int((ends - starts).sum()))

    def _replay(self, run):
        first, ts, buf, starts, ends, link_type = self.frames
        for i in run.tolist():
            self.an.feed(first + i, ts[i], buf, starts[i], ends[i], link_type)


def _address(cache, value):
    raw = cache.get(value)
    if raw is None:
        raw = cache[value] = value.to_bytes(4, "big")
    return raw


def _count_acks(an, first, index, key, dst):
    """Plain ACKs count for a stream that existed when they were sent (as feed())."""
    if not len(index):
        return
    an.frames += len(index)
    an.ib_frames += len(index)
    keys = key[index]
    order = np.argsort(keys, kind="stable")
    keys, index = keys[order], index[order]
    bounds = np.flatnonzero(np.diff(keys)) + 1
    for group in np.split(index, bounds):
        k = int(key[group[0]])
        stream = an.streams.get((int(dst[group[0]]).to_bytes(4, "big"), k & 0xFFFFFF))
        if stream is not None:
            stream.acks += int(np.count_nonzero(first + group >= stream.first_frame))
