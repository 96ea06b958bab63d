"""Connections, connect attempts and path state from the whole IB CM exchange
(docs/PROTOCOL.md#connection-management, docs/PROTOCOL.md#connect-reconnect-and-disconnect).

A REQ creates a connection (client QPN, starting PSN, conn_req: path and session
UUIDs, cid, recon_cnt) of the connect attempt of its recon_cnt: the client raises
recon_cnt once per attempt (rtrs-clt.c init_conns()).  A REP binds the QPs, so the
traffic that follows is attributed, but a connection is *established* only by the
RTU or by RC traffic: the client connects its cids one after another (create_cm()
waits for ESTABLISHED before the next REQ) and sends INFO_REQ only when all are up,
so the REQ of the next cid, or the first RC packet of the attempt, establishes the
connections that got their REP.  An attempt succeeds when all its cid_num
connections are established; it fails on a REJ from either side (with or without
RTRS data), on a DREQ before that, or when the next attempt starts.  The
attempts after the path was up once are reconnects: successes and failures are the
kernel's ``reconnects`` successful_cnt and fail_cnt (rtrs_clt_path_up(),
rtrs_clt_reconnect_work()).

CM state is keyed by (owner address, comm ID): a REQ, REP, REJ or DREQ sent again
with the same IDs is a retransmission, never a new attempt.  A teardown of a path
is one disconnect, started by the side whose DREQ comes first
(docs/PROTOCOL.md#one-teardown-one-disconnect).  The other side's DREQs on the same
path are its answer when that side had already sent a DREP for one of the first
side's DREQs (it saw the disconnect: rdma_disconnect() answers a received DREQ
with a DREP, and the server's close_path() work then disconnects its remaining
cids in cid order, DREQs of its own); they make the disconnect *crossed* only when
they come before any such DREP (both sides started before seeing the other's).
A DREQ whose REQ/REP precede the capture is attached to the path with the same
endpoints.

Path state over time: a path is up from the attempt that succeeded until a DREQ,
a new attempt, or a heartbeat loss; the down time is an outage when the client
tries to reconnect (or the heartbeats were lost), not when the path was simply
closed.  Heartbeats are lost when the kernel's timer would give up
(heartbeat.timer_fired, docs/PROTOCOL.md#heartbeats).
"""

import uuid
from collections import OrderedDict

import numpy as np

from ..capture.columns import P_DST_HI, P_DST_LO, P_START, P_STOP, X_SRC_HI, X_SRC_LO
from ..spec.constants import (
    RTRS_MAGIC, RTRS_MSG_NEW_RKEY_F, RTRS_PROTO_VER_MAJOR, errno_name,
)
from ..capture.links import address_text
from ..layout.plans import plan
from ..layout.wire import ENUMS, IP_SERVICE_ID_PREFIX, MGMT_CLASS_CM, RDMA_PS_IB
from .heartbeat import timer_fired
from .model import Attempt, Connection
from .other_rdma import OtherRdma

cm_attribute_ids = ENUMS["cm_attribute_ids"]
cm_rej_reasons = ENUMS["cm_rej_reasons"]
path_mtus = ENUMS["path_mtus"]

_mad = plan("MAD").reader("mgmt_class", "attribute_id")
_req = plan("CMReq").reader("local_comm_id", "service_id", "local_qpn", "starting_psn",
                          "path_mtu")
_rep = plan("CMRep").reader("local_comm_id", "remote_comm_id", "local_qpn", "starting_psn")
_rej = plan("CMRej").reader("local_comm_id", "remote_comm_id", "reason")
_rtu = plan("CMRtu").reader("local_comm_id", "remote_comm_id")
_dreq = plan("CMDreq").reader("local_comm_id", "remote_comm_id", "remote_qpn")
_drep = plan("CMDrep").reader("local_comm_id", "remote_comm_id")
_conn_req = plan("RtrsMsgConnReq")
_conn_rsp = plan("RtrsMsgConnRsp")
MAD_HDR = plan("MAD").size
PRIVATE_OFFSET = {"CMReq": plan("CMReq").size, "CMRep": plan("CMRep").size,
                  "CMRej": plan("CMRej").size}
CMA_HDR = plan("CmaIpHdr").size
PMTU_BYTES = {code: int(size) for code, size in path_mtus.items()}
REQ_ATTRIBUTE = next(attr for attr, name in cm_attribute_ids.items()
                     if name == "ConnectRequest")
