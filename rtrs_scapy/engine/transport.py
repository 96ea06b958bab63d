"""The RC transport, compiled: per QP stream PSN continuity and message assembly.

One loop over a chunk's packets in capture order does what every packet needs
(docs/PROTOCOL.md#psn-sequence-and-retransmissions): find its stream (one
direction of one QP pair, keyed by destination address and QP), check the PSN
(a duplicate is a go-back-N retransmission: counted and dropped; a jump is a
gap: the message in progress is abandoned, never completed with invented
bytes, and the PSNs it skipped are remembered until a retransmission fills
them: those never filled are the capture's loss, docs/PROTOCOL.md#capture-loss),
count ACKs, NAKs and CNPs, and assemble SEND and RDMA WRITE messages
from their FIRST/MIDDLE/LAST packets.  What it emits is small: one row per
completed message (with the few bytes the analysis reads: the head of SENDs and
READ data, the tail of requests, where RTRS puts trailer and RNBD header,
docs/PROTOCOL.md#chunks-and-what-the-client-writes), one row per anomaly, and a
stop at every CM MAD so that Python sees the handshake in order.

A message keeps at most HEAD_SEND (SEND) or HEAD_WRITE (RDMA WRITE) bytes of
its start and the locations of its last RING packets; the bytes those packets
hold are copied into the stream's carry only when they must outlive the
buffer (chunk end) or the ring, so the bulk of RDMA WRITE data is never copied.
A message whose beginning was not seen (the capture started inside it, or a
gap cut it) still completes at its last packet, flagged partial.  A packet the
capture's snaplen cut counts with the length its headers give; only its
captured bytes are kept, and the row says how many bytes the message lost to the
cut (docs/PROTOCOL.md#header-only-captures).

Streams live in a bounded table: when it is full, the least recently used
quarter is evicted (counted; a message in progress there is lost).  What the
evicted streams counted is kept aside (``retired``) and the loop stops at the next
packet, so that the analysis counts it before the slots are used again.

The table offers its slots a room at a time (FIRST_ROOM, doubled when its streams
fill it): when the room is full and a quarter of it are streams the CM closed, with
no message in progress and silent for CLOSED_SILENCE_NS, those are evicted instead
(not counted against the bound: they are over), so a capture of many short sessions
keeps the memory of the streams alive, not of every stream it ever had.
"""

import numpy as np

from ..capture.jit import compiled, copy_into, helper, prefetch
from ..layout import wire
from ..capture.columns import (
    P_DMALEN, P_DST_HI, P_DST_LO, P_IETH, P_IMM, P_KIND, P_OPCODE, P_PSN, P_QPN, P_RKEY,
    P_START, P_STATUS, P_STOP, P_SYNDROME, P_VA, P_VIS, X_SRC_HI, X_SRC_LO,
)
from ..capture.ib import (
    C_ACK, C_CNP, C_DATA, C_FOREIGN, C_OTHER, C_UD_SEND, P_FIRST, P_LAST, P_MIDDLE, P_ONLY,
    S_CUT, S_HEADERS, S_OK, T_CLASS, T_POS, T_SEND,
)
from ..spec.constants import RTRS_IO_REQ_IMM, RTRS_IO_RSP_IMM, RTRS_IO_RSP_W_INV_IMM
from ..spec.imm import IMM_TYPE_SHIFT

GSI_QPN = wire.GSI_QPN
PSN_MASK = 0xFFFFFF
HALF_PSN = 0x800000
HEAD_SEND = 1024     # info_req (272 B), rkey_rsp, the start of info_rsp
HEAD_WRITE = 64      # RNBD replies at the start of READ data (open_rsp: 56 B)
TAIL_CAP = 512       # a request's user header and trailer (RNBD OPEN: 264 + 4 B)
FETCH_AHEAD = 8      # packets ahead whose last byte's line is asked for: a message's
                     # tail is copied from there, a line the walk fetched on the other core
RING = 4             # packet locations kept per stream before their bytes are copied
SENT = 64            # (psn + 1, frame, stamp) of the last packets sent per stream, by psn
                     # (0: none, so that the table starts as zeros the system maps lazily)
WINDOW = 256         # PSNs behind the next expected one whose gaps a retransmission can fill
FIRST_ROOM = 1024    # slots a table offers before its streams fill them (then twice as many)
CLOSED_SILENCE_NS = 1_000_000_000   # a closed stream this long silent is over
RECENT = 1 << 16     # the stream that last sent a PSN, by PSN: an ACK finds its peer
MAX_ROW_BYTES = HEAD_SEND + TAIL_CAP

