"""The crafter's model of the machines and their connections: a host (addresses,
GUID, GSI PSN, IP id, comm ID allocator), a QP pair (one cid), a path, and the
frame records waiting to be framed."""

import struct

from .params import C, S


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
        self.silent = None       # the side whose link is down beyond the capture point
        self.restore_at = None   # when that link comes back (None: at the next reconnect)
        self.unacked = []        # messages waiting for an ACK that will not come
        self.pending = []        # requests without response (failover candidates)
        self.hb_due = {C: None, S: None}
        self.missed = {C: 0, S: 0}   # hb_missed_cnt of each side
        self.reconnect_at = None
        self.faults = []         # how the next automatic reconnect attempts fail (connect kwargs)
        self.dreqs = []          # (TID, DREQ) of the last disconnect, to send them again
        self.dreq_retry = None   # when the unanswered DREQs go out again
        self.dreq_tries = 0
        self.connects = 0
        self.cma_port = None
        self.flow_label = 0

    @property
    def server_silent(self):
        """Nothing of the server reaches the capture point (nor the client)."""
        return self.silent == S

    @property
    def name(self):
        return "%s@%s" % (self.client.ip, self.server.ip)


class Rec:
    """One frame to be: time, hosts, the IB part (BTH and up) and its UDP source port."""
    __slots__ = ("t", "src", "dst", "ib", "sport")

    def __init__(self, t, src, dst, ib, sport):
        self.t, self.src, self.dst, self.ib, self.sport = t, src, dst, ib, sport
