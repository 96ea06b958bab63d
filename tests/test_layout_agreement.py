"""One layout, several decoders: on every frame of every real capture, the struct
plans of the fast path decode every RTRS/RNBD message exactly as the Scapy
layers do, and the analyzer's records agree with Scapy's single-packet view.
(The generated Lua joins this agreement in tests/test_wireshark_diff.py.)"""

import uuid

import pytest
from scapy.compat import raw
from scapy.fields import FlagValue
from scapy.utils import rdpcap

import rtrs_scapy as R
from rtrs_scapy.analysis import analyze
from rtrs_scapy.layout.plans import plan
from rtrs_scapy.spec.imm import decode as decode_imm

MESSAGE_LAYERS = (R.RtrsMsgConnReq, R.RtrsMsgConnRsp, R.RtrsMsgInfoReq, R.RtrsMsgInfoRsp,
                  R.RtrsMsgRkeyRsp, R.RtrsMsgRdmaRead, R.RtrsMsgRdmaWrite, R.RnbdMsgSessInfo,
                  R.RnbdMsgSessInfoRsp, R.RnbdMsgOpen, R.RnbdMsgOpenRsp, R.RnbdMsgClose,
                  R.RnbdMsgIo)


def scapy_value(layer, spec, value):
    """A Scapy field value in the representation the plans use."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, FlagValue):
        return int(value)
    if spec.kind == "string":
        return bytes(value).split(b"\0", 1)[0].decode("utf-8", "replace")
    if spec.kind == "list":
        return [scapy_fields(item) for item in value]
    return value


def scapy_fields(layer):
    layout = plan(type(layer)).layout
    return {spec.name: scapy_value(layer, spec, layer.getfieldval(spec.name))
            for spec in layout.fields}


def embedded_messages(pkt):
    """Every RTRS/RNBD message layer in a packet, also inside request wrappers."""
    for layer in pkt.iterpayloads():
        if isinstance(layer, MESSAGE_LAYERS):
            yield layer
        if isinstance(layer, (R.RtrsWriteRequest, R.RtrsReadRequest)):
            yield layer.trailer
            if isinstance(layer.usr, MESSAGE_LAYERS):
                yield layer.usr


@pytest.fixture(scope="module")
def decoded():
    cache = {}

    def get(pcap):
        if pcap not in cache:
            cache[pcap] = (rdpcap(str(pcap)), analyze(pcap, keep_messages=True))
        return cache[pcap]
    return get


def test_plans_decode_every_message_like_scapy(real_capture, decoded):
    pcap, _ = real_capture
    packets, _ = decoded(pcap)
    compared = set()
    for pkt in packets:
        for layer in embedded_messages(pkt):
            data = raw(layer)
            if isinstance(layer, R.RtrsMsgConnReq) or isinstance(layer, R.RtrsMsgConnRsp):
                data = data[:plan(type(layer)).size]  # the private data's zero tail follows
            assert plan(type(layer)).decode(data, 0, len(data)) == scapy_fields(layer)
            compared.add(type(layer).__name__)
    # the captures hold every message kind but rkey_rsp (inval=Y only) and info_rsp (single
    # packet only with inval=N)
    assert {"RtrsMsgConnReq", "RtrsMsgConnRsp", "RtrsMsgInfoReq", "RtrsMsgRdmaRead",
            "RtrsMsgRdmaWrite", "RnbdMsgSessInfo", "RnbdMsgOpen", "RnbdMsgIo",
            "RnbdMsgClose", "RnbdMsgSessInfoRsp", "RnbdMsgOpenRsp"} <= compared


def test_analyzer_records_agree_with_scapy(real_capture, decoded):
    pcap, truth = real_capture
    packets, result = decoded(pcap)
    qd = truth["config"]["server_module_params"]["sess_queue_depth"]
    records = {m["frame"]: m for m in result.messages}
    checked = 0
    for number, pkt in enumerate(packets, 1):
        if R.ImmDt not in pkt:
            continue
        imm = decode_imm(pkt[R.ImmDt].imm, qd)
        rec = records[number]
        request = pkt.getlayer(R.RtrsReadRequest) or pkt.getlayer(R.RtrsWriteRequest)
        if imm.type == R.RTRS_IO_REQ_IMM:
            assert rec["fields"]["buf_id"] == imm.buf_id
            assert rec["fields"]["offset"] == imm.offset
            if request is not None:  # single-packet request: Scapy splits it alone
                assert rec["msg"] == ("read" if isinstance(request, R.RtrsReadRequest)
                                      else "write")
                assert rec["fields"]["usr_len"] == request.trailer.usr_len
                assert rec["fields"]["offset"] == request.imm_offset
        elif imm.type in (R.RTRS_IO_RSP_IMM, R.RTRS_IO_RSP_W_INV_IMM):
            assert (rec["fields"]["msg_id"], rec["fields"]["errno"]) == (imm.msg_id, imm.errno)
            if R.RtrsMsgRkeyRsp in pkt:
                assert rec["fields"]["rkey_rsp"] == {"buf_id": pkt[R.RtrsMsgRkeyRsp].buf_id,
                                                     "rkey": pkt[R.RtrsMsgRkeyRsp].rkey}
        else:
            assert rec["msg"] == {R.RTRS_HB_MSG_IMM: "hb_msg", R.RTRS_HB_ACK_IMM: "hb_ack"}[
                imm.type]
        checked += 1
    assert checked == truth["pcap_stats"]["rocev2_with_immediate"]
