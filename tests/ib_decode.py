"""An independent decode of RTRS requests, responses and queue depths, from tshark's own
InfiniBand fields (no plugin) and the Scapy request layers: nothing of the analyzer
and nothing of the Lua plugin.  tests/test_lua_midsession.py holds the plugin to it on
captures cut mid-session; tests/cut_points.py reads the situation at each cut off it.

It reads tshark's opcode, immediate, destination QP, PSN, addresses, the CM REQ/REP
QPNs, and the request bytes for the IO_REQ offset (the Scapy request layers; the
payload where tshark finds it, cut from the frame's record); it drops
duplicate PSNs (go-back-N) and pairs by pairing domain (the session of a visible
handshake, else the address pair) with a reference pairing of its own, under the
handshake's queue depth or rtrs_scapy/analysis/qdepth.py's rule where none is
visible.  Its request count on a whole real capture is held to the capture's truth
(the kernel's requests on the wire, test_lua_midsession.py), so on a cut it is the
kernel's count of the requests whose last packet remains.
"""

import functools
import gzip
import struct
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Optional

from rtrs_scapy.analysis.qdepth import infer
from rtrs_scapy.spec.imm import IMM_PAYLOAD_MASK, MSG_ID_MASK, mem_bits
from rtrs_scapy.layers.rtrs import RtrsMsgConnReq, RtrsMsgConnRsp
from rtrs_scapy.layers.rtrs_request import RtrsReadRequest, request_class

from once_per_run import once_per_run
from reference_pairing import reference_pairs
from tshark_util import TSHARK, tshark_env

PSN_MOD = 1 << 24
# RC opcodes (docs/PROTOCOL.md#opcodes-and-extension-headers)
FIRST = {0x00, 0x06}
MIDDLE = {0x01, 0x07}
LAST = {0x02, 0x03, 0x08, 0x09, 0x16}
REQUEST_OPS = {0x09, 0x0B}   # RDMA WRITE LAST / ONLY with immediate
ACK = 0x11
CM_REQ, CM_REJ, CM_REP = 0x0010, 0x0012, 0x0013
ICRC_LEN = 4
LINKTYPE_ETHERNET = 1
# the classic pcap file (pcap-savefile(5)): a 24-byte file header (the link type at 20),
# then records, each a 16-byte header (its captured length at 8) and the frame
PCAP_MAGICS = (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\xc3\xd4",
               b"\xa1\xb2\x3c\x4d")
FILE_HEADER, LINK_TYPE_AT, RECORD_HEADER, CAPLEN_AT = 24, 20, 16, 8


def _byte_order(data):
    """struct's byte order of a classic pcap, from its magic."""
    return "<" if data[:4] in PCAP_MAGICS[:2] else ">"

IB_FIELDS = ("frame.number", "frame.time_epoch", "ip.src", "ip.dst", "infiniband.bth.opcode",
             "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.immdt", "data.len",
             "infiniband.mad.attributeid", "infiniband.mad.transactionid",
             "infiniband.cm.req.localqpn", "infiniband.cm.rep.localqpn",
             "infiniband.cm.req.ip_cm.private", "infiniband.cm.rep.private",
             "ipv6.src", "ipv6.dst", "infiniband.mad.mgmtclass", "infiniband.bth.padcnt")
#: what the CM tests read of each CM MAD (management class 7), as tshark's text
CM_FIELDS = ("frame.number", "ip.src", "ipv6.src", "infiniband.mad.attributeid",
             "infiniband.cm.req", "infiniband.cm.rep", "infiniband.cm.rej.localcommid",
             "infiniband.cm.rej.remotecommid", "infiniband.cm.rej.reason",
             "infiniband.cm.dreq.localcommid", "infiniband.cm.rej.private")
FIELDS = tuple(dict.fromkeys(IB_FIELDS + CM_FIELDS))


