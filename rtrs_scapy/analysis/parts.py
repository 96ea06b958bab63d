"""One capture in several files, read in parallel: map each file, reduce in order.

``map_file(path)`` runs one file through the engine's transport with a fresh
state and keeps what comes out, in order: the completed messages (rows and
the bytes they kept), the anomalies, the CM MADs, the frame counts, and the
state at its edges: per stream (destination and QP) the first and the next PSN,
the message still in progress at the end, the transport counters.  It needs
nothing of the other files, so the files are mapped on all cores or a cluster.

``reduce_parts(parts)`` takes the parts in time order and runs the analysis
(the same Analyzer as ``analyze``) over them as if they were one capture:
frames are renumbered, each stream gets one identity across the files, the
CM handshake binds streams by (address, QP) as the engine would have, a
message that started in one file and ended in the next is stitched back
together, and a PSN that does not follow on from the previous file is the gap
the single pass would have counted (packets the capture lost).  Requests answered in a later file are
paired like any other: the pairing carries them from batch to batch.

The files must follow each other in time (a ring buffer, ``tcpdump -C/-W/-G``);
files of several hosts that overlap in time are merged frame by frame by
``analyze(files)`` instead.  One case cannot be stitched: a go-back-N
retransmission that a file boundary cuts through (a file starts with packets
the previous one already had); the parts cannot tell which of their messages
were copies, so the reduce then reads the files again in one pass.
"""

from dataclasses import dataclass, field
from typing import List

import numpy as np

from ..capture import open_capture
from ..capture.files import CutRecords
from ..engine import Engine, mads
from ..engine import transport as T
from ..spec.limits import limit
from .analyzer import Analyzer
from .growing import capacity_for

#: the per-stream edge state a part keeps (transport state columns)
EDGE = (T.K_HI, T.K_LO, T.K_QPN, T.SRC_HI, T.SRC_LO, T.NEXT_PSN, T.FIRST_PSN, T.FIRST_FRAME,
        T.LAST_FRAME, T.SEEN, T.DUPS, T.ACKS, T.NAKS, T.RNRS, T.CNPS, T.ACTIVE, T.M_SEND,
        T.M_FIRST_FRAME, T.M_FIRST_TS, T.M_LEN, T.M_PKTS, T.M_VA, T.M_RKEY, T.M_DMALEN,
        T.M_PARTIAL, T.LAST_TS, T.ACK_IN, T.M_CUT, T.SKIPPED, T.FILLED)


@dataclass
class FilePart:
    """What one file gave: picklable, no reference to the file."""
    path: str
    fmt: str
    link_type: int
    frames: int = 0
    ib_frames: int = 0
    first_stamp: int = None
    last_stamp: int = None
    link_types: set = field(default_factory=set)
    mirrors: set = field(default_factory=set)   # mirror codes (capture/links.py)
    items: List[tuple] = field(default_factory=list)   # ("rows"|"events"|"cm", ...) in order
    streams: np.ndarray = None       # one row per stream: the EDGE columns
    heads: dict = field(default_factory=dict)   # stream key -> head bytes of its open message
    tails: dict = field(default_factory=dict)   # stream key -> tail bytes of its open message
    pairs: list = field(default_factory=list)   # (key, key): streams its ACKs paired (no CM)
    evicted: list = field(default_factory=list)  # arrays: key columns, then T.COUNTED
    problems: list = field(default_factory=list)
    truncated: bool = False
    counters: np.ndarray = None      # the transport's global counters (evictions)
    snaplen: int = 0                 # the file's snaplen (header or interfaces)
    cut: CutRecords = field(default_factory=CutRecords)   # records the snaplen cut


