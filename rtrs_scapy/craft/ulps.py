"""Other RDMA protocols that share RTRS's fabrics, crafted with the Scapy layers:
NVMe-oF/RDMA, RPC-over-RDMA (NFS), iSER and SMB Direct connections (IB CM
REQ/REP/RTU with each protocol's service ID and private data, their messages as RC
SENDs, RDMA WRITEs and READs, DREQ/DREP), and random RC traffic.  The tests mix them
with real RTRS captures (docs/PROTOCOL.md#other-rdma-protocols); Wireshark's own
dissectors say what they are.

Layouts as the protocols define them: NVMe-oF RDMA transport binding (the RDMA CM
private data: recfmt, qid, hrqsize, hsqsize; 64-byte command capsules, 16-byte
completions, keyed SGL data blocks), RFC 8166 (RPC-over-RDMA version 1 header in
front of an ONC RPC message), RFC 7145 and Linux ``iser_hdr`` (iSER Hello, iSER
header + iSCSI BHS), MS-SMBD (negotiate request and response).
"""

import random
import struct

from scapy.contrib.roce import AETH
from scapy.packet import Raw

from ..layers.cm import CmaIpHdr, CMDrep, CMDreq, CMRep, CMReq, CMRtu, MAD, service_id
from ..layers.ib import (
    BTH, DETH, GSI_QPN, IETH, RETH, ImmDt, header_chain, opcode_value, transport_bytes,
)
from .capture_files import write_capture
from .cm import DREP, DREQ, REP, REQ, RTU, UD_SEND_ONLY
from .encap import Encap
from .hosts import Host
from .params import AETH_ACK, GSI_SPORT
from ..spec.constants import RPCRDMA_CONNECT_MAGIC, ULP_PORTS

PORTS = {name: port for port, name in ULP_PORTS.items()}
PMTU = 1024
NVME_READ, NVME_WRITE = 0x02, 0x01
SGL_KEYED_DATA = 0x40             # keyed SGL data block descriptor, address subtype
OP = {name: opcode_value("RC_" + name) for name in (
    "SEND_ONLY", "SEND_FIRST", "SEND_MIDDLE", "SEND_LAST", "SEND_ONLY_WITH_INVALIDATE",
    "SEND_ONLY_WITH_IMMEDIATE", "RDMA_WRITE_ONLY", "RDMA_WRITE_FIRST", "RDMA_WRITE_MIDDLE",
    "RDMA_WRITE_LAST", "RDMA_WRITE_ONLY_WITH_IMMEDIATE", "RDMA_READ_REQUEST",
    "RDMA_READ_RESPONSE_ONLY", "RDMA_READ_RESPONSE_FIRST", "RDMA_READ_RESPONSE_MIDDLE",
    "RDMA_READ_RESPONSE_LAST", "ACKNOWLEDGE")}


class UlpConn:
    """One RC connection: the two hosts (0 active, 1 passive), QPNs, PSNs, comm IDs."""

    def __init__(self, rng, hosts, qpns):
        self.hosts = hosts
        self.qpn = qpns
        self.psn = [rng.randrange(1 << 24), rng.randrange(1 << 24)]
        self.first_psn = list(self.psn)
        self.comm = [hosts[0].comm_id()[1], hosts[1].comm_id()[1]]
        self.tid = rng.getrandbits(32)


