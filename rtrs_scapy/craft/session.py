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

The work is split by subject: ``hosts`` (machines, QP pairs, paths), ``cm``
(handshakes, rejects, disconnects), ``rc`` (segmentation, ACKs, go-back-N),
``timers`` (heartbeats, path failure, failover, reconnects), ``workload`` (RNBD
requests and responses), ``encap`` (framing), ``truth`` (the ground truth).

Everything random (UUIDs, QPNs, PSNs, comm IDs, MACs, kernel addresses in the
rkeys/VAs, data) comes from one ``random.Random(seed)``: the same seed gives
byte-identical packets.  Time is a simulated clock; ``idle()`` advances it.
"""

import random
import uuid

from scapy.layers.l2 import Ether

from ..spec.constants import DEFAULT_MAX_CHUNK_SIZE, DEFAULT_MAX_HDR_SIZE, DEFAULT_QUEUE_DEPTH, RTRS_PORT
from ..layers.ib import LRH, transport_bytes
from .cm import CmSteps
from .encap import Encap
from .hosts import Host, Path, Rec
from .params import PMTU_CODES, RC_SPORT, C
from .rc import RcTransport
from .timers import Timers
from .truth import session_truth
from .workload import RnbdWorkload

__all__ = ["Encap", "SessionCrafter"]


class SessionCrafter(CmSteps, RcTransport, Timers, RnbdWorkload):
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
        if path.silent == side:
            return
        self._recs.append(Rec(t, src, dst, ib, sport))

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

    # -- output --------------------------------------------------------------------

    def frames(self, since=None):
        """[(time, frame bytes)] in time order; IP ids are given in that order."""
        recs = sorted(self._recs, key=lambda r: r.t)
        bodies = {}  # id(ib) -> its bytes: retransmissions send the same packets again
        out = []
        for rec in recs:
            if since is not None and rec.t < since:
                continue
            body = bodies.get(id(rec.ib))
            if body is None:
                body = bodies[id(rec.ib)] = transport_bytes(rec.ib)
            out.append((round(rec.t, 6), self.encap.frame(rec.src, rec.dst, body, rec.sport)))
        return out

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
        """What went into the capture, as a JSON-serialisable dict (craft/truth.py)."""
        return session_truth(self, since, scenario, params)