class _Recorder:
    """The engine's consumer in a map: keeps what the engine hands over."""

    def __init__(self, part):
        self.part = part

    def frames_seen(self, chunk, packets):
        part = self.part
        if not len(chunk):
            return
        ib_frames, link_types, mirrors = chunk.counts()
        part.frames += len(chunk)
        part.ib_frames += ib_frames
        if part.first_stamp is None:
            part.first_stamp = int(chunk.stamps[0])
        part.last_stamp = int(chunk.stamps[-1])
        part.link_types.update(link_types)
        if len(part.mirrors) < limit("mirrors"):
            part.mirrors.update(mirrors)

    def messages_done(self, rows, arena):
        """Rows with only the bytes they point at (offsets rewritten)."""
        rows = rows.copy()
        pieces, at = [], 0
        for column_off, column_len in ((T.R_HEAD_OFF, T.R_HEAD_LEN), (T.R_TAIL_OFF, T.R_TAIL_LEN)):
            for i in range(len(rows)):
                start, length = int(rows[i, column_off]), int(rows[i, column_len])
                pieces.append(arena[start:start + length].tobytes())
                rows[i, column_off] = at
                at += length
        self.part.items.append(("rows", rows, b"".join(pieces)))

    def events(self, rows):
        self.part.items.append(("events", rows.copy()))

    def cm_run(self, chunk, packets, first, last):
        for frame, stamp, src, dst, data, start, end in mads(chunk, packets, first, last):
            self.part.items.append(("cm", frame, stamp, src, dst, bytes(data[start:end])))

    def streams_evicted(self, slots, rows):
        """What the evicted streams counted, by stream key (the reduce adds it)."""
        counted = rows[:, list(T.COUNTED)]
        keep = counted.any(axis=1)
        self.part.evicted.append(np.hstack((rows[keep][:, [T.K_HI, T.K_LO, T.K_QPN]],
                                            counted[keep])))


def map_file(path):
    """One file through the transport, with a fresh state: a FilePart."""
    with open_capture(path) as capture:
        part = FilePart(str(capture.path), capture.fmt, capture.link_type)
        engine = Engine(_Recorder(part))
        for chunk in capture.chunks():
            engine.feed(chunk)
            capture.done(chunk)
        engine.flush()
        part.problems = list(capture.problems)
        part.truncated = capture.truncated
        part.snaplen, part.cut = capture.snaplen, capture.cut
    st = engine.streams
    part.counters = st.counters.copy()
    used = np.flatnonzero(st.state[:, T.USED])
    part.streams = st.state[np.ix_(used, EDGE)].copy()
    keys = [T.K_HI, T.K_LO, T.K_QPN]
    for slot in used[(st.state[used, T.CONN] < 0) & (st.state[used, T.PEER] > used)].tolist():
        part.pairs.append((tuple(int(v) for v in st.state[slot, keys]),
                           tuple(int(v) for v in st.state[st.state[slot, T.PEER], keys])))
    for slot in used[st.state[used, T.ACTIVE] == 1].tolist():
        key = tuple(int(v) for v in st.state[slot, [T.K_HI, T.K_LO, T.K_QPN]])
        part.heads[key] = st.head[slot, :st.state[slot, T.M_HEAD_LEN]].tobytes()
        part.tails[key] = st.tail[slot, :st.state[slot, T.M_TAIL_LEN]].tobytes()
    return part


class _Streams:
    """The engine's side of the analysis in a reduce: one identity per stream across
    the files, the CM's bindings by (address, QP), and the per-stream state the
    analyzer reads (transport state columns; rows beyond the streams are unused, as
    the engine's free slots are)."""

    def __init__(self):
        self.ids = {}                 # (hi, lo, qpn) -> global slot
        self.state = np.zeros((0, T.S_COLUMNS), dtype=np.int64)
        self.touched_ids = set()
        self.counters = np.zeros(T.G_COLUMNS, dtype=np.int64)   # summed over the parts
        self.acks_changed = 0         # times a stream's pairing or acknowledged PSN moved

    def slot(self, key):
        slot = self.ids.get(key)
        if slot is None:
            slot = self.ids[key] = len(self.ids)
            if slot == len(self.state):       # room for more: amortized, not a copy each
                grown = np.zeros((capacity_for(slot + 1), T.S_COLUMNS), dtype=np.int64)
                grown[:slot] = self.state
                self.state = grown
            row = self.state[slot]
            row[[T.K_HI, T.K_LO, T.K_QPN]] = key
            row[T.CONN] = row[T.FRESH_FRAME] = -1
            row[list(T.NO_ACKS)] = -1
            row[T.USED] = 1
        return slot


