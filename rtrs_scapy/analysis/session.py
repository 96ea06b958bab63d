"""A Scapy session over the engine: ``sniff(offline=..., session=RtrsSession)``.

Each packet goes through the same engine and analyzer as the CLI (as a chunk
of one record); it comes back annotated: ``pkt.rtrs`` holds the analyzer's
records for this frame (decoded immediate, buf_id, the frame it pairs with,
latency), ImmDt knows the queue depth, and the packet that completes a
multi-packet message carries ``pkt.rtrs_message``, the whole message decoded
with the Scapy layers.  Every packet of such a message gets
``pkt.rtrs_fragment_of``, the frame that completes it.
"""

import numpy as np
from scapy.compat import raw
from scapy.config import conf
from scapy.sessions import DefaultSession

from ..capture import columns
from ..capture.files import Chunk
from ..capture.jit import byte_array
from ..engine import Engine
from ..engine import transport as T
from ..layers.ib import ImmDt
from ..layers.rtrs import RtrsMsg
from ..layers.rtrs_request import RtrsRequest
from .analyzer import Analyzer

MAX_MESSAGE = 1 << 20     # bytes kept of a message in progress


class RtrsSession(DefaultSession):
    def __init__(self, *args, queue_depth=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.analyzer = Analyzer(keep_messages=True, queue_depth=queue_depth)
        self.engine = Engine(self.analyzer)
        self.frame = 0
        self.parts = {}     # message seq -> (packets, payload bytes)

    def process(self, pkt):
        pkt = super().process(pkt)
        if pkt is None:
            return None
        self.frame += 1
        data = raw(pkt)
        link_type = conf.l2types.layer2num.get(type(pkt), 1)
        an = self.analyzer
        first_new = len(an.messages)
        self._feed(data, int(round(pkt.time * 1000000000)), link_type)  # Decimal: exact ns
        pkt.rtrs = [m for m in an.messages.live(first_new) if m["frame"] == self.frame]
        if ImmDt in pkt:
            path = self._path_of(pkt.rtrs)
            if path is not None and path.queue_depth:
                pkt[ImmDt].queue_depth = path.queue_depth
        self._reassemble(pkt, data)
        return pkt

    def _feed(self, data, stamp, link_type):
        buf = byte_array(data)
        one = np.array([0], dtype=np.int64)
        self.chunk = Chunk(data, buf, self.frame, one, np.array([len(data)], np.int64),
                           np.array([stamp], np.int64),
                           np.array([link_type], np.int64)).decoded()
        self.engine.feed(self.chunk)
        self.engine.flush()

    def _reassemble(self, pkt, data):
        """Keep the payload of every packet of a multi-packet message; the last one
        gets the message decoded."""
        seq = int(self.engine.packet_seq[0])
        if seq < 0:
            return
        payload = self._payload(data)
        packets, parts = self.parts.setdefault(seq, ([], []))
        packets.append(pkt)
        if sum(len(p) for p in parts) < MAX_MESSAGE:
            parts.append(payload)
        row = self._completed(seq)
        if row is None:
            return
        del self.parts[seq]
        for packet in packets:
            packet.rtrs_fragment_of = self.frame
        if len(packets) > 1:
            message = b"".join(parts)
            pkt.rtrs_message = RtrsMsg(message) if row[T.R_SEND] else RtrsRequest(message)

    def _completed(self, seq):
        rows = self.engine.rows
        for row in rows[:self.engine.last_rows]:
            if row[T.R_SEQ] == seq:
                return row
        return None

    def _payload(self, data):
        packets = self.chunk.packets
        return data[int(packets[0, columns.P_START]):int(packets[0, columns.P_STOP])]

    def _path_of(self, records):
        for record in records:
            for path in self.analyzer.live():
                if {record["src"], record["dst"]} == {path.client, path.server}:
                    return path
        return None

    def summary(self):
        """The JSON-shaped summary of everything processed so far."""
        from .summary import summarize
        self.engine.flush()
        self.analyzer.close()
        return summarize(self.analyzer, {"path": None, "format": "scapy",
                                         "link_type": None, "truncated": False,
                                         "snaplen": None, "cut_records": 0})
