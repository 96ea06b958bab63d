"""The IB CM side of a crafted path: REQ/REP/RTU per cid and the INFO exchange,
rejects, and the DREQ/DREP of a disconnect (docs/PROTOCOL.md#connection-management,
docs/PROTOCOL.md#connect-reconnect-and-disconnect).  A mixin of SessionCrafter,
which owns the clock, the hosts and the packet log."""

import errno as _errno

from ..spec.constants import RTRS_MAGIC, RTRS_MSG_NEW_RKEY_F, RTRS_PROTO_VER, errno_name
from ..layers.cm import (
    MAD, CmaIpHdr, CMDrep, CMDreq, CMRej, CMRep, CMReq, CMRtu, cm_attribute_ids, msg_kinds,
    service_id,
)
from ..layers.ib import BTH, DETH, GSI_QPN, opcode_value
from ..layers.base import field_writer
from ..layers.rtrs import RtrsMsgConnReq, RtrsMsgConnRsp, RtrsMsgInfoReq, RtrsMsgInfoRsp, RtrsSgDesc
from .hosts import Conn, _bswap32
from .params import (
    CM_REJ_CONSUMER, CM_REJ_TIMEOUT, CM_RETRY_INTERVAL, GSI_SPORT, HB_PERIOD, PMTU_CODES,
    RTRS_CONNECT_TIMEOUT, C, S,
)

CM_ATTR = {name: attr for attr, name in cm_attribute_ids.items()}
REQ, REJ, REP = CM_ATTR["ConnectRequest"], CM_ATTR["ConnectReject"], CM_ATTR["ConnectReply"]
RTU, DREQ, DREP = CM_ATTR["ReadyToUse"], CM_ATTR["DisconnectRequest"], CM_ATTR["DisconnectReply"]
UD_SEND_ONLY = opcode_value("UD_SEND_ONLY")
LID_PERMISSIVE = 0xFFFF  # RoCE: the REQ carries no LIDs
PRIMARY_LOCAL_ACK_TIMEOUT = 19  # 4.096 µs * 2^19 ≈ 2.1 s, as rdma_rxe's CM REQ says
REP_TARGET_ACK_DELAY = 15
MSG_REJECTED = {name: code for code, name in msg_kinds.items()}
REJ_ARI_LENGTH = len(CMRej().additional_reject_information)
_SG_DESC = field_writer(RtrsSgDesc)


