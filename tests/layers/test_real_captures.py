"""Capture-wide checks of the Scapy layers on every real kernel capture: every
frame decodes (conf.debug_dissector is on), rebuilds byte-exact with a valid
ICRC, and the decoded RTRS values agree with truth.json."""

from collections import Counter

import pytest
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import RawPcapReader

from rtrs_scapy.spec.constants import RTRS_MAGIC, RTRS_MSG_NEW_RKEY_F
from rtrs_scapy.spec.imm import imm_type
from rtrs_scapy.layers.cm import MAD, CMRep, CMReq
from rtrs_scapy.layers.ib import BTH, OPCODE_NAMES, IETH, ImmDt, icrc_ok
from rtrs_scapy.layers.rtrs import (
    RtrsMsg, RtrsMsgConnReq, RtrsMsgConnRsp, RtrsMsgInfoReq, RtrsMsgInfoRsp, RtrsMsgRkeyRsp,
)
from rtrs_scapy.layers.rtrs_request import RtrsReadRequest, RtrsWriteRequest

_CACHE = {}

SEND_FIRST, SEND_MIDDLE, SEND_LAST = 0x00, 0x01, 0x02
SEND_ONLY_WITH_IMMEDIATE = 0x05
RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x09


def decoded(real_capture):
    """[(frame number, wire bytes, Ether)] of a capture, decoded once per test session."""
    path, _ = real_capture
    if path not in _CACHE:
        frames = []
        for number, (raw, _) in enumerate(RawPcapReader(str(path)), 1):
            frames.append((number, raw, Ether(raw)))  # raises on a dissector error
        _CACHE[path] = frames
    return _CACHE[path]


def server_ip(truth):
    return truth["config"]["server_ip"][0]


def test_every_frame_decodes_and_rebuilds(real_capture):
    path, truth = real_capture
    frames = decoded(real_capture)
    assert len(frames) == truth["pcap_stats"]["frames"]
    for number, raw, pkt in frames:
        assert BTH in pkt, number
        assert bytes(pkt) == raw, number


def test_icrc_ok_on_every_frame(real_capture):
    bad = [number for number, _, pkt in decoded(real_capture) if icrc_ok(pkt) is not True]
    assert bad == []


def test_opcode_counts_match_truth(real_capture):
    _, truth = real_capture
    counts = Counter(OPCODE_NAMES[pkt[BTH].opcode] for _, _, pkt in decoded(real_capture))

    def norm(name):
        return name.replace("_", "").replace(" ", "").lower()
    expected = {norm(name): n for name, n in truth["pcap_stats"]["rocev2_by_opcode"].items()}
    assert {norm(name): n for name, n in counts.items()} == expected


def test_cm_message_counts_match_truth(real_capture):
    _, truth = real_capture
    counts = Counter(pkt[MAD].sprintf("%attribute_id%")
                     for _, _, pkt in decoded(real_capture) if MAD in pkt)
    assert dict(counts) == truth["pcap_stats"]["cm_messages"]


def test_every_req_carries_conn_req(real_capture):
    _, truth = real_capture
    reqs = [pkt for _, _, pkt in decoded(real_capture) if CMReq in pkt]
    assert reqs
    cid_num = truth["config"]["rtrs_connections_per_path"]
    for pkt in reqs:
        assert RtrsMsgConnReq in pkt, pkt.summary()
        conn_req = pkt[RtrsMsgConnReq]
        assert conn_req.magic == RTRS_MAGIC
        assert conn_req.version >> 8 == 2
        assert conn_req.cid_num == cid_num
        assert pkt[CMReq].service_id == 0x0000000001060000 | truth["config"]["rtrs_port"]
    assert sorted(pkt[RtrsMsgConnReq].cid for pkt in reqs) == list(range(cid_num))
    assert len({str(pkt[RtrsMsgConnReq].sess_uuid) for pkt in reqs}) == 1
    assert len({str(pkt[RtrsMsgConnReq].paths_uuid) for pkt in reqs}) == 1


def test_every_rep_carries_conn_rsp_as_configured(real_capture):
    _, truth = real_capture
    params = truth["config"]["server_module_params"]
    always_invalidate = truth["config"]["always_invalidate"]
    assert always_invalidate == (params["always_invalidate"] == "Y")
    reps = [pkt for _, _, pkt in decoded(real_capture) if CMRep in pkt]
    assert len(reps) == truth["pcap_stats"]["cm_messages"]["ConnectReply"]
    for pkt in reps:
        assert RtrsMsgConnRsp in pkt, pkt.summary()
        rsp = pkt[RtrsMsgConnRsp]
        assert rsp.magic == RTRS_MAGIC and rsp.errno == 0
        assert rsp.queue_depth == params["sess_queue_depth"]
        assert bool(rsp.flags & RTRS_MSG_NEW_RKEY_F) == always_invalidate
        assert rsp.max_io_size + rsp.max_hdr_size == params["max_chunk_size"]


