"""Differential test: tshark + the generated Lua plugin vs Scapy, every frame of
every real capture, field by field.

Expected values come from the Scapy layers: single-packet messages are decoded
by ``Ether(frame)``; multi-packet RDMA WRITE / SEND messages are reassembled
here per (destination, QP) by consecutive PSN and decoded with RtrsRequest /
RtrsMsg (the Scapy layers, not the Lua code).  Immediates are decoded with
rtrs_scapy.spec.imm and the queue depth of the capture's own conn_rsp.  Request /
response links and latencies are compared with the session analyzer.
"""

import functools
import gzip
import json
import struct
import shutil
import subprocess
import uuid

import pytest
from scapy.layers.inet import IP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import RawPcapReader, rdpcap, wrpcap

from rtrs_scapy.spec import imm as immcodec
from rtrs_scapy.spec.constants import RTRS_MAGIC, RTRS_PORT, errno_name
from rtrs_scapy.layers.cm import (
    MAD, RDMA_PS_IB, RDMA_PS_TCP, CmaIpHdr, CMRej, CMRep, CMReq, cm_rej_reasons, service_id,
)
from rtrs_scapy.layers.ib import BTH, GRH, IBPad, ImmDt, header_chain
from rtrs_scapy.layers.rtrs import RtrsMsg, RtrsMsgConnReq, RtrsMsgConnRsp
from rtrs_scapy.layers.rtrs_request import RtrsReadRequest, RtrsRequest, RtrsWriteRequest
from rtrs_scapy.wireshark import generate as gen

from conftest import PROJECT_PCAPS, REAL, REAL_ALL, REPO, real_truth
from tshark_util import tshark_env

LUA = REPO / "wireshark" / "rtrs.lua"
TSHARK = shutil.which("tshark")
FIELDS = gen.field_manifest()
BY_ABBREV = {f.abbrev: f for f in FIELDS}
BY_MSG = {}
for _f in FIELDS:
    if _f.msg:
        BY_MSG.setdefault(_f.msg, []).append(_f)
MSG_OF_CLASS = {cls: msg for _p, msg, cls in gen.MESSAGES}
LAYOUT_KEYS = {f.abbrev for f in FIELDS if f.role != "runtime"}
IMM_KEYS = {"rtrs.imm.type", "rtrs.imm.buf_id", "rtrs.imm.offset", "rtrs.imm.msg_id",
            "rtrs.imm.errno"}

RTRS_SERVICE_IDS = {service_id(RTRS_PORT, RDMA_PS_TCP), service_id(RTRS_PORT, RDMA_PS_IB)}
# RC opcodes (docs/PROTOCOL.md#opcodes-and-extension-headers)
FIRST = {0x00, 0x06}
MIDDLE = {0x01, 0x07}
LAST = {0x02, 0x08, 0x09}


def _norm_expected(f, value):
    if f.ftype == "guid":
        return str(uuid.UUID(str(value)))
    if f.ftype == "string":
        return bytes(value).split(b"\0", 1)[0].decode("utf-8", "replace")
    if f.ftype == "bytes":
        return ":".join("%02x" % b for b in bytes(value))
    return int(value)


def _layer_values(msg, layer, out):
    out.setdefault(BY_MSG[msg][0].abbrev, []).append(None)  # presence item
    for f in BY_MSG[msg][1:]:
        value = layer.getfieldval(f.source)
        if f.role == "op":
            value = int(value) & f.mask
        elif f.role == "flag":
            value = 1 if int(value) & f.mask else 0
        out.setdefault(f.abbrev, []).append(_norm_expected(f, value))
    for fld in layer.fields_desc:
        if fld.name == "desc":
            for element in layer.getfieldval("desc"):
                _layer_values("sg_desc", element, out)


def _request_values(req, out):
    if req.usr is not None and type(req.usr) in MSG_OF_CLASS:
        _layer_values(MSG_OF_CLASS[type(req.usr)], req.usr, out)
    _layer_values(MSG_OF_CLASS[type(req.trailer)], req.trailer, out)


