"""RTRS messages, one layer per kernel struct of rtrs-pri.h (docs/PROTOCOL.md#rtrs-messages).

All fields little-endian.  conn_req travels in the CM REQ private data (after
the RDMA CM IP header), conn_rsp in REP and REJ; info_req/info_rsp are RC
SENDs on cid 0; rkey_rsp is the payload of a SEND WITH IMMEDIATE; the
rdma_read/rdma_write trailers end the client's RDMA WRITE WITH IMMEDIATE (see
rtrs_request.py for whole requests).
"""

from scapy.fields import (
    BitField, ByteField, FlagsField, LEFieldLenField, LEIntField, LEShortEnumField,
    LEShortField, LESignedShortField, PacketListField, StrFixedLenField, UUIDField,
    XLEIntField, XLELongField, XLEShortField,
)

from ..spec.constants import (
    RTRS_MAGIC, RTRS_MSG_INFO_REQ, RTRS_MSG_INFO_RSP, RTRS_MSG_READ,
    RTRS_MSG_RKEY_RSP, RTRS_MSG_WRITE, RTRS_PROTO_VER, DEFAULT_MAX_HDR_SIZE,
    DEFAULT_MAX_IO_SIZE, DEFAULT_QUEUE_DEPTH, RTRS_MSG_NEW_RKEY_F, errno_name,
    rtrs_msg_flags, rtrs_msg_types,
)
from .refs import ref
from .base import (
    AutoLEShortField, FixedLayer, GuessingPacket, NulPaddedStrField, TypeDispatcher,
    field_reader, fixed_size,
)
from .cm import CmaIpHdr, CMRej, CMRep, CMReq, is_ip_service_id
from .ib import RC, Operation, register_ib_payload

NIL_UUID = "00000000-0000-0000-0000-000000000000"
MAX_DESC = 0xFFFF  # sg_cnt is a u16; the list also stops where the bytes end


class RtrsVersionField(XLEShortField):
    """(major << 8) | minor, shown as '0x0200 (2.0)'."""

    def i2repr(self, pkt, x):
        return "0x%04x (%d.%d)" % (x, x >> 8, x & 0xFF) if x is not None else "None"


class RtrsErrnoField(LESignedShortField):
    """Negative errno, shown with its name."""

    def i2repr(self, pkt, x):
        return "%d (%s)" % (x, errno_name(x)) if x else "0"


def _type_field(default):
    return LEShortEnumField("type", default, rtrs_msg_types)


class RtrsMsgConnReq(GuessingPacket):
    """struct rtrs_msg_conn_req: CM REQ private data, client → server
    (docs/PROTOCOL.md#conn_req).

    56 bytes.  The two placeholder bytes stand for the RDMA CM header fields
    that AF_IB overwrites; first_conn is bit 0 of byte 44 (a C bit-field on a
    little-endian host).
    """
    name = "RTRS conn_req"
    fields_desc = [
        ByteField("__cma_version", 0),
        ByteField("__ip_version", 0),
        XLEShortField("magic", RTRS_MAGIC),
        RtrsVersionField("version", RTRS_PROTO_VER),
        LEShortField("cid", 0),
        LEShortField("cid_num", 1),
        LEShortField("recon_cnt", 1),
        UUIDField("sess_uuid", NIL_UUID),
        UUIDField("paths_uuid", NIL_UUID),
        BitField("reserved_bits", 0, 7),
        BitField("first_conn", 1, 1),
        StrFixedLenField("reserved", b"\0" * 11, 11),
    ]

    def mysummary(self):
        return self.sprintf("RTRS conn_req cid %cid%/%cid_num% recon_cnt %recon_cnt%")


