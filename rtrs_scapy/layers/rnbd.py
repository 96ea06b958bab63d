"""RNBD messages of rnbd-proto.h (docs/PROTOCOL.md#rnbd-messages),
all little-endian.

Every RNBD request is the user header of an RTRS request; the two replies
(sess_info_rsp, open_rsp) travel as RTRS READ data, i.e. the payload of the
server's RDMA WRITE into the client's buffer.  Each message starts with the
fields of struct rnbd_msg_hdr (type, __padding); ``RnbdMsgHdr(data)`` returns
the right message class.
"""

from scapy.fields import (
    ByteEnumField, ByteField, FlagsField, LEIntField, LELongField,
    LEShortEnumField, LEShortField, StrFixedLenField, XLEShortField,
)

from ..spec.constants import (
    RNBD_MSG_CLOSE, RNBD_MSG_IO, RNBD_MSG_OPEN, RNBD_MSG_OPEN_RSP,
    RNBD_MSG_SESS_INFO, RNBD_MSG_SESS_INFO_RSP, RNBD_OP_MASK, RNBD_PROTO_VER_MAJOR,
    rnbd_access_mode, rnbd_cache_policy, rnbd_io_flags, rnbd_io_op, rnbd_msg_type,
    rnbd_rw_str,
)
from .base import NulPaddedStrField, TypeDispatcher, fixed_size
from .ib import RC, Operation, register_ib_payload
from .rtrs_request import register_user_header


class RnbdRwField(LEIntField):
    """rnbd_msg_io.rw: operation in the low 8 bits, flags above
    (docs/PROTOCOL.md#the-rw-field)."""
    op_mask = RNBD_OP_MASK
    ops = rnbd_io_op
    flags = rnbd_io_flags

    def i2repr(self, pkt, x):
        return "0x%x (%s)" % (x, rnbd_rw_str(x)) if x is not None else "None"


def _hdr(default_type):
    return [LEShortEnumField("type", default_type, rnbd_msg_type),
            XLEShortField("__padding", 0)]


class RnbdMsgHdr(TypeDispatcher):
    """struct rnbd_msg_hdr (4 bytes); as a class call it dispatches on the type."""
    name = "RNBD hdr"
    fields_desc = _hdr(RNBD_MSG_IO)


def _sess_info(default_type):
    """rnbd_msg_sess_info and rnbd_msg_sess_info_rsp share their layout."""
    return _hdr(default_type) + [
        ByteField("ver", RNBD_PROTO_VER_MAJOR),
        StrFixedLenField("reserved", b"\0" * 31, 31),
    ]


class RnbdMsgSessInfo(RnbdMsgHdr):
    """struct rnbd_msg_sess_info: user header of an RTRS READ on cid 0. 36 bytes."""
    name = "RNBD sess_info"
    fields_desc = _sess_info(RNBD_MSG_SESS_INFO)


class RnbdMsgSessInfoRsp(RnbdMsgHdr):
    """struct rnbd_msg_sess_info_rsp: RTRS READ data from the server. 36 bytes."""
    name = "RNBD sess_info_rsp"
    fields_desc = _sess_info(RNBD_MSG_SESS_INFO_RSP)


class RnbdMsgOpen(RnbdMsgHdr):
    """struct rnbd_msg_open: map a device, user header of an RTRS READ. 264 bytes."""
    name = "RNBD open"
    fields_desc = _hdr(RNBD_MSG_OPEN) + [
        ByteEnumField("access_mode", 1, rnbd_access_mode),
        ByteField("resv1", 0),
        NulPaddedStrField("dev_name", b"", 255),
        StrFixedLenField("reserved", b"\0" * 3, 3),
    ]


