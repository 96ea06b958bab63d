"""Connections from the IB CM handshake (docs/PROTOCOL.md#connection-management,
docs/PROTOCOL.md#conn_req, docs/PROTOCOL.md#conn_rsp,
docs/PROTOCOL.md#connect-reconnect-and-disconnect).

REQ creates a connection (client QPN, starting PSN, conn_req: path and
session UUIDs, cid, recon_cnt), REP completes it (server QPN, conn_rsp: queue
depth, sizes, always_invalidate), REJ records the conn_rsp errno, DREQ/DREP
record who tore the path down.  CM state is keyed by (owner address, comm ID),
so retransmitted MADs (same IDs) are recognised
(docs/PROTOCOL.md#identifiers-comm-ids-qpns-and-starting-psns).
"""

from ..constants import RTRS_MAGIC, RTRS_MSG_NEW_RKEY_F, RTRS_PROTO_VER_MAJOR, errno_name
from ..fastpath.plan import plan
from ..layers.cm import (
    CM_MESSAGES, MAD, MGMT_CLASS_CM, PATH_MTU_BYTES, CmaIpHdr, CMDrep, CMDreq, CMRej, CMRep,
    CMReq, CMRtu, cm_rej_reasons, is_ip_service_id,
)
from ..layers.rtrs import RtrsMsgConnReq, RtrsMsgConnRsp, is_conn_req, is_conn_rsp
from .model import Connection
from .names import address_text

_mad = plan(MAD).reader("mgmt_class", "attribute_id")
_req = plan(CMReq).reader("local_comm_id", "service_id", "local_qpn", "starting_psn",
                          "path_mtu")
_rep = plan(CMRep).reader("local_comm_id", "remote_comm_id", "local_qpn", "starting_psn")
_rej = plan(CMRej).reader("local_comm_id", "remote_comm_id", "reason")
_rtu = plan(CMRtu).reader("local_comm_id", "remote_comm_id")
_dreq = plan(CMDreq).reader("local_comm_id", "remote_comm_id")
_drep = plan(CMDrep).reader("local_comm_id", "remote_comm_id")
_conn_req = plan(RtrsMsgConnReq)
_conn_rsp = plan(RtrsMsgConnRsp)
MAD_HDR = plan(MAD).size
PRIVATE_OFFSET = {CMReq: plan(CMReq).size, CMRep: plan(CMRep).size, CMRej: plan(CMRej).size}
CMA_HDR = plan(CmaIpHdr).size
MAX_UNCLAIMED = 1024  # bounded memory for non-RTRS CM traffic
PMTU_BYTES = PATH_MTU_BYTES

_cma = plan(CmaIpHdr).reader("ip_version", "src_addr", "dst_addr")


def _cma_names(buf, off):
    """The IP addresses of the RDMA CM header: what the user typed, also on native IB
    and RoCEv1 where the packet only shows LIDs or GIDs
    (docs/PROTOCOL.md#rdma-cm-service-id-and-ip-header)."""
    version, src, dst = _cma(buf, off)
    if version == 4:
        return address_text(src[12:]), address_text(dst[12:])
    return address_text(src), address_text(dst)


ATTR = {attr: cls.__name__[2:].lower() for attr, cls in CM_MESSAGES.items()}  # CMReq: "req"