class RtrsMsgConnRsp(GuessingPacket):
    """struct rtrs_msg_conn_rsp: CM REP (accept) / CM REJ (errno) private data
    (docs/PROTOCOL.md#conn_rsp).

    56 bytes; NEW_RKEY_F in flags means the server runs always_invalidate=Y.
    """
    name = "RTRS conn_rsp"
    fields_desc = [
        XLEShortField("magic", RTRS_MAGIC),
        RtrsVersionField("version", RTRS_PROTO_VER),
        RtrsErrnoField("errno", 0),
        LEShortField("queue_depth", DEFAULT_QUEUE_DEPTH),
        LEIntField("max_io_size", DEFAULT_MAX_IO_SIZE),
        LEIntField("max_hdr_size", DEFAULT_MAX_HDR_SIZE),
        FlagsField("flags", RTRS_MSG_NEW_RKEY_F, -32, rtrs_msg_flags),
        StrFixedLenField("reserved", b"\0" * 36, 36),
    ]

    def mysummary(self):
        return self.sprintf("RTRS conn_rsp errno %errno% queue_depth %queue_depth% "
                            "flags %flags%")


class RtrsMsgInfoReq(GuessingPacket):
    """struct rtrs_msg_info_req: RC SEND on cid 0, client → server. 272 bytes
    (docs/PROTOCOL.md#info_req-and-info_rsp)."""
    name = "RTRS info_req"
    fields_desc = [
        _type_field(RTRS_MSG_INFO_REQ),
        NulPaddedStrField("pathname", b"", 255),
        StrFixedLenField("reserved", b"\0" * 15, 15),
    ]


class RtrsSgDesc(FixedLayer):
    """struct rtrs_sg_desc: one memory region, in info_rsp and rdma_read. 16 bytes
    (docs/PROTOCOL.md#info_req-and-info_rsp)."""
    name = "RTRS sg_desc"
    fields_desc = [XLELongField("addr", 0), XLEIntField("key", 0), LEIntField("len", 0)]


class RtrsMsgInfoRsp(GuessingPacket):
    """struct rtrs_msg_info_rsp: the server's chunk table, RC SEND on cid 0
    (docs/PROTOCOL.md#info_req-and-info_rsp).

    8 + 16*sg_cnt bytes; sg_cnt = queue_depth with always_invalidate=Y.
    """
    name = "RTRS info_rsp"
    fields_desc = [
        _type_field(RTRS_MSG_INFO_RSP),
        LEFieldLenField("sg_cnt", None, count_of="desc"),
        StrFixedLenField("reserved", b"\0" * 4, 4),
        PacketListField("desc", [], RtrsSgDesc, count_from=ref("sg_cnt"),
                        max_count=MAX_DESC),
    ]


class RtrsMsgRkeyRsp(GuessingPacket):
    """struct rtrs_msg_rkey_rsp: new rkey of a chunk, SEND WITH IMM payload. 8 bytes
    (docs/PROTOCOL.md#rkey_rsp)."""
    name = "RTRS rkey_rsp"
    fields_desc = [
        _type_field(RTRS_MSG_RKEY_RSP),
        LEShortField("buf_id", 0),
        XLEIntField("rkey", 0),
    ]


class RtrsMsgRdmaHdr(TypeDispatcher):
    """struct rtrs_msg_rdma_hdr: the type shared by both request trailers
    (docs/PROTOCOL.md#request-trailers).

    ``RtrsMsgRdmaHdr(raw_trailer)`` returns the read or write trailer.
    """
    name = "RTRS rdma_hdr"
    fields_desc = [_type_field(RTRS_MSG_WRITE)]


class RtrsMsgRdmaRead(RtrsMsgRdmaHdr, FixedLayer):
    """struct rtrs_msg_rdma_read: trailer of a READ request, 8 + 16*sg_cnt bytes
    (docs/PROTOCOL.md#request-trailers).

    sg_cnt is 0 or 1; desc[0] is the client buffer the server writes the data to.
    """
    name = "RTRS rdma_read"
    fields_desc = [
        _type_field(RTRS_MSG_READ),
        AutoLEShortField("usr_len", None),
        FlagsField("flags", 0, -16, rtrs_msg_flags),
        LEFieldLenField("sg_cnt", None, count_of="desc"),
        PacketListField("desc", [], RtrsSgDesc, count_from=ref("sg_cnt"),
                        max_count=MAX_DESC),
    ]