# -- cutting ---------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def pcap_records(pcap):
    """(bytes of the capture, offset of each record): a classic pcap, gzip or not."""
    path = Path(pcap)
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    order = _byte_order(data)
    offsets, pos = [], FILE_HEADER
    while pos + RECORD_HEADER <= len(data):
        offsets.append(pos)
        pos += RECORD_HEADER + struct.unpack_from(order + "I", data, pos + CAPLEN_AT)[0]
    return data, offsets


def write_cut(pcap, first, path):
    """The capture from frame ``first`` (1-based) on."""
    data, offsets = pcap_records(pcap)
    path.write_bytes(data[:FILE_HEADER] + data[offsets[first - 1]:])
    return path


# -- tshark's view ----------------------------------------------------------------

@dataclass
class Frame:
    number: int
    time: float
    src: Optional[str]
    dst: Optional[str]
    opcode: Optional[int]
    destqp: Optional[int]
    psn: Optional[int]
    imm: Optional[int]
    payload: Optional[bytes]         # of a file not a classic pcap (else: payloads())
    data_len: Optional[str]          # tshark's data.len and BTH pad count: where the
    pad: Optional[str]               # payload lies in a classic pcap's record
    attr: Optional[int]
    tid: Optional[str]
    req_qpn: Optional[int]
    rep_qpn: Optional[int]
    req_private: bytes
    rep_private: bytes
    src6: Optional[str]              # the IPv6 addresses (src/dst: IPv4 only)
    dst6: Optional[str]
    cm: Optional[dict]               # a CM MAD's CM_FIELDS, None for any other frame


class BthRow(NamedTuple):
    frame: int
    src: Optional[str]       # the IPv4 or IPv6 source address
    dst: Optional[str]
    opcode: Optional[int]    # None: no BTH in the frame
    destqp: Optional[int]
    psn: Optional[int]
    imm: Optional[int]       # the immediate (ImmDt), None without one


def _int(text):
    return int(text, 0) if text else None


def _classic_ethernet(pcap):
    """Whether ``pcap`` is a classic pcap (gzip or not) of Ethernet frames."""
    path = Path(pcap)
    with (gzip.open(path) if path.suffix == ".gz" else open(path, "rb")) as f:
        head = f.read(FILE_HEADER)
    if head[:4] not in PCAP_MAGICS or len(head) < FILE_HEADER:
        return False
    return struct.unpack_from(_byte_order(head) + "I", head, LINK_TYPE_AT)[0] \
        == LINKTYPE_ETHERNET


def _records(pcap):
    """The bytes of each record of a classic Ethernet pcap (gzip or not)."""
    data, offsets = pcap_records.__wrapped__(pcap)   # not kept: only the payloads are
    order = _byte_order(data)
    view = memoryview(data)
    return [view[at + RECORD_HEADER:at + RECORD_HEADER
                 + struct.unpack_from(order + "I", data, at + CAPLEN_AT)[0]]
            for at in offsets]


def _payload(record, data_len, pad_count):
    """The IB payload that tshark finds in a RoCE frame, ``data_len`` bytes before its
    pad and ICRC (its ``data.len`` and ``infiniband.bth.padcnt``)."""
    if not data_len:
        return b""
    end = len(record) - ICRC_LEN - int(pad_count or 0)
    return bytes(record[end - int(data_len):end])


