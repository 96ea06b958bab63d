"""SessionCrafter: RTRS/RNBD sessions as two Linux kernels over rdma_rxe put them
on the wire, built with the Scapy layers (docs/PROTOCOL.md#connection-management,
docs/PROTOCOL.md#rtrs-messages, docs/PROTOCOL.md#flows, docs/PROTOCOL.md#rnbd).

Modelled on the real captures in pcaps/real/ (Linux 6.1, Soft-RoCE):

* CM REQ/REP/RTU per cid, strictly one cid after another; comm IDs are a
  sequence XOR a random operand (IB CM), the TID low word is the local comm ID;
  **REQ.starting_psn is the first PSN of the server→client stream and
  REP.starting_psn that of the client→server stream** (what rxe puts on the
  wire, and what docs/PROTOCOL.md#identifiers-comm-ids-qpns-and-starting-psns
  describes).
* every message's last packet asks for an ACK, and so does the 66th
  non-final packet since the last request for one (rxe RXE_MAX_PKT_PER_ACK 64);
  the responder ACKs each such packet (AETH 0x1F, MSN = completed messages):
  no ACK coalescing, as in the captures.
* zero-length RDMA WRITE WITH IMM (heartbeats, always_invalidate=N responses)
  carry RETH va 0, rkey 0, length 0; every READ response is preceded by a
  zero-length SEND WITH INVALIDATE; the server's rkeys are rxe style
  (MR index << 8 | key byte), +1 in the key byte per use with always_invalidate=Y.
* heartbeats every ~5.1 s on cid 0 from both sides, also under load.

Everything random (UUIDs, QPNs, PSNs, comm IDs, MACs, kernel addresses in the
rkeys/VAs, data) comes from one ``random.Random(seed)``: the same seed gives
byte-identical packets.  Time is a simulated clock; ``idle()`` advances it.
"""

import errno as _errno
import random
import struct
import uuid
from dataclasses import dataclass
from typing import Optional

from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Raw

from ..constants import (
    DEFAULT_MAX_CHUNK_SIZE, DEFAULT_MAX_HDR_SIZE, DEFAULT_QUEUE_DEPTH, RTRS_MAGIC, RTRS_MSG_NEW_RKEY_F,
    RTRS_PORT, RTRS_PROTO_VER, errno_name,
)
from ..imm import encode_hb
from ..layers.cm import (
    MAD, CmaIpHdr, CMDrep, CMDreq, CMRej, CMRep, CMReq, CMRtu, service_id,
)
from ..layers.ib import (
    DETH, GRH, IETH, LRH, RETH, BTH, DLT_INFINIBAND, ROCEV1_ETHERTYPE, ROCEV2_PORT,
    ImmDt, opcode_value,
)
from ..layers.rtrs import (
    RtrsMsgConnReq, RtrsMsgConnRsp, RtrsMsgInfoReq, RtrsMsgInfoRsp, RtrsSgDesc,
)
from .params import (
    AETH_ACK, CM_REJ_CONSUMER, GSI_SPORT, HB_MISSED_MAX, HB_PERIOD, PMTU_CODES,
    RC_ACK_TIMEOUT, RC_RETRY_COUNT, RC_SPORT, RECONNECT_DELAY, RXE_MAX_PKT_PER_ACK, C, S,
)
from .workload import RnbdWorkload

# opcodes by (kind, position): position = only/first/middle/last
# (docs/PROTOCOL.md#opcodes-and-extension-headers)
_OPC = {key: opcode_value("RC_" + name) for key, name in {
    ("send", "only"): "SEND_ONLY", ("send", "first"): "SEND_FIRST",
    ("send", "middle"): "SEND_MIDDLE", ("send", "last"): "SEND_LAST",
    ("send_imm", "only"): "SEND_ONLY_WITH_IMMEDIATE",
    ("send_imm", "last"): "SEND_LAST_WITH_IMMEDIATE",
    ("send_inv", "only"): "SEND_ONLY_WITH_INVALIDATE",
    ("write", "only"): "RDMA_WRITE_ONLY", ("write", "first"): "RDMA_WRITE_FIRST",
    ("write", "middle"): "RDMA_WRITE_MIDDLE", ("write", "last"): "RDMA_WRITE_LAST",
    ("write_imm", "only"): "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
    ("write_imm", "first"): "RDMA_WRITE_FIRST", ("write_imm", "middle"): "RDMA_WRITE_MIDDLE",
    ("write_imm", "last"): "RDMA_WRITE_LAST_WITH_IMMEDIATE",
}.items()}