class UlpCrafter:
    """Frames of other RDMA protocols' connections between ``hosts`` (IP addresses),
    from ``start`` seconds on; ``frames`` is a list of (time, bytes)."""

    def __init__(self, seed=0, start=0.0):
        self.rng = random.Random(seed)
        self.encap = Encap()
        self.t = start
        self.hosts = {}
        self.frames = []

    def host(self, ip):
        if ip not in self.hosts:
            self.hosts[ip] = Host(self.rng, ip, ip, self.encap, 0)
        return self.hosts[ip]

    def _emit(self, src, dst, ib, sport=None, gap=20e-6):
        frame = self.encap.frame(src, dst, transport_bytes(ib), sport if sport is not None
                                 else self.rng.randrange(49152, 65536))
        self.frames.append((round(self.t, 6), frame))
        self.t += gap

    # -- IB CM ----------------------------------------------------------------------

    def _mad(self, conn, side, attr, body):
        src, dst = conn.hosts[side], conn.hosts[1 - side]
        psn = src.gsi_psn
        src.gsi_psn = (psn + 1) & 0xFFFFFF
        ib = (BTH(opcode=UD_SEND_ONLY, dqpn=GSI_QPN, psn=psn) / DETH() /
              MAD(transaction_id=conn.tid, attribute_id=attr) / body)
        self._emit(src, dst, ib, GSI_SPORT, gap=1e-3)

    def connect(self, client, server, qpns, port, req_private, rep_private=b""):
        """REQ (RDMA CM IP header + ``req_private``) to ``port``, REP, RTU."""
        conn = UlpConn(self.rng, (self.host(client), self.host(server)), qpns)
        cma = CmaIpHdr(ip_version=4, port=self.rng.randrange(32768, 61000),
                       src_addr="::" + client, dst_addr="::" + server)
        req = CMReq(local_comm_id=conn.comm[0], service_id=service_id(port),
                    local_ca_guid=conn.hosts[0].guid, local_qpn=qpns[0],
                    starting_psn=conn.psn[1], path_mtu=3, primary_local_port_lid=0xFFFF,
                    primary_remote_port_lid=0xFFFF, primary_local_port_gid=conn.hosts[0].gid,
                    primary_remote_port_gid=conn.hosts[1].gid, primary_hop_limit=64,
                    primary_local_ack_timeout=19)
        self._mad(conn, 0, REQ, req / cma / Raw(req_private))
        rep = CMRep(local_comm_id=conn.comm[1], remote_comm_id=conn.comm[0],
                    local_qpn=qpns[1], starting_psn=conn.psn[0], target_ack_delay=15,
                    local_ca_guid=conn.hosts[1].guid)
        self._mad(conn, 1, REP, rep / Raw(rep_private) if rep_private else rep)
        self._mad(conn, 0, RTU, CMRtu(local_comm_id=conn.comm[0], remote_comm_id=conn.comm[1]))
        return conn

    def disconnect(self, conn, side=0):
        """DREQ of ``side``, DREP of the other."""
        local, remote = (conn.comm[side], conn.comm[1 - side])
        self._mad(conn, side, DREQ, CMDreq(local_comm_id=local, remote_comm_id=remote,
                                           remote_qpn=conn.qpn[1 - side]))
        self._mad(conn, 1 - side, DREP, CMDrep(local_comm_id=remote, remote_comm_id=local))

    # -- RC ---------------------------------------------------------------------

    def _next_psn(self, conn, side):
        psn = conn.psn[side]
        conn.psn[side] = (psn + 1) & 0xFFFFFF
        return psn

    def _ack(self, conn, side, psn):
        """The responder (1 - side) acknowledges ``psn`` of ``side``."""
        ib = BTH(opcode=OP["ACKNOWLEDGE"], dqpn=conn.qpn[side], psn=psn) / AETH(
            syndrome=AETH_ACK, msn=0)
        self._emit(conn.hosts[1 - side], conn.hosts[side], ib)

    def _packet(self, conn, side, opcode, payload, *headers, psn=None):
        ib = BTH(opcode=opcode, dqpn=conn.qpn[1 - side],
                 psn=self._next_psn(conn, side) if psn is None else psn, ackreq=1)
        for header in headers:
            ib = ib / header
        pad = -len(payload) % 4
        ib.padcount = pad
        if payload or pad:
            ib = ib / Raw(payload + b"\0" * pad)
        self._emit(conn.hosts[side], conn.hosts[1 - side], ib)
        return ib.psn

    def message(self, conn, side, kind, payload, va=0, rkey=0, imm=None, ieth=None):
        """A SEND (``kind`` "send") or RDMA WRITE ("write") of ``side``, segmented at
        the MTU, with optional immediate / invalidate on the last packet; one ACK."""
        segs = [payload[i:i + PMTU] for i in range(0, len(payload), PMTU)] or [b""]
        psn = None
        for i, seg in enumerate(segs):
            last = i == len(segs) - 1
            pos = "ONLY" if len(segs) == 1 else "FIRST" if i == 0 else "LAST" if last else \
                "MIDDLE"
            name = "%s_%s" % ("SEND" if kind == "send" else "RDMA_WRITE", pos)
            headers = []
            if kind == "write" and pos in ("ONLY", "FIRST"):
                headers.append(RETH(va=va, rkey=rkey, dma_len=len(payload)))
            if last and imm is not None:
                name += "_WITH_IMMEDIATE"
                headers.append(ImmDt(imm=imm))
            if last and ieth is not None:
                name += "_WITH_INVALIDATE"
                headers.append(IETH(rkey=ieth))
            psn = self._packet(conn, side, OP[name], seg, *headers)
        self._ack(conn, side, psn)

    def read(self, conn, side, length, va, rkey):
        """An RDMA READ of ``side`` (request) and the other side's response packets."""
        psn = self._packet(conn, side, OP["RDMA_READ_REQUEST"], b"",
                           RETH(va=va, rkey=rkey, dma_len=length))
        segs = [bytes(self.rng.getrandbits(8) for _ in range(min(PMTU, length - i)))
                for i in range(0, length, PMTU)]
        conn.psn[side] = (psn + len(segs)) & 0xFFFFFF   # a READ takes one PSN per response
        for i, seg in enumerate(segs):
            pos = "ONLY" if len(segs) == 1 else "FIRST" if i == 0 else \
                "LAST" if i == len(segs) - 1 else "MIDDLE"
            headers = [] if pos == "MIDDLE" else [AETH(syndrome=AETH_ACK, msn=0)]
            self._packet(conn, 1 - side, OP["RDMA_READ_RESPONSE_" + pos], seg, *headers,
                         psn=(psn + i) & 0xFFFFFF)

    def data(self, length):
        return bytes(self.rng.getrandbits(8) for _ in range(length))

    # -- protocols ----------------------------------------------------------------

    def nvme(self, host, target, qpns, commands=6, qid=1, queue_size=128, block=4096):
        """An NVMe-oF/RDMA I/O queue: connect with NVMe's RDMA CM private data, READ and
        WRITE commands as 64-byte capsules (keyed SGL), the data by RDMA WRITE (to the
        host) or RDMA READ (from the host), 16-byte completions, disconnect."""
        req = struct.pack("<HHHHH22x", 0, qid, queue_size, queue_size - 1, 0)
        rep = struct.pack("<HH28x", 0, queue_size)
        conn = self.connect(host, target, qpns, PORTS["NVMe-oF/RDMA"], req, rep)
        for cid in range(commands):
            opcode = NVME_READ if cid % 2 == 0 else NVME_WRITE
            va, rkey = 0x7F0000000000 + cid * block, self.rng.getrandbits(32)
            sgl = struct.pack("<Q", va) + block.to_bytes(3, "little") + struct.pack(
                "<IB", rkey, SGL_KEYED_DATA)
            capsule = (struct.pack("<BBHIQQ", opcode, 0x40, cid, 1, 0, 0) + sgl +
                       struct.pack("<QIIII", cid * 8, block // 512 - 1, 0, 0, 0))
            assert len(capsule) == 64
            self.message(conn, 0, "send", capsule)
            if opcode == NVME_READ:
                self.message(conn, 1, "write", self.data(block), va=va, rkey=rkey)
            else:
                self.read(conn, 1, block, va, rkey)
            self.message(conn, 1, "send", struct.pack("<QHHHH", 0, cid + 1, qid, cid, 0))
        self.disconnect(conn, 0)
        return conn

    def nfs(self, client, server, qpns, calls=4):
        """RPC-over-RDMA version 1 (port 20049): NFSv3 NULL and GETATTR calls and their
        replies, each behind an RPC-over-RDMA header without chunks."""
        conn = self.connect(client, server, qpns, PORTS["NFS/RDMA"],
                            struct.pack(">IBBBB", RPCRDMA_CONNECT_MAGIC, 1, 0, 4, 4))
        for n in range(calls):
            xid = 0x1000 + n
            proc = n % 2                      # NULL, GETATTR
            args = struct.pack(">I", 8) + b"\x01" * 8 if proc else b""
            call = struct.pack(">IIIIIIIIII", xid, 0, 2, 100003, 3, proc, 0, 0, 0, 0) + args
            self.message(conn, 0, "send", struct.pack(">IIII III", xid, 1, 32, 0, 0, 0, 0) + call)
            reply = struct.pack(">IIIIII", xid, 1, 0, 0, 0, 0) + (b"\0" * 88 if proc else b"")
            self.message(conn, 1, "send", struct.pack(">IIII III", xid, 1, 32, 0, 0, 0, 0) + reply)
        self.disconnect(conn, 0)
        return conn

    def iser(self, initiator, target, qpns, commands=4):
        """iSER (port 3260): the iSER CM header, Hello and HelloReply, then SCSI READ
        commands as iSER-headed iSCSI PDUs, their data by RDMA WRITE, the responses."""
        conn = self.connect(initiator, target, qpns, PORTS["iSER"], bytes(4))
        for side, opcode in ((0, 0x20), (1, 0x30)):   # Hello, HelloReply, padded to 76 B
            self.message(conn, side, "send", struct.pack(">BBH72x", opcode, 0xAA, 16))
        for itt in range(commands):
            stag, va = self.rng.getrandbits(32), 0x7E0000000000 + itt * 4096
            hdr = struct.pack(">B3xIQIQ", 0x10 | 0x04, 0, 0, stag, va)
            cdb = bytes([0x28, 0, 0, 0, 0, itt, 0, 0, 8, 0]) + bytes(6)
            bhs = struct.pack(">BBxxB3s8sIIII", 0x01, 0xC1, 0, b"\0\0\0", bytes(8), itt,
                              4096, itt + 1, itt + 1) + cdb
            self.message(conn, 0, "send", hdr + bhs)
            self.message(conn, 1, "write", self.data(4096), va=va, rkey=stag)
            rsp = struct.pack(">BBBBB3s8sIIIIIIII", 0x21, 0x80, 0, 0, 0, b"\0\0\0", bytes(8),
                              itt, 0, itt + 1, itt + 2, itt + 33, 0, 0, 0)
            self.message(conn, 1, "send", struct.pack(">B3xIQIQ", 0x10, 0, 0, 0, 0) + rsp)
        self.disconnect(conn, 0)
        return conn

    def smbd(self, client, server, qpns):
        """SMB Direct (port 5445): negotiate request and response."""
        conn = self.connect(client, server, qpns, PORTS["SMB Direct"], b"")
        self.message(conn, 0, "send", struct.pack("<HHHHIII", 0x100, 0x100, 0, 255, 1364,
                                                  8192, 1048576))
        self.message(conn, 1, "send", struct.pack("<HHHHHHIIIII", 0x100, 0x100, 0x100, 0,
                                                  255, 255, 0, 1048576, 1364, 8192, 1048576))
        self.disconnect(conn, 0)
        return conn

    def random_rc(self, a, b, packets, qpns=(0x40, 0x41), opcodes=None):
        """RC traffic of no protocol between ``a`` and ``b``, no handshake: random RC
        opcodes (``opcodes``: their names, default every one), immediates, lengths and
        payloads, consecutive PSNs."""
        conn = UlpConn(self.rng, (self.host(a), self.host(b)), qpns)
        names = list(opcodes or (name for name in OP if name != "ACKNOWLEDGE"))
        for _ in range(packets):
            side = self.rng.randrange(2)
            name = self.rng.choice(names)
            rng = self.rng
            made = {"RETH": lambda: RETH(va=rng.getrandbits(64), rkey=rng.getrandbits(32),
                                         dma_len=rng.randrange(1 << 16)),
                    "AETH": lambda: AETH(syndrome=AETH_ACK, msn=0),
                    "ImmDt": lambda: ImmDt(imm=rng.getrandbits(32)),
                    "IETH": lambda: IETH(rkey=rng.getrandbits(32))}
            headers = [made[header.__name__]() for header in header_chain(OP[name])]
            size = self.rng.choice((0, 4, 16, 64, 100, 512, PMTU))
            payload = b"" if name == "RDMA_READ_REQUEST" else self.data(size)
            self._packet(conn, side, OP[name], payload, *headers)
        return conn

    def write(self, path):
        write_capture(path, self.frames, linktype=1)
