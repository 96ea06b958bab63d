"""The columnar engine: capture chunks → IB packets located → RC transport →
message rows, anomaly rows and CM MADs, handed to a consumer in capture order.

The consumer (the analysis) receives, per chunk:

* ``frames_seen(chunk, located)``: the chunk's records and where their IB packets are;
* ``messages_done(rows, arena)``: completed messages (transport.R_* columns)
  whose bytes of interest sit in ``arena``; ``events(rows)``: anomalies;
* ``cm_mad(frame, stamp, src, dst, data, start, end)``: one CM MAD, in order with
  the rows around it, so that the handshake binds streams before what follows
  (the consumer calls ``bind()`` back);
* ``chunk_done()``.
"""

import numpy as np

from ..capture import links
from . import transport as T

ROWS = 1 << 14
ARENA = 1 << 22
EVENTS = 1 << 12


class Engine:
    def __init__(self, consumer, max_streams=16384):
        self.consumer = consumer
        consumer.engine = self
        self.streams = T.TransportState(max_streams)
        self.rows = np.zeros((ROWS, T.R_COLUMNS), dtype=np.int64)
        self.arena = np.zeros(ARENA, dtype=np.uint8)
        self.events = np.zeros((EVENTS, T.E_COLUMNS), dtype=np.int64)
        self.last_rows = 0          # rows of the last transport call (rows[:last_rows])

    def feed(self, chunk):
        """One chunk of records (capture.Chunk)."""
        located = links.locate(chunk.buf, chunk.offs, chunk.caplens, chunk.links,
                               links.GEOMETRY)
        consumer = self.consumer
        consumer.frames_seen(chunk, located)
        st = self.streams
        packet_seq = np.empty(len(chunk), dtype=np.int64)
        self.packet_seq = packet_seq
        start, n = 0, len(chunk)
        while start < n:
            start, why, nr, na, ne, st.nfree = T.run(
                chunk.buf, chunk.offs, chunk.stamps, located, chunk.first_frame, start,
                T.FIELDS, T.OPCODE_TABLE, st.table, st.state, st.ring, st.head, st.tail,
                st.free, st.nfree, st.counters, self.rows, self.arena, self.events,
                packet_seq)
            self.last_rows = nr
            if ne:
                consumer.events(self.events[:ne])
            if nr:
                consumer.messages_done(self.rows[:nr], self.arena)
            if why == T.STOP_CM:
                self._cm(chunk, located, start)
                start += 1
        T.materialize(chunk.buf, st.state, st.ring, st.tail)
        consumer.chunk_done()

    def _cm(self, chunk, located, i):
        bth, end = int(located[2, i]), int(located[3, i])
        buf = chunk.buf
        opcode = int(buf[bth + T.FIELDS[T.F_OPCODE]])
        pad = (int(buf[bth + T.FIELDS[T.F_PAD]]) >> int(T.FIELDS[T.F_PAD_SHIFT])) & (
            (1 << int(T.FIELDS[T.F_PAD_WIDTH])) - 1)
        start = bth + int(T.FIELDS[T.F_BTH_SIZE]) + int(T.OPCODE_TABLE[opcode, T.T_EXT])
        stop = end - int(T.FIELDS[T.F_ICRC]) - pad
        self.consumer.cm_mad(chunk.first_frame + i, int(chunk.stamps[i]),
                         (int(located[4, i]), int(located[5, i])),
                         (int(located[6, i]), int(located[7, i])), chunk.data, start, stop)

    def bind(self, address, qpn, conn, next_psn, frame):
        """Bind the stream to ``address``/``qpn`` to connection ``conn`` (CM REP).

        Addresses are (hi, lo) pairs of signed 64-bit ints, as the rows carry them."""
        st = self.streams
        slot, st.nfree = T.bind(st.table, st.state, st.free, st.nfree, st.counters,
                                address[0], address[1], qpn, conn, next_psn, frame)
        return slot