@dataclass
class Encap:
    """How frames are framed: RoCEv2 (IPv4/IPv6, optional 802.1Q), RoCEv1 or native IB."""
    kind: str = "rocev2"  # rocev2 | rocev1 | ib
    ip_version: int = 4
    vlan: Optional[int] = None
    vlan_prio: int = 3

    @property
    def linktype(self):
        return DLT_INFINIBAND if self.kind == "ib" else 1

    def describe(self):
        if self.kind == "ib":
            return "InfiniBand (LRH, link type 247)"
        if self.kind == "rocev1":
            text = "RoCEv1 (EtherType 0x8915)"
        else:
            text = "RoCEv2/IPv%d" % self.ip_version
        return text + (" VLAN %d" % self.vlan if self.vlan is not None else "")


def _bswap32(x):
    return struct.unpack("<I", struct.pack(">I", x))[0]


class Host:
    """One machine: addresses, GSI PSN, IP id, comm ID allocator, MAD hi_tid."""

    def __init__(self, rng, name, ip, encap, lid):
        self.name = name
        self.ip = ip
        mac = [0x52, 0x54, 0x00] + [rng.randrange(256) for _ in range(3)]
        self.mac = ":".join("%02x" % b for b in mac)
        self.guid = int.from_bytes(bytes([mac[0] ^ 2] + mac[1:3] + [0xFF, 0xFE] + mac[3:]), "big")
        if encap.kind == "rocev2":
            self.gid = ip if encap.ip_version == 6 else "::ffff:" + ip
        else:
            self.gid = "fe80::%x:%x:%x:%x" % tuple((self.guid >> s) & 0xFFFF for s in (48, 32, 16, 0))
        self.lid = lid
        self.ip_id = rng.randrange(1 << 16)
        self.gsi_psn = 0
        self.comm_seq = rng.randrange(64)
        self.comm_xor = rng.getrandbits(32)
        self.hi_tid = rng.randrange(1, 8)

    def comm_id(self):
        """(CPU value, wire value) of a new local comm ID (cm.c: xa id ^ random operand)."""
        cpu = (self.comm_seq ^ self.comm_xor) & 0xFFFFFFFF
        self.comm_seq += 1
        return cpu, _bswap32(cpu)


class Conn:
    """One RC QP pair (one cid): QPNs, request PSN streams, MSNs, comm IDs."""

    def __init__(self, cid, qpn, psn, comm, tid):
        self.cid = cid
        self.qpn = qpn      # {C: client QPN, S: server QPN}
        self.psn = psn      # next request PSN per sending side
        self.first_psn = dict(psn)
        self.comm = comm    # wire comm IDs {C: .., S: ..}
        self.tid = tid
        self.msn = {C: 0, S: 0}   # messages completed by that side as responder
        self.noack = {C: 0, S: 0}
        self.last_ack = {C: 0.0, S: 0.0}  # rxe sends ACKs in PSN order

    def next_psn(self, side):
        psn = self.psn[side]
        self.psn[side] = (psn + 1) & 0xFFFFFF
        return psn


class Path:
    """One RTRS path: client/server hosts, sess_uuid, cids, server chunk table."""

    def __init__(self, index, client, server, sess_uuid, cid_num):
        self.index = index
        self.client = client
        self.server = server
        self.sess_uuid = sess_uuid
        self.cid_num = cid_num
        self.recon_cnt = 0
        self.conns = []
        self.state = "new"
        self.rbuf = []           # buf_id -> [addr, rkey]
        self.server_silent = False
        self.unacked = []        # client requests waiting for an ACK on a silent path
        self.pending = []        # requests without response (failover candidates)
        self.hb_due = {C: None, S: None}
        self.missed = 0
        self.reconnect_at = None
        self.connects = 0
        self.cma_port = None
        self.flow_label = 0

    @property
    def name(self):
        return "%s@%s" % (self.client.ip, self.server.ip)


