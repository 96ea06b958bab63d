"""The columnar engine: capture chunks → IB packets located → RC transport →
message rows, anomaly rows and CM MADs, handed to a consumer in capture order.

The consumer (the analysis) receives, in capture order:

* ``frames_seen(chunk, packets)``: the chunk's records and their IB headers;
* ``messages_done(rows, arena)``: completed messages (transport.R_* columns)
  whose bytes of interest sit in ``arena``; ``events(rows)``: anomalies;
* ``cm_run(chunk, packets, first, last)``: the consecutive CM MADs first..last-1
  of a chunk (``mads()`` yields them one by one), in order with the rows around
  them, so that the handshake binds streams before what follows (the consumer
  calls ``bind()`` back);
* ``streams_evicted(slots, rows)``: the state rows of streams the bounded table
  evicted (transport.py), with what they counted, before their slots are used again;
and the consumer calls ``flush()`` at the end.  Rows of several chunks are
handed over together (numpy works best on long columns), but never across a CM
MAD.
"""

import numpy as np

from ..capture import columns, ib
from ..spec.limits import limit
from . import transport as T

#: the rows' room; a batch goes to the consumer at half of it (or half the arena's), or
#: at a quarter while the reader has no chunk ready (flush_waiting): the analysis costs
#: about 2 ms a batch beyond its rows (docs/benchmarks.md)
ROWS = 1 << 15
ARENA = 1 << 23
EVENTS = 1 << 12
NONE_TOUCHED = (np.zeros(0, dtype=np.int64), np.zeros((0, T.S_COLUMNS), dtype=np.int64))


class Engine:
    def __init__(self, consumer, max_streams=limit("streams")):
        self.consumer = consumer
        consumer.engine = self
        self.streams = T.TransportState(max_streams)
        self.rows = np.zeros((ROWS, T.R_COLUMNS), dtype=np.int64)
        self.arena = np.zeros(ARENA, dtype=np.uint8)
        self.events = np.zeros((EVENTS, T.E_COLUMNS), dtype=np.int64)
        self.nr = self.na = self.ne = 0
        self.last_rows = 0          # rows of the last flush (rows[:last_rows])
        self.packet_seq = None      # per packet of the last chunk: its message, -1 none
        self.moves = 0              # runs, bindings and pairings (see acknowledgements)

    def feed(self, chunk):
        """One chunk of records (capture.Chunk)."""
        packets = chunk.decoded().packets
        self.consumer.frames_seen(chunk, packets)
        st = self.streams
        self.packet_seq = packet_seq = np.empty(len(chunk), dtype=np.int64)
        start, n = 0, len(chunk)
        while start < n:
            start, why, self.nr, self.na, self.ne, st.nfree = T.run(
                chunk.buf, packets, chunk.extra, chunk.stamps, chunk.first_frame, start,
                ib.OPCODE_TABLE,
                st.table, st.state, st.ring, st.head, st.tail, st.free, st.nfree,
                st.counters, st.touched, self.rows, self.nr, self.arena, self.na, self.events,
                self.ne,
                packet_seq, st.sent, st.missing, st.recent, st.retired, st.retired_slots)
            self.moves += 1
            if why != T.STOP_END or self.nr > ROWS // 2 or self.na > ARENA // 2:
                self.flush()
            if why == T.STOP_CM:
                end = T.cm_run(packets, start, ib.OPCODE_TABLE, packet_seq)
                self.consumer.cm_run(chunk, packets, start, end)
                start = end
        # the slots offered so far: the table's rows beyond them were never used
        T.materialize(chunk.buf, st.state[:st.counters[T.G_ROOM]], st.ring, st.tail)

    def flush_waiting(self):
        """Hand the rows gathered so far to the consumer if they are a quarter of the
        room: called while the reader has no chunk ready, in time the next chunk would
        not have used (where a batch ends changes no result: records.LATE)."""
        if self.nr >= ROWS // 4:
            self.flush()

    def flush(self):
        """Hand the rows and events gathered so far to the consumer."""
        if self.ne:
            self.consumer.events(self.events[:self.ne])
        if self.nr:
            self.consumer.messages_done(self.rows[:self.nr], self.arena)
        self.last_rows, self.nr, self.na, self.ne = self.nr, 0, 0, 0
        self._hand_over_evicted()

    def _hand_over_evicted(self):
        """The streams evicted since the last call, to the consumer (after the rows
        they sent: their content may have told whose they are)."""
        st = self.streams
        count = int(st.counters[T.G_RETIRED])
        if count:
            slots, rows = st.retired_slots[:count].copy(), st.retired[:count].copy()
            st.counters[T.G_RETIRED] = 0
            self.consumer.streams_evicted(slots, rows)

    def close(self):
        """The capture is read and the consumer closed: the per-stream tables and the
        buffers go (up to 63 MB touched when the streams alive fill the table, while the
        summary is made), the streams' global counters stay."""
        self.streams.release()
        self.rows = self.arena = self.events = self.packet_seq = None

    @property
    def acknowledgements(self):
        """Changes whenever the streams' acknowledgements may have (packets read, a
        stream bound or paired since): what was not acknowledged at the same value
        still is not."""
        return self.moves

    def touched(self):
        """The slots that got new packets since the last call (and their state rows)."""
        st = self.streams
        count = int(st.counters[T.G_TOUCHED])
        if not count:
            return NONE_TOUCHED
        slots = st.touched[:count].copy()
        st.state[slots, T.TOUCHED] = 0
        st.counters[T.G_TOUCHED] = 0
        return slots, st.state[slots]

    def bind(self, address, qpn, conn, next_psn, frame):
        """Bind the stream to ``address``/``qpn`` to connection ``conn`` (CM REP).

        Addresses are (hi, lo) pairs of signed 64-bit ints, as the rows carry them."""
        st = self.streams
        slot, st.nfree = T.bind(st.table, st.state, st.free, st.nfree, st.counters,
                                address[0], address[1], qpn, conn, next_psn, frame, st.missing,
                                st.retired, st.retired_slots)
        self._hand_over_evicted()
        self.moves += 1
        return slot

    def pair_streams(self, a, b):
        T.pair_streams(self.streams.state, a, b)
        self.moves += 1

    def stream_closed(self, slot):
        """The CM closed the connection of the stream in ``slot``: the slot may be
        recycled once the stream is silent (transport.py)."""
        self.streams.state[slot, T.CLOSED] = 1

    def stream(self, address, qpn):
        """The slot of the stream to ``address``/``qpn`` (as bind() takes them), -1."""
        st = self.streams
        return int(T.find(st.table, st.state, address[0], address[1], qpn))


def mads(chunk, packets, first, last):
    """(frame, stamp, src, dst, data, start, end) of the CM MADs first..last-1 of a
    chunk: the MAD is ``data[start:end]``, addresses are (hi, lo) pairs."""
    for i in range(first, last):
        column, other = packets[i].tolist(), chunk.extra[i].tolist()
        yield (chunk.first_frame + i, int(chunk.stamps[i]),
               (other[columns.X_SRC_HI], other[columns.X_SRC_LO]),
               (column[columns.P_DST_HI], column[columns.P_DST_LO]), chunk.data,
               column[columns.P_START], column[columns.P_STOP])