class _Binder:
    """What the analyzer calls on its engine (bind, touched, streams.state)."""

    def __init__(self):
        self.streams = _Streams()

    def bind(self, address, qpn, conn, next_psn, frame):
        slot = self.streams.slot((address[0], address[1], qpn))
        state = self.streams.state[slot]
        state[T.CONN] = conn
        state[T.FRESH_FRAME] = -1
        return slot

    def pair_streams(self, a, b):
        """Each part's last acknowledged PSN arrives with its edges (ACK_IN).  Only a
        stream paired with another before changes an answer's acknowledgement (one
        waiting was on a paired stream; the CM pairs the same two again)."""
        state = self.streams.state
        if state[a, T.PEER] not in (-1, b) or state[b, T.PEER] not in (-1, a):
            self.streams.acks_changed += 1
        T.pair_streams(state, a, b)

    @property
    def acknowledgements(self):
        """Changes when what ``io.acknowledged`` reads may have: here only where the
        files join, and when a paired stream is paired again."""
        return self.streams.acks_changed

    def stream(self, address, qpn):
        return self.streams.ids.get((address[0], address[1], qpn), -1)

    def stream_closed(self, slot):
        """A closed connection's stream: kept (the reduce's table recycles none)."""

    def touched(self):
        streams = self.streams
        slots = np.array(sorted(streams.touched_ids), dtype=np.int64)
        streams.touched_ids.clear()
        return slots, streams.state[slots]


def reduce_parts(parts, keep_messages=True, queue_depth=None, io_sink=None,
                 keep_latencies=True):
    """The analysis of parts in time order: an Analysis equal to ``analyze(files)``
    (which it runs instead when a boundary cannot be stitched, see above)."""
    from . import Analysis, analyze
    parts = sorted(parts, key=lambda p: (p.first_stamp is None, p.first_stamp or 0))
    if not _stitchable(parts) or _retransmitted(parts):
        return analyze([p.path for p in parts], keep_messages=keep_messages,
                       queue_depth=queue_depth, io_sink=io_sink, keep_latencies=keep_latencies)
    analyzer = Analyzer(keep_messages=keep_messages, queue_depth=queue_depth, io_sink=io_sink,
                        keep_latencies=keep_latencies)
    binder = _Binder()
    analyzer.attach(binder)
    reducer = _Reducer(analyzer, binder)
    for part in parts:
        reducer.add(part)
    reducer.add_evicted(parts)
    analyzer.close()
    return Analysis(analyzer, _Capture(parts, reducer))


def _retransmitted(parts):
    """Whether a stream retransmitted: a stall (docs/PROTOCOL.md#stalls) needs the ACKs
    seen in capture order by one engine, so such a capture is read in one pass."""
    column = EDGE.index(T.DUPS)
    return any(part.streams is not None and len(part.streams)
               and bool((part.streams[:, column] > 0).any()) for part in parts)


def _stitchable(parts):
    """False when a file starts with packets the previous file already had (its first
    PSN on a stream is behind the one the earlier files left expected)."""
    column = EDGE.index
    expected = {}
    for part in parts:
        if part.streams is None:
            continue
        for edge in part.streams:
            key = tuple(int(v) for v in edge[:3])
            first_psn = edge[column(T.FIRST_PSN)]
            if first_psn < 0:
                continue
            before = expected.get(key)
            if before is not None and (first_psn - before) & T.PSN_MASK >= T.HALF_PSN:
                return False
            expected[key] = edge[column(T.NEXT_PSN)]
    return True