MAX_DEFERRED = 64     # REQs of one unknown path kept deferred; more make it a path

_cma = plan("CmaIpHdr").reader("ip_version", "src_addr", "dst_addr")
_conn_req_magic = _conn_req.reader("magic")
_conn_rsp_magic = _conn_rsp.reader("magic")


def _flood_of_new_sessions(buf, packets, extra):
    """Columns of the MADs ``packets`` and ``extra`` (capture/columns.py): per MAD,
    whether it is an RTRS conn_req of the running protocol version behind an RDMA CM IP
    header, with its client (hi, lo), comm id and sess_uuid (two 64-bit halves)."""
    start = packets[:, P_START]
    body = start + MAD_HDR
    private = body + PRIVATE_OFFSET["CMReq"] + CMA_HDR
    whole = packets[:, P_STOP] - private >= _conn_req.size
    at = np.where(whole, start, 0)       # short MADs: read something harmless, rejected
    body, private = at + MAD_HDR, np.where(whole, private, 0)
    mad, req, conn_req = plan("MAD"), plan("CMReq"), _conn_req
    sid = req.column(np, buf, body, "service_id")
    ok = (whole & (mad.column(np, buf, at, "mgmt_class") == MGMT_CLASS_CM)
          & (mad.column(np, buf, at, "attribute_id") == REQ_ATTRIBUTE)
          & (sid >> 24 == IP_SERVICE_ID_PREFIX >> 24)
          & ((sid >> 16) & 0xFF != RDMA_PS_IB & 0xFF)
          & (conn_req.column(np, buf, private, "magic") == RTRS_MAGIC)
          & (conn_req.column(np, buf, private, "version") >> 8 == RTRS_PROTO_VER_MAJOR))
    uuid_at = private + conn_req.layout.field("sess_uuid").offset
    raw = buf[uuid_at[:, None] + np.arange(16)]
    return {"ok": ok, "src_hi": extra[:, X_SRC_HI], "src_lo": extra[:, X_SRC_LO],
            "comm": req.column(np, buf, body, "local_comm_id"),
            "sess": np.ascontiguousarray(raw).view(">u8").reshape(-1, 2).astype(np.int64)}


def _hash(a, b, c=0):
    """One int64 of int64 columns (wrapping): a collision only makes two keys look
    alike, which shortens a flood's run, never lengthens it."""
    return (a * np.int64(-7046029254386353131)) ^ (b * np.int64(7145902811939364889)) ^ c


def _keys(flood):
    """(comm id, session) hashes of flood REQs."""
    return (_hash(flood["src_hi"], flood["src_lo"], flood["comm"]),
            _hash(flood["sess"][:, 0], flood["sess"][:, 1]))


def _fresh_prefix(flood, known_sessions, known_comm_ids, block):
    """The length of the leading run of flood REQs whose comm id and session occur
    once in it and in no table (nor in the kept ``block``)."""
    comm, sess = _keys(flood)
    known_comm = np.array(known_comm_ids, dtype=np.int64).reshape(-1, 3)
    halves = np.frombuffer(b"".join(known_sessions), dtype=">u8").astype(np.int64)
    halves = halves.reshape(-1, 2)
    known_comm = _hash(known_comm[:, 0], known_comm[:, 1], known_comm[:, 2])
    known_sess = _hash(halves[:, 0], halves[:, 1])
    if block is not None:
        known_comm = np.concatenate((known_comm, block.comm))
        known_sess = np.concatenate((known_sess, block.sess))
    bad = ~flood["ok"]
    for keys, known in ((comm, known_comm), (sess, known_sess)):
        _, first = np.unique(keys, return_index=True)
        repeated = np.ones(len(keys), dtype=bool)
        repeated[first] = False
        bad |= repeated | np.isin(keys, known)
    stops = np.flatnonzero(bad)
    return int(stops[0]) if len(stops) else len(bad)


class _Block:
    """The last REQs of a flood, kept as they came: MADs first..last of a chunk."""

    def __init__(self, chunk, packets, first, last, flood, at):
        self.count = last - first
        self.frames = chunk.first_frame + np.arange(first, last)
        self.stamps = chunk.stamps[first:last].copy()
        columns = packets[first:last]
        self.src = chunk.extra[first:last][:, [X_SRC_HI, X_SRC_LO]].tolist()
        self.dst = columns[:, [P_DST_HI, P_DST_LO]].tolist()
        self.data = [bytes(chunk.data[s:e]) for s, e in columns[:, [P_START, P_STOP]].tolist()]
        comm, sess = _keys(flood)
        self.comm, self.sess = comm[at:at + self.count], sess[at:at + self.count]

    def mads(self):
        for i in range(self.count):
            yield (int(self.frames[i]), int(self.stamps[i]), tuple(self.src[i]),
                   tuple(self.dst[i]), self.data[i], 0, len(self.data[i]))


