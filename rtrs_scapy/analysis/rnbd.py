"""RNBD messages from bytes, one at a time (docs/PROTOCOL.md#rnbd-messages).

For the rare ones: session info, open, close and their replies, and the RNBD
header of a message record.  IO headers in bulk are read in decode.py.
"""

import functools

from ..spec.constants import (
    RNBD_MSG_CLOSE, RNBD_MSG_IO, RNBD_MSG_OPEN, RNBD_MSG_OPEN_RSP, RNBD_MSG_SESS_INFO,
    RNBD_MSG_SESS_INFO_RSP, rnbd_msg_type, rnbd_rw_str, short_name,
)
from ..layout.plans import plan

LAYOUTS = {
    RNBD_MSG_SESS_INFO: "RnbdMsgSessInfo", RNBD_MSG_SESS_INFO_RSP: "RnbdMsgSessInfoRsp",
    RNBD_MSG_OPEN: "RnbdMsgOpen", RNBD_MSG_OPEN_RSP: "RnbdMsgOpenRsp",
    RNBD_MSG_IO: "RnbdMsgIo", RNBD_MSG_CLOSE: "RnbdMsgClose",
}
#: RNBD messages whose reply travels as READ data (docs/PROTOCOL.md#rnbd-session-life-cycle)
CONTROL_READS = (RNBD_MSG_SESS_INFO, RNBD_MSG_OPEN)
REPLIES = (RNBD_MSG_SESS_INFO_RSP, RNBD_MSG_OPEN_RSP)
_HDR = plan("RnbdMsgHdr")


@functools.lru_cache(maxsize=256)
def kind_name(kind):
    """'io', 'open', 'sess_info_rsp', … of an RNBD message type."""
    return short_name(rnbd_msg_type, kind, "RNBD_MSG_").lower()


def message_type(data):
    return _HDR.reader("type")(data, 0)[0] if len(data) >= _HDR.size else None


def decode(data):
    """An RNBD message as a dict (all fields, plus names), or None.

    A message cut short (the 28-byte IO header of a 32-bit client) is read as if
    zero-padded to its full size."""
    kind = message_type(data)
    layout = _layout(kind)
    if layout is None:
        return None
    data = bytes(data)
    if len(data) < layout.size:
        data += b"\0" * (layout.size - len(data))
    fields = layout.decode(data, 0, len(data))
    fields = {k: v for k, v in fields.items() if not k.startswith("__")
              and not isinstance(v, bytes)}
    fields["msg"] = kind_name(kind)
    if kind == RNBD_MSG_IO and "rw" in fields:
        fields["rw_str"] = _rw_str(fields["rw"])
    return fields


@functools.lru_cache(maxsize=16)
def _layout(kind):
    name = LAYOUTS.get(kind)
    return None if name is None else plan(name)


@functools.lru_cache(maxsize=1024)
def _rw_str(rw):
    return rnbd_rw_str(rw)


def reply(data, length):
    """The RNBD reply at the start of a server's READ data, or None (plain data)."""
    kind = message_type(data)
    if kind in REPLIES and length == plan(LAYOUTS[kind]).size:
        return decode(data[:length])
    return None