class _Rec:
    """One frame to be: time, hosts, the IB part (BTH and up) and its UDP source port."""
    __slots__ = ("t", "src", "dst", "ib", "sport")

    def __init__(self, t, src, dst, ib, sport):
        self.t, self.src, self.dst, self.ib, self.sport = t, src, dst, ib, sport


class SessionCrafter(RnbdWorkload):
    """An RTRS client session (one RNBD session) with its paths, driven step by step.

    Typical use::

        s = SessionCrafter(seed=1, always_invalidate=True)
        p = s.add_path()
        s.connect(p); s.rnbd_map("/dev/ram0")
        s.io("write", 0, 4096); s.io("read", 0, 4096); s.idle(12)
        s.rnbd_unmap(); s.disconnect(p)
        packets, truth = s.packets(), s.truth()
    """

    def __init__(self, seed=0, encap=None, pmtu=1024, always_invalidate=True,
                 queue_depth=DEFAULT_QUEUE_DEPTH, cpus=2, sessname="lab1",
                 max_chunk_size=DEFAULT_MAX_CHUNK_SIZE, max_hdr_size=DEFAULT_MAX_HDR_SIZE,
                 port=RTRS_PORT, start_time=None):
        if pmtu not in PMTU_CODES:
            raise ValueError("path MTU must be one of %s" % sorted(PMTU_CODES))
        self.rng = random.Random(seed)
        self.seed = seed
        self.encap = encap or Encap()
        self.pmtu = pmtu
        self.inval = always_invalidate
        self.qd = queue_depth
        self.cpus = cpus
        self.cid_num = cpus + 1
        self.sessname = sessname
        self.chunk_size = max_chunk_size
        self.max_hdr_size = max_hdr_size
        self.max_io_size = max_chunk_size - max_hdr_size
        self.port = port
        self.t0 = start_time if start_time is not None else 1795965300.0 + self.rng.randrange(86400)
        self.t = self.t0
        self.paths_uuid = self._uuid()
        self.paths = []
        self.hosts = {}
        self._recs = []
        self._permits = set()
        self._cpu = 0
        self._rr = 0
        # server session state: chunk pool addresses shared by all paths
        # (docs/PROTOCOL.md#sessions-paths-and-connections)
        base = 0xFFFF888000000000 + self.rng.randrange(1 << 14) * (1 << 22)
        self._chunk_addr = [base + i * self.chunk_size for i in range(self.qd)]
        self._client_mr = {}     # permit -> [va, rkey] of the client's read buffer MR
        self._client_mr_index = self.rng.randrange(3, 8)  # rxe MR pool indices are small
        self.devices = {}        # device_id -> dev_name, mapped now
        self.device_log = {}     # device_id -> dev_name, every successful OPEN
        self._next_device_id = 0
        self._sess_info_done = False
        # ground truth
        self.requests = []
        self.events = []

    # -- helpers -------------------------------------------------------------

    def _uuid(self):
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def _host(self, ip, lid):
        if ip not in self.hosts:
            self.hosts[ip] = Host(self.rng, ip, ip, self.encap, lid)
        return self.hosts[ip]

    def _jitter(self, lo, hi):
        return self.rng.uniform(lo, hi)

    def _wire_gap(self, length):
        return 2e-6 + length * 4e-9 + self.rng.uniform(0, 6e-6)

    def _event(self, kind, **info):
        info.update(kind=kind, t=self.t)
        self.events.append(info)

    def _emit(self, t, path, side, ib, sport=RC_SPORT):
        src, dst = (path.client, path.server) if side == C else (path.server, path.client)
        if side == S and path.server_silent:
            return
        self._recs.append(_Rec(t, src, dst, ib, sport))

    # -- CM (docs/PROTOCOL.md#connection-management)

    def _mad(self, t, path, side, tid, attr, body):
        host = path.client if side == C else path.server
        if side == S and path.server_silent:
            return
        psn = host.gsi_psn
        host.gsi_psn = (psn + 1) & 0xFFFFFF
        ib = (BTH(opcode=0x64, dqpn=1, psn=psn, ackreq=1) / DETH() /
              MAD(transaction_id=tid, attribute_id=attr) / body)
        self._emit(t, path, side, ib, sport=GSI_SPORT)

    def _req_body(self, path, conn, magic=RTRS_MAGIC, version=RTRS_PROTO_VER, first_conn=1):
        ib = self.encap.kind == "ib"
        req = CMReq(
            local_comm_id=conn.comm[C], service_id=service_id(self.port),
            local_ca_guid=path.client.guid, local_qpn=conn.qpn[C],
            starting_psn=conn.first_psn[S], path_mtu=PMTU_CODES[self.pmtu],
            primary_local_port_lid=path.client.lid if ib else 0xFFFF,
            primary_remote_port_lid=path.server.lid if ib else 0xFFFF,
            primary_local_port_gid=path.client.gid, primary_remote_port_gid=path.server.gid,
            primary_flow_label=0 if ib else path.flow_label,
            primary_hop_limit=0 if ib else 64, primary_subnet_local=1 if ib else 0,
            primary_packet_rate=3 if ib else 0, primary_local_ack_timeout=19)
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

    def add_path(self, client_ip=None, server_ip=None):
        """A new path of this session (not connected yet)."""
        n = len(self.paths)
        if client_ip is None:
            client_ip = ("fd00:77::%d" % (2 + 16 * n) if self.encap.ip_version == 6
                         else "10.77.%d.2" % n)
        if server_ip is None:
            server_ip = ("fd00:77::%d" % (1 + 16 * n) if self.encap.ip_version == 6
                         else "10.77.%d.1" % n)
        client = self._host(client_ip, lid=2 + 2 * n)
        server = self._host(server_ip, lid=1 + 2 * n)
        path = Path(n, client, server, self._uuid(), self.cid_num)
        self.paths.append(path)
        return path

    def _qpn_base(self):
        return self.rng.randrange(0x11, 0x4000)

    def connect(self, path, first_conn=None, reject=None, magic=RTRS_MAGIC,
                version=RTRS_PROTO_VER, port=None):
        """CM REQ/REP/RTU for every cid, then INFO_REQ/INFO_RSP
        (docs/PROTOCOL.md#connect-reconnect-and-disconnect).

        ``reject``: (errno, reason) for the server to refuse cid 0 with a CM REJ;
        a bad ``magic``/``version`` makes the server reject with -ECONNRESET.
        Returns True when the path got connected.
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
            self._mad(self.t, path, C, conn.tid, 0x0010,
                      self._req_body(path, conn, magic, version, fc))
            self._event("cm_req", path=path.index, cid=cid, recon_cnt=path.recon_cnt)
            first_rep = not path.connects and cid == 0 and path.index == 0
            self.t += self._jitter(0.15, 0.18) if first_rep else self._jitter(0.0015, 0.008)
            if cid == 0 and reject is not None:
                err, reason = reject
                body = CMRej(local_comm_id=conn.comm[S] if reason == CM_REJ_CONSUMER else 0,
                             remote_comm_id=conn.comm[C], reason=reason)
                if reason == CM_REJ_CONSUMER:
                    body = body / RtrsMsgConnRsp(errno=err, queue_depth=0, max_io_size=0,
                                                 max_hdr_size=0, flags=0)
                self._mad(self.t, path, S, conn.tid, 0x0012, body)
                self._event("reject", path=path.index, cid=cid, errno=err, reason=reason,
                            errno_name=errno_name(err) if err else None)
                self.t += self._jitter(0.001, 0.003)
                path.state = "rejected"
                self.port = save_port
                return False
            rsp = RtrsMsgConnRsp(queue_depth=self.qd, max_io_size=self.max_io_size,
                                 max_hdr_size=self.max_hdr_size,
                                 flags=RTRS_MSG_NEW_RKEY_F if self.inval else 0)
            rep = CMRep(local_comm_id=conn.comm[S], remote_comm_id=conn.comm[C],
                        local_qpn=conn.qpn[S], starting_psn=conn.first_psn[C],
                        target_ack_delay=15, local_ca_guid=path.server.guid) / rsp
            self._mad(self.t, path, S, conn.tid, 0x0013, rep)
            self.t += self._jitter(0.003, 0.009)
            self._mad(self.t, path, C, conn.tid, 0x0014,
                      CMRtu(local_comm_id=conn.comm[C], remote_comm_id=conn.comm[S]))
            self.t += self._jitter(0.002, 0.008)
            conns.append(conn)
        self.port = save_port
        path.conns = conns
        path.connects += 1
        self._info(path)
        path.state = "connected"
        path.missed = 0
        path.hb_due = {C: self.t + HB_PERIOD + self._jitter(0.0, 0.1),
                       S: self.t + HB_PERIOD + self._jitter(0.1, 0.2)}
        if path.connects > 1:
            self._event("reconnect", path=path.index, recon_cnt=path.recon_cnt)
        return True

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
            desc = [RtrsSgDesc(addr=a, key=k, len=self.chunk_size) for a, k in path.rbuf]
        else:
            key = (index << 8) | self.rng.randrange(256)
            path.rbuf = [[addr, key] for addr in self._chunk_addr]
            desc = [RtrsSgDesc(addr=self._chunk_addr[0], key=key,
                               len=self.chunk_size * self.qd)]
        self._message(path, conn, S, "send", bytes(RtrsMsgInfoRsp(desc=desc)))
        self.t += self._jitter(0.002, 0.006)

    def disconnect(self, path, initiator=C, answered=True):
        """CM DREQ per cid from ``initiator`` and the peer's DREPs
        (docs/PROTOCOL.md#connect-reconnect-and-disconnect)."""
        self._tick(self.t)
        peer = S if initiator == C else C
        t = self.t
        for conn in path.conns:
            tid = conn.tid if initiator == C else (path.server.hi_tid << 32) | _bswap32(conn.comm[S])
            self._mad(t, path, initiator, tid, 0x0015,
                      CMDreq(local_comm_id=conn.comm[initiator], remote_comm_id=conn.comm[peer],
                             remote_qpn=conn.qpn[peer]))
            self._event("cm_dreq", path=path.index, cid=conn.cid, side=initiator)
            t += self._jitter(2e-6, 5e-5)
        t += self._jitter(0.002, 0.004)
        if answered:
            for conn in path.conns:
                tid = conn.tid if initiator == C else (path.server.hi_tid << 32) | _bswap32(conn.comm[S])
                self._mad(t, path, peer, tid, 0x0016,
                          CMDrep(local_comm_id=conn.comm[peer], remote_comm_id=conn.comm[initiator]))
                t += self._jitter(2e-6, 2e-5)
        self.t = t + self._jitter(0.001, 0.003)
        path.state = "closed"
        path.hb_due = {C: None, S: None}

    # -- RC transport (docs/PROTOCOL.md#opcodes-and-extension-headers,
    #    docs/PROTOCOL.md#psn-sequence-and-retransmissions)

    def _message(self, path, conn, side, kind, payload, va=0, rkey=0, imm=None, ieth=None):
        """One RC message of ``side`` on ``conn``, segmented at the path MTU, with the
        responder's ACKs; advances the clock past the last packet."""
        peer = 1 - side
        segs = [payload[i:i + self.pmtu] for i in range(0, len(payload), self.pmtu)] or [b""]
        n = len(segs)
        t = self.t
        sent = []
        for i, seg in enumerate(segs):
            pos = "only" if n == 1 else "first" if i == 0 else "last" if i == n - 1 else "middle"
            end = i == n - 1
            layers = BTH(opcode=_OPC[(kind, pos)], dqpn=conn.qpn[peer], psn=conn.next_psn(side))
            if kind.startswith("write") and pos in ("only", "first"):
                layers = layers / RETH(va=va, rkey=rkey, dma_len=len(payload))
            if imm is not None and end:
                layers = layers / ImmDt(imm=imm)
            if ieth is not None:
                layers = layers / IETH(rkey=ieth)
            if end:
                ackreq = True
            else:
                old = conn.noack[side]
                conn.noack[side] = old + 1
                ackreq = old > RXE_MAX_PKT_PER_ACK
            if ackreq:
                conn.noack[side] = 0
            pad = -len(seg) % 4
            layers.ackreq = int(ackreq)
            layers.padcount = pad
            if seg or pad:
                layers = layers / Raw(seg + b"\0" * pad)
            self._emit(t, path, side, layers)
            sent.append(layers)
            psn = layers.psn
            if end:
                conn.msn[peer] += 1
            if ackreq and not (peer == S and path.server_silent):
                ack = BTH(opcode=0x11, dqpn=conn.qpn[side], psn=psn) / _aeth(conn.msn[peer])
                t_ack = max(t + self._jitter(2e-4, 6e-4), conn.last_ack[peer] + 5e-6)
                conn.last_ack[peer] = t_ack
                self._emit(t_ack, path, peer, ack)
            t += self._wire_gap(len(seg))
        self.t = t
        return sent

    # -- heartbeats and path failure (docs/PROTOCOL.md#heartbeats,
    #    docs/PROTOCOL.md#connect-reconnect-and-disconnect)

    def _tick(self, until):
        """Emit the heartbeats (and path recovery) due up to ``until``."""
        while True:
            due = []
            for path in self.paths:
                for side in (C, S):
                    if path.hb_due[side] is not None and path.hb_due[side] <= until:
                        due.append((path.hb_due[side], path.index, side, path))
                if path.reconnect_at is not None and path.reconnect_at <= until:
                    due.append((path.reconnect_at, path.index, 2, path))
                if path.unacked and path.unacked[0]["next"] <= until:
                    due.append((path.unacked[0]["next"], path.index, 3, path))
            if not due:
                return
            when, _, side, path = min(due)
            self.t = max(self.t, when)
            if side == 2:
                path.reconnect_at = None
                path.server_silent = False
                self.connect(path, first_conn=1)
                continue
            if side == 3:
                self._retransmit(path)
                continue
            path.hb_due[side] = when + HB_PERIOD + self._jitter(0.0, 0.04)
            self._heartbeat(path, side)

    def _heartbeat(self, path, side):
        conn = path.conns[0]
        peer = 1 - side
        if side == C and path.server_silent:
            path.missed += 1
            if path.missed > HB_MISSED_MAX:
                self._path_error(path)
                return
        packets = self._message(path, conn, side, "write_imm", b"", imm=encode_hb())
        self._event("hb_msg", path=path.index, side=side, answered=not path.server_silent)
        if side == C and path.server_silent:
            path.unacked.append({"req": None, "cid": 0, "packets": packets, "tries": 0,
                                 "next": self.t + RC_ACK_TIMEOUT + self._jitter(0.0, 0.01)})
            return
        if side == S and path.server_silent:
            return
        self.t += self._jitter(1e-4, 5e-4)
        self._message(path, conn, peer, "write_imm", b"", imm=encode_hb(ack=True))
        self._event("hb_ack", path=path.index, side=peer)
        self.t += self._jitter(1e-4, 5e-4)

    def fail_path(self, path):
        """From now on the server side of ``path`` is silent (its link is down beyond the
        capture point): nothing the client sends there is acknowledged.  Its requests
        and heartbeats are retransmitted (go-back-N, same PSNs) every ~2.1 s; after
        RC_RETRY_COUNT retries the QP fails (or, with nothing unacknowledged, more than
        HB_MISSED_MAX heartbeat ticks pass): the client closes the path (DREQs,
        unanswered), re-issues its unanswered requests on a live path with the same
        buf_id, and reconnects RECONNECT_DELAY + 1 s later with recon_cnt + 1."""
        self._tick(self.t)
        path.server_silent = True
        path.hb_due[S] = None
        path.missed = 0
        self._event("path_down", path=path.index)

    def _retransmit(self, path):
        """Go-back-N after the ACK timeout: every unacknowledged request packet again, with
        its PSN; after RC_RETRY_COUNT retries the QP fails and so does the path
        (docs/PROTOCOL.md#psn-sequence-and-retransmissions)."""
        entry = path.unacked[0]
        if entry["tries"] >= RC_RETRY_COUNT:
            self._path_error(path, cause="retry_exceeded")
            return
        t = self.t
        for item in path.unacked:
            item["tries"] += 1
            for ib in item["packets"]:
                self._emit(t, path, C, ib)
                t += self._wire_gap(len(ib))
            self._event("retransmission", path=path.index,
                        cid=item["req"]["cid"] if item["req"] else item["cid"],
                        packets=len(item["packets"]))
        self.t = t
        entry["next"] = self.t + RC_ACK_TIMEOUT + self._jitter(0.0, 0.01)

    def _path_error(self, path, cause="heartbeat"):
        self._event("path_error", path=path.index, cause=cause)
        path.state = "reconnecting"
        path.hb_due = {C: None, S: None}
        path.unacked = []
        self.disconnect(path, C, answered=False)
        path.state = "reconnecting"
        path.reconnect_at = self.t + RECONNECT_DELAY + 1.0 + self.rng.uniform(0, 0.007)
        pending, path.pending = path.pending, []
        for req in pending:
            self._failover(req)

    def _failover(self, req):
        """Re-issue a request of a failed path on a live one, with the same buf_id
        (docs/PROTOCOL.md#failover)."""
        live = [p for p in self.paths if p.state == "connected" and not p.server_silent]
        if not live:
            return
        path, conn = self._pick(live[0])
        self.t += self._jitter(1e-4, 5e-4)
        again = self._send_request(path, conn, req["dir"], req["_usr"], data=req["_data"],
                                   data_len=req["data_len"], label=req["op"],
                                   buf=req["buf_id"], sg=req["_sg"])
        again["failover"] = True
        self._event("failover", path=path.index, buf_id=req["buf_id"])
        self._send_response(path, conn, again)

    # -- requests and responses (docs/PROTOCOL.md#chunks-and-what-the-client-writes,
    #    docs/PROTOCOL.md#which-operation-carries-what, docs/PROTOCOL.md#rnbd-messages)

    def idle(self, seconds):
        """Nothing but heartbeats for ``seconds``."""
        self.wait(seconds)

    def wait(self, seconds):
        """Advance the clock by ``seconds`` with heartbeats in between."""
        end = self.t + seconds
        self._tick(end)
        self.t = max(self.t, end)

    # -- output --------------------------------------------------------------------

    def frames(self, since=None):
        """[(time, frame bytes)] in time order; IP ids are given in that order."""
        recs = sorted(self._recs, key=lambda r: r.t)
        out = []
        for rec in recs:
            if since is not None and rec.t < since:
                continue
            frame = self._frame(rec)
            out.append((round(rec.t, 6), bytes(frame)))
        return out

    def _frame(self, rec):
        e = self.encap
        src, dst = rec.src, rec.dst
        if e.kind == "ib":
            return LRH(lnh=2, dlid=dst.lid, slid=src.lid) / rec.ib
        if e.kind == "rocev1":
            l3 = GRH(ipver=6, tclass=0, flowlabel=0, nexthdr=0x1B, hoplmt=64,
                     sgid=int.from_bytes(_gid_bytes(src.gid), "big"),
                     dgid=int.from_bytes(_gid_bytes(dst.gid), "big")) / rec.ib
            ethertype = ROCEV1_ETHERTYPE
        else:
            udp = UDP(sport=rec.sport, dport=ROCEV2_PORT, chksum=0) / rec.ib
            src.ip_id = (src.ip_id + 1) & 0xFFFF
            if e.ip_version == 6:
                l3 = IPv6(src=src.ip, dst=dst.ip, hlim=64, fl=0, tc=0) / udp
                ethertype = 0x86DD
            else:
                l3 = IP(src=src.ip, dst=dst.ip, id=src.ip_id, flags="DF", ttl=64) / udp
                ethertype = 0x0800
        if e.vlan is not None:
            return (Ether(src=src.mac, dst=dst.mac, type=0x8100) /
                    Dot1Q(vlan=e.vlan, prio=e.vlan_prio, type=ethertype) / l3)
        return Ether(src=src.mac, dst=dst.mac, type=ethertype) / l3

    def packets(self, since=None):
        """The frames as dissected Scapy packets with ``.time`` (like rdpcap gives)."""
        cls = LRH if self.encap.kind == "ib" else Ether
        out = []
        for t, data in self.frames(since):
            pkt = cls(data)
            pkt.time = t
            out.append(pkt)
        return out

    def truth(self, since=None, scenario=None, params=None):
        """What went into the capture, as a JSON-serialisable dict (see module doc)."""
        def visible(item):
            return since is None or item["t"] >= since
        reqs = [r for r in self.requests if visible(r)]
        events = [e for e in self.events if visible(e)]
        paths = []
        for path in self.paths:
            stats = {"reads": 0, "read_bytes": 0, "writes": 0, "write_bytes": 0}
            for r in reqs:
                if r["path"] == path.index:
                    key = "read" if r["dir"] == "read" else "write"
                    stats[key + "s"] += 1
                    stats[key + "_bytes"] += r["data_len"] + r["usr_len"]
            paths.append({
                "index": path.index, "client_addr": path.client.ip, "server_addr": path.server.ip,
                "sess_uuid": path.sess_uuid, "cid_num": path.cid_num,
                "recon_cnt": path.recon_cnt, "connects": path.connects,
                "reconnects": sum(1 for e in events
                                  if e["kind"] == "reconnect" and e["path"] == path.index),
                "state": path.state, "stats": stats,
            })
        totals = {k: sum(p["stats"][k] for p in paths)
                  for k in ("reads", "read_bytes", "writes", "write_bytes")}
        errors = {}
        for r in reqs:
            if r["errno"]:  # None: never answered (the request failed over)
                name = errno_name(r["errno"])
                errors[name] = errors.get(name, 0) + 1
        rejects = [{k: e[k] for k in ("path", "cid", "errno", "errno_name", "reason")}
                   for e in events if e["kind"] == "reject"]
        ops = {}
        for r in reqs:
            ops[r["op"]] = ops.get(r["op"], 0) + 1
        return {
            "scenario": scenario, "seed": self.seed, "params": params or {},
            "config": {"encap": self.encap.describe(), "linktype": self.encap.linktype,
                       "path_mtu": self.pmtu, "always_invalidate": self.inval,
                       "queue_depth": self.qd, "cid_num": self.cid_num,
                       "max_io_size": self.max_io_size, "max_hdr_size": self.max_hdr_size,
                       "chunk_size": self.chunk_size, "sessname": self.sessname,
                       "port": self.port},
            "capture_start": round(since, 6) if since is not None else None,
            "session": {"paths_uuid": self.paths_uuid, "sessname": self.sessname},
            "paths": paths,
            "stats": totals,
            "requests": len(reqs),
            "requests_by_op": ops,
            "errors": errors,
            "rejects": rejects,
            "reconnects": sum(p["reconnects"] for p in paths),
            "heartbeats": {
                "hb_msg": sum(1 for e in events if e["kind"] == "hb_msg"),
                "hb_ack": sum(1 for e in events if e["kind"] == "hb_ack"),
                "hb_msg_unanswered": sum(1 for e in events
                                         if e["kind"] == "hb_msg" and not e["answered"]),
            },
            "path_failures": sum(1 for e in events if e["kind"] == "path_error"),
            "failovers": sum(1 for r in reqs if r.get("failover")),
            "retransmitted_messages": sum(1 for e in events if e["kind"] == "retransmission"),
            "devices": {str(k): v for k, v in sorted(self.device_log.items())},
            "ios": [{k: r[k] for k in ("t", "path", "cid", "buf_id", "dir", "op", "data_len",
                                       "usr_len", "errno", "failover")} for r in reqs],
        }


def _aeth(msn):
    from scapy.contrib.roce import AETH
    return AETH(syndrome=AETH_ACK, msn=msn & 0xFFFFFF)


def _gid_bytes(gid):
    import socket
    return socket.inet_pton(socket.AF_INET6, gid)
