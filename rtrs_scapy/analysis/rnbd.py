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
    reader = _reader(kind)
    if reader is None:
        return None
    size, names, read = reader
    data = bytes(data)
    if len(data) < size:
        data += b"\0" * (size - len(data))
    fields = dict(zip(names, read(data, 0)))
    fields["msg"] = kind_name(kind)
    if kind == RNBD_MSG_IO and "rw" in fields:
        fields["rw_str"] = rw_str(fields["rw"])
    return fields


@functools.lru_cache(maxsize=16)
def _reader(kind):
    """(size, names, read) of a message type: the fields a record shows (no padding,
    no reserved bytes: a field's type is the same in every message), or None."""
    name = LAYOUTS.get(kind)
    if name is None:
        return None
    layout = plan(name)
    if layout.layout.lists:
        raise ValueError("%s: an RNBD message with a list is not read here" % name)
    blank = layout.decode(bytes(layout.size), 0, layout.size)
    names = tuple(k for k, v in blank.items() if not k.startswith("__")
                  and not isinstance(v, bytes))
    return layout.size, names, layout.reader(*names)


#: rnbd_rw_str of the few rw values a capture has, each worked out once
rw_str = functools.lru_cache(maxsize=1024)(rnbd_rw_str)
#: bytes of a whole RNBD IO header
IO_SIZE = plan(LAYOUTS[RNBD_MSG_IO]).size


def reply(data, length):
    """The RNBD reply at the start of a server's READ data, or None (plain data)."""
    kind = message_type(data)
    if kind in REPLIES and length == plan(LAYOUTS[kind]).size:
        return decode(data[:length])
    return None