# stream state columns
(K_HI, K_LO, K_QPN, USED, GEN, SRC_HI, SRC_LO, NEXT_PSN, SYNCED, SEEN, DUPS, ACKS, NAKS,
 RNRS, CNPS, FIRST_FRAME, LAST_FRAME, CONN, ACTIVE, M_SEND, M_FIRST_FRAME, M_FIRST_TS, M_LEN,
 M_PKTS, M_VA, M_RKEY, M_DMALEN, M_HEAD_LEN, M_HEAD_CAP, M_TAIL_LEN, M_RING_N, M_PARTIAL,
 M_SEQ, FIRST_PSN, FRESH_FRAME, FRESH_TS, LAST_TS, TOUCHED,
 # acknowledgements (docs/PROTOCOL.md#stalls): ACK_IN, the highest PSN the positive ACKs
 # sent to this stream's destination acknowledged (of the reverse stream's packets);
 # for this stream's own packets, once the analysis paired it with its reverse stream
 # (PEER, from the CM): the highest PSN acknowledged, the first packet not acknowledged
 # yet and the retransmissions since it was sent
 ACK_IN, PEER, PEER_GEN, ACKED_PSN, ACKED_FRAME, UNACKED_PSN, UNACKED_FRAME, UNACKED_TS,
 UNACKED_DUPS,
 # bytes of the message in progress that the snaplen cut
 M_CUT,
 # loss (docs/PROTOCOL.md#capture-loss): PSNs a gap skipped, and retransmitted packets
 # that filled one of them; the difference is what the capture lost
 SKIPPED, FILLED,
 # the CM closed its connection (DREQ): recycled first when the table's room is full
 CLOSED, S_COLUMNS) = range(52)
#: what a stream counts for the path it belongs to (analysis/analyzer.py harvests them)
COUNTED = (SEEN, DUPS, ACKS, NAKS, RNRS, CNPS, SKIPPED, FILLED)

# message row columns
(R_SLOT, R_GEN, R_CONN, R_FIRST_FRAME, R_LAST_FRAME, R_FIRST_TS, R_LAST_TS, R_OPCODE, R_SEND,
 R_IMM, R_IETH, R_VA, R_RKEY, R_DMALEN, R_LEN, R_PKTS, R_PARTIAL, R_HEAD_OFF, R_HEAD_LEN,
 R_TAIL_OFF, R_TAIL_LEN, R_SEQ, R_SRC_HI, R_SRC_LO, R_DST_HI, R_DST_LO, R_QPN, R_PSN,
 R_CUT, R_COLUMNS) = range(30)
# R_CUT: bytes of the message the snaplen cut; its tail then holds only the bytes
# behind the last cut packet, its head only those before the first

# event row columns and kinds
(E_KIND, E_FRAME, E_SLOT, E_GEN, E_CONN, E_A, E_B, E_QPN, E_DST_HI, E_DST_LO, E_SRC_HI,
 E_SRC_LO, E_COLUMNS) = range(13)
(EV_PARTIAL_MESSAGE, EV_NAK, EV_RNR, EV_UNKNOWN_OPCODE, EV_FOREIGN_OPCODE, EV_TRUNCATED,
 EV_CNP) = range(7)

# partial flags of a message row
PARTIAL_START = 1    # the message's first packets are not in the capture
PARTIAL_LOST = 2     # a LAST without its FIRST on a stream that was in sync

# why the loop stopped
STOP_END, STOP_CM, STOP_FULL = range(3)

# global counters
G_SEQ, G_EVICTIONS, G_EVICTED_MESSAGES, G_STREAMS, G_TOUCHED, G_CUT_MADS, G_CUT_HEADERS, \
    G_RETIRED, G_ROOM, G_RECYCLED, G_COLUMNS = range(11)
# G_CUT_MADS: CM MADs the snaplen cut (not read); G_CUT_HEADERS: RC packets whose extension
# headers it cut (their PSN counts, their message is lost); G_RETIRED: evicted streams'
# rows in ``retired`` that the analysis has not taken yet; G_ROOM: the slots offered so
# far; G_RECYCLED: closed streams evicted before the room grew

_AETH_NAK, _AETH_RNR, _AETH_KIND = 0x60, 0x20, 0x60


@helper
def key_slot(hi, lo, qpn, mask):
    """The first slot of the key (address halves, QP) in a table of ``mask + 1`` slots
    (a power of two): the streams' table here, the records' addresses'
    (record_columns.py)."""
    h = np.uint64(hi) * np.uint64(0x9E3779B97F4A7C15)
    h ^= np.uint64(lo) + np.uint64(0x632BE59BD9B4E019) + (h << np.uint64(6)) + (h >> np.uint64(2))
    h ^= np.uint64(qpn) * np.uint64(0xC2B2AE3D27D4EB4F)
    h ^= h >> np.uint64(29)
    return np.int64(h & np.uint64(mask))