@once_per_run
def ib_frames(pcap):
    """Every frame of the whole capture as tshark's own dissectors show it (one tshark
    run per capture and test run: the cut sweeps and test_failover.py read it).  The
    payloads of a classic Ethernet pcap are cut from its records where tshark finds
    them, rather than printed by tshark in hex (the bulk of its output), and only for
    the captures whose payloads are read (``payloads``); of another file, tshark
    prints them."""
    classic = _classic_ethernet(pcap)
    fields = FIELDS if classic else FIELDS + ("data.data",)
    cmd = [TSHARK, "-n", "-r", str(pcap), "--disable-protocol", "rpcordma",
           "-T", "fields", "-E", "occurrence=f"]
    for f in fields:
        cmd += ["-e", f]
    run = subprocess.run(cmd, capture_output=True, text=True, env=tshark_env(), check=True)
    at = {name: k for k, name in enumerate(fields)}     # a frame's fields by position
    mgmt, src6, dst6, pad = (at[f] for f in ("infiniband.mad.mgmtclass", "ipv6.src",
                                             "ipv6.dst", "infiniband.bth.padcnt"))
    data = at.get("data.data")
    cm_at = [(f, at[f]) for f in CM_FIELDS]
    frames = []
    for line in run.stdout.splitlines():
        v = line.split("\t")
        imm = v[7].split(",")[0].replace(":", "")
        cm = {f: v[k] for f, k in cm_at} if v[mgmt] and int(v[mgmt], 0) == 7 else None
        payload = None if classic else bytes.fromhex(v[data])
        frames.append(Frame(int(v[0]), float(v[1]), v[2] or None, v[3] or None, _int(v[4]),
                            _int(v[5]), _int(v[6]), int(imm, 16) if imm else None, payload,
                            v[8], v[pad], _int(v[9]), v[10] or None, _int(v[11]),
                            _int(v[12]), bytes.fromhex(v[13]), bytes.fromhex(v[14]),
                            v[src6] or None, v[dst6] or None, cm))
    return frames


@once_per_run
def payloads(pcap):
    """The IB payload of every frame of ``ib_frames(pcap)``, in its order (what the
    decode reads; the other views of the frames need none)."""
    frames = ib_frames(pcap)
    if not _classic_ethernet(pcap):
        return [f.payload for f in frames]
    records = _records(pcap)
    return [_payload(records[f.number - 1], f.data_len, f.pad) for f in frames]


@functools.lru_cache(maxsize=None)
def bth_rows(pcap):
    """Every frame's addresses (IPv4 or IPv6), BTH opcode, destination QP, PSN and
    immediate as tshark shows them (first occurrence), read by the tests that find
    retransmissions (a repeated destination, QP and PSN) in it."""
    return [BthRow(f.number, f.src or f.src6, f.dst or f.dst6, f.opcode, f.destqp, f.psn,
                   f.imm) for f in ib_frames(pcap)]


def cm_rows(pcap):
    """Every CM MAD (management class 7): {field of CM_FIELDS: text}, a copy each call."""
    return [dict(f.cm) for f in ib_frames(pcap) if f.cm is not None]


# -- the decode ---------------------------------------------------------------------

@dataclass
class Decode:
    reads: set = field(default_factory=set)       # request frames
    writes: set = field(default_factory=set)
    partial: set = field(default_factory=set)     # requests whose start precedes the cut
    depth: dict = field(default_factory=dict)     # request/response frame -> (qd, source)
    pairs: dict = field(default_factory=dict)     # response frame -> (request frame, seconds)


@functools.lru_cache(maxsize=None)
def _request_of(message):
    """("read"|"write", offset) of a whole request message (the Scapy request layers)."""
    cls = request_class(message)
    assert cls is not None, "an IO_REQ without an RTRS trailer in a real capture"
    return ("read" if cls is RtrsReadRequest else "write"), cls(message).imm_offset


@functools.lru_cache(maxsize=None)
def _conn_req(private):
    """(magic, paths_uuid) of the conn_req in a CM REQ's private data."""
    req = RtrsMsgConnReq(private)
    return req.magic, str(req.paths_uuid)


@functools.lru_cache(maxsize=None)
def _conn_rsp(private):
    """(magic, errno, queue_depth) of the conn_rsp in a CM REP's private data."""
    rsp = RtrsMsgConnRsp(private)
    return rsp.magic, rsp.errno, rsp.queue_depth


