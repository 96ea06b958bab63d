"""A whole client request as the client RDMA-writes it into a server chunk
(docs/PROTOCOL.md#chunks-and-what-the-client-writes):

    WRITE:  data | user header | rtrs_msg_rdma_write          (trailer at the end)
    READ:   user header | rtrs_msg_rdma_read + desc[sg_cnt]   (data_len is not sent)

``RtrsRequest(payload)`` splits a complete (single-packet or reassembled)
message into its parts without knowing the session, using the trailer checks
of docs/PROTOCOL.md#request-trailers; building fills usr_len and sg_cnt, and
``imm_offset``/``imm()`` give the IO_REQ immediate.  The user header is decoded
by whatever upper layer registered itself (RNBD).
"""

from scapy.compat import raw
from scapy.config import conf
from scapy.fields import PacketField, StrField
from scapy.packet import Packet

from ..spec.constants import RTRS_MSG_NEED_INVAL_F, RTRS_MSG_READ, RTRS_MSG_WRITE
from ..spec.imm import encode_io_req
from .base import field_reader, fixed_size
from .ib import RC, Operation, register_ib_payload
from .rtrs import SG_DESC_SIZE, RtrsMsgRdmaRead, RtrsMsgRdmaWrite

WRITE_TRAILER_SIZE = fixed_size(RtrsMsgRdmaWrite)
READ_TRAILER_SIZE = fixed_size(RtrsMsgRdmaRead)
_read_write_trailer = field_reader(RtrsMsgRdmaWrite, "type", "usr_len")
_read_read_trailer = field_reader(RtrsMsgRdmaRead, "type", "usr_len", "sg_cnt")

_user_header_guessers = []


def register_user_header(fn):
    """Register ``fn(data) -> Packet class or None`` for RTRS user headers."""
    if fn not in _user_header_guessers:
        _user_header_guessers.append(fn)
    return fn


def user_header(data):
    """Decode a user header with the first registered class that claims it."""
    for guesser in _user_header_guessers:
        cls = guesser(data)
        if cls is not None:
            try:
                return cls(data)
            except Exception:  # a truncated header stays raw, never an exception
                break
    return conf.raw_layer(data)


def split_write(buf, start=0, end=None):
    """(data_len, usr_len) of a WRITE request in buf[start:end], or None
    (docs/PROTOCOL.md#chunks-and-what-the-client-writes)."""
    end = len(buf) if end is None else end
    size = end - start
    if size < WRITE_TRAILER_SIZE:
        return None
    kind, usr_len = _read_write_trailer(buf, end - WRITE_TRAILER_SIZE)
    if kind != RTRS_MSG_WRITE or usr_len > size - WRITE_TRAILER_SIZE:
        return None
    return size - WRITE_TRAILER_SIZE - usr_len, usr_len


def split_read(buf, start=0, end=None):
    """(usr_len, sg_cnt) of a READ request in buf[start:end], or None
    (docs/PROTOCOL.md#request-trailers)."""
    end = len(buf) if end is None else end
    size = end - start
    for sg_cnt in (1, 0):
        usr_len = size - READ_TRAILER_SIZE - SG_DESC_SIZE * sg_cnt
        if usr_len < 0:
            continue
        kind, u_len, count = _read_read_trailer(buf, start + usr_len)
        if kind == RTRS_MSG_READ and u_len == usr_len and count == sg_cnt:
            return usr_len, sg_cnt
    return None


class _Request(Packet):
    """Common behaviour of the two request layouts."""

    def imm(self, buf_id, queue_depth):
        """The IO_REQ immediate for this request in chunk ``buf_id``."""
        return encode_io_req(buf_id, self.imm_offset, queue_depth)

    def _usr_bytes(self):
        return raw(self.usr) if self.usr is not None else b""

    def _trailer(self):
        trailer = self.trailer.copy()
        if trailer.usr_len is None:
            trailer.usr_len = len(self._usr_bytes())
        return trailer

    def _set(self, s, **fields):
        self.fields.update(fields)
        self.raw_packet_cache = None  # rebuilt from the parts, which round-trip
        self.explicit = 1
        return b""


