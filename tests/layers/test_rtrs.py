"""RTRS layers (rtrs_scapy/layers/rtrs.py, rtrs_request.py) against docs/PROTOCOL.md#rtrs-messages
(sizes, default conn_rsp bytes, errno encodings) and real kernel messages."""


import pytest
from scapy.packet import Raw

from conftest import real_frame
from rtrs_scapy.spec.constants import RTRS_MSG_NEED_INVAL_F, RTRS_MSG_NEW_RKEY_F
from rtrs_scapy.layers.ib import RETH, ImmDt
from rtrs_scapy.layers.rnbd import RnbdMsgClose, RnbdMsgIo, RnbdMsgOpen, RnbdMsgSessInfo
from rtrs_scapy.layers.rtrs import (
    RtrsMsg, RtrsMsgConnReq, RtrsMsgConnRsp, RtrsMsgInfoReq, RtrsMsgInfoRsp, RtrsMsgRdmaHdr,
    RtrsMsgRdmaRead, RtrsMsgRdmaWrite, RtrsMsgRkeyRsp, RtrsSgDesc, send_message_class,
)
from rtrs_scapy.layers.rtrs_request import (
    RtrsReadRequest, RtrsRequest, RtrsWriteRequest, request_class,
)


def alone(layer):
    copy = layer.copy()
    copy.remove_payload()
    return bytes(copy)


# -- sizes and default bytes (docs/PROTOCOL.md#conn_rsp)

@pytest.mark.parametrize("layer, size", [
    (RtrsMsgConnReq(), 56), (RtrsMsgConnRsp(), 56), (RtrsMsgInfoReq(), 272),
    (RtrsSgDesc(), 16), (RtrsMsgRkeyRsp(), 8), (RtrsMsgRdmaWrite(), 4),
    (RtrsMsgRdmaRead(), 8), (RtrsMsgRdmaRead(desc=[RtrsSgDesc()]), 24),
    (RtrsMsgInfoRsp(), 8), (RtrsMsgInfoRsp(desc=[RtrsSgDesc()] * 3), 8 + 48),
], ids=lambda v: v if isinstance(v, int) else type(v).__name__)
def test_struct_sizes(layer, size):
    assert len(bytes(layer)) == size


def test_default_conn_rsp_bytes():
    # docs/PROTOCOL.md#conn_rsp: default REP private data
    expected = bytes.fromhex("BD1B 0002 0000 0002 00F00100 00100000 02000000") + b"\0" * 36
    assert bytes(RtrsMsgConnRsp()) == expected


@pytest.mark.parametrize("errno, wire", [(-104, "98ff"), (-6, "faff"), (-17, "efff"),
                                         (-12, "f4ff"), (-16, "f0ff"), (0, "0000")])
def test_conn_rsp_errno_le_signed(errno, wire):
    data = bytes(RtrsMsgConnRsp(errno=errno))
    assert data[4:6] == bytes.fromhex(wire)
    assert RtrsMsgConnRsp(data).errno == errno


def test_conn_rsp_errno_repr_names_it():
    assert RtrsMsgConnRsp(errno=-104).sprintf("%errno%") == "-104 (ECONNRESET)"


def test_conn_req_first_conn_is_bit_0_of_byte_44():
    assert bytes(RtrsMsgConnReq(first_conn=1))[44] == 0x01
    assert bytes(RtrsMsgConnReq(first_conn=0))[44] == 0x00
    assert RtrsMsgConnReq(bytes(RtrsMsgConnReq(first_conn=1, reserved_bits=0x7F))).first_conn == 1


def test_conn_req_defaults():
    data = bytes(RtrsMsgConnReq())
    assert data[:8] == bytes.fromhex("0000 BD1B 0002 0000")  # placeholders, magic, version, cid


# -- real messages ------------------------------------------------------------------

def test_real_conn_req():
    # pcaps/real/basic_inval.pcap frame 1: cid 0 of 3, first connect
    raw, pkt = real_frame("basic_inval", 1)
    req = pkt[RtrsMsgConnReq]
    assert (req.magic, req.version, req.cid, req.cid_num, req.recon_cnt) == (
        0x1BBD, 0x0200, 0, 3, 1)
    assert str(req.sess_uuid) == "894d3ba1-50fa-4916-b23b-553160c763f0"
    assert str(req.paths_uuid) == "099515cc-5059-40ce-80bc-db2c1eb9079c"
    assert req.first_conn == 1
    assert req.getfieldval("__cma_version") == 0 and req.getfieldval("__ip_version") == 0
    assert alone(req) == raw[62 + 200:62 + 256]
    assert bytes(pkt) == raw


