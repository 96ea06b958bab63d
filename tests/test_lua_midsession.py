"""tshark + the generated plugin on real captures cut mid-session, against an
independent decode of the same frames that does not use the plugin.

The independent decode reads tshark's own InfiniBand fields (no plugin):
opcode, immediate, destination QP, PSN, addresses, the CM REQ/REP QPNs, and
the request bytes for the IO_REQ offset (the Scapy request layers); it drops
duplicate PSNs (go-back-N), pairs by pairing domain (the session of a visible
handshake, else the address pair) with rtrs_scapy/analysis/qdepth.py's rule
and pair_events.  Its request count on the whole capture is held to the
capture's truth (the kernel's requests on the wire), so on a cut it is the
kernel's count of the requests whose last packet remains.

The small captures are cut at every 50th frame, load.pcap.gz (135k frames) at
three points; each cut is one tshark run.
"""

import functools
import gzip
import struct
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Optional

import pytest

from rtrs_scapy.analysis.qdepth import infer, pair_events
from rtrs_scapy.spec.imm import IMM_PAYLOAD_MASK, MSG_ID_MASK, mem_bits
from rtrs_scapy.layers.rtrs import RtrsMsgConnReq, RtrsMsgConnRsp
from rtrs_scapy.layers.rtrs_request import RtrsReadRequest, request_class

from conftest import REPO, real_pcap, real_truth
from tshark_util import TSHARK, tshark_env

LUA = REPO / "wireshark" / "rtrs.lua"
SMALL = ("basic_inval", "basic_noinval", "jumbo", "multipath", "errors", "discard")
STEP = 50
PSN_MOD = 1 << 24
# RC opcodes (docs/PROTOCOL.md#opcodes-and-extension-headers)
FIRST = {0x00, 0x06}
MIDDLE = {0x01, 0x07}
LAST = {0x02, 0x03, 0x08, 0x09, 0x16}
REQUEST_OPS = {0x09, 0x0B}   # RDMA WRITE LAST / ONLY with immediate
ACK = 0x11
CM_REQ, CM_REP = 0x0010, 0x0013

IB_FIELDS = ("frame.number", "frame.time_epoch", "ip.src", "ip.dst", "infiniband.bth.opcode",
             "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.immdt", "data.data",
             "infiniband.mad.attributeid", "infiniband.mad.transactionid",
             "infiniband.cm.req.localqpn", "infiniband.cm.rep.localqpn",
             "infiniband.cm.req.ip_cm.private", "infiniband.cm.rep.private")
PLUGIN_FIELDS = ("frame.number", "rtrs.queue_depth", "rtrs.queue_depth_source",
                 "rtrs.response_time", "rtrs.request_in", "rtrs.response_in", "rtrs.rdma_read.type",
                 "rtrs.rdma_write.type", "rtrs.partial", "_ws.expert.message")


# -- cutting ---------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def pcap_records(name):
    """(bytes of the capture, offset of each record): a classic pcap, gzip or not."""
    path = real_pcap(name)
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    offsets, pos = [], 24
    while pos + 16 <= len(data):
        offsets.append(pos)
        pos += 16 + struct.unpack_from(order + "I", data, pos + 8)[0]
    return data, offsets


def write_cut(name, first, path):
    """The capture from frame ``first`` (1-based) on."""
    data, offsets = pcap_records(name)
    path.write_bytes(data[:24] + data[offsets[first - 1]:])
    return path


# -- the independent decode -------------------------------------------------------

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
    payload: bytes
    attr: Optional[int]
    tid: Optional[str]
    req_qpn: Optional[int]
    rep_qpn: Optional[int]
    req_private: bytes
    rep_private: bytes


def _int(text):
    return int(text, 0) if text else None


@functools.lru_cache(maxsize=None)
def ib_frames(name):
    """Every frame of the whole capture as tshark's own dissectors show it."""
    cmd = [TSHARK, "-n", "-r", str(real_pcap(name)), "--disable-protocol", "rpcordma",
           "-T", "fields", "-E", "occurrence=f"]
    for f in IB_FIELDS:
        cmd += ["-e", f]
    run = subprocess.run(cmd, capture_output=True, text=True, env=tshark_env(), check=True)
    frames = []
    for line in run.stdout.splitlines():
        v = line.split("\t")
        imm = v[7].split(",")[0]
        frames.append(Frame(int(v[0]), float(v[1]), v[2] or None, v[3] or None, _int(v[4]),
                            _int(v[5]), _int(v[6]), int(imm, 16) if imm else None,
                            bytes.fromhex(v[8]), _int(v[9]), v[10] or None, _int(v[11]),
                            _int(v[12]), bytes.fromhex(v[13]), bytes.fromhex(v[14])))
    return frames


