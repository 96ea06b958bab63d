"""Connections of the other RDMA protocols that share RTRS's fabrics, told by their
CM exchange (docs/PROTOCOL.md#other-rdma-protocols).

A CM REQ without RTRS's conn_req is classified by its service ID (the RDMA CM port)
and the format of its private data: NVMe-oF/RDMA, NFS/RDMA (RPC-over-RDMA), iSER,
SMB Direct, SRP, or other.  Its REP binds the connection's two QPs in the engine to a
marker of their own (``marker()``, below -1), so that nothing of theirs reaches an
RTRS path: not their messages, not their anomalies, not their RTU/REJ/DREQ/DREP.
What is counted of them is listed in the summary's ``other_rdma``.
"""

import struct
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import List, Optional

from ..layout.wire import IP_SERVICE_ID_PREFIX, RDMA_PS_IB
from ..spec.constants import (
    RPCRDMA_CONNECT_MAGIC, SRP_BUF_FORMATS, SRP_LOGIN_REQ, SRP_LOGIN_REQ_SIZE, ULP_PORTS,
)

NVME = "NVMe-oF/RDMA"
NVME_CM_REQ = struct.Struct("<HHHHH22s")   # nvme_rdma_cm_req (include/linux/nvme-rdma.h)
SRP_BUF_FMT = struct.Struct(">H")          # srp_login_req.req_buf_fmt, at offset 24
SRP_BUF_FMT_AT = 24
FIRST_MARKER = -2                          # the engine's connection of an unbound stream: -1


def marker(index):
    """The engine's connection value of the ``index``-th other connection."""
    return FIRST_MARKER - index


def index_of(value):
    return FIRST_MARKER - value


def _ip_port(sid):
    """The RDMA CM port of an IP service ID, else None."""
    if sid >> 24 == IP_SERVICE_ID_PREFIX >> 24 and (sid >> 16) & 0xFF != RDMA_PS_IB & 0xFF:
        return sid & 0xFFFF
    return None


def is_nvme_cm_req(private):
    """nvme_rdma_cm_req: record format 0, queue sizes given, the reserved bytes zero."""
    if len(private) < NVME_CM_REQ.size:
        return False
    recfmt, _qid, hrqsize, hsqsize, _cntlid, reserved = NVME_CM_REQ.unpack_from(private)
    return recfmt == 0 and hrqsize > 0 and hsqsize > 0 and not any(reserved)


def is_srp_login(private):
    """srp_login_req: its opcode, and buffer formats of SRP's only."""
    if len(private) < SRP_LOGIN_REQ_SIZE or private[0] != SRP_LOGIN_REQ:
        return False
    formats = SRP_BUF_FMT.unpack_from(private, SRP_BUF_FMT_AT)[0]
    return formats != 0 and formats & ~SRP_BUF_FORMATS == 0


def classify(sid, private):
    """The protocol of a CM REQ that is not RTRS's (``private``: its private data after
    the RDMA CM IP header, when the service ID is an IP one)."""
    port = _ip_port(sid)
    if is_nvme_cm_req(private):
        return NVME
    if port is None:
        return "SRP" if is_srp_login(private) else "other"
    if private[:4] == struct.pack(">I", RPCRDMA_CONNECT_MAGIC):
        return ULP_PORTS[20049]
    if ULP_PORTS.get(port) == NVME:     # NVMe's port without NVMe's private data
        return "other"
    return ULP_PORTS.get(port, "other")


@dataclass(eq=False)
class OtherConnection:
    """One RC connection of another protocol: its CM exchange and what it carried."""
    index: int
    protocol: str
    client: str
    server: str
    client_raw: tuple
    server_raw: tuple
    service_id: int
    port: Optional[int]
    client_qpn: int
    req_psn: int
    client_comm_id: int
    server_qpn: Optional[int] = None
    server_comm_id: Optional[int] = None
    connect_frames: List[int] = field(default_factory=list)     # REQ, REP, RTU, REJ
    disconnect_frames: List[int] = field(default_factory=list)  # DREQ, DREP
    rejected: bool = False
    packets: int = 0       # its CM MADs and the RC packets to its QPs
    bytes: int = 0         # payload of its SENDs, RDMA WRITEs and READ responses
    messages: int = 0      # SENDs and RDMA WRITEs completed

    def summary(self):
        return {"protocol": self.protocol, "client": self.client, "server": self.server,
                "port": self.port, "service_id": "0x%016x" % self.service_id,
                "client_qpn": self.client_qpn, "server_qpn": self.server_qpn,
                "packets": self.packets, "bytes": self.bytes, "messages": self.messages,
                "rejected": self.rejected, "connect_frames": list(self.connect_frames),
                "disconnect_frames": list(self.disconnect_frames)}


class OtherRdma:
    """The other protocols' connections of a capture (``an``: the Analyzer)."""

    def __init__(self, an):
        self.an = an
        self.by_comm_id = OrderedDict()   # (address, comm id) -> OtherConnection
        self.connections = []

    def requested(self, frame, src, dst, sid, qpn, psn, comm_id, private):
        """A CM REQ that is not RTRS's; a retransmission of one counts as a packet."""
        conn = self.by_comm_id.get((src, comm_id))
        if conn is None:
            if len(self.connections) >= self.an.bounds.size["cm"]:
                self.an.bounds.refuse("cm")
                return None
            conn = OtherConnection(
                len(self.connections), classify(sid, private), self.an.text(src),
                self.an.text(dst), src, dst, sid, _ip_port(sid), qpn, psn, comm_id)
            self.connections.append(conn)
            self._put((src, comm_id), conn)
            conn.connect_frames.append(frame)
        conn.packets += 1
        return conn

    def claimed(self, address, comm_id):
        """An RTRS server answered this REQ: it is RTRS's after all (a bad magic)."""
        conn = self.by_comm_id.pop((address, comm_id), None)
        if conn is not None:
            conn.protocol = None

    def replied(self, frame, src, dst, comm_id, remote_id, qpn, psn):
        """A REP to one of these REQs: the QPs are bound to the connection."""
        conn = self.by_comm_id.get((dst, remote_id))
        if conn is None:
            return None
        conn.packets += 1
        if conn.server_comm_id is None:
            conn.server_qpn, conn.server_comm_id = qpn, comm_id
            conn.connect_frames.append(frame)
            self._put((src, comm_id), conn)
            self.an.bind_other(conn, psn)
        return conn

    def cm(self, frame, src, dst, local_id, remote_id, kind):
        """An RTU, REJ, DREQ or DREP (``kind``) of one of these connections, or None."""
        conn = self.by_comm_id.get((src, local_id)) or self.by_comm_id.get((dst, remote_id))
        if conn is None:
            return None
        conn.packets += 1
        frames = conn.disconnect_frames if kind in ("dreq", "drep") else conn.connect_frames
        if len(frames) < 16:
            frames.append(frame)
        conn.rejected |= kind == "rej"
        return conn

    def _put(self, key, conn):
        self.by_comm_id[key] = conn
        if len(self.by_comm_id) > self.an.bounds.size["cm"]:
            self.by_comm_id.popitem(last=False)
            self.an.bounds.evict("cm")

    def of(self, value):
        """The connection of an engine marker."""
        return self.connections[index_of(int(value))]

    def summary(self):
        return [conn.summary() for conn in self.connections
                if conn.protocol is not None]