def _ib_payload(pkt):
    """IB payload bytes after the extension headers, pad stripped."""
    layer = pkt[BTH]
    for cls in header_chain(layer.opcode):
        layer = layer[cls]
    body = bytes(layer.payload)
    if IBPad in pkt:
        body = body[:len(body) - len(pkt[IBPad].pad)]
    return body


def _net_dst(pkt):
    for cls, name in ((IP, "dst"), (IPv6, "dst"), (GRH, "dgid")):
        if cls in pkt:
            return pkt[cls].getfieldval(name)
    return None


@functools.lru_cache(maxsize=None)
def scapy_expectations(pcap, queue_depth=None):
    """frame number -> {abbrev: [values]} as Scapy decodes the capture.

    ``queue_depth`` (from the capture's truth) decodes IO_REQ immediates of a
    capture without a conn_rsp; otherwise the first conn_rsp gives it.
    """
    expected, rx, seen_psn = {}, {}, set()
    for number, pkt in enumerate(rdpcap(str(pcap)), 1):
        pkt = Ether(bytes(pkt))
        out = {}
        if CmaIpHdr in pkt and RtrsMsgConnReq not in pkt \
                and pkt[CMReq].service_id in RTRS_SERVICE_IDS:
            # a REQ to the RTRS port with a bad magic: the plugin shows it as conn_req
            _layer_values("conn_req", RtrsMsgConnReq(bytes(pkt[CmaIpHdr].payload)[:56]), out)
        for cls in (RtrsMsgConnReq, RtrsMsgConnRsp):
            if cls in pkt:
                _layer_values(MSG_OF_CLASS[cls], pkt[cls], out)
                if cls is RtrsMsgConnRsp and pkt[cls].queue_depth:
                    queue_depth = pkt[cls].queue_depth
        if BTH in pkt and pkt[BTH].opcode < 0x20 and pkt[BTH].opcode != 0x11:
            bth = pkt[BTH]
            op = bth.opcode
            key = (_net_dst(pkt), bth.dqpn)
            if (key, bth.psn) in seen_psn:  # go-back-N retransmission: decoded once
                # (docs/PROTOCOL.md#psn-sequence-and-retransmissions)
                continue
            seen_psn.add((key, bth.psn))
            whole = None
            if op in FIRST:
                rx[key] = [bth.psn, _ib_payload(pkt)]
            elif op in MIDDLE | LAST and key in rx and bth.psn == (rx[key][0] + 1) % (1 << 24):
                rx[key][0] = bth.psn
                rx[key][1] += _ib_payload(pkt)
                if op in LAST:
                    whole = rx.pop(key)[1]
            if whole is not None and op == 0x09:
                _request_values(RtrsRequest(whole), out)
            elif whole is not None and op == 0x02:
                message = RtrsMsg(whole)
                _layer_values(MSG_OF_CLASS[type(message)], message, out)
            for cls in (RtrsReadRequest, RtrsWriteRequest):
                if cls in pkt:
                    _request_values(pkt[cls], out)
            for cls, msg in MSG_OF_CLASS.items():
                if msg in ("info_req", "info_rsp", "rkey_rsp", "sess_info_rsp", "open_rsp") \
                        and cls in pkt and not any(c in pkt for c in (RtrsReadRequest,
                                                                       RtrsWriteRequest)):
                    _layer_values(msg, pkt[cls], out)
            if ImmDt in pkt:
                decoded = immcodec.decode(pkt[ImmDt].imm, queue_depth)
                out["rtrs.imm.type"] = [decoded.type]
                for name in ("buf_id", "offset", "msg_id", "errno"):
                    if getattr(decoded, name) is not None:
                        out["rtrs.imm." + name] = [getattr(decoded, name)]
        if out:
            expected[number] = out
    return expected


