"""What the layer modules share: payload guessing that the upper layers plug
into, type dispatchers, fast reads of a few header fields and writes of small
fixed layers, and the bit positions of fields.

Scapy's ``bind_layers`` only matches field values of the lower layer.  Several
RTRS decisions depend on the payload itself (the RTRS magic in CM private data,
the message type of a SEND); lower layers therefore ask functions registered by
the upper layers, which keeps ib.py and cm.py free of RTRS imports.

The layers are the bottom of the package: sizes and field offsets used here
are measured with Scapy itself, never taken from the layout IR built above them.
"""

import struct

from scapy.fields import LEShortField, StrFixedLenField, _BitField
from scapy.packet import Packet


def fixed_size(cls):
    """Bytes of a layer built with its defaults (counted lists empty), e.g. 8 for
    rtrs_msg_info_rsp without descriptors."""
    return len(cls())


def _measured(cls):
    """(field, what was built before it, after it) for each field of ``cls``: each field
    adds itself (Scapy's own ``addfield``) to a layer built with the defaults, so past a
    field of variable size the positions hold for those defaults only.  What was built
    is bytes, or (bytes, bits of the open bit group, its value) inside a bit group."""
    pkt = cls()
    built = b""
    for fld in cls.fields_desc:
        before = built
        built = fld.addfield(pkt, built, pkt.getfieldval(fld.name))
        yield fld, before, built


def _field_offsets(cls):
    """{name: (offset, size, field)} of the byte-aligned fields of ``cls``; fields inside
    a bit group have no byte offset of their own and are left out."""
    return {fld.name: (len(before), len(after) - len(before), fld)
            for fld, before, after in _measured(cls)
            if isinstance(before, bytes) and isinstance(after, bytes)}


def field_bits(cls):
    """{name: (first bit, width in bits)} of the fields of ``cls``, bit groups included."""
    return {fld.name: (_bit_length(before), _bit_length(after) - _bit_length(before))
            for fld, before, after in _measured(cls)}


def _bit_length(built):
    """Bits added so far: bytes, or (bytes, bits of the open bit group, its value)."""
    return len(built) * 8 if isinstance(built, bytes) else len(built[0]) * 8 + built[1]


def field_reader(cls, *names):
    """``read(buf, off) -> tuple``: the named integer fields of layer ``cls`` at
    ``buf[off:]`` in one ``struct.unpack_from``, for decisions made on many packets
    (is this a request trailer, which message type) without building Scapy objects."""
    return _fields_struct(cls, names).unpack_from


def field_writer(cls):
    """``write(*values) -> bytes``: a whole layer ``cls`` of integer fields, the values
    in the order of its field list, in one ``struct.pack``, for layers crafted by the
    thousand (the descriptors of an info_rsp) without building Scapy objects."""
    layout = _fields_struct(cls, tuple(fld.name for fld in cls.fields_desc))
    if layout.size != fixed_size(cls):
        raise ValueError("%s: not a layer of integer fields alone" % cls.__name__)
    return layout.pack


def _fields_struct(cls, names):
    offsets = _field_offsets(cls)
    fmt, pos, endians = "", 0, set()
    for name in names:
        offset, size, fld = offsets[name]
        code = getattr(fld, "fmt", "")
        if (offset < pos or isinstance(fld, _BitField) or not code
                or code[-1] not in "bBhHiIqQ" or struct.calcsize(code) != size):
            raise ValueError("%s.%s: not an integer field readable in wire order"
                             % (cls.__name__, name))
        endians.add(code[0] if code[0] in "<>!" else "!")
        fmt += "%dx" % (offset - pos) if offset > pos else ""
        fmt += code.lstrip("<>!=@")
        pos = offset + size
    if len(endians) > 1:
        raise ValueError("%s: fields %s mix byte orders" % (cls.__name__, names))
    return struct.Struct(endians.pop() + fmt)


class GuessingPacket(Packet):
    """A layer whose payload class can be chosen by registered guessers.

    Each guesser is ``fn(layer, payload: bytes) -> Packet class or None``; the
    first non-None answer wins, then Scapy's bindings decide.
    """

    payload_guessers = []

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.payload_guessers = []

    @classmethod
    def register_payload_guesser(cls, fn):
        if fn not in cls.payload_guessers:
            cls.payload_guessers.append(fn)
        return fn

    def guess_payload_class(self, payload):
        for guesser in type(self).payload_guessers:
            cls = guesser(self, payload)
            if cls is not None:
                return cls
        return super().guess_payload_class(payload)


class TypeDispatcher(Packet):
    """A header class that, called on bytes, returns the message class for the
    leading type field (``RtrsMsg(data)``, ``RnbdMsgHdr(data)``).

    Once its messages exist the header calls ``dispatch_on(table)``; its
    subclasses (the messages) build themselves.
    """

    @classmethod
    def dispatch_on(cls, table):
        cls.type_table = table
        cls.read_type = field_reader(cls, "type")
        cls.header_size = fixed_size(cls)
        # Scapy only honours a dispatch_hook in the class's own __dict__
        cls.dispatch_hook = TypeDispatcher.__dict__["_dispatch"]

    @classmethod
    def _dispatch(cls, _pkt=None, *args, **kargs):
        if "type_table" in cls.__dict__ and _pkt and len(_pkt) >= cls.header_size:
            return cls.type_table.get(cls.read_type(_pkt, 0)[0], cls)
        return cls


class FixedLayer(Packet):
    """Base of fixed-size list elements: bytes after the element belong to the list."""

    def extract_padding(self, s):
        return b"", s


class NulPaddedStrField(StrFixedLenField):
    """A fixed-size, NUL-padded C string (pathname, dev_name); shown up to the first NUL."""
    c_string = True

    def i2repr(self, pkt, x):
        return repr(bytes(x or b"").split(b"\0", 1)[0].decode("utf-8", "replace"))


class AutoLEShortField(LEShortField):
    """A LE u16 that a containing layer fills in; None builds as 0 on its own."""

    def i2m(self, pkt, x):
        return 0 if x is None else x