def _handshake(frame, setups, known):
    """CM REQ/REP: the QPs of a connection set up in the visible frames -> its session."""
    if frame.attr == CM_REQ and len(frame.req_private) >= len(RtrsMsgConnReq()):
        magic, paths_uuid = _conn_req(frame.req_private)
        if magic == 0x1BBD:
            setups[frame.tid] = (frame.src, frame.req_qpn, paths_uuid)
    elif frame.attr == CM_REP and frame.tid in setups and len(frame.rep_private) >= 8:
        magic, errno, queue_depth = _conn_rsp(frame.rep_private)
        client, client_qpn, session = setups[frame.tid]
        if magic == 0x1BBD and errno == 0 and queue_depth:
            known.setdefault(("session", session), queue_depth)
            known[(frame.src, frame.rep_qpn)] = ("session", session)
            known[(client, client_qpn)] = ("session", session)


@functools.lru_cache(maxsize=None)
def decode(pcap, first):
    """What the frames from ``first`` on say, without the plugin (not to be changed:
    it is kept for the next caller)."""
    out = Decode()
    setups, known, streams, events = {}, {}, {}, {}
    for f, payload in zip(ib_frames(pcap)[first - 1:], payloads(pcap)[first - 1:]):
        _handshake(f, setups, known)
        if f.opcode is None or f.opcode >= 0x20 or f.opcode == ACK:
            continue
        key = (f.dst, f.destqp)
        stream = streams.get(key)
        new_stream = stream is None
        if new_stream:
            stream = streams[key] = {"msg": None}
        else:
            delta = (f.psn - stream["psn"]) % PSN_MOD
            if delta == 0 or delta >= PSN_MOD // 2:
                continue   # a PSN seen before: go-back-N retransmission
            if delta != 1:
                stream["msg"] = None   # a gap: the message in progress is lost
        stream["psn"] = f.psn
        message = None   # [whole?, payload chunks]
        if f.opcode in FIRST:
            stream["msg"] = [True, [payload]]
        elif f.opcode in MIDDLE | LAST:
            if stream["msg"] is None and new_stream:
                stream["msg"] = [False, []]   # the capture starts inside this message
            if stream["msg"] is not None:
                stream["msg"][1].append(payload)
            if f.opcode in LAST:
                message, stream["msg"] = stream["msg"], None
        else:
            message = [True, [payload]]
        domain = known.get(key, ("path", frozenset((f.src, f.dst))))
        kind = None if f.imm is None else f.imm >> 28
        if kind == 0 and f.opcode in REQUEST_OPS and message is not None:
            whole, chunks = message
            op, offset = _request_of(b"".join(chunks)) if whole else ("write", None)
            (out.reads if op == "read" else out.writes).add(f.number)
            if not whole:
                out.partial.add(f.number)
            events.setdefault(domain, []).append(
                (("req", f.imm & IMM_PAYLOAD_MASK, offset), f.number, f.time))
        elif kind in (1, 2):
            events.setdefault(domain, []).append((("rsp", f.imm & MSG_ID_MASK), f.number, f.time))
    for domain, evs in events.items():
        if domain[0] == "session":
            depth = known[domain]
            bits, qd, source = mem_bits(depth), depth, "handshake"
        else:
            rule = infer(event for event, _n, _t in evs)
            bits, qd, source = rule.mem_bits, rule.queue_depth, rule.source
        for _event, number, _t in evs:
            out.depth[number] = (qd, source)
        for req, rsp in reference_pairs([e for e, _n, _t in evs], bits):
            out.pairs[evs[rsp][1]] = (evs[req][1], evs[rsp][2] - evs[req][2])
    return out


def in_flight_at(pcap, ends):
    """{(client, server): requests in flight} at each time of ``ends`` (epoch seconds):
    the requests of the whole capture sent by then whose response comes later or
    never, as this decode finds them."""
    frames = ib_frames(pcap)
    wire = decode(pcap, 1)
    answered = {req: rsp for rsp, (req, _seconds) in wire.pairs.items()}
    requests = [((frames[r - 1].src, frames[r - 1].dst), frames[r - 1].time,
                 frames[answered[r] - 1].time if r in answered else None)
                for r in sorted(wire.reads | wire.writes)]
    counts = []
    for end in ends:
        count = Counter()
        for key, sent, answer in requests:
            count[key] += sent <= end and (answer is None or answer > end)
        counts.append(count)
    return counts