def _norm_tshark(abbrev, text):
    f = BY_ABBREV[abbrev]
    if f.ftype == "none":
        return None
    if f.ftype == "double":
        return float(text)
    if f.ftype in ("guid", "string", "bytes"):
        return text.lower() if f.ftype != "string" else text
    return int(text, 0)


def _collect(node, out):
    for key, value in node.items():
        items = value if isinstance(value, list) else [value]
        for item in items:
            if key in BY_ABBREV:
                if isinstance(item, dict):
                    out.setdefault(key, []).append(None)
                else:
                    out.setdefault(key, []).append(_norm_tshark(key, item))
            if isinstance(item, dict):
                _collect(item, out)


@functools.lru_cache(maxsize=None)
def tshark_fields(pcap):
    """frame number -> {abbrev: [values]} of the rtrs/rnbd trees (tshark -2)."""
    assert TSHARK, "tshark is required (scripts/test.sh installs it)"
    # any display filter makes tshark -2 build the tree in its first pass,
    # so request frames see their response_in (rtrs_scapy/wireshark/lua/entry.lua)
    # -J: the trees of the frame, rtrs and rnbd whole, no other protocol's (a third of
    # the JSON to write and read)
    run = subprocess.run([TSHARK, "-2", "-X", "lua_script:%s" % LUA, "-r", str(pcap), "-Y", "frame",
                          "-T", "json", "--no-duplicate-keys", "-J", "frame rtrs rnbd"],
                         capture_output=True, text=True, env=tshark_env(), timeout=600)
    assert run.returncode == 0, run.stderr
    assert "Lua Error" not in run.stdout + run.stderr
    frames = {}
    for packet in json.loads(run.stdout):
        layers = packet["_source"]["layers"]
        number = int(layers["frame"]["frame.number"])
        out = {}
        for proto in ("rtrs", "rnbd"):
            if proto in layers:
                _collect(layers[proto] if isinstance(layers[proto], dict) else {}, out)
        frames[number] = out
    return frames


CAPTURES = [(name, path) for name, path, _truth in REAL]


def _corpus():
    """(name, pcap, truth) of the project corpus (pcaps/*.truth.json; a truth without
    its capture fails in the tests, not hidden here)."""
    found = []
    for truth in sorted(PROJECT_PCAPS.glob("*.truth.json")):
        pcap = truth.with_name(truth.name[:-len(".truth.json")])
        found.append((pcap.name, pcap, json.loads(truth.read_text())))
    return found