@dataclass
class Decode:
    reads: set = field(default_factory=set)       # request frames
    writes: set = field(default_factory=set)
    partial: set = field(default_factory=set)     # requests whose start precedes the cut
    depth: dict = field(default_factory=dict)     # request/response frame -> (qd, source)
    pairs: dict = field(default_factory=dict)     # response frame -> (request frame, seconds)


def _request_of(message):
    """("read"|"write", offset) of a whole request message (the Scapy request layers)."""
    cls = request_class(message)
    assert cls is not None, "an IO_REQ without an RTRS trailer in a real capture"
    return ("read" if cls is RtrsReadRequest else "write"), cls(message).imm_offset


def _handshake(frame, setups, known):
    """CM REQ/REP: the QPs of a connection set up in the visible frames -> its session."""
    if frame.attr == CM_REQ and len(frame.req_private) >= len(RtrsMsgConnReq()):
        req = RtrsMsgConnReq(frame.req_private)
        if req.magic == 0x1BBD:
            setups[frame.tid] = (frame.src, frame.req_qpn, str(req.paths_uuid))
    elif frame.attr == CM_REP and frame.tid in setups and len(frame.rep_private) >= 8:
        rsp = RtrsMsgConnRsp(frame.rep_private)
        client, client_qpn, session = setups[frame.tid]
        if rsp.magic == 0x1BBD and rsp.errno == 0 and rsp.queue_depth:
            known.setdefault(("session", session), rsp.queue_depth)
            known[(frame.src, frame.rep_qpn)] = ("session", session)
            known[(client, client_qpn)] = ("session", session)


def decode(name, first):
    """What the frames from ``first`` on say, without the plugin."""
    out = Decode()
    setups, known, streams, events = {}, {}, {}, {}
    for f in ib_frames(name)[first - 1:]:
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
        message = None
        if f.opcode in FIRST:
            stream["msg"] = [True, f.payload]
        elif f.opcode in MIDDLE | LAST:
            if stream["msg"] is None and new_stream:
                stream["msg"] = [False, b""]   # the capture starts inside this message
            if stream["msg"] is not None:
                stream["msg"][1] += f.payload
            if f.opcode in LAST:
                message, stream["msg"] = stream["msg"], None
        else:
            message = [True, f.payload]
        domain = known.get(key, ("path", frozenset((f.src, f.dst))))
        kind = None if f.imm is None else f.imm >> 28
        if kind == 0 and f.opcode in REQUEST_OPS and message is not None:
            whole, data = message
            op, offset = _request_of(data) if whole else ("write", None)
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
        for req, rsp in pair_events([e for e, _n, _t in evs], bits):
            out.pairs[evs[rsp][1]] = (evs[req][1], evs[rsp][2] - evs[req][2])
    return out


# -- the plugin ---------------------------------------------------------------------

@dataclass
class Shown:
    reads: set = field(default_factory=set)
    writes: set = field(default_factory=set)
    partial: set = field(default_factory=set)
    depth: dict = field(default_factory=dict)
    pairs: dict = field(default_factory=dict)
    response_in: dict = field(default_factory=dict)   # request frame -> response frame
    lua_errors: list = field(default_factory=list)


def plugin_view(path, shift):
    """The plugin's fields on a cut capture, frame numbers of the whole capture."""
    cmd = [TSHARK, "-n", "-2", "-Y", "frame", "-X", "lua_script:%s" % LUA, "-r", str(path),
           "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|"]
    for f in PLUGIN_FIELDS:
        cmd += ["-e", f]
    run = subprocess.run(cmd, capture_output=True, text=True, env=tshark_env(), timeout=900)
    assert run.returncode == 0, run.stderr
    shown = Shown()
    if "Lua Error" in run.stderr:
        shown.lua_errors.append(run.stderr)
    for line in run.stdout.splitlines():
        (number, depth, source, rtime, request_in, response_in, read, write, partial,
         expert) = line.split("\t")
        number = int(number) + shift
        if "Lua Error" in expert:
            shown.lua_errors.append((number, expert))
        if depth:
            shown.depth[number] = (int(depth.split("|")[0]), source.split("|")[0])
        if rtime:
            shown.pairs[number] = (int(request_in) + shift, float(rtime))
        if response_in:
            shown.response_in[number] = int(response_in) + shift
        if read:
            shown.reads.add(number)
        if write:
            shown.writes.add(number)
        if partial:
            shown.partial.add(number)
    return shown