def is_ip_service_id(sid):
    """True for RDMA CM IP port spaces (a CMA header precedes the REQ private data)."""
    return sid >> 24 == IP_SERVICE_ID_PREFIX >> 24 and (sid >> 16) & 0xFF != RDMA_PS_IB & 0xFF


def is_conn_req(payload):
    return len(payload) >= _conn_req.size and _conn_req_magic(payload, 0)[0] == RTRS_MAGIC


def is_conn_rsp(payload):
    return len(payload) >= _conn_rsp.size and _conn_rsp_magic(payload, 0)[0] == RTRS_MAGIC

_HANDLERS = {"ConnectRequest": "req", "ConnectReject": "rej", "ConnectReply": "rep",
             "ReadyToUse": "rtu", "DisconnectRequest": "dreq", "DisconnectReply": "drep",
             "MsgRcptAck": "mra"}
ATTR = {attr: _HANDLERS[name] for attr, name in cm_attribute_ids.items() if name in _HANDLERS}


def _cma_names(buf, off):
    """The IP addresses of the RDMA CM header: what the user typed, also on native IB
    and RoCEv1 where the packet only shows LIDs or GIDs
    (docs/PROTOCOL.md#rdma-cm-service-id-and-ip-header)."""
    version, src, dst = _cma(buf, off)
    if version == 4:
        return address_text(src[12:]), address_text(dst[12:])
    return address_text(src), address_text(dst)


def _side(path, sender):
    return "client" if sender == path.client_raw else "server"