def _linktype(path):
    """Link type of a pcap file (pcapng: its first interface)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as fh:
        head = fh.read(64)
    if head[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        return struct.unpack_from("<I", head, 20)[0]
    if head[:4] in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        return struct.unpack_from(">I", head, 20)[0]
    if head[:4] == b"\x0a\x0d\x0d\x0a":  # SHB, then the IDB's link type
        order = "<" if head[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
        shb_len = struct.unpack_from(order + "I", head, 4)[0]
        return struct.unpack_from(order + "H", head, shb_len + 8)[0]
    return None


CORPUS = _corpus()
# tshark 4.0 cannot read LINKTYPE_INFINIBAND (247); Scapy here reads Ethernet (1) only
TSHARK_CORPUS = [c for c in CORPUS if _linktype(c[1]) != 247]
SCAPY_CORPUS = [c for c in TSHARK_CORPUS if _linktype(c[1]) == 1]


@pytest.mark.parametrize("name,pcap", CAPTURES, ids=[c[0] for c in CAPTURES])
def test_layout_fields_equal_scapy_every_frame(name, pcap):
    expected = scapy_expectations(pcap)
    shown = tshark_fields(pcap)
    mismatches = []
    for number in sorted(set(shown) | set(expected)):
        want = {k: v for k, v in expected.get(number, {}).items() if k in LAYOUT_KEYS}
        got = {k: v for k, v in shown.get(number, {}).items() if k in LAYOUT_KEYS}
        if want != got:
            keys = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
            mismatches.append((number, [(k, want.get(k), got.get(k)) for k in keys[:4]]))
    assert not mismatches, mismatches[:5]
    # the WRITE requests compared: the kernel's (stats/rdma before the unmap) and the
    # RNBD CLOSE each unmap sends after it
    rdma = next(iter(real_truth(name)["rtrs_stats"]["client"]["pre_unmap"].values()))["rdma"]
    assert sum(1 for f in expected.values() if "rtrs.rdma_write" in f) == \
        rdma["writes"] + len(real_truth(name)["unmaps"])


@pytest.mark.parametrize("name,pcap", CAPTURES, ids=[c[0] for c in CAPTURES])
def test_immediates_equal_scapy_codec(name, pcap):
    expected = scapy_expectations(pcap)
    shown = tshark_fields(pcap)
    checked = 0
    for number, want in expected.items():
        want = {k: v for k, v in want.items() if k in IMM_KEYS}
        if not want:
            continue
        got = {k: v for k, v in shown.get(number, {}).items() if k in IMM_KEYS}
        assert got == want, number
        checked += 1
    # every frame with an immediate (the recording's count; no retransmission here)
    assert checked == real_truth(name)["pcap_stats"]["rocev2_with_immediate"]


@pytest.mark.parametrize("name,pcap,truth", REAL, ids=[r[0] for r in REAL])
def test_request_filters_count_like_the_kernel(name, pcap, truth):
    stats = truth["rtrs_stats"]["client"]["pre_unmap"]
    rdma = next(iter(stats.values()))["rdma"]
    unmaps = len(truth["unmaps"])  # the RNBD CLOSE (an RTRS write) is sent after the read-out
    shown = tshark_fields(pcap)
    reads = sum(1 for f in shown.values() if "rtrs.rdma_read" in f)
    writes = sum(1 for f in shown.values() if "rtrs.rdma_write" in f)
    assert (reads, writes) == (rdma["reads"], rdma["writes"] + unmaps)
    counts = truth["checks"]["pcap_rtrs_counts"]
    by_type = {}
    for f in shown.values():
        for t in f.get("rtrs.imm.type", []):
            by_type[t] = by_type.get(t, 0) + 1
    assert by_type.get(0, 0) == counts["IO_REQ"]
    assert by_type.get(8, 0) == counts["HB_MSG"] and by_type.get(9, 0) == counts["HB_ACK"]
    assert by_type.get(2, 0) == counts["IO_RSP_W_INV"]
    assert not [n for n, f in shown.items() if any(e != 0 for e in f.get("rtrs.imm.errno", []))]


@pytest.mark.parametrize("name,pcap", CAPTURES, ids=[c[0] for c in CAPTURES])
def test_tshark_filters_select_requests(name, pcap):
    def count(flt):
        run = subprocess.run([TSHARK, "-X", "lua_script:%s" % LUA, "-r", str(pcap), "-Y", flt],
                             capture_output=True, text=True, env=tshark_env(), timeout=300)
        assert run.returncode == 0 and "Lua Error" not in run.stdout
        return len(run.stdout.splitlines())
    shown = tshark_fields(pcap)
    assert count("rtrs.rdma_read") == sum(1 for f in shown.values() if "rtrs.rdma_read" in f)
    assert count("rtrs.rdma_write") == sum(1 for f in shown.values() if "rtrs.rdma_write" in f)
    assert count("rtrs.imm.errno != 0") == 0


@pytest.mark.parametrize("name,pcap", CAPTURES, ids=[c[0] for c in CAPTURES])
def test_links_are_mutual_and_match_the_analyzer(name, pcap):
    shown = tshark_fields(pcap)
    requests = {n: f["rtrs.response_in"][0] for n, f in shown.items() if "rtrs.response_in" in f}
    responses = {n: f["rtrs.request_in"][0] for n, f in shown.items() if "rtrs.request_in" in f}
    assert requests and len(requests) == len(responses)
    for req, rsp in requests.items():
        assert responses[rsp] == req
    from rtrs_scapy.analysis import analyze
    analysis = analyze(str(pcap))
    want_requests, want_responses = {}, {}
    for m in analysis.messages:
        if m.get("paired_frame") is None:
            continue
        if m["msg"] in ("read", "write"):
            want_requests[m["frame"]] = m["paired_frame"]
        elif m["msg"] == "io_rsp":
            want_responses[m["frame"]] = (m["paired_frame"], m["latency"])
    assert requests == want_requests
    assert {n: r for n, (r, _l) in want_responses.items()} == responses
    for number, (_req, latency) in want_responses.items():
        assert shown[number]["rtrs.response_time"][0] == pytest.approx(latency, abs=2e-6)


@pytest.mark.parametrize("name,pcap", CAPTURES, ids=[c[0] for c in CAPTURES])
def test_capture_started_mid_session_infers_the_queue_depth(name, pcap, tmp_path):
    """No CM handshake, no INFO, no RNBD admin: cut the capture at the first IO
    request (docs/PROTOCOL.md#queue-depth-inference); the plugin must infer mem_bits from request /
    response pairs and then agree with Scapy (which is told the real queue depth)."""
    expected = scapy_expectations(pcap)
    first_io = min(n for n, f in expected.items() if "rnbd.io" in f)
    cut = tmp_path / "mid.pcap"
    subprocess.run(["editcap", "-r", str(pcap), str(cut), "%d-1000000" % first_io], check=True,
                   capture_output=True)
    shown = tshark_fields(cut)
    shift = first_io - 1
    keys = LAYOUT_KEYS | IMM_KEYS
    for number, got in shown.items():
        want = {k: v for k, v in expected.get(number + shift, {}).items() if k in keys}
        assert {k: v for k, v in got.items() if k in keys} == want, number + shift
    assert any(f.get("rtrs.mem_bits") == [19] for f in shown.values())
    requests = {n: f["rtrs.response_in"][0] for n, f in shown.items() if "rtrs.response_in" in f}
    responses = {n: f["rtrs.request_in"][0] for n, f in shown.items() if "rtrs.request_in" in f}
    assert requests and {v: k for k, v in requests.items()} == responses



@pytest.mark.parametrize("name,pcap,truth", SCAPY_CORPUS, ids=[c[0] for c in SCAPY_CORPUS])
def test_corpus_fields_equal_scapy_every_frame(name, pcap, truth):
    expected = scapy_expectations(pcap, truth["config"]["queue_depth"])
    shown = tshark_fields(pcap)
    keys = LAYOUT_KEYS | IMM_KEYS
    for number in sorted(set(shown) | set(expected)):
        want = {k: v for k, v in expected.get(number, {}).items() if k in keys}
        got = {k: v for k, v in shown.get(number, {}).items() if k in keys}
        assert got == want, number


@pytest.mark.parametrize("name,pcap,truth", TSHARK_CORPUS, ids=[c[0] for c in TSHARK_CORPUS])
def test_corpus_counts_equal_truth(name, pcap, truth):
    shown = tshark_fields(pcap)
    ios = [io for io in truth["ios"] if io["on_wire"]]

    def frames_with(key, pred=lambda values: True):
        return sum(1 for f in shown.values() if key in f and pred(f[key]))

    assert frames_with("rtrs.rdma_read") == sum(1 for io in ios if io["dir"] == "read")
    assert frames_with("rtrs.rdma_write") == sum(1 for io in ios if io["dir"] == "write")
    assert frames_with("rtrs.imm.errno", lambda v: v[0] != 0) == sum(truth["errors"].values())
    assert frames_with("rtrs.imm.type", lambda v: v[0] == 8) == truth["heartbeats"]["hb_msg"]
    assert frames_with("rtrs.imm.type", lambda v: v[0] == 9) == truth["heartbeats"]["hb_ack"]
    rejects = sum(1 for f in shown.values() if "rtrs.conn_rsp.errno" in f and f["rtrs.conn_rsp.errno"][0])
    no_rtrs = sum(1 for r in truth.get("rejects", []) if not r.get("errno"))
    assert rejects == len(truth.get("rejects", [])) - no_rtrs


# -- CM rejects: every REJ of an RTRS connection attempt is shown as one ------------

REJ_FIELDS = ("frame.number", "ip.src", "infiniband.mad.attributeid", "infiniband.mad.transactionid",
              "infiniband.cm.rej.reason", "infiniband.cm.rej.private")


def _plain_fields(pcap, fields):
    cmd = [TSHARK, "-n", "-r", str(pcap), "-T", "fields", "-E", "occurrence=f"]
    for f in fields:
        cmd += ["-e", f]
    run = subprocess.run(cmd, capture_output=True, text=True, env=tshark_env(), check=True)
    return [dict(zip(fields, line.split("\t"))) for line in run.stdout.splitlines()]


def expected_rejects(pcap):
    """frame -> (reason, sender, errno or None) from tshark's own CM fields: the
    sender is the client when the REJ comes from the address that sent the REQ
    of the same transaction; the errno is the conn_rsp in the private data."""
    clients, rejects = {}, {}
    for row in _plain_fields(pcap, REJ_FIELDS):
        if row["infiniband.mad.attributeid"] == "0x0010":
            clients[row["infiniband.mad.transactionid"]] = row["ip.src"]
        elif row["infiniband.mad.attributeid"] == "0x0012":
            client = clients[row["infiniband.mad.transactionid"]]
            rsp = RtrsMsgConnRsp(bytes.fromhex(row["infiniband.cm.rej.private"]))
            rejects[int(row["frame.number"])] = (
                int(row["infiniband.cm.rej.reason"], 0),
                "client" if row["ip.src"] == client else "server",
                rsp.errno if rsp.magic == RTRS_MAGIC else None)
    return rejects


def shown_rejects(pcap):
    cmd = [TSHARK, "-n", "-2", "-Y", "rtrs.cm.rej_reason", "-X", "lua_script:%s" % LUA,
           "-r", str(pcap), "-T", "fields", "-E", "occurrence=f", "-e", "frame.number",
           "-e", "rtrs.cm.rej_reason", "-e", "rtrs.cm.sender", "-e", "rtrs.conn_rsp.errno",
           "-e", "_ws.col.Info"]
    run = subprocess.run(cmd, capture_output=True, text=True, env=tshark_env(), timeout=300)
    assert run.returncode == 0 and "Lua Error" not in run.stdout + run.stderr, run.stderr
    shown = {}
    for line in run.stdout.splitlines():
        number, reason, sender, errno, info = line.split("\t")
        shown[int(number)] = (int(reason), sender, int(errno) if errno else None, info)
    return shown


REJECT_CAPTURES = [path for _n, path, _t in REAL_ALL if _n == "errors"] + [
    c[1] for c in TSHARK_CORPUS if c[2].get("rejects")]
CORPUS_REJECTS = [c for c in TSHARK_CORPUS if c[2].get("rejects")]


@pytest.mark.parametrize("pcap", REJECT_CAPTURES, ids=lambda p: p.name)
def test_every_cm_rej_is_shown_as_a_reject(pcap):
    want, shown = expected_rejects(pcap), shown_rejects(pcap)
    assert want and set(shown) == set(want)
    for number, (reason, sender, errno) in want.items():
        assert shown[number][:3] == (reason, sender, errno), number
        info = shown[number][3]
        assert "reason %d (%s)" % (reason, cm_rej_reasons[reason]) in info
        assert "from " + sender in info
        if errno is not None:
            assert "errno %d (%s)" % (errno, errno_name(errno)) in info


@pytest.mark.parametrize("name,pcap,truth", CORPUS_REJECTS, ids=[c[0] for c in CORPUS_REJECTS])
def test_rejects_equal_the_crafters_truth(name, pcap, truth):
    """In capture order: reason, sender and errno (0 without RTRS data) of each REJ."""
    shown = shown_rejects(pcap)
    got = [(shown[n][0], shown[n][1], shown[n][2] or 0) for n in sorted(shown)]
    assert got == [(r["reason"], r["sender"], r["errno"]) for r in truth["rejects"]]


def _rej_frame(template, reason, comm_ids, private=b""):
    """A CM REJ sent by the sender of ``template`` (a captured CM MAD frame)."""
    pkt = Ether(template)
    tid = pkt[MAD].transaction_id
    pkt[MAD].remove_payload()
    pkt[MAD].attribute_id = 0x0012
    pkt[MAD].transaction_id = tid
    local, remote = comm_ids
    pkt = pkt / CMRej(local_comm_id=local, remote_comm_id=remote, message_rejected=1,
                      reason=reason) / private
    del pkt[IP].len, pkt[IP].chksum
    pkt["UDP"].len = None
    return bytes(pkt)


def test_a_reject_sent_by_the_client_after_its_rep(tmp_path):
    """The client ends an attempt whose REP it did not accept with a REJ Timeout
    (reason 4) without RTRS data: a reject from the client, reason by name; a
    REJ without RTRS data of an unknown attempt is not RTRS."""
    frames = [data for data, _ in RawPcapReader(str(REAL[0][1]))][:3]   # REQ, REP, RTU
    req, rep = Ether(frames[0])[CMReq], Ether(frames[1])[CMRep]
    client_rej = _rej_frame(frames[2], 4, (req.local_comm_id, rep.local_comm_id))
    stray = bytearray(_rej_frame(frames[2], 4, (0x1234, 0x5678)))
    tid_at = bytes(stray).find(Ether(frames[2])[MAD].transaction_id.to_bytes(8, "big"))
    stray[tid_at:tid_at + 8] = (0x77).to_bytes(8, "big")
    path = tmp_path / "rej.pcap"
    wrpcap(str(path), [Raw(frames[0]), Raw(frames[1]), Raw(client_rej), Raw(bytes(stray))],
           linktype=1)
    shown = shown_rejects(path)
    assert set(shown) == {3}
    reason, sender, errno, info = shown[3]
    assert (reason, sender, errno) == (4, "client", None)
    assert info == "RTRS CONN_REJ cid 0 reason 4 (Timeout) from client"


def test_failed_responses_name_their_errno():
    """errors.pcap: the IO_RSP errnos the capture's truth counted, each with its
    name in the Info column and the errno field's value string."""
    _name, pcap, truth = next(c for c in REAL_ALL if c[0] == "errors")
    run = subprocess.run([TSHARK, "-n", "-X", "lua_script:%s" % LUA, "-r", str(pcap), "-Y",
                          "rtrs.imm.errno != 0", "-T", "fields", "-e", "rtrs.imm.errno",
                          "-e", "_ws.col.Info"], capture_output=True, text=True,
                         env=tshark_env(), timeout=300)
    assert run.returncode == 0 and "Lua Error" not in run.stdout
    counts = {}
    for line in run.stdout.splitlines():
        errno, info = line.split("\t")
        counts[errno] = counts.get(errno, 0) + 1
        assert "errno %s (%s)" % (errno, errno_name(int(errno))) in info
    assert counts == truth["checks"]["pcap_io_rsp_errnos"]
    verbose = subprocess.run([TSHARK, "-n", "-X", "lua_script:%s" % LUA, "-r", str(pcap), "-Y",
                              "rtrs.imm.errno == -107", "-V"], capture_output=True, text=True,
                             env=tshark_env(), timeout=300).stdout
    assert "errno: ENOTCONN (-107)" in verbose and "Request failed: errno -107 (ENOTCONN)" in verbose