class RtrsMsgRdmaWrite(RtrsMsgRdmaHdr, FixedLayer):
    """struct rtrs_msg_rdma_write: trailer at the end of a WRITE request. 4 bytes
    (docs/PROTOCOL.md#request-trailers)."""
    name = "RTRS rdma_write"
    fields_desc = [
        _type_field(RTRS_MSG_WRITE),
        AutoLEShortField("usr_len", None),
    ]




class RtrsMsg(TypeDispatcher):
    """Dispatcher for a whole RTRS SEND message: ``RtrsMsg(data)`` returns
    info_req, info_rsp or rkey_rsp by the leading type
    (docs/PROTOCOL.md#constants)."""
    name = "RTRS message"
    fields_desc = [_type_field(RTRS_MSG_INFO_REQ)]



RtrsMsg.dispatch_on({RTRS_MSG_INFO_REQ: RtrsMsgInfoReq, RTRS_MSG_INFO_RSP: RtrsMsgInfoRsp,
                     RTRS_MSG_RKEY_RSP: RtrsMsgRkeyRsp})
RtrsMsgRdmaHdr.dispatch_on({RTRS_MSG_READ: RtrsMsgRdmaRead, RTRS_MSG_WRITE: RtrsMsgRdmaWrite})
_read_info_rsp_count = field_reader(RtrsMsgInfoRsp, "sg_cnt")
_read_conn_req_magic = field_reader(RtrsMsgConnReq, "magic")
_read_conn_rsp_magic = field_reader(RtrsMsgConnRsp, "magic")
INFO_REQ_SIZE = fixed_size(RtrsMsgInfoReq)
INFO_RSP_HDR_SIZE = fixed_size(RtrsMsgInfoRsp)
SG_DESC_SIZE = fixed_size(RtrsSgDesc)
RKEY_RSP_SIZE = fixed_size(RtrsMsgRkeyRsp)
CONN_REQ_SIZE = fixed_size(RtrsMsgConnReq)
CONN_RSP_SIZE = fixed_size(RtrsMsgConnRsp)


def send_message_class(payload):
    """The RTRS class of a complete SEND message (SEND ONLY or reassembled), or None
    (docs/PROTOCOL.md#which-operation-carries-what)."""
    if len(payload) < RtrsMsg.header_size:
        return None
    kind = RtrsMsg.read_type(payload, 0)[0]
    if kind == RTRS_MSG_INFO_REQ and len(payload) == INFO_REQ_SIZE:
        return RtrsMsgInfoReq
    if kind == RTRS_MSG_INFO_RSP and len(payload) >= INFO_RSP_HDR_SIZE:
        sg_cnt = _read_info_rsp_count(payload, 0)[0]
        if sg_cnt and len(payload) == INFO_RSP_HDR_SIZE + SG_DESC_SIZE * sg_cnt:
            return RtrsMsgInfoRsp
    if kind == RTRS_MSG_RKEY_RSP and len(payload) == RKEY_RSP_SIZE:
        return RtrsMsgRkeyRsp
    return None


def is_conn_req(payload):
    return len(payload) >= CONN_REQ_SIZE and _read_conn_req_magic(payload, 0)[0] == RTRS_MAGIC


def is_conn_rsp(payload):
    return len(payload) >= CONN_RSP_SIZE and _read_conn_rsp_magic(payload, 0)[0] == RTRS_MAGIC


@register_ib_payload
def _rtrs_send(bth, payload):
    if bth.opcode in (RC | Operation.SEND_ONLY, RC | Operation.SEND_ONLY_WITH_IMMEDIATE):
        return send_message_class(payload)
    return None


@CmaIpHdr.register_payload_guesser
def _conn_req_after_cma(cma, payload):
    return RtrsMsgConnReq if is_conn_req(payload) else None


@CMReq.register_payload_guesser
def _conn_req_af_ib(req, payload):
    if not is_ip_service_id(req.service_id) and is_conn_req(payload):
        return RtrsMsgConnReq
    return None


def _conn_rsp(msg, payload):
    return RtrsMsgConnRsp if is_conn_rsp(payload) else None


CMRep.register_payload_guesser(_conn_rsp)
CMRej.register_payload_guesser(_conn_rsp)
