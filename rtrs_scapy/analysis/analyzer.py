"""The session analyzer: one object fed frame by frame (raw bytes), shared by
the CLI, the Scapy session class and the tests.

Per frame it locates the IB transport, decodes the BTH and extension headers
through the struct plans, routes CM MADs to the CM tracker and RC packets to
their stream (PSN checks, reassembly), then interprets complete messages:
requests (trailer + RNBD header, buf_id/offset from the immediate), responses
(msg_id/errno, rkey_rsp), READ data and invalidations, heartbeats, info
messages (docs/PROTOCOL.md#flows, docs/PROTOCOL.md#analysis-rules, docs/PROTOCOL.md#rnbd).
"""


from ..layers.ib import AETH, BTH, GRH

from ..fastpath.plan import plan
from ..fastpath.reader import ib_offset
from ..imm import mem_bits
from ..layers import ib
from .cm_tracker import CmTracker
from .infer import MemBitsGuess
from .messages import MessageInterpreter
from .model import Path, Session
from .names import address_text
from .reassembly import HEAD_LIMIT, SEND_LIMIT, Message, Stream

_bth = plan(BTH).reader("opcode", "padcount", "dqpn", "psn")
_reth = plan(ib.RETH).reader("va", "rkey", "dma_len")
_imm = plan(ib.ImmDt).reader("imm")
_ieth = plan(ib.IETH).reader("rkey")
_aeth = plan(AETH).reader("syndrome")
BTH_SIZE = plan(BTH).size
ICRC_SIZE = plan(BTH).layout.trailer_size
GRH_SIZE = plan(GRH).size
LRH_SIZE = plan(ib.LRH).size

_op = ib.opcode_value
SEND_FIRST, SEND_MIDDLE = _op("RC_SEND_FIRST"), _op("RC_SEND_MIDDLE")
SEND_ENDS = {_op("RC_SEND_LAST"), _op("RC_SEND_LAST_WITH_IMMEDIATE"),
             _op("RC_SEND_LAST_WITH_INVALIDATE")}
SEND_ONLYS = {_op("RC_SEND_ONLY"), _op("RC_SEND_ONLY_WITH_IMMEDIATE"),
              _op("RC_SEND_ONLY_WITH_INVALIDATE")}
WRITE_FIRST, WRITE_MIDDLE = _op("RC_RDMA_WRITE_FIRST"), _op("RC_RDMA_WRITE_MIDDLE")
WRITE_ENDS = {_op("RC_RDMA_WRITE_LAST"), _op("RC_RDMA_WRITE_LAST_WITH_IMMEDIATE")}
WRITE_ONLYS = {_op("RC_RDMA_WRITE_ONLY"), _op("RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE")}
SENDS = {SEND_FIRST, SEND_MIDDLE} | SEND_ENDS | SEND_ONLYS
RC_DATA = SENDS | {WRITE_FIRST, WRITE_MIDDLE} | WRITE_ENDS | WRITE_ONLYS
ACK = _op("RC_ACKNOWLEDGE")
CM_SEND = _op("UD_SEND_ONLY")
CNP = _op("CNP")
# opcodes RTRS never uses on its QPs (docs/PROTOCOL.md#opcodes-and-extension-headers)
FOREIGN = {_op(n) for n in ("RC_RDMA_READ_REQUEST", "RC_RDMA_READ_RESPONSE_FIRST",
                            "RC_RDMA_READ_RESPONSE_MIDDLE", "RC_RDMA_READ_RESPONSE_LAST",
                            "RC_RDMA_READ_RESPONSE_ONLY", "RC_COMPARE_SWAP", "RC_FETCH_ADD",
                            "RC_ATOMIC_ACKNOWLEDGE")}
# AETH syndrome bits 6..5: 11 NAK, 01 RNR NAK (docs/PROTOCOL.md#opcodes-and-extension-headers)
AETH_NAK, AETH_RNR = 0x60, 0x20


