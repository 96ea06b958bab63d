"""Payload guessing that the upper layers plug into.

Scapy's ``bind_layers`` only matches field values of the lower layer.  Several
RTRS decisions depend on the payload itself (the RTRS magic in CM private data,
the message type of a SEND); lower layers therefore ask functions registered by
the upper layers, which keeps ib.py and cm.py free of RTRS imports.
"""

from scapy.fields import LEShortField, StrFixedLenField
from scapy.packet import Packet


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

    Once its messages exist the header calls ``dispatch_on(table, header_plan)``
    (the struct plan of its own fields); its subclasses (the messages) build
    themselves.
    """

    @classmethod
    def dispatch_on(cls, table, header_plan):
        cls.type_table = table
        cls.read_type = header_plan.reader("type")
        cls.header_size = header_plan.size
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