@helper
def _find(table, state, hi, lo, qpn):
    mask = table.shape[0] - 1
    h = key_slot(hi, lo, qpn, mask)
    while True:
        slot = table[h]
        if slot < 0:
            return -1, h
        if state[slot, K_QPN] == qpn and state[slot, K_LO] == lo and state[slot, K_HI] == hi:
            return slot, h
        h = (h + 1) & mask


@compiled
def cm_run(packets, start, optable, packet_seq):
    """The end of the run of CM MADs that starts at ``start`` (where ``run`` stopped):
    a flood of MADs goes to the consumer without a return to this module per MAD."""
    i = start + 1
    while (i < packets.shape[0] and packets[i, P_KIND] != 0 and packets[i, P_STATUS] == S_OK
           and optable[packets[i, P_OPCODE], T_CLASS] == C_UD_SEND
           and packets[i, P_QPN] == GSI_QPN):
        packet_seq[i] = -1
        i += 1
    return i


@compiled
def rebuild(table, state):
    """The hash index from the used slots (after evictions)."""
    table[:] = -1
    mask = table.shape[0] - 1
    for slot in range(state.shape[0]):
        if state[slot, USED]:
            h = key_slot(state[slot, K_HI], state[slot, K_LO], state[slot, K_QPN], mask)
            while table[h] >= 0:
                h = (h + 1) & mask
            table[h] = slot