class _Reducer:
    def __init__(self, analyzer, binder):
        self.an = analyzer
        self.binder = binder
        self.frames = 0               # frames of the parts before the current one
        self.open = {}                # stream key -> (edge row, head, tail, frame offset)
        self.problems = []

    def add(self, part):
        an, offset = self.an, self.frames
        if part.counters is not None:
            self.binder.streams.counters += part.counters
        firsts = {}
        if part.streams is not None:
            for row in part.streams:
                firsts[tuple(int(v) for v in row[:3])] = row
        an.counts.file_seen(part)
        self._pair(part)
        seen = set()
        for item in part.items:
            if item[0] == "rows":
                arena = np.frombuffer(item[2] + bytes(16), dtype=np.uint8)  # never empty
                rows, arena = self._stitched(item[1], arena, offset, firsts, seen)
                self._touch(rows)
                an.messages_done(rows, arena)
            elif item[0] == "events":
                events = item[1].copy()
                events[:, T.E_FRAME] += offset
                self._global_events(events)
                an.events(events)
            else:
                _, frame, stamp, src, dst, payload = item
                an.cm_mad(frame + offset, stamp, src, dst, payload, 0, len(payload))
        self._edges(part, offset, firsts, seen)
        self.frames += part.frames
        self.problems.extend((f, k, "%s: %s" % (part.path, d)) for f, k, d in part.problems)

    def add_evicted(self, parts):
        """What the streams a file's table evicted counted, to the same streams across
        the files (the reduce's table is not bounded), once the files' edges are
        joined: an evicted stream's PSNs are no edge."""
        streams = self.binder.streams
        for part in parts:
            for block in part.evicted:
                for row in block.tolist():
                    streams.state[streams.slot(tuple(row[:3])), list(T.COUNTED)] += row[3:]

    def _pair(self, part):
        """Streams without a handshake that the part's engine paired by their ACKs
        (engine/transport.py), paired from the part's start."""
        streams = self.binder.streams
        for a, b in part.pairs:
            a, b = streams.slot(a), streams.slot(b)
            if streams.state[a, T.PEER] < 0 and streams.state[b, T.PEER] < 0:
                T.pair_streams(streams.state, a, b)     # neither paired: see pair_streams

    def _stitched(self, rows, arena, offset, firsts, seen):
        """Rows of a part in the capture's numbering and stream identities; a stream's
        first message that began in the previous file gets its beginning back."""
        rows = rows.copy()
        rows[:, [T.R_FIRST_FRAME, T.R_LAST_FRAME]] += offset
        streams = self.binder.streams
        keys, first_row, where = np.unique(rows[:, [T.R_DST_HI, T.R_DST_LO, T.R_QPN]], axis=0,
                                           return_index=True, return_inverse=True)
        slots = np.array([streams.slot(tuple(k)) for k in keys.tolist()], dtype=np.int64)
        rows[:, T.R_SLOT] = slots[where.ravel()]
        rows[:, T.R_GEN] = 0
        rows[:, T.R_CONN] = streams.state[rows[:, T.R_SLOT], T.CONN]
        extra = []
        for key, i in zip(map(tuple, keys.tolist()), first_row.tolist()):
            if key in seen:
                continue
            seen.add(key)
            begun = self.open.pop(key, None)
            if begun is not None and rows[i, T.R_PARTIAL] == T.PARTIAL_START \
                    and self._follows(begun[0], firsts.get(key)):
                extra.append((i, begun))
        if extra:
            rows, arena = _join(rows, arena, extra)
        return rows, arena

    @staticmethod
    def _follows(edge, first):
        """The stream's first packet in this file carries the PSN the last file expected."""
        column = EDGE.index
        return first is not None and edge[column(T.NEXT_PSN)] == first[column(T.FIRST_PSN)]

    def _touch(self, rows):
        """What the engine's touched() would give: first and last new traffic."""
        streams = self.binder.streams
        for slot in np.unique(rows[:, T.R_SLOT]).tolist():
            mine = rows[rows[:, T.R_SLOT] == slot]
            state = streams.state[slot]
            if state[T.FRESH_FRAME] < 0:
                state[T.FRESH_FRAME] = mine[0, T.R_FIRST_FRAME]
                state[T.FRESH_TS] = mine[0, T.R_FIRST_TS]
            state[T.LAST_TS] = mine[-1, T.R_LAST_TS]
            streams.touched_ids.add(slot)

    def _global_events(self, events):
        streams = self.binder.streams
        for i in range(len(events)):
            key = (int(events[i, T.E_DST_HI]), int(events[i, T.E_DST_LO]),
                   int(events[i, T.E_QPN]))
            if events[i, T.E_SLOT] >= 0:
                slot = streams.slot(key)
                events[i, T.E_SLOT], events[i, T.E_GEN] = slot, 0
                events[i, T.E_CONN] = streams.state[slot, T.CONN]

    def _edges(self, part, offset, firsts, seen):
        """Per stream: the previous file's expected PSN against this file's first one,
        the transport counters, and the message left open at the end."""
        column = EDGE.index
        streams = self.binder.streams
        for key, edge in firsts.items():
            slot = streams.slot(key)
            state = streams.state[slot]
            before = self.open.pop(key, None)        # open before, and no message ended here
            expected = state[T.NEXT_PSN] if state[T.SEEN] else -1
            first_psn = edge[column(T.FIRST_PSN)]     # -1: only ACKs to it in this file
            if expected >= 0 and first_psn >= 0 and first_psn != expected:
                state[T.SKIPPED] += (first_psn - expected) & T.PSN_MASK   # never filled:
                before = None                             # a fill is a DUP, read in one pass
            for name in T.COUNTED:
                state[name] += edge[column(name)]
            if edge[column(T.ACK_IN)] >= 0:
                state[T.ACK_IN] = edge[column(T.ACK_IN)]
                streams.acks_changed += 1
            if first_psn >= 0:
                state[T.NEXT_PSN] = edge[column(T.NEXT_PSN)]
            if state[T.SRC_HI] == 0 and state[T.SRC_LO] == 0:
                state[T.SRC_HI], state[T.SRC_LO] = edge[column(T.SRC_HI)], edge[column(T.SRC_LO)]
            if edge[column(T.ACTIVE)]:
                edge = edge.copy()
                edge[column(T.M_FIRST_FRAME)] += offset
                head, tail = part.heads.get(key, b""), part.tails.get(key, b"")
                if before is not None and key not in seen \
                        and edge[column(T.M_PARTIAL)] == T.PARTIAL_START:
                    edge, head, tail = _spanning(before, edge, head, tail)
                self.open[key] = (edge, head, tail)