class CmTracker:
    """Feeds CM MADs into the analyzer's model (``an`` is the Analyzer).

    Besides ``feed()``, the analyzer calls ``rc_traffic()`` for RC packets with a new
    PSN on a stream of a known path and ``heartbeat()`` for each heartbeat message;
    ``finish()`` settles what only the end of the capture tells.
    """

    def __init__(self, an):
        self.an = an
        self.by_comm_id = OrderedDict()   # (owner address, comm id) -> Connection
        self.cm_retransmissions = 0
        self.rtrs_frames = 0   # MADs of RTRS connections
        self.unclaimed = OrderedDict()   # REQs without RTRS magic, in case an RTRS server answers
        self.requested = OrderedDict()  # sess_uuid -> REQs of a path not known yet (_defer)
        self.requested_ids = {}  # (client address, comm id) -> sess_uuid of such a REQ
        self.block = None      # the last REQs of a flood, not deferred yet (_Block)
        self.orphans = OrderedDict()     # (sender, comm id) of a DREQ without its REQ -> its path
        self.unattached = []   # DREQs whose path was not known yet: (frame, ts, src, dst)
        self.others = OtherRdma(an)   # connections of other protocols (other_rdma.py)
        self.finished = False

    def feed(self, frame, ts, src, dst, buf, off, end):
        """Decode one MAD at buf[off:end]; returns what it belongs to (Connection or
        Path), or None when it is no RTRS CM message."""
        if self.block is not None:
            self._expand()
        if end - off < MAD_HDR:
            self.an.anomaly(frame, "truncated_mad", "%d bytes" % (end - off))
            return None
        mgmt_class, attr = _mad(buf, off)
        if mgmt_class != MGMT_CLASS_CM or attr not in ATTR:
            return None
        body = off + MAD_HDR
        handler = getattr(self, "_" + ATTR[attr])
        known = handler(frame, ts, src, dst, buf, body, end)
        if known is not None:
            self.rtrs_frames += 1
        return known

    def requests_in_bulk(self, chunk, packets, first, last):
        """How many MADs from ``first`` are taken here at once: the head of a flood of
        REQs that each open a session of their own.  Fed one by one, each would be
        deferred (_defer) and pushed out of the full table by the next ones before
        anything could name it: so the flood's last table's worth is kept as a block,
        deferred only when something else comes (``_expand``), and the others are
        counted (RTRS frames, CM evictions).  The same result as feeding them one by
        one: they must be RTRS conn_reqs of the running version (after an RDMA CM IP
        header) whose comm ids and sessions occur once and in no table."""
        size = self.an.bounds.size["cm"]
        if last - first < size:
            return 0
        flood = _flood_of_new_sessions(chunk.buf, packets[first:last], chunk.extra[first:last])
        known = [uuid.UUID(key).bytes for key in list(self.an.paths) + list(self.requested)
                 if isinstance(key, str)]
        comm_known = [(src[0], src[1], comm) for (src, comm) in
                      list(self.by_comm_id) + list(self.requested_ids)]
        count = _fresh_prefix(flood, known, comm_known, self.block)
        if count < size:
            return 0
        dropped = self.block.count if self.block is not None else 0
        self.rtrs_frames += count - size + dropped
        self.an.bounds.evict("cm", count - size + dropped + len(self.requested))
        self.requested.clear()       # the flood pushes out every deferred REQ
        self.requested_ids.clear()
        self.block = _Block(chunk, packets, first + count - size, first + count, flood,
                            count - size)
        return count

    def _expand(self):
        """The kept REQs of a flood, deferred one by one (something else came)."""
        block, self.block = self.block, None
        for frame, stamp, src, dst, data, start, end in block.mads():
            self.feed(frame, stamp / 1e9, src, dst, data, start, end)

    def _put(self, table, key, value):
        """``table[key] = value`` in a table of at most the "cm" limit of entries
        (rtrs_scapy/spec/limits.py): the oldest entry goes, counted."""
        table[key] = value
        if len(table) > self.an.bounds.size["cm"]:
            table.popitem(last=False)
            self.an.bounds.evict("cm")

    def forget(self, path):
        """A path evicted by the analyzer: its connections leave the CM tables."""
        for conn in path.connections:
            for key in ((path.client_raw, conn.client_comm_id),
                        (path.server_raw, conn.server_comm_id)):
                if self.by_comm_id.get(key) is conn:
                    del self.by_comm_id[key]

    # -- hooks of the analyzer ------------------------------------------------

    def rc_traffic(self, path, conn, client_to_server, frame, ts):
        """An RC packet with a new PSN on a stream of ``path`` (``conn``: its connection
        when the handshake was seen).  The first one of a connect attempt establishes
        the connections whose RTU is not in the capture."""
        path.last_traffic[client_to_server] = ts
        if conn is not None and conn.attempt is not None and conn.attempt.outcome is None:
            for replied in list(conn.attempt.connections):
                self._established(replied, frame, ts)

    def heartbeat(self, path, frame, ts):
        """An HB_MSG or HB_ACK message on ``path``."""
        path.last_heartbeat = (frame, ts)

    def finish(self):
        """The end of the capture: heartbeats that stopped on a path still up, and
        DREQs that came before any sign of their path."""
        if self.finished:
            return
        self.finished = True
        if self.an.last_ts is not None:
            for path in list(self.an.paths.values()):
                self.heartbeats_lost(path, self.an.last_ts)
        for frame, ts, src, dst in self.unattached:
            path = self._path_by_endpoints(src, dst)
            if path is not None:
                path.disconnects.append({"frame": frame, "time": ts,
                                         "initiator": _side(path, src), "crossed": False,
                                         "answered_by": None, "answer_frame": None})
                path.disconnects.sort(key=lambda d: d["frame"])

    # -- REQ / REP / REJ ----------------------------------------------------

    def _req(self, frame, ts, src, dst, buf, body, end):
        if end - body < PRIVATE_OFFSET["CMReq"]:
            self.an.anomaly(frame, "truncated_mad", "CM REQ")
            return None
        comm_id, sid, qpn, psn, pmtu = _req(buf, body)
        if (src, comm_id) in self.by_comm_id:
            self.cm_retransmissions += 1
            return self.by_comm_id[(src, comm_id)]
        if (src, comm_id) in self.requested_ids:
            self.cm_retransmissions += 1
            self.rtrs_frames += 1
            return None
        private = body + PRIVATE_OFFSET["CMReq"]
        names = None     # the RDMA CM header, made text when the path is made
        if is_ip_service_id(sid):
            if private + CMA_HDR <= end:
                names = bytes(buf[private:private + CMA_HDR])
            private += CMA_HDR
        data = bytes(buf[private:end])    # the private data: whose protocol it is
        if len(data) < _conn_req.size:
            return None
        fields = _conn_req.decode(data, 0, len(data))
        req = (frame, ts, src, dst, fields, sid, qpn, psn, pmtu, comm_id, names)
        if not is_conn_req(data):
            # another protocol's (docs/PROTOCOL.md#other-rdma-protocols), unless an RTRS
            # server answers it (then: a bad magic, docs/PROTOCOL.md#conn_rsp)
            self._put(self.unclaimed, (src, comm_id), req)
            self.others.requested(frame, src, dst, sid, qpn, psn, comm_id, data)
            return None
        if fields["version"] >> 8 != RTRS_PROTO_VER_MAJOR:
            self.an.anomaly(frame, "bad_version", "conn_req version %d.%d, the server "
                            "speaks %d.x" % (fields["version"] >> 8, fields["version"] & 0xFF,
                                             RTRS_PROTO_VER_MAJOR))
        if fields["sess_uuid"] in self.an.paths:
            return self._connection(*req)
        self._defer(req)
        return None

    def _defer(self, req):
        """The REQ of a path not known yet stays a CM transaction until a reply, a
        reject or a disconnect names it, or the capture ends: a flood of REQs that
        nobody answers costs a bounded table entry each, not a path
        (rtrs_scapy/spec/limits.py, "cm")."""
        sess = req[4]["sess_uuid"]
        self.rtrs_frames += 1
        waiting = self.requested.get(sess)
        if waiting is None:
            waiting = self.requested[sess] = []
        else:                                  # the table is kept least recent first
            self.requested.move_to_end(sess)
        waiting.append(req)
        self.requested_ids[(req[2], req[9])] = sess
        if len(self.requested) > self.an.bounds.size["cm"]:
            for forgotten in self.requested.popitem(last=False)[1]:
                self.requested_ids.pop((forgotten[2], forgotten[9]), None)
            self.an.bounds.evict("cm")
        if len(waiting) > MAX_DEFERRED:
            self.materialize(waiting[-1][0])

    def materialize(self, frame=None):
        """The deferred REQs up to ``frame`` (all of them without) become connections,
        in capture order."""
        if self.block is not None:
            self._expand()
        reqs = sorted((req for waiting in self.requested.values() for req in waiting
                       if frame is None or req[0] <= frame), key=lambda req: req[0])
        for req in reqs:
            waiting = self.requested[req[4]["sess_uuid"]]
            waiting.remove(req)
            if not waiting:
                del self.requested[req[4]["sess_uuid"]]
            del self.requested_ids[(req[2], req[9])]
            self._connection(*req)

    def _known(self, key):
        """The connection of (address, comm id): known, or a deferred REQ made real."""
        conn = self.by_comm_id.get(key)
        if conn is None and key in self.requested_ids:
            sess = self.requested_ids[key]
            self.materialize(max(req[0] for req in self.requested[sess]))
            conn = self.by_comm_id.get(key)
        return conn

    def _connection(self, frame, ts, src, dst, fields, sid, qpn, psn, pmtu, comm_id, names):
        """A new connection from a REQ's conn_req."""
        path = self.an.path_for(fields["sess_uuid"], fields["paths_uuid"], src, dst,
                                names and _cma_names(names, 0))
        if path is None:       # the paths are full (rtrs_scapy/spec/limits.py): not tracked
            return None
        path.port = sid & 0xFFFF
        path.protocol_version = "%d.%d" % (fields["version"] >> 8, fields["version"] & 0xFF)
        path.cid_num = fields["cid_num"]
        if path.up is None:
            path.up = False  # a handshake: the path is up once an attempt gets through
        attempt = self._attempt(path, fields["recon_cnt"], frame, ts)
        for earlier in list(attempt.connections):  # the client moved on: they are up
            self._established(earlier, frame, ts)
        if fields["cid"] == 0:
            self.an.abort_pending(path)  # a (re)connect: nothing older is answered
        path.last_recon_cnt = max(path.last_recon_cnt or 0, fields["recon_cnt"])
        path.state = "connecting"
        conn = Connection(fields["cid"], client_qpn=qpn, recon_cnt=fields["recon_cnt"],
                          first_conn=fields["first_conn"], req_psn=psn,
                          client_comm_id=comm_id, path_mtu=PMTU_BYTES.get(pmtu),
                          req_frame=frame, path=path, attempt=attempt)
        attempt.connections.append(conn)
        path.connections.append(conn)
        self._put(self.by_comm_id, (src, comm_id), conn)
        self.an.record(frame, ts, src, dst, 1, conn, "conn_req", fields)
        return conn

    def _answered(self, dst, remote_id, has_conn_rsp):
        """The connection a REP/REJ answers; a REQ without RTRS magic that an RTRS
        server answered (conn_rsp in the private data) becomes one, with an anomaly."""
        conn = self._known((dst, remote_id))
        if conn is not None or not has_conn_rsp:
            return conn
        req = self.unclaimed.pop((dst, remote_id), None)
        if req is None:
            return None
        fields = req[4]
        self.others.claimed(dst, remote_id)
        self.an.anomaly(req[0], "bad_magic", "conn_req magic 0x%04x (RTRS is 0x%04x); "
                        "the RTRS server answered it" % (fields["magic"], RTRS_MAGIC))
        return self._connection(*req)

    def _rep(self, frame, ts, src, dst, buf, body, end):
        if end - body < PRIVATE_OFFSET["CMRep"]:
            self.an.anomaly(frame, "truncated_mad", "CM REP")
            return None
        comm_id, remote_id, qpn, psn = _rep(buf, body)
        private = body + PRIVATE_OFFSET["CMRep"]
        data = bytes(buf[private:min(end, private + _conn_rsp.size)])
        fields = _conn_rsp.decode(data, 0, len(data)) if is_conn_rsp(data) else {}
        conn = self._answered(dst, remote_id, bool(fields))
        if conn is None:    # another protocol's, or a connection not seen requested
            self.others.replied(frame, src, dst, comm_id, remote_id, qpn, psn)
            return None
        if conn.server_comm_id is not None:
            self.cm_retransmissions += 1
            return conn
        conn.server_qpn, conn.rep_psn, conn.server_comm_id = qpn, psn, comm_id
        self._put(self.by_comm_id, (src, comm_id), conn)
        path = conn.path
        record = fields
        if fields.get("errno"):
            record = dict(fields, **self._rejected(frame, ts, conn, "server", fields["errno"]))
        elif fields:
            path.queue_depth = fields["queue_depth"]
            path.queue_depth_inferred = False
            path.max_io_size = fields["max_io_size"]
            path.max_hdr_size = fields["max_hdr_size"]
            path.always_invalidate = bool(fields["flags"] & RTRS_MSG_NEW_RKEY_F)
            self.an.set_queue_depth(path, fields["queue_depth"])
            conn.state = "replied"
            self.an.bind_connection(conn)
        self.an.record(frame, ts, src, dst, 1, conn, "conn_rsp", record)
        return conn

    def _rej(self, frame, ts, src, dst, buf, body, end):
        if end - body < PRIVATE_OFFSET["CMRej"]:
            self.an.anomaly(frame, "truncated_mad", "CM REJ")
            return None
        comm_id, remote_id, reason = _rej(buf, body)
        private = body + PRIVATE_OFFSET["CMRej"]
        data = bytes(buf[private:min(end, private + _conn_rsp.size)])
        fields = _conn_rsp.decode(data, 0, len(data)) if is_conn_rsp(data) else {}
        # the sender's own comm ID: a client giving up (Timeout), a server after its REP
        conn = self._known((src, comm_id)) if comm_id else None
        if conn is None:
            conn = self._answered(dst, remote_id, bool(fields))
        if conn is None:
            if self.others.cm(frame, src, dst, comm_id, remote_id, "rej") is not None:
                return None
            return self._orphan_rej(frame, ts, src, dst, fields, reason)
        sender = _side(conn.path, src)
        if conn.rejected_by == sender:
            self.cm_retransmissions += 1
            return conn
        reject = self._rejected(frame, ts, conn, sender, fields.get("errno"), reason)
        self.an.record(frame, ts, src, dst, 1, conn, "conn_rej", dict(fields, **reject))
        return conn

    def _orphan_rej(self, frame, ts, src, dst, fields, reason):
        """A REJ whose REQ precedes the capture: a reject of the path with those
        endpoints, when there is one."""
        path = self._path_by_endpoints(src, dst)
        if path is None:
            return None
        reject = self._reject_record(frame, ts, _side(path, src), fields.get("errno"), reason,
                                     None)
        path.rejects.append(reject)
        self.an.record(frame, ts, src, dst, 1, None, "conn_rej", dict(fields, **reject),
                       path=path)
        return path

    def _rejected(self, frame, ts, conn, sender, errno, reason=None):
        """A REJ (or a REP carrying an errno): the connection and its attempt failed."""
        conn.state = "rejected"
        conn.rejected_by = sender
        reject = self._reject_record(frame, ts, sender, errno, reason, conn.req_frame)
        conn.path.rejects.append(reject)
        self._failed(conn, frame, ts)
        return reject

    @staticmethod
    def _reject_record(frame, ts, sender, errno, reason, attempt_frame):
        reason_name = None if reason is None else cm_rej_reasons.get(reason, "reason %d" % reason)
        return {"frame": frame, "time": ts, "sender": sender, "reason": reason,
                "reason_name": reason_name, "errno": errno or None,
                "name": errno_name(errno) if errno else reason_name,
                "attempt_frame": attempt_frame}

    # -- RTU / DREQ / DREP ----------------------------------------------------

    def _rtu(self, frame, ts, src, dst, buf, body, end):
        conn = self._by_ids("CMRtu", _rtu, src, dst, buf, body, end)
        if conn is not None:
            self._established(conn, frame, ts)
        elif end - body >= plan("CMRtu").size:
            self.others.cm(frame, src, dst, *_rtu(buf, body), "rtu")
        return conn

    def _mra(self, frame, ts, src, dst, buf, body, end):
        return None

    def _by_ids(self, cls, read_ids, src, dst, buf, body, end):
        """The connection a message with (local, remote) comm IDs belongs to."""
        if end - body < plan(cls).size:
            return None
        local_id, remote_id = read_ids(buf, body)
        return self._known((src, local_id)) or self._known((dst, remote_id))

    def _dreq(self, frame, ts, src, dst, buf, body, end):
        if end - body < plan("CMDreq").size:
            return None
        local_id, remote_id, remote_qpn = _dreq(buf, body)
        conn = self._known((src, local_id)) or self._known((dst, remote_id))
        if conn is None:
            if self.others.cm(frame, src, dst, local_id, remote_id, "dreq") is not None:
                return None
            return self._orphan_dreq(frame, ts, src, dst, local_id, remote_qpn)
        path = conn.path
        initiator = _side(path, src)
        if initiator in conn.dreq_from:
            self.cm_retransmissions += 1
            return conn
        conn.dreq_from += (initiator,)
        conn.state = "disconnected"
        self.an.connection_closed(conn)
        self._failed(conn, frame, ts)
        self._disconnect(path, frame, ts, initiator)
        path.state = "disconnecting"
        self.an.record(frame, ts, src, dst, 1, conn, "disconnect",
                       {"initiator": initiator, "cm": "DREQ"})
        return conn

    def _orphan_dreq(self, frame, ts, src, dst, local_id, remote_qpn):
        """A DREQ of a connection whose REQ/REP precede the capture; not the path's when
        the QP it names carried another protocol's traffic
        (docs/PROTOCOL.md#other-rdma-protocols)."""
        if self.an.foreign_stream(dst, remote_qpn):
            return None
        key = (src, local_id)
        if key in self.orphans:
            self.cm_retransmissions += 1
            return self.orphans[key]
        path = self._path_by_endpoints(src, dst)
        self._put(self.orphans, key, path)
        if path is None:
            if len(self.unattached) < self.an.bounds.size["cm"]:
                self.unattached.append((frame, ts, src, dst))
            else:
                self.an.bounds.refuse("cm")
            return None
        initiator = _side(path, src)
        self._disconnect(path, frame, ts, initiator)
        self.an.record(frame, ts, src, dst, 1, None, "disconnect",
                       {"initiator": initiator, "cm": "DREQ"}, path=path)
        return path

    def _drep(self, frame, ts, src, dst, buf, body, end):
        if end - body < plan("CMDrep").size:
            return None
        local_id, remote_id = _drep(buf, body)
        known = self._known((src, local_id)) or self._known((dst, remote_id))
        if known is None and self.others.cm(frame, src, dst, local_id, remote_id,
                                            "drep") is not None:
            return None
        known = known or self.orphans.get((dst, remote_id))
        path = known.path if isinstance(known, Connection) else known
        if path is not None and path.teardown is not None:
            side = _side(path, src)     # it saw the disconnect
            if side not in path.teardown["drep"]:
                path.teardown["drep"] += (side,)
        if isinstance(known, Connection):
            self.an.record(frame, ts, src, dst, 1, known, "disconnect", {"cm": "DREP"})
        elif known is not None:
            self.an.record(frame, ts, src, dst, 1, None, "disconnect", {"cm": "DREP"},
                           path=known)
        return known

    def _path_by_endpoints(self, a, b):
        """The latest path between these two addresses (with or without handshake)."""
        for path in reversed(list(self.an.paths.values())):
            if {path.client_raw, path.server_raw} == {a, b}:
                return path
        return None

    # -- attempts and path state ---------------------------------------------------

    def _attempt(self, path, recon_cnt, frame, ts):
        """The connect attempt a REQ belongs to (a new recon_cnt starts one)."""
        if path.attempts and path.attempts[-1].recon_cnt == recon_cnt:
            return path.attempts[-1]
        if path.attempts and path.attempts[-1].outcome is None:
            self._attempt_over(path.attempts[-1], "failed", frame, ts)  # given up
        reconnect = path.established_once or (recon_cnt or 0) > 1
        attempt = Attempt(path, recon_cnt, frame, ts, reconnect)
        path.attempts.append(attempt)
        if reconnect:
            path.reconnect_attempts += 1
        self.heartbeats_lost(path, ts)
        self._down(path, frame, ts, "reconnect")
        if path.down is not None:
            path.down["outage"] = True  # the client tries to get it back
        path.teardown = None
        return attempt

    def _established(self, conn, frame, ts):
        if conn.state != "replied":
            return
        conn.state = "established"
        conn.established_frame = frame
        attempt = conn.attempt
        if attempt is None or attempt.outcome is not None:
            return
        done = sum(1 for c in attempt.connections if c.state == "established")
        if done >= (conn.path.cid_num or 1):
            self._attempt_over(attempt, "established", frame, ts)

    def _failed(self, conn, frame, ts):
        attempt = conn.attempt
        if attempt is not None and attempt.outcome is None:
            self._attempt_over(attempt, "failed", frame, ts)

    def _attempt_over(self, attempt, outcome, frame, ts):
        attempt.outcome, attempt.end_frame, attempt.end_time = outcome, frame, ts
        path = attempt.path
        if outcome != "established":
            return
        if attempt.reconnect:
            path.reconnects += 1
        path.established_once = True
        path.up = True
        path.last_heartbeat = None
        path.last_traffic.clear()
        path.hb_epoch += 1
        down, path.down = path.down, None
        if down is not None and down["outage"]:
            path.outages.append({
                "down_frame": down["down_frame"], "down_time": down["down_time"],
                "up_frame": frame, "up_time": ts,
                "duration_s": round(ts - down["down_time"], 6), "cause": down["cause"]})

    def _down(self, path, frame, ts, cause, outage=False):
        path.hb_epoch += 1      # heartbeat gaps stop here
        if path.up is False:
            return
        path.up = False
        path.down = {"down_frame": frame, "down_time": ts, "cause": cause, "outage": outage}

    def _disconnect(self, path, frame, ts, initiator):
        """A DREQ of ``initiator``: the first of a teardown starts the path's one
        disconnect; the other side's first DREQ is its answer when it had already
        sent a DREP in this teardown, else the disconnect is crossed
        (docs/PROTOCOL.md#one-teardown-one-disconnect)."""
        self.heartbeats_lost(path, ts)
        self._down(path, frame, ts, initiator + "_disconnect")
        teardown = path.teardown
        if teardown is None:
            record = {"frame": frame, "time": ts, "initiator": initiator, "crossed": False,
                      "answered_by": None, "answer_frame": None}
            path.teardown = {"record": record, "dreq": (initiator,), "drep": ()}
            path.disconnects.append(record)
            return
        if initiator in teardown["dreq"]:
            return
        teardown["dreq"] += (initiator,)
        record = teardown["record"]
        record["answer_frame"] = frame
        if initiator in teardown["drep"]:
            record["answered_by"] = initiator
        else:
            record["crossed"] = True

    def heartbeats_lost(self, path, now):
        """Did the kernel's heartbeat timer fire on ``path`` before ``now``?  Only while
        the path is up (or known from IO alone), once per up period."""
        if path.up is False or path.last_heartbeat is None:
            return
        frame, last = path.last_heartbeat
        deadline = timer_fired(last, path.last_traffic, now)
        if deadline is None:
            return
        path.heartbeats_lost.append({"frame": frame, "last_time": last, "time": deadline})
        self._down(path, frame, deadline, "heartbeat_lost", outage=True)