@helper(allocates=True)
def _evict(table, state, free, nfree, counters, retired, retired_slots):
    """Free slots when none is left: the room doubles, unless a quarter of it are
    streams that are over (closed, no message in progress, silent); at the bound,
    the least recently used quarter goes.  The evicted rows (with what they counted)
    go to ``retired`` for the analysis, which has taken the last ones (``run`` stops
    after an eviction, the engine's ``bind`` hands them over); returns the free
    count."""
    room = counters[G_ROOM]
    used = state[:room]
    at_bound = room == state.shape[0]
    quota = max(1, room // 4)
    if at_bound:
        candidates = np.arange(room)
    else:
        now = used[:, LAST_TS].max()
        candidates = np.flatnonzero((used[:, USED] != 0) & (used[:, CLOSED] != 0)
                                    & (used[:, ACTIVE] == 0)
                                    & (used[:, LAST_TS] + CLOSED_SILENCE_NS <= now))
        if candidates.shape[0] < quota:
            grown = min(2 * room, state.shape[0])
            for slot in range(grown - 1, room - 1, -1):
                free[nfree] = slot
                nfree += 1
            counters[G_ROOM] = grown
            return nfree
    order = candidates[np.argsort(used[candidates, LAST_FRAME])]
    for k in range(quota):
        slot = order[k]
        retired[k, :] = state[slot, :]
        retired_slots[k] = slot
        if at_bound and state[slot, ACTIVE]:
            counters[G_EVICTED_MESSAGES] += 1
        state[slot, USED] = 0
        state[slot, ACTIVE] = 0
        state[slot, GEN] += 1
        free[nfree] = slot
        nfree += 1
    counters[G_RETIRED] = quota
    counters[G_EVICTIONS if at_bound else G_RECYCLED] += quota
    counters[G_STREAMS] -= quota
    rebuild(table, state)
    return nfree


@helper
def _open(table, state, free, nfree, counters, bucket, hi, lo, qpn, src_hi, src_lo, frame,
          missing, retired, retired_slots):
    """A new stream in a free slot (evicting when none is left); returns (slot, nfree)."""
    if nfree == 0:
        nfree = _evict(table, state, free, nfree, counters, retired, retired_slots)
        _, bucket = _find(table, state, hi, lo, qpn)
    nfree -= 1
    slot = free[nfree]
    table[bucket] = slot
    s = state[slot]
    gen, touched_flag = s[GEN], s[TOUCHED]   # the slot may sit in the touched list
    s[:] = 0
    s[GEN], s[TOUCHED] = gen, touched_flag
    s[USED] = 1
    s[K_HI], s[K_LO], s[K_QPN] = hi, lo, qpn
    s[SRC_HI], s[SRC_LO] = src_hi, src_lo
    s[NEXT_PSN] = s[FIRST_PSN] = -1
    s[CONN] = -1
    _no_acks(s)
    s[FRESH_FRAME] = -1
    s[FIRST_FRAME] = s[LAST_FRAME] = frame
    missing[slot, :] = 0
    counters[G_STREAMS] += 1
    return slot, nfree


#: what a stream knows of acknowledgements when it starts (or a new PSN space does)
NO_ACKS = (ACK_IN, PEER, ACKED_PSN, ACKED_FRAME, UNACKED_PSN, UNACKED_FRAME)


@helper
def _no_acks(s):
    for column in NO_ACKS:
        s[column] = -1
    s[UNACKED_DUPS] = 0


def pair_streams(state, a, b):
    """The two directions of one connection: the ACKs that arrive on one acknowledge
    the packets of the other (Python calls it, the compiled loop :func:`_pair_streams`)."""
    state[a, PEER], state[a, PEER_GEN] = b, state[b, GEN]
    state[b, PEER], state[b, PEER_GEN] = a, state[a, GEN]


_pair_streams = helper(pair_streams)


@helper
def _unpaired(state, slot):
    peer = state[slot, PEER]
    return state[slot, CONN] < 0 and (peer < 0 or state[peer, GEN] != state[slot, PEER_GEN])


@helper
def _pair_by_ack(state, sent, recent, slot, psn, shi, slo, dhi, dlo):
    """A positive ACK on stream ``slot`` whose connection the CM did not tell (the
    handshake is not in the capture): the stream that sent ``psn`` from the ACK's
    destination to its source, not paired either, is its reverse direction
    (docs/PROTOCOL.md#stalls).  ``recent`` remembers which stream last sent each PSN
    (modulo RECENT); the stream's own last SENT packets confirm it."""
    other = recent[psn % RECENT]
    if other < 0 or other == slot or not state[other, USED] or not _unpaired(state, other):
        return False
    o = state[other]
    if sent[other, psn % SENT, 0] != psn + 1 or o[K_HI] != shi or o[K_LO] != slo \
            or o[SRC_HI] != dhi or o[SRC_LO] != dlo:
        return False
    _pair_streams(state, slot, other)
    return True


@helper
def _acknowledged(state, sent, slot, psn, frame):
    """A positive ACK with ``psn`` for the packets of stream ``slot``: everything up to
    it is acknowledged; the first packet not acknowledged is the one after it (found
    among the last SENT packets of the stream, else dated by its next packet)."""
    s = state[slot]
    s[ACKED_PSN], s[ACKED_FRAME] = psn, frame
    first = s[UNACKED_PSN]
    if first < 0 or (psn - first) & PSN_MASK >= HALF_PSN:
        return                                   # nothing outstanding, or an old ACK
    nxt = (psn + 1) & PSN_MASK
    s[UNACKED_DUPS] = 0
    if s[NEXT_PSN] < 0 or nxt == s[NEXT_PSN] or (nxt - s[NEXT_PSN]) & PSN_MASK < HALF_PSN:
        s[UNACKED_PSN] = s[UNACKED_FRAME] = -1    # all sent packets acknowledged
        return
    s[UNACKED_PSN] = nxt
    k = nxt % SENT
    if sent[slot, k, 0] == nxt + 1:
        s[UNACKED_FRAME], s[UNACKED_TS] = sent[slot, k, 1], sent[slot, k, 2]
    else:
        s[UNACKED_FRAME] = -1


@helper
def _skipped(s, missing, slot, expected, count):
    """A gap: ``count`` PSNs from ``expected`` not in the capture (the last WINDOW of
    them remembered, for a retransmission to fill); the message in progress is lost."""
    s[SKIPPED] += count
    for k in range(max(0, count - WINDOW), count):
        missing[slot, ((expected + k) & PSN_MASK) % WINDOW] = 1
    s[ACTIVE] = 0
    s[SYNCED] = 0


@helper
def _event(events, ne, kind, frame, slot, state, a, b, packets, extra, i):
    """An event of packet ``i`` (its QP and addresses from the packet tables)."""
    row = events[ne]
    row[E_KIND] = kind
    row[E_FRAME] = frame
    row[E_SLOT] = slot
    row[E_GEN] = state[slot, GEN] if slot >= 0 else -1
    row[E_CONN] = state[slot, CONN] if slot >= 0 else -1
    row[E_A] = a
    row[E_B] = b
    row[E_QPN] = packets[i, P_QPN]
    row[E_DST_HI] = packets[i, P_DST_HI]
    row[E_DST_LO] = packets[i, P_DST_LO]
    row[E_SRC_HI] = extra[i, X_SRC_HI]
    row[E_SRC_LO] = extra[i, X_SRC_LO]
    return ne + 1


@helper(allocates=True)
def _carry(tail, tail_len, slot, buf, off, n):
    """The carry of a stream followed by buf[off:off+n], last TAIL_CAP bytes kept;
    returns the new carry length."""
    cap = tail.shape[1]
    if n >= cap:
        copy_into(tail[slot, :], buf[off + n - cap:off + n])
        return cap
    if tail_len + n > cap:
        keep = cap - n
        copy_into(tail[slot, :keep], tail[slot, tail_len - keep:tail_len].copy())
        tail_len = keep
    copy_into(tail[slot, tail_len:tail_len + n], buf[off:off + n])
    return tail_len + n


@helper
def _ring_push(state, ring, tail, slot, buf, off, n):
    """Remember a packet of the message in progress; older packets' bytes move to
    the carry only when the ring is full and they still belong to the tail."""
    cap = tail.shape[1]
    count = state[slot, M_RING_N]
    if n >= cap:                       # this packet alone is the whole tail
        state[slot, M_TAIL_LEN] = 0
        count = 0
    elif count == ring.shape[1]:
        newer = n
        for k in range(1, count):
            newer += ring[slot, k, 1]
        if newer < cap:
            o, ln = ring[slot, 0, 0], ring[slot, 0, 1]
            need = min(ln, cap - newer)
            state[slot, M_TAIL_LEN] = _carry(tail, state[slot, M_TAIL_LEN], slot, buf,
                                             o + ln - need, need)
        else:
            state[slot, M_TAIL_LEN] = 0
        for k in range(1, count):
            ring[slot, k - 1, 0] = ring[slot, k, 0]
            ring[slot, k - 1, 1] = ring[slot, k, 1]
        count -= 1
    ring[slot, count, 0] = off
    ring[slot, count, 1] = n
    state[slot, M_RING_N] = count + 1


@compiled
def materialize(buf, state, ring, tail):
    """Chunk end: the ring's packets of every message in progress go to the carry
    (``state``: the rows of the slots offered so far, not the whole table)."""
    for slot in range(state.shape[0]):
        count = state[slot, M_RING_N]
        if state[slot, USED] and state[slot, ACTIVE] and count:
            for k in range(count):
                state[slot, M_TAIL_LEN] = _carry(tail, state[slot, M_TAIL_LEN], slot, buf,
                                                 ring[slot, k, 0], ring[slot, k, 1])
            state[slot, M_RING_N] = 0


@helper
def _tail_bytes(state, ring, tail, slot, buf, arena, at, want):
    """Copy the last ``want`` bytes of the message (carry + ring) to arena[at:]."""
    count = state[slot, M_RING_N]
    in_ring = 0
    for k in range(count):
        in_ring += ring[slot, k, 1]
    from_carry = min(state[slot, M_TAIL_LEN], max(0, want - in_ring))
    w = at
    if from_carry:
        tl = state[slot, M_TAIL_LEN]
        copy_into(arena[w:w + from_carry], tail[slot, tl - from_carry:tl])
        w += from_carry
    skip = max(0, in_ring - (want - from_carry))
    for k in range(count):
        o, ln = ring[slot, k, 0], ring[slot, k, 1]
        if skip >= ln:
            skip -= ln
            continue
        copy_into(arena[w:w + ln - skip], buf[o + skip:o + ln])
        w += ln - skip
        skip = 0
    return w - at


@helper
def _keep(state, ring, head, tail, slot, buf, off, n_vis, cut):
    """The captured bytes of a packet of the message in progress: its head grows while
    nothing was cut before; a cut packet ends the head, and its tail starts afresh
    behind it (the bytes it lost are counted)."""
    s = state[slot]
    have = s[M_HEAD_LEN]
    if have < s[M_HEAD_CAP] and n_vis:
        take = min(n_vis, s[M_HEAD_CAP] - have)
        copy_into(head[slot, have:have + take], buf[off:off + take])
        s[M_HEAD_LEN] = have + take
    if cut:
        s[M_HEAD_CAP] = s[M_HEAD_LEN]
        s[M_CUT] += cut
        s[M_RING_N] = 0
        s[M_TAIL_LEN] = 0
    elif n_vis:
        _ring_push(state, ring, tail, slot, buf, off, n_vis)


@helper
def _wants(send, imm):
    """(head bytes, tail bytes) the analysis reads of a completed message."""
    if imm >= 0:
        kind = imm >> IMM_TYPE_SHIFT
        if kind == RTRS_IO_REQ_IMM:
            return 0, TAIL_CAP
        if send and (kind == RTRS_IO_RSP_IMM or kind == RTRS_IO_RSP_W_INV_IMM):
            return 16, 0
        return 0, 0
    return (HEAD_SEND if send else HEAD_WRITE), 0


@compiled
def run(buf, packets, extra, stamps, first_frame, start, optable, table, state, ring, head,
        tail, free, nfree, counters, touched, rows, nr, arena, na, events, ne, packet_seq, sent,
        missing, recent, retired, retired_slots):
    """Packets ``start`` … of a chunk (``packets`` and ``extra``: capture/columns.py; the
    source address is read from ``extra`` only where a packet opens a stream, pairs one or
    makes an event), appending to
    ``rows[nr:]``, ``arena[na:]`` and ``events[ne:]``; returns (next packet, why,
    rows, arena bytes, events, free slots).  It stops (STOP_FULL) after a packet
    that evicted streams, before the next one."""
    n = packets.shape[0]
    row_room = rows.shape[0]
    event_room = events.shape[0] - 2
    arena_room = arena.shape[0] - MAX_ROW_BYTES
    for i in range(start, n):
        if nr >= row_room or ne >= event_room or na >= arena_room or counters[G_RETIRED]:
            return i, STOP_FULL, nr, na, ne, nfree
        packet_seq[i] = -1
        if i + FETCH_AHEAD < n:
            prefetch(buf, packets[i + FETCH_AHEAD, P_STOP] - 1)
        if packets[i, P_KIND] == 0:
            continue
        frame = first_frame + i
        dhi, dlo = packets[i, P_DST_HI], packets[i, P_DST_LO]
        status = packets[i, P_STATUS]
        opcode = packets[i, P_OPCODE]
        qpn = packets[i, P_QPN]
        cls = optable[opcode, T_CLASS]
        if status == S_CUT:
            if cls == C_UD_SEND:
                counters[G_CUT_MADS] += 1
            if cls != C_DATA:
                continue
        elif status != S_OK:
            kind = EV_UNKNOWN_OPCODE if status > S_HEADERS else EV_TRUNCATED
            ne = _event(events, ne, kind, frame, -1, state, opcode, status == S_HEADERS,
                        packets, extra, i)
            continue
        if cls == C_UD_SEND:
            if qpn == GSI_QPN:
                return i, STOP_CM, nr, na, ne, nfree
            continue
        if cls == C_OTHER:
            continue
        psn = packets[i, P_PSN]
        slot, bucket = _find(table, state, dhi, dlo, qpn)
        if cls == C_ACK:       # counted on the stream of the ACK's destination QP
            if slot < 0:
                slot, nfree = _open(table, state, free, nfree, counters, bucket, dhi, dlo, qpn,
                                    extra[i, X_SRC_HI], extra[i, X_SRC_LO], frame, missing,
                                    retired, retired_slots)
            state[slot, ACKS] += 1
            syndrome = packets[i, P_SYNDROME]
            peer = state[slot, PEER]
            if syndrome & _AETH_KIND == 0:
                state[slot, ACK_IN] = psn
                if _unpaired(state, slot) and _pair_by_ack(state, sent, recent, slot, psn,
                                                           extra[i, X_SRC_HI], extra[i, X_SRC_LO],
                                                           dhi, dlo):
                    peer = state[slot, PEER]
                if peer >= 0 and state[peer, GEN] == state[slot, PEER_GEN]:
                    _acknowledged(state, sent, peer, psn, frame)
            if syndrome & _AETH_KIND == _AETH_NAK:
                state[slot, NAKS] += 1
                ne = _event(events, ne, EV_NAK, frame, slot, state, syndrome, 0, packets,
                            extra, i)
            elif syndrome & _AETH_KIND == _AETH_RNR:
                state[slot, RNRS] += 1
            continue
        if cls == C_CNP:
            ne = _event(events, ne, EV_CNP, frame, slot, state, 0, 0, packets, extra, i)
            if slot >= 0:
                state[slot, CNPS] += 1
            continue
        if cls == C_FOREIGN:
            if slot >= 0:
                ne = _event(events, ne, EV_FOREIGN_OPCODE, frame, slot, state, opcode,
                            packets[i, P_STOP] - packets[i, P_START], packets, extra, i)
            continue
        # -- RC SEND / RDMA WRITE ------------------------------------------------
        if slot < 0:
            slot, nfree = _open(table, state, free, nfree, counters, bucket, dhi, dlo, qpn,
                                extra[i, X_SRC_HI], extra[i, X_SRC_LO], frame, missing, retired,
                                retired_slots)
        s = state[slot]
        if s[SRC_HI] == 0 and s[SRC_LO] == 0:     # bound by the CM before its first packet
            s[SRC_HI], s[SRC_LO] = extra[i, X_SRC_HI], extra[i, X_SRC_LO]
        if s[FIRST_PSN] < 0:                      # opened by the CM or an ACK
            s[FIRST_PSN] = psn
        s[LAST_FRAME] = frame
        s[SEEN] += 1
        expected = s[NEXT_PSN]
        pos = optable[opcode, T_POS]
        fill = False            # the first copy in the capture of a packet a gap skipped
        if expected >= 0 and psn != expected:
            if (psn - expected) & PSN_MASK >= HALF_PSN:
                s[DUPS] += 1            # go-back-N retransmission: counted, dropped
                if s[UNACKED_PSN] >= 0:
                    s[UNACKED_DUPS] += 1
                if (expected - psn) & PSN_MASK <= WINDOW and missing[slot, psn % WINDOW]:
                    missing[slot, psn % WINDOW] = 0     # a gap filled: the network's loss
                    s[FILLED] += 1
                    fill = pos == P_ONLY                # a message of its own: taken
                if not fill:
                    continue
            else:
                _skipped(s, missing, slot, expected, (psn - expected) & PSN_MASK)
        if not fill:
            missing[slot, psn % WINDOW] = 0
            s[NEXT_PSN] = (psn + 1) & PSN_MASK
            k = psn % SENT
            sent[slot, k, 0], sent[slot, k, 1], sent[slot, k, 2] = psn + 1, frame, stamps[i]
            recent[psn % RECENT] = slot
            if s[UNACKED_PSN] < 0:
                s[UNACKED_PSN] = psn
            if s[UNACKED_PSN] == psn or s[UNACKED_FRAME] < 0:
                s[UNACKED_FRAME], s[UNACKED_TS] = frame, stamps[i]
            if s[FRESH_FRAME] < 0:           # the first new packet since the stream was bound
                s[FRESH_FRAME], s[FRESH_TS] = frame, stamps[i]
            s[LAST_TS] = stamps[i]
        if not s[TOUCHED]:                    # the analysis looks at touched streams only
            s[TOUCHED] = 1
            touched[counters[G_TOUCHED]] = slot
            counters[G_TOUCHED] += 1
        if status == S_CUT:                   # in sequence, but what it carries is unknown
            counters[G_CUT_HEADERS] += 1
            s[ACTIVE] = 0
            s[SYNCED] = 0
            continue
        send = optable[opcode, T_SEND]
        p_start, p_end = packets[i, P_START], packets[i, P_STOP]
        n_bytes = p_end - p_start
        n_vis = max(0, min(p_end, packets[i, P_VIS]) - p_start)
        cut = n_bytes - n_vis
        if pos == P_FIRST or (pos == P_MIDDLE and not s[ACTIVE] and not s[SYNCED]):
            s[SYNCED] = pos == P_FIRST
            s[ACTIVE] = 1
            s[M_SEND] = send
            s[M_FIRST_FRAME] = frame
            s[M_FIRST_TS] = stamps[i]
            s[M_LEN] = 0
            s[M_PKTS] = 0
            s[M_HEAD_LEN] = 0
            s[M_HEAD_CAP] = HEAD_SEND if send else HEAD_WRITE
            s[M_TAIL_LEN] = 0
            s[M_RING_N] = 0
            s[M_PARTIAL] = 0 if pos == P_FIRST else PARTIAL_START
            s[M_CUT] = 0
            s[M_SEQ] = counters[G_SEQ]
            counters[G_SEQ] += 1
            s[M_VA], s[M_RKEY], s[M_DMALEN] = (packets[i, P_VA], packets[i, P_RKEY],
                                               packets[i, P_DMALEN])
        if pos == P_FIRST or pos == P_MIDDLE:
            if s[ACTIVE]:
                packet_seq[i] = s[M_SEQ]
                s[M_LEN] += n_bytes
                s[M_PKTS] += 1
                _keep(state, ring, head, tail, slot, buf, p_start, n_vis, cut)
            continue
        # LAST or ONLY: a message completes
        imm = packets[i, P_IMM]
        want_head, want_tail = _wants(send, imm)
        row = rows[nr]
        if pos == P_ONLY or not s[ACTIVE]:
            partial = 0
            if pos == P_LAST:
                if s[SYNCED]:
                    partial = PARTIAL_LOST
                    ne = _event(events, ne, EV_PARTIAL_MESSAGE, frame, slot, state, 0, 0,
                                packets, extra, i)
                else:
                    partial = PARTIAL_START
            elif not fill:
                s[SYNCED] = 1
            if not fill:                  # a fill leaves the message in progress alone
                s[ACTIVE] = 0
            seq = counters[G_SEQ]
            counters[G_SEQ] += 1
            row[R_FIRST_FRAME] = frame
            row[R_FIRST_TS] = stamps[i]
            row[R_VA], row[R_RKEY], row[R_DMALEN] = (packets[i, P_VA], packets[i, P_RKEY],
                                                     packets[i, P_DMALEN])
            row[R_LEN] = n_bytes
            row[R_PKTS] = 1
            row[R_PARTIAL] = partial
            row[R_CUT] = cut
            take = min(n_vis, want_head)
            row[R_HEAD_OFF] = na
            row[R_HEAD_LEN] = take
            copy_into(arena[na:na + take], buf[p_start:p_start + take])
            na += take
            take = 0 if cut else min(n_bytes, want_tail)
            row[R_TAIL_OFF] = na
            row[R_TAIL_LEN] = take
            copy_into(arena[na:na + take], buf[p_end - take:p_end])
            na += take
        else:
            seq = s[M_SEQ]
            s[M_LEN] += n_bytes
            s[M_PKTS] += 1
            _keep(state, ring, head, tail, slot, buf, p_start, n_vis, cut)
            s[ACTIVE] = 0
            row[R_FIRST_FRAME] = s[M_FIRST_FRAME]
            row[R_FIRST_TS] = s[M_FIRST_TS]
            row[R_VA], row[R_RKEY], row[R_DMALEN] = s[M_VA], s[M_RKEY], s[M_DMALEN]
            row[R_LEN] = s[M_LEN]
            row[R_PKTS] = s[M_PKTS]
            row[R_PARTIAL] = s[M_PARTIAL]
            row[R_CUT] = s[M_CUT]
            take = min(s[M_HEAD_LEN], want_head)
            row[R_HEAD_OFF] = na
            row[R_HEAD_LEN] = take
            copy_into(arena[na:na + take], head[slot, :take])
            na += take
            take = _tail_bytes(state, ring, tail, slot, buf, arena, na,
                               min(want_tail, s[M_LEN]))
            row[R_TAIL_OFF] = na
            row[R_TAIL_LEN] = take
            na += take
            s[M_RING_N] = 0
            s[M_TAIL_LEN] = 0
        packet_seq[i] = seq
        row[R_SLOT] = slot
        row[R_GEN] = s[GEN]
        row[R_CONN] = s[CONN]
        row[R_LAST_FRAME] = frame
        row[R_LAST_TS] = stamps[i]
        row[R_PSN] = psn
        row[R_OPCODE] = opcode
        row[R_SEND] = send
        row[R_IMM] = imm
        row[R_IETH] = packets[i, P_IETH]
        row[R_SEQ] = seq
        row[R_SRC_HI], row[R_SRC_LO] = s[SRC_HI], s[SRC_LO]
        row[R_DST_HI], row[R_DST_LO] = dhi, dlo
        row[R_QPN] = qpn
        nr += 1
    return n, STOP_END, nr, na, ne, nfree


@compiled
def find(table, state, hi, lo, qpn):
    """The slot of the stream to address (hi, lo) and QP ``qpn``; -1 when none."""
    return _find(table, state, hi, lo, qpn)[0]


@compiled
def bind(table, state, free, nfree, counters, hi, lo, qpn, conn, next_psn, frame, missing,
         retired, retired_slots):
    """The CM bound a stream to a connection (after a REP); returns (slot, nfree).

    A stream that belonged to another connection starts afresh (a QP number can
    come back with a new connection); ``conn`` below -1 marks a connection of another
    protocol (analysis/other_rdma.py)."""
    slot, bucket = _find(table, state, hi, lo, qpn)
    if slot >= 0 and state[slot, CONN] != conn and state[slot, CONN] != -1:
        state[slot, ACTIVE] = 0
        state[slot, SYNCED] = 0
    if slot >= 0:
        state[slot, CLOSED] = 0
    if slot < 0:
        slot, nfree = _open(table, state, free, nfree, counters, bucket, hi, lo, qpn, 0, 0,
                            frame, missing, retired, retired_slots)
    state[slot, CONN] = conn
    missing[slot, :] = 0
    _no_acks(state[slot])                 # a new PSN space (the analysis sets PEER)
    state[slot, NEXT_PSN] = next_psn
    state[slot, LAST_FRAME] = frame
    state[slot, FRESH_FRAME] = -1
    return slot, nfree


class TransportState:
    """The streams of a capture, carried from chunk to chunk."""

    def __init__(self, max_streams):
        size = 1
        while size < 2 * max_streams:
            size *= 2
        self.table = np.full(size, -1, dtype=np.int64)
        self.state = np.zeros((max_streams, S_COLUMNS), dtype=np.int64)
        self.ring = np.zeros((max_streams, RING, 2), dtype=np.int64)
        self.sent = np.zeros((max_streams, SENT, 3), dtype=np.int64)
        self.missing = np.zeros((max_streams, WINDOW), dtype=np.uint8)   # PSNs a gap skipped
        self.recent = np.full(RECENT, -1, dtype=np.int64)
        self.head = np.zeros((max_streams, HEAD_SEND), dtype=np.uint8)
        self.tail = np.zeros((max_streams, TAIL_CAP), dtype=np.uint8)
        # the slots not used yet of the room offered (the arrays' pages of the slots
        # beyond it are never touched: memory follows the streams in use)
        room = min(FIRST_ROOM, max_streams)
        self.free = np.zeros(max_streams, dtype=np.int64)
        self.free[:room] = np.arange(room - 1, -1, -1)
        self.nfree = room
        self.counters = np.zeros(G_COLUMNS, dtype=np.int64)
        self.counters[G_ROOM] = room
        self.touched = np.zeros(max_streams, dtype=np.int64)   # slots with new packets
        # the rows of the streams evicted last (counters[G_RETIRED] of them) and their
        # slots: a full table evicts a quarter of its streams at once
        quota = max(1, max_streams // 4)
        self.retired = np.zeros((quota, S_COLUMNS), dtype=np.int64)
        self.retired_slots = np.zeros(quota, dtype=np.int64)

    def release(self):
        """The capture is read: the per-stream tables go, the global counters stay."""
        self.table = self.state = self.ring = self.sent = self.missing = None
        self.recent = self.head = self.tail = self.free = self.touched = None
        self.retired = self.retired_slots = None