class RtrsWriteRequest(_Request):
    """An RTRS WRITE request: data | user header | rtrs_msg_rdma_write
    (docs/PROTOCOL.md#chunks-and-what-the-client-writes)."""
    name = "RTRS WRITE request"
    fields_desc = [
        StrField("data", b""),
        PacketField("usr", None, Packet),
        PacketField("trailer", RtrsMsgRdmaWrite(), RtrsMsgRdmaWrite),
    ]

    @property
    def imm_offset(self):
        """data_len + usr_len: where the trailer starts in the chunk
        (docs/PROTOCOL.md#io_req-buf_id-and-offset)."""
        return len(self.data) + len(self._usr_bytes())

    def self_build(self):
        return bytes(self.data) + self._usr_bytes() + raw(self._trailer())

    def do_dissect(self, s):
        parts = split_write(s)
        if parts is None:
            raise ValueError("no RTRS WRITE trailer at the end of %d bytes" % len(s))
        data_len, usr_len = parts
        return self._set(s, data=s[:data_len],
                         usr=user_header(s[data_len:data_len + usr_len]),
                         trailer=RtrsMsgRdmaWrite(s[data_len + usr_len:]))

    def mysummary(self):
        return "RTRS WRITE data %d usr %d" % (len(self.data), len(self._usr_bytes()))


class RtrsReadRequest(_Request):
    """An RTRS READ request: user header | rtrs_msg_rdma_read + desc
    (docs/PROTOCOL.md#chunks-and-what-the-client-writes).

    The data_len bytes reserved in the chunk are not sent; they equal the
    descriptor's len (0 without descriptor, e.g. an RNBD flush).
    """
    name = "RTRS READ request"
    fields_desc = [
        PacketField("usr", None, Packet),
        PacketField("trailer", RtrsMsgRdmaRead(flags=RTRS_MSG_NEED_INVAL_F),
                    RtrsMsgRdmaRead),
    ]

    @property
    def data_len(self):
        return sum(desc.len for desc in self.trailer.desc)

    @property
    def imm_offset(self):
        return self.data_len + len(self._usr_bytes())

    def self_build(self):
        return self._usr_bytes() + raw(self._trailer())

    def do_dissect(self, s):
        parts = split_read(s)
        if parts is None:
            raise ValueError("no RTRS READ trailer in %d bytes" % len(s))
        usr_len, _sg_cnt = parts
        return self._set(s, usr=user_header(s[:usr_len]),
                         trailer=RtrsMsgRdmaRead(s[usr_len:]))

    def mysummary(self):
        return "RTRS READ usr %d data_len %d" % (len(self._usr_bytes()), self.data_len)


class RtrsRequest(Packet):
    """Dispatcher: ``RtrsRequest(payload)`` is a read or write request, or Raw."""
    name = "RTRS request"

    @classmethod
    def dispatch_hook(cls, _pkt=None, *args, **kargs):
        if cls is not RtrsRequest or not _pkt:
            return cls
        return request_class(_pkt) or conf.raw_layer


def request_class(payload):
    """RtrsReadRequest / RtrsWriteRequest for a complete request message, or None.

    A READ is checked first: its trailer pins three fields, a WRITE's only two.
    """
    if split_read(payload) is not None:
        return RtrsReadRequest
    if split_write(payload) is not None:
        return RtrsWriteRequest
    return None


@register_ib_payload
def _single_packet_request(bth, payload):
    """RDMA WRITE ONLY WITH IMMEDIATE with data is a whole request
    (docs/PROTOCOL.md#which-operation-carries-what)."""
    if bth.opcode == RC | Operation.RDMA_WRITE_ONLY_WITH_IMMEDIATE and payload:
        return request_class(payload)
    return None