class CmSteps:
    """CM handshakes, rejects and disconnects of the crafter's paths."""

    def _mad(self, t, path, side, tid, attr, body):
        host = path.client if side == C else path.server
        if path.silent == side:
            return
        psn = host.gsi_psn
        host.gsi_psn = (psn + 1) & 0xFFFFFF
        ib = (BTH(opcode=UD_SEND_ONLY, dqpn=GSI_QPN, psn=psn, ackreq=1) / DETH() /
              MAD(transaction_id=tid, attribute_id=attr) / body)
        self._emit(t, path, side, ib, sport=GSI_SPORT)

    def _req_body(self, path, conn, magic=RTRS_MAGIC, version=RTRS_PROTO_VER, first_conn=1):
        ib = self.encap.kind == "ib"
        req = CMReq(
            local_comm_id=conn.comm[C], service_id=service_id(self.port),
            local_ca_guid=path.client.guid, local_qpn=conn.qpn[C],
            starting_psn=conn.first_psn[S], path_mtu=PMTU_CODES[self.pmtu],
            primary_local_port_lid=path.client.lid if ib else LID_PERMISSIVE,
            primary_remote_port_lid=path.server.lid if ib else LID_PERMISSIVE,
            primary_local_port_gid=path.client.gid, primary_remote_port_gid=path.server.gid,
            primary_flow_label=0 if ib else path.flow_label,
            primary_hop_limit=0 if ib else 64, primary_subnet_local=1 if ib else 0,
            primary_packet_rate=3 if ib else 0, primary_local_ack_timeout=PRIMARY_LOCAL_ACK_TIMEOUT)
        cma = CmaIpHdr(ip_version=self.encap.ip_version, port=path.cma_port,
                       src_addr=self._cma_addr(path.client.ip),
                       dst_addr=self._cma_addr(path.server.ip))
        conn_req = RtrsMsgConnReq(magic=magic, version=version, cid=conn.cid,
                                  cid_num=path.cid_num, recon_cnt=path.recon_cnt,
                                  sess_uuid=path.sess_uuid, paths_uuid=self.paths_uuid,
                                  first_conn=first_conn)
        return req / cma / conn_req

    def _cma_addr(self, ip):
        return ip if ":" in ip else "::" + ip

    def _new_conn(self, path, cid, qpn_c, qpn_s):
        c_cpu, c_wire = path.client.comm_id()
        _s_cpu, s_wire = path.server.comm_id()
        psn = {C: self.rng.randrange(1 << 24), S: self.rng.randrange(1 << 24)}
        tid = (path.client.hi_tid << 32) | c_cpu
        return Conn(cid, {C: qpn_c, S: qpn_s}, psn, {C: c_wire, S: s_wire}, tid)


    def _qpn_base(self):
        return self.rng.randrange(0x11, 0x4000)

    def connect(self, path, first_conn=None, reject=None, magic=RTRS_MAGIC,
                version=RTRS_PROTO_VER, port=None, fault=None):
        """CM REQ/REP/RTU for every cid, then INFO_REQ/INFO_RSP: one connect attempt
        (recon_cnt + 1).

        ``reject``: (errno, reason) for the server to refuse cid 0 with a CM REJ;
        a bad ``magic``/``version`` makes the server reject with -ECONNRESET.
        ``fault`` ends the attempt at cid 0 without a server REJ: "rep_lost" (the
        server's REP never reaches the client) or "unanswered" (nothing answers the
        REQ); see :meth:`_connect_timeout`.  Returns True when the path got connected.
        """
        self._tick(self.t)
        path.recon_cnt += 1
        path.cma_port = self.rng.randrange(32768, 61000)
        path.flow_label = self.rng.randrange(1 << 20)
        if magic != RTRS_MAGIC or (version >> 8) != (RTRS_PROTO_VER >> 8):
            reject = (-_errno.ECONNRESET, CM_REJ_CONSUMER)
        if first_conn is None:
            first_conn = 1 if (path.index == 0 or path.connects) else None
        qc, qs = self._qpn_base(), self._qpn_base()
        save_port = self.port
        if port is not None:
            self.port = port
        conns = []
        for cid in range(path.cid_num):
            conn = self._new_conn(path, cid, qc + cid, qs + cid)
            fc = first_conn if first_conn is not None else (0 if cid == 0 else 1)
            req = self._req_body(path, conn, magic, version, fc)
            self._mad(self.t, path, C, conn.tid, REQ, req)
            self._event("cm_req", path=path.index, cid=cid, recon_cnt=path.recon_cnt)
            first_rep = not path.connects and cid == 0 and path.index == 0
            self.t += self._jitter(0.15, 0.18) if first_rep else self._jitter(0.0015, 0.008)
            if cid == 0 and (reject is not None or fault is not None):
                if fault is not None:
                    self._connect_timeout(path, conn, req, fault)
                else:
                    self._server_reject(path, conn, *reject)
                path.state = "rejected"
                self.port = save_port
                if path.recon_cnt > 1:
                    self._event("reconnect_failed", path=path.index, recon_cnt=path.recon_cnt)
                return False
            self._mad(self.t, path, S, conn.tid, REP, self._rep_body(path, conn))
            self.t += self._jitter(0.003, 0.009)
            self._mad(self.t, path, C, conn.tid, RTU,
                      CMRtu(local_comm_id=conn.comm[C], remote_comm_id=conn.comm[S]))
            self.t += self._jitter(0.002, 0.008)
            conns.append(conn)
        self.port = save_port
        path.conns = conns
        path.connects += 1
        self._info(path)
        path.state = "connected"
        path.missed = {C: 0, S: 0}
        path.hb_due = {C: self.t + HB_PERIOD + self._jitter(0.0, 0.1),
                       S: self.t + HB_PERIOD + self._jitter(0.1, 0.2)}
        self._event("connected", path=path.index, recon_cnt=path.recon_cnt)
        if path.recon_cnt > 1:
            self._event("reconnect", path=path.index, recon_cnt=path.recon_cnt)
        return True

    def _rep_body(self, path, conn):
        rsp = RtrsMsgConnRsp(queue_depth=self.qd, max_io_size=self.max_io_size,
                             max_hdr_size=self.max_hdr_size,
                             flags=RTRS_MSG_NEW_RKEY_F if self.inval else 0)
        return CMRep(local_comm_id=conn.comm[S], remote_comm_id=conn.comm[C],
                     local_qpn=conn.qpn[S], starting_psn=conn.first_psn[C],
                     target_ack_delay=REP_TARGET_ACK_DELAY,
                     local_ca_guid=path.server.guid) / rsp

    def _server_reject(self, path, conn, err, reason):
        """The server refuses the REQ: Consumer Reject with the RTRS errno in a
        conn_rsp, or a CM reason of its own (no listener: zero private data)."""
        body = CMRej(local_comm_id=conn.comm[S] if reason == CM_REJ_CONSUMER else 0,
                     remote_comm_id=conn.comm[C], reason=reason)
        if reason == CM_REJ_CONSUMER:
            body = body / RtrsMsgConnRsp(errno=err, queue_depth=0, max_io_size=0,
                                         max_hdr_size=0, flags=0)
        self._mad(self.t, path, S, conn.tid, REJ, body)
        self._event("reject", path=path.index, cid=conn.cid, errno=err, reason=reason,
                    errno_name=errno_name(err) if err else None, sender=S)
        self.t += self._jitter(0.001, 0.003)

    def _connect_timeout(self, path, conn, req, fault):
        """The client's REQ gets no usable answer: its CM sends the REQ again every
        ~CM_RETRY_INTERVAL (same comm ID and TID); with "rep_lost" the server sends
        its REP again for each duplicate, but the REP never reaches the client.  After
        RTRS_CONNECT_TIMEOUT the client destroys its CM ID, and ib_destroy_cm_id() in
        state REQ_SENT sends a REJ with reason Timeout, its CA GUID as additional
        reject information and no private data (drivers/infiniband/core/cm.c)."""
        start = self.t
        rep = self._rep_body(path, conn) if fault == "rep_lost" else None
        retry = 0
        while True:
            if rep is not None:
                self._mad(self.t, path, S, conn.tid, REP, rep)
            retry += 1
            due = start + retry * CM_RETRY_INTERVAL + self._jitter(0.0, 0.05)
            if due >= start + RTRS_CONNECT_TIMEOUT:
                break
            self.wait_until(due)
            self._mad(self.t, path, C, conn.tid, REQ, req)
            self.t += self._jitter(0.0015, 0.008)
        self.wait_until(start + RTRS_CONNECT_TIMEOUT + self._jitter(0.0, 0.01))
        guid = path.client.guid.to_bytes(8, "big")
        self._mad(self.t, path, C, conn.tid, REJ, CMRej(
            local_comm_id=conn.comm[C], message_rejected=MSG_REJECTED["other"],
            reject_info_length=len(guid), reason=CM_REJ_TIMEOUT,
            additional_reject_information=guid.ljust(REJ_ARI_LENGTH, b"\0")))
        self._event("reject", path=path.index, cid=conn.cid, errno=0, reason=CM_REJ_TIMEOUT,
                    errno_name=None, sender=C)
        self.t += self._jitter(0.001, 0.003)

    def _info(self, path):
        """INFO_REQ (272 B SEND) and INFO_RSP (8 + 16·sg_cnt, multi-packet SEND) on cid 0."""
        conn = path.conns[0]
        self.t += self._jitter(0.01, 0.02)
        info_req = bytes(RtrsMsgInfoReq(pathname=self.sessname.encode()))
        self._message(path, conn, C, "send", info_req)
        self.t += self._jitter(0.002, 0.004)
        index = self.rng.randrange(3, 0x40)  # rxe: rkey = MR index << 8 | key byte
        if self.inval:
            path.rbuf = [[addr, ((index + i) << 8) | self.rng.randrange(256)]
                         for i, addr in enumerate(self._chunk_addr)]
            desc = [(a, k, self.chunk_size) for a, k in path.rbuf]
        else:
            key = (index << 8) | self.rng.randrange(256)
            path.rbuf = [[addr, key] for addr in self._chunk_addr]
            desc = [(self._chunk_addr[0], key, self.chunk_size * self.qd)]
        # up to queue_depth descriptors: packed, not a Scapy packet each
        info_rsp = bytes(RtrsMsgInfoRsp(sg_cnt=len(desc))) + b"".join(
            _SG_DESC(*d) for d in desc)
        self._message(path, conn, S, "send", info_rsp)
        self.t += self._jitter(0.002, 0.006)

    def disconnect(self, path, initiator=C, answered=True, crossed=False):
        """CM DREQ per cid from ``initiator`` and the peer's DREPs.

        ``crossed``: the peer closes the other cids itself as soon as it got the DREQ
        of cid 0 (its own DREQs with its own comm IDs and TIDs, after its DREP, as
        Linux does at unmap, pcaps/real/multipath.pcap frames 1080-1088): both sides
        send DREQs, still one disconnect started by ``initiator`` and answered by the
        peer (docs/PROTOCOL.md#one-teardown-one-disconnect); the name stays for the
        connections of cids 1.. where the two sides' DREQs do cross.
        """
        self._tick(self.t)
        peer = S if initiator == C else C
        t = self.t
        conns = path.conns[:1] if crossed else path.conns
        path.dreqs = [self._dreq(path, conn, initiator) for conn in conns]
        for tid, body in path.dreqs:
            self._mad(t, path, initiator, tid, DREQ, body)
            t += self._jitter(2e-6, 5e-5)
        self._event("disconnect", path=path.index, side=initiator, crossed=False,
                    answered=crossed)
        t += self._jitter(0.002, 0.004)
        if answered:
            for conn in conns:
                self._mad(t, path, peer, self._tid(path, conn, initiator), DREP,
                          CMDrep(local_comm_id=conn.comm[peer], remote_comm_id=conn.comm[initiator]))
                t += self._jitter(2e-6, 2e-5)
        if crossed:
            rest = path.conns[1:]
            theirs = [self._dreq(path, conn, peer) for conn in rest]
            mine = [self._dreq(path, conn, initiator) for conn in rest]
            for (tid, body) in theirs:
                self._mad(t, path, peer, tid, DREQ, body)
                t += self._jitter(2e-6, 5e-5)
            t += self._jitter(5e-4, 1.5e-3)
            for (tid, body) in mine:
                self._mad(t, path, initiator, tid, DREQ, body)
                t += self._jitter(2e-6, 5e-5)
            t += self._jitter(0.002, 0.006)
            for conn in rest:
                self._mad(t, path, initiator, self._tid(path, conn, peer), DREP,
                          CMDrep(local_comm_id=conn.comm[initiator], remote_comm_id=conn.comm[peer]))
                t += self._jitter(2e-6, 2e-5)
            last = rest[-1]  # the peer answers the crossing DREQ of the last cid only
            self._mad(t + self._jitter(0.003, 0.008), path, peer,
                      self._tid(path, last, initiator), DREP,
                      CMDrep(local_comm_id=last.comm[peer], remote_comm_id=last.comm[initiator]))
        self.t = t + self._jitter(0.001, 0.003)
        path.state = "closed"
        path.hb_due = {C: None, S: None}

    @staticmethod
    def _tid(path, conn, side):
        """The TID of a transaction ``side`` starts on ``conn``: its hi_tid and its comm ID."""
        if side == C:
            return conn.tid
        return (path.server.hi_tid << 32) | _bswap32(conn.comm[S])

    def _dreq(self, path, conn, side):
        peer = S if side == C else C
        return self._tid(path, conn, side), CMDreq(
            local_comm_id=conn.comm[side], remote_comm_id=conn.comm[peer],
            remote_qpn=conn.qpn[peer])