def compare(name, first, path):
    """Differences between the plugin and the independent decode on one cut."""
    want, got = decode(name, first), plugin_view(path, first - 1)
    problems = []
    if got.lua_errors:
        problems.append(("lua errors", got.lua_errors[:2]))
    for what in ("reads", "writes", "partial"):
        if getattr(got, what) != getattr(want, what):
            problems.append((what, sorted(getattr(want, what) ^ getattr(got, what))[:5]))
    wrong_depth = [(n, want.depth[n], got.depth.get(n)) for n in sorted(want.depth)
                   if got.depth.get(n) != want.depth[n]]
    if wrong_depth:
        problems.append(("queue depth", wrong_depth[:3]))
    if set(got.pairs) != set(want.pairs):
        problems.append(("response_time frames", sorted(set(got.pairs) ^ set(want.pairs))[:5]))
    else:
        for rsp, (req, seconds) in want.pairs.items():
            if got.pairs[rsp][0] != req or abs(got.pairs[rsp][1] - seconds) > 1e-6:
                problems.append(("pair", rsp, (req, seconds), got.pairs[rsp]))
                break
    if got.response_in != {req: rsp for rsp, (req, _s) in want.pairs.items()}:
        problems.append(("response_in links",))
    if want.pairs and abs(min(s for _r, s in got.pairs.values())
                          - min(s for _r, s in want.pairs.values())) > 1e-6:
        problems.append(("minimum response time",))
    return [(first,) + p for p in problems]


def run_cuts(name, firsts, tmp_path):
    def one(first):
        return compare(name, first, write_cut(name, first, tmp_path / ("%s-%d.pcap" % (name, first))))
    with ThreadPoolExecutor(max_workers=2) as pool:
        return [p for problems in pool.map(one, firsts) for p in problems]


# -- tests -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", SMALL + ("load",))
def test_independent_decode_counts_the_kernels_requests(name):
    want = decode(name, 1)
    wire = real_truth(name)["checks"]["pcap_rtrs_counts"]["IO_REQ"]
    assert len(want.reads) + len(want.writes) == wire
    assert not want.partial and want.pairs


@pytest.mark.parametrize("name", SMALL)
def test_every_50th_frame_cut_equals_the_independent_decode(name, tmp_path):
    firsts = range(1, len(pcap_records(name)[1]) + 1, STEP)
    problems = run_cuts(name, firsts, tmp_path)
    assert not problems, problems[:5]


def load_cut_points():
    """A third in; past the half, at the last packet of a multi-packet write
    request (its other packets are cut away); three quarters in."""
    frames = ib_frames("load")
    n = len(frames)
    last_of_write = next(f.number for f in frames[n // 2:]
                         if f.opcode == 0x09 and f.imm is not None and f.imm >> 28 == 0)
    return [n // 3, last_of_write, 3 * n // 4]


def test_load_capture_cut_at_three_points(tmp_path):
    points = load_cut_points()
    problems = run_cuts("load", points, tmp_path)
    assert not problems, problems[:5]
    # the write in progress at the second cut is counted, decoded and marked partial
    assert decode("load", points[1]).partial


def test_a_cut_shows_partial_requests_and_early_responses(tmp_path):
    """Inside the first multi-packet write of basic_inval: the write's tail is a
    partial request with its RNBD header, paired with its response."""
    frames = ib_frames("basic_inval")
    last = next(f for f in frames if f.opcode == 0x09 and f.imm >> 28 == 0)
    middle = max(f.number for f in frames[:last.number] if f.opcode == 0x07 and f.dst == last.dst)
    path = write_cut("basic_inval", middle, tmp_path / "cut.pcap")
    run = subprocess.run([TSHARK, "-n", "-2", "-Y", "rtrs.partial || rtrs.request_before_capture",
                          "-X", "lua_script:%s" % LUA, "-r", str(path), "-P", "-V"],
                         capture_output=True, text=True, env=tshark_env(), timeout=300)
    assert run.returncode == 0 and "Lua Error" not in run.stdout
    assert "Request started before the capture: last" in run.stdout
    assert "RNBD WRITE dev 0 sector" in run.stdout and "[started before the capture]" in run.stdout
    assert "Response in:" in run.stdout