@pytest.mark.parametrize("capture, flags", [("basic_inval", RTRS_MSG_NEW_RKEY_F),
                                            ("basic_noinval", 0)])
def test_real_conn_rsp(capture, flags):
    # frame 2 of each capture: REP of cid 0
    raw, pkt = real_frame(capture, 2)
    rsp = pkt[RtrsMsgConnRsp]
    assert (rsp.magic, rsp.version, rsp.errno, rsp.queue_depth) == (0x1BBD, 0x0200, 0, 512)
    assert (rsp.max_io_size, rsp.max_hdr_size, rsp.flags) == (126976, 4096, flags)
    if flags:
        # the layer's defaults are what 6.1 sends (docs/PROTOCOL.md#conn_rsp)
        assert alone(rsp) == bytes(RtrsMsgConnRsp())
    assert bytes(pkt) == raw


def test_real_info_req():
    # basic_inval frame 10: INFO_REQ, SEND ONLY, pathname = RNBD session name
    raw, pkt = real_frame("basic_inval", 10)
    info = pkt[RtrsMsgInfoReq]
    assert info.type == 0 and info.pathname.rstrip(b"\0") == b"lab1"
    assert info.sprintf("%pathname%") == "'lab1'"
    assert len(bytes(info)) == 272
    assert bytes(pkt) == raw


def test_real_info_rsp_single_desc():
    # basic_noinval frame 12: always_invalidate=N, one MR for all 512 chunks
    raw, pkt = real_frame("basic_noinval", 12)
    info = pkt[RtrsMsgInfoRsp]
    assert info.type == 1 and info.sg_cnt == 1
    assert (info.desc[0].addr, info.desc[0].key, info.desc[0].len) == (
        0xFFFF898343380000, 0x344, 512 * 131072)
    assert bytes(pkt) == raw


def test_real_info_rsp_reassembled_512_descs():
    # basic_inval frames 12..20: SEND FIRST, 7 MIDDLE, LAST = 8200 bytes, one desc per chunk
    data = b"".join(real_frame("basic_inval", n)[1][Raw].load for n in range(12, 21))
    assert len(data) == 8 + 16 * 512
    assert send_message_class(data) is RtrsMsgInfoRsp
    info = RtrsMsg(data)
    assert isinstance(info, RtrsMsgInfoRsp)
    assert info.sg_cnt == len(info.desc) == 512
    assert {desc.len for desc in info.desc} == {131072}
    assert info.desc[0].addr == 0xFFFF890203380000 and info.desc[0].key == 0x3D7
    assert bytes(info) == data


def test_real_rkey_rsp():
    # basic_inval frame 27: rkey_rsp for buf_id 0, new rkey 0x3d8 (0x3d7 + 1,
    # docs/PROTOCOL.md#rkey_rsp)
    raw, pkt = real_frame("basic_inval", 27)
    rsp = pkt[RtrsMsgRkeyRsp]
    assert (rsp.type, rsp.buf_id, rsp.rkey) == (4, 0, 0x3D8)
    assert bytes(pkt) == raw


def test_real_read_request_sess_info():
    # basic_inval frame 22: RNBD SESS_INFO as an RTRS READ (usr_len 36, len 60, off 72),
    # docs/PROTOCOL.md#rnbd-messages
    raw, pkt = real_frame("basic_inval", 22)
    req = pkt[RtrsReadRequest]
    assert isinstance(req.usr, RnbdMsgSessInfo)
    trailer = req.trailer
    assert (trailer.type, trailer.usr_len, trailer.flags, trailer.sg_cnt) == (
        3, 36, RTRS_MSG_NEED_INVAL_F, 1)
    assert (trailer.desc[0].addr, trailer.desc[0].key, trailer.desc[0].len) == (
        0xFFFF8D25C3433280, 0x304, 36)
    assert req.imm_offset == 72 == pkt[ImmDt].imm
    assert req.imm(0, 512) == pkt[ImmDt].imm
    assert bytes(pkt) == raw