def _opcode_offsets():
    """opcode -> (extension bytes, RETH offset, ImmDt offset, IETH offset) after the BTH."""
    table = {}
    for opcode, (_name, chain) in ib.OPCODES.items():
        where, size = {}, 0
        for header in chain:
            where[header] = size
            size += plan(header).size
        table[opcode] = (size, where.get(ib.RETH), where.get(ib.ImmDt), where.get(ib.IETH))
    return table


OPCODE_OFFSETS = _opcode_offsets()


class Analyzer(MessageInterpreter):
    """Feed frames with ``feed()``; ``close()`` returns the Analysis."""

    def __init__(self, keep_messages=False, queue_depth=None):
        self.keep_messages = keep_messages
        self.forced_queue_depth = queue_depth
        self.messages = []
        self.sessions = {}          # paths_uuid -> Session (None key: inferred sessions)
        self.paths = {}             # sess_uuid or (client, server) -> Path
        self.streams = {}           # (dst address, dest QP) -> Stream
        self.endpoints = {}         # (dst address, dest QP) -> (Connection, client_to_server)
        self.anomalies = []
        self.cm = CmTracker(self)
        self.guesses = {}           # Path -> MemBitsGuess (handshake missing)
        self.addr_cache = {}
        self.frames = 0
        self.ib_frames = 0
        self.malformed = 0
        self.first_ts = self.last_ts = None
        self.link_type = None
        self.link_types = set()
        self.unattributed = []      # (stream, imm type) of heartbeats on unknown streams
        self.unmatched_responses = 0
        self.partial_messages = 0
        self.cnps = 0
        self.frame = None           # the frame being fed
        self.closed = False
        self.completed = None       # (frame, Message, is_send) of the last complete message

    # -- model helpers used by the CM tracker ------------------------------

    def text(self, raw):
        text = self.addr_cache.get(raw)
        if text is None:
            text = self.addr_cache[raw] = address_text(raw)
        return text

    def anomaly(self, frame, kind, detail):
        self.anomalies.append({"frame": frame, "kind": kind, "detail": detail})

    def path_for(self, sess_uuid, paths_uuid, client, server, names=None):
        """The path of a conn_req; ``names``: (client, server) as the RDMA CM header
        gives them, else the packet's addresses."""
        path = self.paths.get(sess_uuid)
        if path is None:
            client_name, server_name = names or (self.text(client), self.text(server))
            path = self.paths[sess_uuid] = Path(sess_uuid, paths_uuid=paths_uuid,
                                                client=client_name, server=server_name)
            path.client_raw, path.server_raw = client, server
            session = self.sessions.get(paths_uuid)
            if session is None:
                session = self.sessions[paths_uuid] = Session(paths_uuid)
            session.paths.append(path)
            path.session = session
        return path

    def inferred_path(self, client, server):
        """The path of a QP pair whose handshake is not in the capture
        (docs/PROTOCOL.md#captures-that-start-mid-session)."""
        key = (client, server)
        path = self.paths.get(key)
        if path is None:
            for known in self.paths.values():  # a handshake seen for the same endpoints
                if known.client_raw == client \
                        and known.server_raw == server:
                    return known
            path = self.paths[key] = Path(None, client=self.text(client),
                                          server=self.text(server))
            path.client_raw, path.server_raw = client, server
            session = Session(None)
            self.sessions[("inferred",) + key] = session
            session.paths.append(path)
            path.session = session
            if self.forced_queue_depth:
                self.set_queue_depth(path, self.forced_queue_depth)
            else:
                path.queue_depth_inferred = True
                self.guesses[path] = MemBitsGuess()
        return path

    def set_queue_depth(self, path, queue_depth):
        path.queue_depth = queue_depth
        path.mem_bits = mem_bits(queue_depth) if queue_depth else None
        self.guesses.pop(path, None)

    def bind_connection(self, conn):
        """After a REP: packets to the server QP are client→server and vice versa.

        The REQ's starting PSN is the first PSN of the server→client stream and
        the REP's that of the client→server stream (seen in the Linux 6.1 captures).
        """
        path = conn.path
        for addr, qpn, c2s, psn in ((path.server_raw, conn.server_qpn, True, conn.rep_psn),
                                    (path.client_raw, conn.client_qpn, False, conn.req_psn)):
            key = (addr, qpn)
            self.endpoints[key] = (conn, c2s)
            stream = self.streams.get(key)
            if stream is None or stream.conn is not conn:
                stream = self.new_stream(key, None, addr, qpn, self.frame)
            stream.conn, stream.client_to_server, stream.next_psn = conn, c2s, psn

    def new_stream(self, key, src, dst, dqpn, frame):
        stream = self.streams[key] = Stream(key, src, dst, dqpn)
        stream.first_frame = frame
        return stream

    def record(self, frame, ts, src, dst, qpn, conn, msg, fields, rnbd=None, path=None):
        """A message record; ``path`` when there is no connection (no handshake seen).
        The path's sess_uuid, client and server tell its session apart from others
        between the same hosts."""
        if not self.keep_messages:
            return None
        if path is None and conn is not None:
            path = conn.path
        rec = {"frame": frame, "time": ts, "src": self.text(src), "dst": self.text(dst),
               "qpn": qpn, "cid": conn.cid if conn is not None else None, "msg": msg,
               "fields": fields, "rnbd": rnbd, "paired_frame": None, "latency": None,
               "sess_uuid": path.sess_uuid if path is not None else None,
               "client": path.client if path is not None else None,
               "server": path.server if path is not None else None}
        self.messages.append(rec)
        return rec

    # -- per frame -------------------------------------------------------------

    def frame_seen(self, frame, ts, link_type):
        self.frame = frame
        self.frames += 1
        if self.first_ts is None:
            self.first_ts = ts
            self.link_type = link_type
        if link_type not in self.link_types:
            self.link_types.add(link_type)
        self.last_ts = ts

    def feed(self, frame, ts, buf, start, end, link_type):
        self.frame_seen(frame, ts, link_type)
        loc = ib_offset(buf, start, end, link_type)
        if loc is None:
            return
        kind, off, ib_end, src, dst = loc
        self.ib_frames += 1
        if kind == "rocev1":
            bth = off + GRH_SIZE
        elif kind == "ib":
            bth = off + LRH_SIZE + (GRH_SIZE if buf[off + 1] & 3 == ib.LNH_IBA_GLOBAL else 0)
        else:
            bth = off
        if bth + BTH_SIZE + ICRC_SIZE > ib_end:
            self.malformed += 1
            self.anomaly(frame, "truncated", "IB packet shorter than BTH + ICRC")
            return
        self.transport(frame, ts, buf, bth, ib_end, src, dst, *_bth(buf, bth))

    def transport(self, frame, ts, buf, bth, ib_end, src, dst, opcode, pad, dqpn, psn):
        """One IB packet whose BTH is decoded (the batch path enters here too)."""
        offsets = OPCODE_OFFSETS.get(opcode)
        if offsets is None:
            self.anomaly(frame, "unknown_opcode", "BTH opcode 0x%02x" % opcode)
            return
        ext, reth_o, imm_o, ieth_o = offsets
        hdr = bth + BTH_SIZE
        p_start = hdr + ext
        p_end = ib_end - ICRC_SIZE - pad
        if p_end < p_start:
            self.malformed += 1
            self.anomaly(frame, "truncated", "%s shorter than its headers"
                         % ib.OPCODE_NAMES.get(opcode, hex(opcode)))
            return
        if opcode in RC_DATA:
            self._rc(frame, ts, src, dst, dqpn, psn, opcode, buf, hdr, reth_o, imm_o, ieth_o,
                     p_start, p_end)
        elif opcode == ACK:
            self._ack(frame, dst, dqpn, _aeth(buf, hdr)[0])
        elif opcode == CM_SEND and dqpn == ib.GSI_QPN:
            self.cm.feed(frame, ts, src, dst, buf, p_start, p_end)
        elif opcode == CNP:
            self.cnps += 1
            stream = self.streams.get((dst, dqpn))
            if stream is not None and stream.conn is not None:
                stream.conn.path.transport["cnps"] += 1
        elif opcode in FOREIGN:
            stream = self.streams.get((dst, dqpn))
            if stream is not None and stream.conn is not None:
                self.anomaly(frame, "foreign_opcode", "%s on an RTRS QP"
                             % ib.OPCODE_NAMES[opcode])

    def _ack(self, frame, dst, dqpn, syndrome):
        """ACKs are counted per stream (the path's total is summed at the end);
        NAKs are events."""
        stream = self.streams.get((dst, dqpn))
        if stream is None:
            return
        stream.acks += 1
        path = stream.path
        if path is None:
            return
        kind = syndrome & 0x60
        if kind == AETH_NAK:
            path.transport["naks"] += 1
            self.anomaly(frame, "nak", "AETH NAK syndrome 0x%02x" % syndrome)
        elif kind == AETH_RNR:
            path.transport["rnr_naks"] += 1

    def _rc(self, frame, ts, src, dst, dqpn, psn, opcode, buf, hdr, reth_o, imm_o, ieth_o,
            p_start, p_end):
        key = (dst, dqpn)
        stream = self.streams.get(key)
        if stream is None:
            stream = self.new_stream(key, src, dst, dqpn, frame)
        elif stream.src is None:
            stream.src = src
        stream.last_frame = frame
        expected = stream.next_psn
        status = stream.check_psn(psn)
        if status == "duplicate":
            if stream.path is not None:
                stream.path.transport["retransmissions"] += 1
            return
        if status == "gap":
            self.anomaly(frame, "psn_gap", "QP 0x%x: PSN %d where %d was expected"
                         % (dqpn, psn, expected))
            stream.message = None
            stream.synced = False  # the gap is reported; what follows may be partial
        path = stream.path
        if path is not None:  # fresh traffic: establishes a connection without RTU
            self.cm.rc_traffic(path, stream.conn, stream.client_to_server, frame, ts)
        reth = _reth(buf, hdr + reth_o) if reth_o is not None else None
        if opcode == SEND_FIRST or opcode == WRITE_FIRST:
            stream.synced = True
            stream.message = Message(frame, ts, SEND_LIMIT if opcode in SENDS else HEAD_LIMIT,
                                     reth)
            stream.message.add(buf, p_start, p_end)
            return
        if opcode == SEND_MIDDLE or opcode == WRITE_MIDDLE:
            if stream.message is not None:
                stream.message.add(buf, p_start, p_end)
            return
        if opcode in SEND_ONLYS or opcode in WRITE_ONLYS:
            stream.synced = True
            msg = Message(frame, ts, SEND_LIMIT if opcode in SENDS else HEAD_LIMIT, reth)
            msg.add(buf, p_start, p_end)
        else:
            msg = stream.message
            if msg is not None:
                msg.add(buf, p_start, p_end)
            elif stream.synced:
                self.anomaly(frame, "partial_message", "last packet without its first")
            else:  # the capture started inside this message
                self.partial_messages += 1
        stream.message = None
        imm = _imm(buf, hdr + imm_o)[0] if imm_o is not None else None
        ieth = _ieth(buf, hdr + ieth_o)[0] if ieth_o is not None else None
        self._complete(stream, opcode in SENDS, msg, imm, ieth, frame, ts)

    # -- end ---------------------------------------------------------------------

    def close(self):
        if self.closed:
            return self
        self.closed = True
        for stream in self.streams.values():
            if stream.path is not None:
                stream.path.transport["acks"] += stream.acks
        for stream, kind in self.unattributed:
            path = self._match_endpoints(stream)
            if path is not None:
                self._count_heartbeat(path, stream.src == path.client_raw, kind)
        for path in self.paths.values():
            for req in path.pending.values():
                self.anomaly(req.frame, "unanswered", "%s buf_id %s got no response"
                             % (req.op, req.buf_id))
        self.anomalies.sort(key=lambda a: a["frame"])
        return self

    def _match_endpoints(self, stream):
        for path in self.paths.values():
            ends = {path.client_raw, path.server_raw}
            if {stream.src, stream.dst} == ends:
                return path
        return None

    @property
    def rtrs_packets(self):
        return self.cm.rtrs_frames + sum(s.seen + s.acks for s in self.streams.values()
                                         if s.path is not None)


