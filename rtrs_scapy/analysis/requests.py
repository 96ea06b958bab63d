"""Decoding a complete RTRS request and its RNBD user header from raw bytes,
through the struct plans (docs/PROTOCOL.md#chunks-and-what-the-client-writes,
docs/PROTOCOL.md#request-trailers, docs/PROTOCOL.md#rnbd-messages).
"""

from dataclasses import dataclass
from typing import Optional

from ..constants import (
    RNBD_MSG_IO, RNBD_MSG_OPEN, RNBD_MSG_SESS_INFO, rnbd_msg_type, rnbd_rw_str, short_name,
)
from ..fastpath.plan import plan
from ..layers.rnbd import RNBD_MESSAGES, RnbdMsgHdr, reply_class
from ..layers.rtrs import RtrsMsgRdmaRead
from ..layers.rtrs_request import WRITE_TRAILER_SIZE, split_read, split_write

_read_trailer = plan(RtrsMsgRdmaRead)
_rnbd_type = plan(RnbdMsgHdr).reader("type")
RNBD_HDR = plan(RnbdMsgHdr).size
#: RNBD messages whose reply travels as READ data and must be decoded
#: (docs/PROTOCOL.md#rnbd-messages)
RNBD_ADMIN = (RNBD_MSG_SESS_INFO, RNBD_MSG_OPEN)


@dataclass
class ParsedRequest:
    op: str                 # "read" / "write"
    usr_len: int
    data_len: int
    sg_cnt: int
    desc: Optional[dict]    # read: the client buffer {addr, key, len}
    usr: bytes              # the user (RNBD) header

    @property
    def offset(self):
        """Where the trailer starts in the chunk: the IO_REQ immediate offset
        (docs/PROTOCOL.md#io_req-buf_id-and-offset)."""
        return self.data_len + self.usr_len


def parse_request(msg):
    """ParsedRequest of a reassembled request Message, or None when no trailer fits."""
    if msg.whole:
        data = msg.data()
        parts = split_read(data)
        if parts is not None:
            usr_len, sg_cnt = parts
            trailer = _read_trailer.decode(data, usr_len, len(data))
            desc = trailer["desc"][0] if trailer["desc"] else None
            data_len = sum(d["len"] for d in trailer["desc"])
            return ParsedRequest("read", usr_len, data_len, sg_cnt, desc, data[:usr_len])
        tail, total = data, len(data)
    else:
        tail, total = msg.last_bytes(), msg.length
    parts = split_write(tail)
    if parts is None:
        return None
    _, usr_len = parts
    end = len(tail) - WRITE_TRAILER_SIZE
    return ParsedRequest("write", usr_len, total - WRITE_TRAILER_SIZE - usr_len, 0, None,
                         tail[end - usr_len:end])


def rnbd_type(usr):
    return _rnbd_type(usr, 0)[0] if len(usr) >= RNBD_HDR else None


def decode_rnbd(data):
    """An RNBD message as a dict (all fields, plus names), or None."""
    kind = rnbd_type(data)
    cls = RNBD_MESSAGES.get(kind)
    if cls is None:
        return None
    fields = plan(cls).decode(data, 0, len(data)) if len(data) >= plan(cls).size \
        else _short(cls, data)
    fields = {k: v for k, v in fields.items() if not k.startswith("__")
              and not isinstance(v, bytes)}
    fields["msg"] = short_name(rnbd_msg_type, kind, "RNBD_MSG_").lower()
    if kind == RNBD_MSG_IO and "rw" in fields:
        fields["rw_str"] = rnbd_rw_str(fields["rw"])
    return fields


def _short(cls, data):
    """Fields of a message cut short (a 28-byte IO header of a 32-bit client)."""
    padded = bytes(data) + b"\0" * (plan(cls).size - len(data))
    return plan(cls).decode(padded, 0, len(padded))


def decode_rnbd_reply(data):
    cls = reply_class(data)
    return decode_rnbd(data) if cls is not None else None