class CmTracker:
    """Feeds CM MADs into the analyzer's model (``an`` is the Analyzer)."""

    def __init__(self, an):
        self.an = an
        self.by_comm_id = {}   # (owner address, comm id) -> Connection
        self.cm_retransmissions = 0
        self.rtrs_frames = 0   # MADs of RTRS connections
        self.unclaimed = {}    # REQs without RTRS magic, in case an RTRS server answers

    def feed(self, frame, ts, src, dst, buf, off, end):
        """Decode one MAD at buf[off:end]; returns its RTRS Connection or None."""
        if end - off < MAD_HDR:
            self.an.anomaly(frame, "truncated_mad", "%d bytes" % (end - off))
            return None
        mgmt_class, attr = _mad(buf, off)
        if mgmt_class != MGMT_CLASS_CM or attr not in ATTR:
            return None
        body = off + MAD_HDR
        handler = getattr(self, "_" + ATTR[attr])
        known = handler(frame, ts, src, dst, buf, body, end)
        if known:
            self.rtrs_frames += 1
        return known

    # -- REQ / REP / REJ ----------------------------------------------------

    def _req(self, frame, ts, src, dst, buf, body, end):
        if end - body < PRIVATE_OFFSET[CMReq]:
            self.an.anomaly(frame, "truncated_mad", "CM REQ")
            return None
        comm_id, sid, qpn, psn, pmtu = _req(buf, body)
        if (src, comm_id) in self.by_comm_id:
            self.cm_retransmissions += 1
            return self.by_comm_id[(src, comm_id)]
        private = body + PRIVATE_OFFSET[CMReq]
        names = None
        if is_ip_service_id(sid):
            if private + CMA_HDR <= end:
                names = _cma_names(buf, private)
            private += CMA_HDR
        data = bytes(buf[private:min(end, private + _conn_req.size)])
        if len(data) < _conn_req.size:
            return None
        fields = _conn_req.decode(data, 0, len(data))
        req = (frame, ts, src, dst, fields, sid, qpn, psn, pmtu, comm_id, names)
        if not is_conn_req(data):
            # not RTRS, unless an RTRS server answers it (then: a bad magic,
            # docs/PROTOCOL.md#conn_rsp)
            self.unclaimed[(src, comm_id)] = req
            if len(self.unclaimed) > MAX_UNCLAIMED:
                del self.unclaimed[next(iter(self.unclaimed))]
            return None
        if fields["version"] >> 8 != RTRS_PROTO_VER_MAJOR:
            self.an.anomaly(frame, "bad_version", "conn_req version %d.%d, the server "
                            "speaks %d.x" % (fields["version"] >> 8, fields["version"] & 0xFF,
                                             RTRS_PROTO_VER_MAJOR))
        return self._connection(*req)

    def _connection(self, frame, ts, src, dst, fields, sid, qpn, psn, pmtu, comm_id, names):
        """A new connection from a REQ's conn_req."""
        path = self.an.path_for(fields["sess_uuid"], fields["paths_uuid"], src, dst, names)
        path.port = sid & 0xFFFF
        path.protocol_version = "%d.%d" % (fields["version"] >> 8, fields["version"] & 0xFF)
        path.cid_num = fields["cid_num"]
        if fields["cid"] == 0:
            if path.established_once or fields["recon_cnt"] > 1:
                path.reconnect_attempts += 1
            self.an.abort_pending(path)  # a (re)connect: nothing older is answered
        path.last_recon_cnt = max(path.last_recon_cnt or 0, fields["recon_cnt"])
        path.state = "connecting"
        conn = Connection(fields["cid"], client_qpn=qpn, recon_cnt=fields["recon_cnt"],
                          first_conn=fields["first_conn"], req_psn=psn,
                          client_comm_id=comm_id, path_mtu=PMTU_BYTES.get(pmtu),
                          req_frame=frame, path=path)
        path.connections.append(conn)
        self.by_comm_id[(src, comm_id)] = conn
        self.an.record(frame, ts, src, dst, 1, conn, "conn_req", fields)
        return conn

    def _answered(self, dst, remote_id, has_conn_rsp):
        """The connection a REP/REJ answers; a REQ without RTRS magic that an RTRS
        server answered (conn_rsp in the private data) becomes one, with an anomaly."""
        conn = self.by_comm_id.get((dst, remote_id))
        if conn is not None or not has_conn_rsp:
            return conn
        req = self.unclaimed.pop((dst, remote_id), None)
        if req is None:
            return None
        fields = req[4]
        self.an.anomaly(req[0], "bad_magic", "conn_req magic 0x%04x (RTRS is 0x%04x); "
                        "the RTRS server answered it" % (fields["magic"], RTRS_MAGIC))
        return self._connection(*req)

    def _rep(self, frame, ts, src, dst, buf, body, end):
        if end - body < PRIVATE_OFFSET[CMRep]:
            self.an.anomaly(frame, "truncated_mad", "CM REP")
            return None
        comm_id, remote_id, qpn, psn = _rep(buf, body)
        private = body + PRIVATE_OFFSET[CMRep]
        data = bytes(buf[private:min(end, private + _conn_rsp.size)])
        fields = _conn_rsp.decode(data, 0, len(data)) if is_conn_rsp(data) else {}
        conn = self._answered(dst, remote_id, bool(fields))
        if conn is None:
            return None  # not a connection we saw requested (or not RTRS)
        if conn.server_comm_id is not None:
            self.cm_retransmissions += 1
            return conn
        conn.server_qpn, conn.rep_psn, conn.server_comm_id = qpn, psn, comm_id
        self.by_comm_id[(src, comm_id)] = conn
        path = conn.path
        if fields.get("errno"):
            self._rejected(frame, conn, fields["errno"])
        elif fields:
            path.queue_depth = fields["queue_depth"]
            path.queue_depth_inferred = False
            path.max_io_size = fields["max_io_size"]
            path.max_hdr_size = fields["max_hdr_size"]
            path.always_invalidate = bool(fields["flags"] & RTRS_MSG_NEW_RKEY_F)
            self.an.set_queue_depth(path, fields["queue_depth"])
            conn.state = "established"
            if conn.cid == 0:
                # a reconnect: the path was up before, or recon_cnt says so
                # (docs/PROTOCOL.md#connect-reconnect-and-disconnect)
                if path.established_once or (conn.recon_cnt or 0) > 1:
                    path.reconnects += 1
                path.established_once = True
            self.an.bind_connection(conn)
        self.an.record(frame, ts, src, dst, 1, conn, "conn_rsp", fields)
        return conn

    def _rej(self, frame, ts, src, dst, buf, body, end):
        if end - body < PRIVATE_OFFSET[CMRej]:
            self.an.anomaly(frame, "truncated_mad", "CM REJ")
            return None
        _comm_id, remote_id, reason = _rej(buf, body)
        private = body + PRIVATE_OFFSET[CMRej]
        data = bytes(buf[private:min(end, private + _conn_rsp.size)])
        fields = _conn_rsp.decode(data, 0, len(data)) if is_conn_rsp(data) else {}
        conn = self._answered(dst, remote_id, bool(fields))
        if conn is None:
            return None
        if conn.state == "rejected":
            self.cm_retransmissions += 1
            return conn
        errno = fields.get("errno")
        self._rejected(frame, conn, errno, reason)
        fields = dict(fields, reason=reason)
        self.an.record(frame, ts, src, dst, 1, conn, "conn_rej", fields)
        return conn

    def _rejected(self, frame, conn, errno, reason=None):
        conn.state = "rejected"
        if errno:
            name = errno_name(errno)
        else:
            name = cm_rej_reasons.get(reason, "reason %s" % reason)
        conn.path.rejects.append({"frame": frame, "errno": errno, "name": name})

    # -- RTU / DREQ / DREP ----------------------------------------------------

    def _rtu(self, frame, ts, src, dst, buf, body, end):
        """The REP already bound the QPs; an RTU only marks the MAD as RTRS."""
        return self._by_ids(CMRtu, _rtu, src, dst, buf, body, end)

    def _mra(self, frame, ts, src, dst, buf, body, end):
        return None

    def _by_ids(self, cls, read_ids, src, dst, buf, body, end):
        """The connection a message with (local, remote) comm IDs belongs to."""
        if end - body < plan(cls).size:
            return None
        local_id, remote_id = read_ids(buf, body)
        return self.by_comm_id.get((src, local_id)) or self.by_comm_id.get((dst, remote_id))

    def _dreq(self, frame, ts, src, dst, buf, body, end):
        conn = self._by_ids(CMDreq, _dreq, src, dst, buf, body, end)
        if conn is None:
            return None
        if conn.state == "disconnected":
            self.cm_retransmissions += 1
            return conn
        conn.state = "disconnected"
        path = conn.path
        initiator = "client" if src == path.client_raw else "server"
        if path.state != "disconnecting":
            path.state = "disconnecting"
            path.disconnects.append({"frame": frame, "initiator": initiator})
        self.an.record(frame, ts, src, dst, 1, conn, "disconnect",
                       {"initiator": initiator, "cm": "DREQ"})
        return conn

    def _drep(self, frame, ts, src, dst, buf, body, end):
        conn = self._by_ids(CMDrep, _drep, src, dst, buf, body, end)
        if conn is not None:
            self.an.record(frame, ts, src, dst, 1, conn, "disconnect", {"cm": "DREP"})
        return conn