def test_real_read_request_io():
    # basic_inval frame 38: 4 KiB read on cid 2, buf_id 1, imm 0x81020
    raw, pkt = real_frame("basic_inval", 38)
    req = pkt[RtrsReadRequest]
    assert isinstance(req.usr, RnbdMsgIo)
    assert req.data_len == 4096 and req.imm_offset == 4128
    assert req.imm(1, 512) == pkt[ImmDt].imm == 0x00081020
    assert pkt[RETH].dma_len == len(bytes(req)) == 56  # docs/PROTOCOL.md#found-in-real-captures
    assert bytes(pkt) == raw


def test_real_write_request_close():
    # basic_inval frame 1549: RNBD CLOSE, RTRS WRITE without data (len 12, imm offset 8)
    raw, pkt = real_frame("basic_inval", 1549)
    req = pkt[RtrsWriteRequest]
    assert req.data == b"" and isinstance(req.usr, RnbdMsgClose)
    assert (req.trailer.type, req.trailer.usr_len) == (2, 8)
    assert req.imm_offset == 8 == pkt[ImmDt].imm
    assert bytes(pkt) == raw


def test_real_write_request_reassembled():
    # basic_inval frames 71..75: 4 KiB write, FIRST + 3 MIDDLE + LAST WITH IMM (imm 0x1020)
    data = b"".join(real_frame("basic_inval", n)[1][Raw].load for n in range(71, 76))
    _, first = real_frame("basic_inval", 71)
    _, last = real_frame("basic_inval", 75)
    assert len(data) == first[RETH].dma_len == 4132
    assert request_class(data) is RtrsWriteRequest
    req = RtrsRequest(data)
    assert isinstance(req, RtrsWriteRequest)
    assert len(req.data) == 4096 and isinstance(req.usr, RnbdMsgIo)
    assert req.usr.bi_size == 4096 and req.trailer.usr_len == 32
    assert req.imm_offset == 4128 and req.imm(0, 512) == last[ImmDt].imm == 0x1020
    assert bytes(req) == data


@pytest.mark.parametrize("number", [22, 30, 38, 1549])
def test_rtrs_request_splits_real_payloads(number):
    # basic_inval single-packet requests: sess_info, open, io read, close
    _, pkt = real_frame("basic_inval", number)
    payload = bytes(pkt[ImmDt].payload)
    req = RtrsRequest(payload)
    assert type(req) is type(pkt[ImmDt].payload)
    assert bytes(req) == payload
    assert len(payload) == pkt[RETH].dma_len


def test_real_open_request():
    # basic_inval frame 30: OPEN of /dev/ram0 (usr_len 264, len 288, imm offset 320),
    # docs/PROTOCOL.md#rnbd-messages
    _, pkt = real_frame("basic_inval", 30)
    req = pkt[RtrsReadRequest]
    assert isinstance(req.usr, RnbdMsgOpen)
    assert req.trailer.usr_len == 264 and req.data_len == 56
    assert req.imm_offset == 320 == pkt[ImmDt].imm


# -- whole requests, built ------------------------------------------------------------

def test_write_request_build():
    io = RnbdMsgIo(device_id=1, sector=8, rw=0x101, bi_size=4096, prio=0x4004)
    data = bytes(range(256)) * 16
    req = RtrsWriteRequest(data=data, usr=io)
    wire = bytes(req)
    assert len(wire) == 4096 + 32 + 4
    assert wire[:4096] == data
    assert wire[4096:4128] == bytes(io)
    assert wire[4128:] == bytes.fromhex("0200 2000")  # type WRITE, usr_len 32 filled in
    assert req.imm_offset == 0x1020
    # docs/PROTOCOL.md#io_req-buf_id-and-offset: worked examples
    assert req.imm(5, 128) == 0x00A01020
    assert req.imm(5, 512) == 0x00281020
    assert req.imm(127, 128) == 0x0FE01020
    back = RtrsRequest(wire)
    assert isinstance(back, RtrsWriteRequest) and back.data == data
    assert back.usr.rw == 0x101 and back.trailer.usr_len == 32
    assert bytes(back) == wire