class RnbdMsgOpenRsp(RnbdMsgHdr):
    """struct rnbd_msg_open_rsp: device id and geometry, RTRS READ data. 56 bytes.

    Offset 20 is max_write_same_sectors up to ~v6.7 (always 0 since v5.18).
    """
    name = "RNBD open_rsp"
    fields_desc = _hdr(RNBD_MSG_OPEN_RSP) + [
        LEIntField("device_id", 0),
        LELongField("nsectors", 0),
        LEIntField("max_hw_sectors", 0),
        LEIntField("max_write_zeroes_sectors", 0),
        LEIntField("max_discard_sectors", 0),
        LEIntField("discard_granularity", 0),
        LEIntField("discard_alignment", 0),
        LEShortField("physical_block_size", 512),
        LEShortField("logical_block_size", 512),
        LEShortField("max_segments", 128),
        LEShortField("secure_discard", 0),
        ByteField("obsolete_rotational", 0),
        FlagsField("cache_policy", 0, 8, rnbd_cache_policy),
        StrFixedLenField("reserved", b"\0" * 10, 10),
    ]


class RnbdMsgClose(RnbdMsgHdr):
    """struct rnbd_msg_close: unmap, user header of an RTRS WRITE without data. 8 bytes."""
    name = "RNBD close"
    fields_desc = _hdr(RNBD_MSG_CLOSE) + [LEIntField("device_id", 0)]


class RnbdMsgIo(RnbdMsgHdr):
    """struct rnbd_msg_io: a block IO, user header of an RTRS READ or WRITE
    (docs/PROTOCOL.md#rnbd-messages).

    32 bytes on 64-bit hosts, the last 6 being uninitialised struct padding;
    trust the RTRS trailer's usr_len.
    """
    name = "RNBD io"
    fields_desc = _hdr(RNBD_MSG_IO) + [
        LEIntField("device_id", 0),
        LELongField("sector", 0),
        RnbdRwField("rw", 0),
        LEIntField("bi_size", 0),
        LEShortField("prio", 0),
        StrFixedLenField("__tail_padding", b"\0" * 6, 6),
    ]

    def mysummary(self):
        return "RNBD %s dev %d sector %d len %d" % (
            rnbd_rw_str(self.rw), self.device_id, self.sector, self.bi_size)


RNBD_MESSAGES = {
    RNBD_MSG_SESS_INFO: RnbdMsgSessInfo, RNBD_MSG_SESS_INFO_RSP: RnbdMsgSessInfoRsp,
    RNBD_MSG_OPEN: RnbdMsgOpen, RNBD_MSG_OPEN_RSP: RnbdMsgOpenRsp,
    RNBD_MSG_IO: RnbdMsgIo, RNBD_MSG_CLOSE: RnbdMsgClose,
}
RNBD_REQUESTS = (RNBD_MSG_SESS_INFO, RNBD_MSG_OPEN, RNBD_MSG_IO, RNBD_MSG_CLOSE)
RnbdMsgHdr.dispatch_on(RNBD_MESSAGES)
_read_type = RnbdMsgHdr.read_type
HDR_SIZE = RnbdMsgHdr.header_size
SESS_INFO_RSP_SIZE = fixed_size(RnbdMsgSessInfoRsp)
OPEN_RSP_SIZE = fixed_size(RnbdMsgOpenRsp)


def reply_class(data):
    """The RNBD reply carried by a server RDMA WRITE of READ data, or None
    (docs/PROTOCOL.md#rnbd)."""
    if len(data) < HDR_SIZE:
        return None
    kind = _read_type(data, 0)[0]
    if kind == RNBD_MSG_SESS_INFO_RSP and len(data) == SESS_INFO_RSP_SIZE:
        return RnbdMsgSessInfoRsp
    if kind == RNBD_MSG_OPEN_RSP and len(data) == OPEN_RSP_SIZE:
        return RnbdMsgOpenRsp
    return None


@register_user_header
def _rnbd_request(data):
    if len(data) >= HDR_SIZE and _read_type(data, 0)[0] in RNBD_REQUESTS:
        return RnbdMsgHdr
    return None


@register_ib_payload
def _rnbd_reply(bth, payload):
    if bth.opcode == RC | Operation.RDMA_WRITE_ONLY:  # READ data of one packet
        return reply_class(payload)
    return None