def test_info_req_pathname_is_the_session(real_capture):
    _, truth = real_capture
    infos = [pkt[RtrsMsgInfoReq] for _, _, pkt in decoded(real_capture) if RtrsMsgInfoReq in pkt]
    assert len(infos) == truth["checks"]["pcap_rtrs_counts"]["INFO_REQ"]
    for info in infos:
        assert info.pathname.rstrip(b"\0").decode() == truth["config"]["session"]


def test_server_send_with_immediate_is_rkey_rsp_iff_always_invalidate(real_capture):
    _, truth = real_capture
    sends = [pkt for _, _, pkt in decoded(real_capture)
             if pkt[BTH].opcode == SEND_ONLY_WITH_IMMEDIATE and pkt[IP].src == server_ip(truth)]
    if truth["config"]["always_invalidate"]:
        assert sends
        for pkt in sends:
            assert RtrsMsgRkeyRsp in pkt, pkt.summary()
            # docs/PROTOCOL.md#rkey_rsp: buf_id equals the msg_id of the response immediate
            assert pkt[RtrsMsgRkeyRsp].buf_id == pkt[ImmDt].imm & 0x7FFFF
    else:
        assert sends == []
        assert not any(RtrsMsgRkeyRsp in pkt for _, _, pkt in decoded(real_capture))


def _reassembled_sends(frames):
    """Complete multi-packet SEND messages (FIRST .. LAST) per (source, dest QP)."""
    pending, messages = {}, []
    for _, _, pkt in frames:
        key = (pkt[IP].src, pkt[BTH].dqpn)
        opcode = pkt[BTH].opcode
        if opcode == SEND_FIRST:
            pending[key] = [pkt[Raw].load]
        elif opcode in (SEND_MIDDLE, SEND_LAST) and key in pending:
            pending[key].append(pkt[Raw].load)
            if opcode == SEND_LAST:
                messages.append(b"".join(pending.pop(key)))
    return messages


def test_rtrs_counts_match_truth(real_capture):
    """truth["checks"]["pcap_rtrs_counts"], counted from single-packet layers (and the
    multi-packet INFO_RSP reassembled from SEND FIRST/MIDDLE/LAST)."""
    _, truth = real_capture
    frames = decoded(real_capture)
    counts = Counter()
    single_requests = last_with_imm = 0
    for _, _, pkt in frames:
        if ImmDt in pkt:
            kind = imm_type(pkt[ImmDt].imm)
            counts[{0: "IO_REQ", 1: "IO_RSP", 2: "IO_RSP_W_INV", 8: "HB_MSG",
                    9: "HB_ACK"}[kind]] += 1
            if kind == 0:
                if RtrsReadRequest in pkt or RtrsWriteRequest in pkt:
                    single_requests += 1
                elif pkt[BTH].opcode == RDMA_WRITE_LAST_WITH_IMMEDIATE:
                    last_with_imm += 1
        if IETH in pkt:
            counts["SEND_WITH_INV"] += 1
        for cls, name in ((RtrsMsgInfoReq, "INFO_REQ"), (RtrsMsgInfoRsp, "INFO_RSP"),
                          (RtrsMsgRkeyRsp, "RKEY_RSP")):
            if cls in pkt:
                counts[name] += 1
    for message in _reassembled_sends(frames):
        if isinstance(RtrsMsg(message), RtrsMsgInfoRsp):
            counts["INFO_RSP"] += 1
    expected = truth["checks"]["pcap_rtrs_counts"]
    assert dict(counts) == expected
    # every IO_REQ is either a whole single-packet request or the tail of a multi-packet one
    assert single_requests + last_with_imm == expected["IO_REQ"]


def test_starting_psns_as_linux_uses_them(real_capture):
    """Observed on Linux 6.1/rxe: the server's first request PSN on each QP is the
    REQ's Starting PSN, and the client's is the REP's
    (docs/PROTOCOL.md#identifiers-comm-ids-qpns-and-starting-psns)."""
    _, truth = real_capture
    frames = decoded(real_capture)
    server = server_ip(truth)
    reqs = {pkt[CMReq].local_comm_id: pkt[CMReq] for _, _, pkt in frames if CMReq in pkt}
    first_psn = {}
    for _, _, pkt in frames:
        bth = pkt[BTH]
        if bth.opcode >> 5 == 0 and bth.opcode != 0x11:  # RC requests, not ACKs
            first_psn.setdefault((pkt[IP].src == server, bth.dqpn), bth.psn)
    checked = 0
    for _, _, pkt in frames:
        if CMRep in pkt:
            rep, req = pkt[CMRep], reqs[pkt[CMRep].remote_comm_id]
            # server -> client packets go to the client QPN (REQ local QPN)
            assert first_psn[(True, req.local_qpn)] == req.starting_psn
            assert first_psn[(False, rep.local_qpn)] == rep.starting_psn
            checked += 1
    assert checked == truth["config"]["rtrs_connections_per_path"]


@pytest.mark.parametrize("name", ["INFO_REQ", "IO_REQ", "HB_MSG", "HB_ACK"])
def test_truth_counts_are_not_empty(real_capture, name):
    # guards the count test above against a truth.json without these keys
    _, truth = real_capture
    assert truth["checks"]["pcap_rtrs_counts"][name] > 0