def _spanning(before, edge, head, tail):
    """A message open across a whole file: its beginning from the file before."""
    column = EDGE.index
    early, early_head, early_tail = before
    for name in (T.M_FIRST_FRAME, T.M_FIRST_TS, T.M_PARTIAL, T.M_VA, T.M_RKEY, T.M_DMALEN):
        edge[column(name)] = early[column(name)]
    edge[column(T.M_LEN)] += early[column(T.M_LEN)]
    edge[column(T.M_PKTS)] += early[column(T.M_PKTS)]
    edge[column(T.M_CUT)] += early[column(T.M_CUT)]
    return edge, (early_head + head)[:T.HEAD_SEND], (early_tail + tail)[-T.TAIL_CAP:]


def _join(rows, arena, extra):
    """Rows whose message began in the previous file: its first frame, time, RETH,
    length and packets, and its head in front of what this file kept."""
    column = EDGE.index
    pieces, at = [arena], len(arena)
    for i, (edge, head, tail) in extra:
        rows[i, T.R_FIRST_FRAME] = edge[column(T.M_FIRST_FRAME)]
        rows[i, T.R_FIRST_TS] = edge[column(T.M_FIRST_TS)]
        rows[i, T.R_LEN] += edge[column(T.M_LEN)]
        rows[i, T.R_PKTS] += edge[column(T.M_PKTS)]
        rows[i, T.R_PARTIAL] = edge[column(T.M_PARTIAL)]
        own_cut, early_cut = int(rows[i, T.R_CUT]), int(edge[column(T.M_CUT)])
        rows[i, T.R_CUT] += early_cut
        if early_cut:         # the head ends at the cut (transport._keep)
            rows[i, T.R_HEAD_LEN] = 0
        if own_cut:           # the tail starts behind the cut
            tail = b""
        if edge[column(T.M_RKEY)] >= 0:
            rows[i, T.R_VA] = edge[column(T.M_VA)]
            rows[i, T.R_RKEY] = edge[column(T.M_RKEY)]
            rows[i, T.R_DMALEN] = edge[column(T.M_DMALEN)]
        if rows[i, T.R_HEAD_LEN] or head:
            own = arena[rows[i, T.R_HEAD_OFF]:rows[i, T.R_HEAD_OFF] + rows[i, T.R_HEAD_LEN]]
            whole = (head + bytes(own))[:max(len(head), int(rows[i, T.R_HEAD_LEN]))]
            pieces.append(whole)
            rows[i, T.R_HEAD_OFF], rows[i, T.R_HEAD_LEN] = at, len(whole)
            at += len(whole)
        want = int(rows[i, T.R_TAIL_LEN])
        if want and tail:
            own = bytes(arena[rows[i, T.R_TAIL_OFF]:rows[i, T.R_TAIL_OFF] + want])
            whole = (tail + own)[-T.TAIL_CAP:]
            pieces.append(whole)
            rows[i, T.R_TAIL_OFF], rows[i, T.R_TAIL_LEN] = at, len(whole)
            at += len(whole)
    return rows, np.frombuffer(b"".join(bytes(p) for p in pieces), dtype=np.uint8)


class _Capture:
    """What Analysis reads of a capture, for parts."""

    def __init__(self, parts, reducer):
        self.path = ", ".join(p.path for p in parts)
        self.files = [p.path for p in parts]
        self.fmt = "+".join(sorted({p.fmt for p in parts}))
        self.link_type = parts[0].link_type if parts else -1
        self.truncated = any(p.truncated for p in parts)
        self.problems = reducer.problems
        self.duplicates = 0
        self.snaplen = max((p.snaplen for p in parts), default=0)
        self.cut = CutRecords()
        for p in parts:
            self.cut.merge(p.cut)