def test_write_request_without_data_or_user_header():
    assert bytes(RtrsWriteRequest()) == bytes.fromhex("0200 0000")
    assert RtrsWriteRequest().imm_offset == 0


def test_read_request_build():
    desc = RtrsSgDesc(addr=0xFFFF8D25C35DF000, key=0x4BA, len=4096)
    req = RtrsReadRequest(usr=RnbdMsgIo(rw=0x100, bi_size=4096),
                          trailer=RtrsMsgRdmaRead(flags=RTRS_MSG_NEED_INVAL_F, desc=[desc]))
    wire = bytes(req)
    assert len(wire) == 32 + 8 + 16
    assert wire[32:40] == bytes.fromhex("0300 2000 0100 0100")  # READ, usr_len, NEED_INVAL, 1
    assert req.data_len == 4096 and req.imm_offset == 4128
    assert req.imm(1, 512) == 0x00081020
    back = RtrsRequest(wire)
    assert isinstance(back, RtrsReadRequest)
    assert back.trailer.desc[0].key == 0x4BA and bytes(back) == wire


def test_read_request_without_descriptor():
    # RNBD flush: RTRS READ with sg_cnt 0, flags 0 (length 40, offset 32,
    # docs/PROTOCOL.md#rnbd-messages)
    req = RtrsReadRequest(usr=RnbdMsgIo(rw=2), trailer=RtrsMsgRdmaRead(flags=0))
    wire = bytes(req)
    assert len(wire) == 40 and req.imm_offset == 32
    assert isinstance(RtrsRequest(wire), RtrsReadRequest)


def test_not_a_request_stays_raw():
    assert isinstance(RtrsRequest(b"\x01\x02\x03\x04\x05"), Raw)
    assert request_class(b"") is None


def test_rdma_hdr_dispatch():
    assert isinstance(RtrsMsgRdmaHdr(bytes(RtrsMsgRdmaWrite(usr_len=8))), RtrsMsgRdmaWrite)
    assert isinstance(RtrsMsgRdmaHdr(bytes(RtrsMsgRdmaRead(usr_len=8))), RtrsMsgRdmaRead)


# -- round trips with non-default values ------------------------------------------------

ROUND_TRIPS = [
    RtrsMsgConnReq(cid=7, cid_num=9, recon_cnt=3, sess_uuid="11111111-2222-3333-4444-555555555555",
                   paths_uuid="66666666-7777-8888-9999-aaaaaaaaaaaa", first_conn=0,
                   reserved_bits=0x15),
    RtrsMsgConnRsp(errno=-17, queue_depth=128, max_io_size=0x7F000, max_hdr_size=65536, flags=0),
    RtrsMsgInfoReq(pathname=b"session-x".ljust(255, b"\0")),
    RtrsMsgInfoRsp(desc=[RtrsSgDesc(addr=0x1000, key=0x11, len=131072),
                         RtrsSgDesc(addr=0x80000, key=0x22, len=262144)]),
    RtrsMsgRkeyRsp(buf_id=511, rkey=0x12345678),
    RtrsMsgRdmaWrite(usr_len=32),
    RtrsMsgRdmaRead(usr_len=264, flags=1, desc=[RtrsSgDesc(addr=0xABC, key=0x305, len=56)]),
]


@pytest.mark.parametrize("layer", ROUND_TRIPS, ids=lambda l: type(l).__name__)
def test_round_trip_non_default(layer):
    wire = bytes(layer)
    decoded = type(layer)(wire)
    for field in layer.fields_desc:
        if field.name in layer.fields:
            assert decoded.getfieldval(field.name) == layer.getfieldval(field.name), field.name
    assert bytes(decoded) == wire


def test_info_rsp_counts_filled():
    wire = bytes(ROUND_TRIPS[3])
    assert wire[:4] == bytes.fromhex("0100 0200")
    assert RtrsMsg(wire).sg_cnt == 2


@pytest.mark.parametrize("cls", [RtrsMsgInfoReq, RtrsMsgInfoRsp, RtrsMsgRkeyRsp])
def test_rtrs_msg_dispatch(cls):
    layer = cls(desc=[RtrsSgDesc()]) if cls is RtrsMsgInfoRsp else cls()
    assert type(RtrsMsg(bytes(layer))) is cls
