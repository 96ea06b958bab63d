"""InfiniBand transport on top of ``scapy.contrib.roce``: extension headers,
the opcode → header chain, RoCEv1/RoCEv2/native IB framing and the ICRC
(docs/PROTOCOL.md#infiniband-transport).

Scapy's roce module has BTH, GRH and AETH; this module subclasses them (the roce
classes themselves are left as they are) and adds RETH, ImmDt, IETH, DETH, RDETH,
AtomicETH, AtomicAckETH, the LRH (with VCRC, pcap link type 247), the SEND WITH
INVALIDATE opcodes, AETH on every opcode that carries it, pad-byte handling and an
ICRC that is computed for every underlayer and can be checked on decode.
"""

import enum
import functools
import itertools
import struct
import zlib

from scapy.compat import raw
from scapy.config import conf
from scapy.contrib import roce
from scapy.contrib.roce import CNP_OPCODE, CNPPadding  # noqa: F401  (CNP: reused as is)
from scapy.base_classes import Gen
from scapy.data import ETH_P_IP, ETH_P_IPV6
from scapy.fields import (
    BitEnumField, BitField, ByteEnumField, ByteField, FCSField, IntField, XBitField,
    XIntField, XLongField, XShortField, StrField, TrailerField,
)
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.volatile import VolatileValue
from scapy.packet import Packet, Raw, bind_bottom_up, bind_layers, bind_top_down, split_bottom_up

from ..spec.imm import decode as decode_imm
from .base import field_bits

# -- framing: where InfiniBand transport sits (docs/PROTOCOL.md#capture-encapsulations)

ROCEV2_PORT = 4791                  # UDP destination port of RoCEv2 (IANA, IBTA A17)
ROCEV2_SOURCE_PORT = 0xC000         # first of the entropy source ports (A17.4.5.1)
ROCEV1_ETHERTYPE = 0x8915           # RoCEv1: GRH right after Ethernet (IBTA A16)
ETHERTYPE_IPV4 = ETH_P_IP
ETHERTYPE_IPV6 = ETH_P_IPV6
VLAN_ETHERTYPES = (0x8100, 0x88A8, 0x9100)  # 802.1Q, 802.1ad, pre-standard QinQ
IP_PROTO_UDP = 17
GRH_NEXT_HEADER_BTH = 0x1B          # GRH next header: IBA transport
DLT_INFINIBAND = 247
GSI_QPN = 1
GSI_QKEY = 0x80010000

# Bits 7..5 of the opcode are the transport, bits 4..0 the operation
# (docs/PROTOCOL.md#base-transport-header).
RC, UC, RD, UD = 0x00, 0x20, 0x40, 0x60


class Operation(enum.IntEnum):
    """Bits 4..0 of the BTH opcode (IBTA table 38); ``RC | Operation.SEND_ONLY``
    is the opcode of an RC SEND ONLY."""
    SEND_FIRST = 0x00
    SEND_MIDDLE = 0x01
    SEND_LAST = 0x02
    SEND_LAST_WITH_IMMEDIATE = 0x03
    SEND_ONLY = 0x04
    SEND_ONLY_WITH_IMMEDIATE = 0x05
    RDMA_WRITE_FIRST = 0x06
    RDMA_WRITE_MIDDLE = 0x07
    RDMA_WRITE_LAST = 0x08
    RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x09
    RDMA_WRITE_ONLY = 0x0A
    RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x0B
    RDMA_READ_REQUEST = 0x0C
    RDMA_READ_RESPONSE_FIRST = 0x0D
    RDMA_READ_RESPONSE_MIDDLE = 0x0E
    RDMA_READ_RESPONSE_LAST = 0x0F
    RDMA_READ_RESPONSE_ONLY = 0x10
    ACKNOWLEDGE = 0x11
    ATOMIC_ACKNOWLEDGE = 0x12
    COMPARE_SWAP = 0x13
    FETCH_ADD = 0x14
    SEND_LAST_WITH_INVALIDATE = 0x16
    SEND_ONLY_WITH_INVALIDATE = 0x17


class IBHeader(Packet):
    """An extension header: what follows it is decided by its BTH's opcode."""

    def guess_payload_class(self, payload):
        return _next_in_chain(self, payload)


class RETH(IBHeader):
    """RDMA Extended Transport Header (docs/PROTOCOL.md#opcodes-and-extension-headers)."""
    name = "RETH"
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0), IntField("dma_len", 0)]


class RtrsImmField(XIntField):
    """The immediate, shown with its RTRS meaning (docs/PROTOCOL.md#immediate-data)."""

    def i2repr(self, pkt, x):
        if x is None:
            return "None"
        return "0x%08x [%s]" % (x, decode_imm(x, getattr(pkt, "queue_depth", None)).describe())


class ImmDt(IBHeader):
    """Immediate data; RTRS reads it as a big-endian u32 (docs/PROTOCOL.md#immediate-data).

    ``queue_depth`` is not on the wire: set it (as the session analyzer does)
    to see IO_REQ immediates as buf_id/offset.
    """
    name = "ImmDt"
    fields_desc = [RtrsImmField("imm", 0)]
    queue_depth = None

    def decoded(self, queue_depth=None):
        return decode_imm(self.imm, queue_depth or self.queue_depth)

    def mysummary(self):
        return "ImmDt %s" % self.decoded().describe()


class IETH(IBHeader):
    """Invalidate Extended Transport Header: the R_Key to invalidate
    (docs/PROTOCOL.md#opcodes-and-extension-headers)."""
    name = "IETH"
    fields_desc = [XIntField("rkey", 0)]


class DETH(IBHeader):
    """Datagram Extended Transport Header (docs/PROTOCOL.md#opcodes-and-extension-headers)."""
    name = "DETH"
    fields_desc = [XIntField("qkey", GSI_QKEY), ByteField("reserved", 0),
                   XBitField("src_qp", GSI_QPN, 24)]


class RDETH(IBHeader):
    """Reliable Datagram Extended Transport Header
    (docs/PROTOCOL.md#opcodes-and-extension-headers)."""
    name = "RDETH"
    fields_desc = [ByteField("reserved", 0), XBitField("ee_context", 0, 24)]


class AtomicETH(IBHeader):
    """Atomic Extended Transport Header (docs/PROTOCOL.md#opcodes-and-extension-headers)."""
    name = "AtomicETH"
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0),
                   XLongField("swap_add", 0), XLongField("compare", 0)]


class AtomicAckETH(IBHeader):
    """Atomic Acknowledge Extended Transport Header
    (docs/PROTOCOL.md#opcodes-and-extension-headers)."""
    name = "AtomicAckETH"
    fields_desc = [XLongField("orig_remote_data", 0)]


class IBPad(Packet):
    """The 0-3 pad bytes after the payload (BTH.padcount), covered by the ICRC."""
    name = "IB pad"
    fields_desc = [StrField("pad", b"")]


# -- AETH and the opcode → header chain (docs/PROTOCOL.md#opcodes-and-extension-headers)

class AETH(roce.AETH):
    """ACK Extended Transport Header: scapy.contrib.roce's, followed by what the
    opcode dictates, AtomicAckETH on an ATOMIC ACKNOWLEDGE
    (docs/PROTOCOL.md#opcodes-and-extension-headers)."""
    name = "AETH"

    def guess_payload_class(self, payload):
        return _next_in_chain(self, payload)


_CHAINS = {
    # operation: extension headers after the BTH for RC/UC (none when not listed)
    Operation.SEND_LAST_WITH_IMMEDIATE: (ImmDt,),
    Operation.SEND_ONLY_WITH_IMMEDIATE: (ImmDt,),
    Operation.RDMA_WRITE_FIRST: (RETH,),
    Operation.RDMA_WRITE_LAST_WITH_IMMEDIATE: (ImmDt,),
    Operation.RDMA_WRITE_ONLY: (RETH,),
    Operation.RDMA_WRITE_ONLY_WITH_IMMEDIATE: (RETH, ImmDt),
    Operation.RDMA_READ_REQUEST: (RETH,),
    Operation.RDMA_READ_RESPONSE_FIRST: (AETH,),
    Operation.RDMA_READ_RESPONSE_LAST: (AETH,),
    Operation.RDMA_READ_RESPONSE_ONLY: (AETH,),
    Operation.ACKNOWLEDGE: (AETH,),
    Operation.ATOMIC_ACKNOWLEDGE: (AETH, AtomicAckETH),
    Operation.COMPARE_SWAP: (AtomicETH,),
    Operation.FETCH_ADD: (AtomicETH,),
    Operation.SEND_LAST_WITH_INVALIDATE: (IETH,),
    Operation.SEND_ONLY_WITH_INVALIDATE: (IETH,),
}
_UC_OPS = range(Operation.SEND_FIRST, Operation.RDMA_WRITE_ONLY_WITH_IMMEDIATE + 1)
_RD_OPS = range(Operation.SEND_FIRST, Operation.FETCH_ADD + 1)
# RD responses carry RDETH but no DETH
_RD_RESPONSES = range(Operation.RDMA_READ_RESPONSE_FIRST, Operation.ATOMIC_ACKNOWLEDGE + 1)


def _opcode_table():
    table = {}
    for op in Operation:
        headers = _CHAINS.get(op, ())
        table[RC | op] = ("RC_" + op.name, headers)
        if op in _UC_OPS:
            table[UC | op] = ("UC_" + op.name, headers)
        if op in _RD_OPS:
            extra = (RDETH,) if op in _RD_RESPONSES else (RDETH, DETH)
            table[RD | op] = ("RD_" + op.name, extra + headers)
    table[UD | Operation.SEND_ONLY] = ("UD_SEND_ONLY", (DETH,))
    table[UD | Operation.SEND_ONLY_WITH_IMMEDIATE] = ("UD_SEND_ONLY_WITH_IMMEDIATE", (DETH, ImmDt))
    table[CNP_OPCODE] = ("CNP", ())
    return table


#: opcode -> (name, tuple of extension header classes in wire order)
OPCODES = _opcode_table()
OPCODE_NAMES = {op: name for op, (name, _) in OPCODES.items()}


def opcode_value(name):
    """'RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE' -> 0x0B."""
    for op, op_name in OPCODE_NAMES.items():
        if op_name == name:
            return op
    raise KeyError(name)


def header_chain(opcode):
    return OPCODES.get(opcode, ("", ()))[1]


# -- payload guessing: upper layers (CM, RTRS, RNBD) register here ----------

_ib_payload_guessers = []


def register_ib_payload(fn):
    """Register ``fn(bth, payload: bytes) -> class or None`` for IB payloads."""
    if fn not in _ib_payload_guessers:
        _ib_payload_guessers.append(fn)
    return fn


def _guess_ib_payload(bth, payload):
    for guesser in _ib_payload_guessers:
        cls = guesser(bth, payload)
        if cls is not None:
            return cls
    return Raw


def find_bth(pkt):
    while pkt is not None and not isinstance(pkt, BTH):
        pkt = pkt.underlayer
    return pkt


def _next_in_chain(layer, payload):
    """Payload class after ``layer`` in the chain that its BTH opcode dictates."""
    bth = find_bth(layer)
    if bth is None:
        return Raw
    chain = header_chain(bth.opcode)
    if layer is bth:
        following = chain
    else:
        index = next((i for i, c in enumerate(chain) if isinstance(layer, c)), None)
        following = chain[index + 1:] if index is not None else ()
    if following:
        return following[0]
    if bth.opcode == CNP_OPCODE:
        return CNPPadding
    return _guess_ib_payload(bth, payload)


# -- ICRC and VCRC (docs/PROTOCOL.md#payload-pad-and-icrc)

def _icrc_masks(layer):
    """(mask, bytes) of the fields of ``layer`` that the ICRC covers as ones: those a
    router or switch may change on the way."""
    for cls, names in ((IP, ("tos", "ttl", "chksum")), (IPv6, ("tc", "fl", "hlim")),
                       (UDP, ("chksum",)), (roce.GRH, ("tclass", "flowlabel", "hoplmt")),
                       (LRH, ("vl",)), (roce.BTH, ("fecn", "becn", "resv6"))):
        if isinstance(layer, cls):
            return _ones(cls, names)
    raise TypeError("the ICRC masks no field of %s" % layer.name)


@functools.lru_cache(maxsize=None)
def _ones(cls, names):
    """The bits of fields ``names`` as an integer over the first bytes of a ``cls`` header
    that hold them, and how many those are; positions from the Scapy field list."""
    bits = field_bits(cls)
    size = (max(start + width for start, width in map(bits.get, names)) + 7) // 8
    mask = 0
    for start, width in map(bits.get, names):
        mask |= ((1 << width) - 1) << (size * 8 - start - width)
    return mask, size


def _masked(layer, data):
    """``data`` (``layer``'s header first) with the fields the ICRC masks set to ones."""
    mask, size = _icrc_masks(layer)
    return (int.from_bytes(data[:size], "big") | mask).to_bytes(size, "big") + data[size:]


def _header_bytes(layer, payload_len):
    """``layer``'s own bytes as Scapy builds them in front of ``payload_len`` bytes (lengths
    and checksums filled in by its post_build, as Packet.do_build does), the layer itself
    neither copied nor changed."""
    if any(isinstance(field, TrailerField) for field in layer.fields_desc):
        layer = _without_trailers(layer)
    head = layer.self_build()
    if layer.raw_packet_cache is not None:  # as dissected: built as it came
        return head
    return layer.post_build(head, bytes(payload_len))[:len(head)]


def _without_trailers(layer):
    """A payload-less copy of ``layer`` with its trailers (LRH's VCRC) at 0: Scapy adds a
    trailer in the post_build of the build under way, which a second build of the layer
    itself would take."""
    copy = type(layer)()
    for field in layer.fields_desc:
        value = 0 if isinstance(field, TrailerField) else layer.getfieldval(field.name)
        copy.setfieldval(field.name, value)
    return copy


def _icrc_prefix(bth, body_len):
    """Masked bytes that the ICRC covers in front of the BTH, or None: the headers under
    it as they are built for ``body_len`` bytes of BTH .. pad
    (docs/PROTOCOL.md#payload-pad-and-icrc)."""
    size = body_len + 4  # BTH .. pad and the ICRC
    lower = bth.underlayer
    if isinstance(lower, UDP):
        net = lower.underlayer
        if not isinstance(net, (IP, IPv6)):
            return None
        udp = _header_bytes(lower, size)
        return (_pseudo_lrh() + _masked(net, _header_bytes(net, size + len(udp)))
                + _masked(lower, udp))
    grh = b""
    if isinstance(lower, roce.GRH):
        grh = _masked(lower, _header_bytes(lower, size))
        size += len(grh)
        lower = lower.underlayer
    if isinstance(lower, LRH):
        # IBTA: the real LRH with VL masked (not verified against hardware).
        return _masked(lower, _header_bytes(lower, size)) + grh
    if grh:  # RoCEv1: a pseudo LRH of ones, as for RoCEv2
        return _pseudo_lrh() + grh
    return None


@functools.lru_cache(maxsize=None)
def _pseudo_lrh():
    """The LRH of ones that a RoCE ICRC covers in place of a real one: as long as an LRH
    without its VCRC."""
    return b"\xff" * len(_header_bytes(LRH(), 0))


def compute_icrc(bth, body):
    """ICRC of ``body`` (BTH bytes .. pad, without ICRC) as the 4 wire bytes."""
    prefix = _icrc_prefix(bth, len(body))
    if prefix is None:
        return None
    return struct.pack("<I", zlib.crc32(_masked(bth, body), zlib.crc32(prefix)))


def icrc_ok(pkt):
    """True/False whether the frame's ICRC is right; None when it cannot tell."""
    bth = find_bth(pkt) if not isinstance(pkt, BTH) else pkt
    if bth is None:
        bth = pkt.getlayer(BTH)
    if bth is None or bth.icrc is None:
        return None
    wire = raw(bth)
    expected = compute_icrc(bth, wire[:-4])
    if expected is None:
        return None
    return expected == wire[-4:]


def transport_bytes(bth):
    """BTH .. pad of a packet with no layer under its BTH, built (in place unless a field
    holds a random value), without the ICRC: the ``body`` of ``frame_bytes``."""
    layers = []
    layer = bth
    while layer:
        layers.append(layer)
        layer = layer.payload
    if not all(map(_fixed, layers)):
        return raw(bth)[:-4]
    data = b""
    for layer in reversed(layers):
        data = _built_on(layer, data)
    return data[:-4]


def _fixed(layer):
    """No field of ``layer`` holds what Packet.do_build copies the packet for, to fix it
    first: a random value (RandShort…) or values to make several packets of (a Net, a
    list for a single value; packets as values are counted in, to be safe)."""
    items = itertools.chain(layer.default_fields.items(), layer.overloaded_fields.items(),
                            layer.fields.items())
    return not any(isinstance(value, (VolatileValue, Gen))
                   or isinstance(value, list) and not layer.get_field(name).islist
                   for name, value in items)


def frame_bytes(bth, body):
    """The frame that ``bth`` sits in, with ``body`` (BTH .. pad, built, without the
    ICRC) in place of the BTH and what follows it, and body's ICRC: the layers under
    ``bth`` (with fixed values, see ``_fixed``) built in place, so that a crafter frames
    many packets on one chain of headers."""
    data = body + (compute_icrc(bth, body) or bytes(4))
    layer = bth.underlayer
    while layer is not None:
        data = _built_on(layer, data)
        layer = layer.underlayer
    return data


def _built_on(layer, payload):
    """``layer`` built in front of its built ``payload``, as Packet.do_build does but in
    place: without the copy of the packet it makes first to fix random field values, which
    a crafted packet does not have."""
    head = layer.self_build()
    return head + payload if layer.raw_packet_cache is not None else layer.post_build(head, payload)


# -- BTH and GRH: scapy.contrib.roce's, extended in subclasses ---------------------

class BTH(roce.BTH):
    """Base Transport Header (docs/PROTOCOL.md#base-transport-header): scapy.contrib.roce's
    with what this project needs: every opcode named (SEND WITH INVALIDATE too), the
    extension headers chosen by opcode, the pad bytes split off before the payload
    (IBPad), the ICRC computed for RoCEv2, RoCEv1 and native IB alike (roce's covers
    RoCEv2 only)."""
    name = "BTH"
    fields_desc = [ByteEnumField("opcode", 0, OPCODE_NAMES)] + roce.BTH.fields_desc[1:]

    def compute_icrc(self, p):
        """roce's hook for post_build: ``p`` is the packet with a 4-byte placeholder."""
        icrc = compute_icrc(self, p[:-4])
        return icrc if icrc is not None else b"\0\0\0\0"

    def do_dissect_payload(self, s):
        """Split off the pad bytes (BTH.padcount) before decoding the payload."""
        pad = self.padcount if self.padcount <= len(s) else 0
        body, pad_bytes = s[:len(s) - pad], s[len(s) - pad:]
        super().do_dissect_payload(body)
        if pad_bytes:
            self.add_payload(IBPad(pad_bytes))

    def guess_payload_class(self, payload):
        cls = super().guess_payload_class(payload)
        if cls is not conf.raw_layer:
            return cls
        return _next_in_chain(self, payload)

    def mysummary(self):
        return "BTH %s qp 0x%x psn %d" % (OPCODE_NAMES.get(self.opcode, hex(self.opcode)),
                                          self.dqpn, self.psn)


class GRH(roce.GRH):
    """Global Route Header (docs/PROTOCOL.md#capture-encapsulations): scapy.contrib.roce's
    with PayLen filled in on build and honoured on decode (bytes after it are Ethernet
    padding)."""
    name = "GRH"

    def post_build(self, p, pay):
        if self.paylen == 0 and pay:
            p = p[:4] + struct.pack("!H", len(pay)) + p[6:]
        return p + pay

    def extract_padding(self, s):
        return (s[:self.paylen], None) if self.paylen else (s, None)


def _crc16_table(poly):
    """The byte table of a reflected CRC-16 (``poly`` reflected): 8 bits a step."""
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
        table.append(crc)
    return table


_VCRC_TABLE = _crc16_table(0xD008)  # 0x100B reflected


def _vcrc(data):
    """IBTA VCRC: CRC-16, polynomial 0x100B, seed 0xFFFF, reflected, inverted.

    Per the IBTA description; no hardware capture was available to verify it.
    """
    crc = 0xFFFF
    for byte in data:
        crc = (crc >> 8) ^ _VCRC_TABLE[(crc ^ byte) & 0xFF]
    return crc ^ 0xFFFF


LNH_RAW, LNH_IP, LNH_IBA_LOCAL, LNH_IBA_GLOBAL = 0, 1, 2, 3
lrh_next_headers = {LNH_RAW: "raw", LNH_IP: "ip", LNH_IBA_LOCAL: "iba_local",
                    LNH_IBA_GLOBAL: "iba_global"}


class LRH(Packet):
    """Local Route Header of native InfiniBand, with the VCRC trailer
    (docs/PROTOCOL.md#capture-encapsulations)."""
    name = "LRH"
    fields_desc = [
        BitField("vl", 0, 4),
        BitField("lver", 0, 4),
        BitField("sl", 0, 4),
        BitField("reserved1", 0, 2),
        BitEnumField("lnh", LNH_IBA_LOCAL, 2, lrh_next_headers),
        XShortField("dlid", 0),
        BitField("reserved2", 0, 5),
        BitField("pktlen", None, 11),
        XShortField("slid", 0),
        FCSField("vcrc", None, fmt="!H"),
    ]

    def post_build(self, p, pay):
        p += pay  # pay ends with the VCRC placeholder (2 bytes)
        if self.pktlen is None:
            words = (len(p) - 2) // 4
            p = p[:4] + struct.pack("!H", (p[4] & 0xF8) << 8 | (words & 0x7FF)) + p[6:]
        if self.vcrc is None:
            p = p[:-2] + struct.pack("!H", _vcrc(p[:-2]))
        return p

    def extract_padding(self, s):
        size = self.pktlen * 4 - 8 if self.pktlen else len(s)
        return s[:size], None


# -- bindings ----------------------------------------------------------------

# scapy.contrib.roce binds UDP port 4791 to its BTH and EtherType 0x8915 to its GRH
# (whose payload is its BTH, and whose BTH binds roce's AETH).  The subclasses above take
# those bindings over the way Scapy's own contribs replace a binding (scapy.contrib.ikev2
# with UDP/ISAKMP): split_bottom_up, then bind.  The roce classes are not modified, and
# the other entries of the binding tables keep their order.  Scapy tries a layer's
# bindings in order, so a RoCEv2 packet from a source port that another protocol is bound
# to (DNS 53, …) is decoded as that protocol; RoCEv2 senders use the entropy ports
# 0xC000-0xFFFF (Linux: rdma_flow_label_to_udp_sport(), rxe), where no Scapy binding sits.
split_bottom_up(UDP, roce.BTH, dport=ROCEV2_PORT)
bind_bottom_up(UDP, BTH, dport=ROCEV2_PORT)
bind_top_down(UDP, BTH, dport=ROCEV2_PORT, sport=ROCEV2_SOURCE_PORT, chksum=0)
split_bottom_up(Ether, roce.GRH, type=ROCEV1_ETHERTYPE)
bind_layers(Ether, GRH, type=ROCEV1_ETHERTYPE)
split_bottom_up(GRH, roce.BTH)  # inherited from roce.GRH; the copy is this class's own
bind_bottom_up(GRH, BTH)
bind_top_down(GRH, BTH, nexthdr=GRH_NEXT_HEADER_BTH)
split_bottom_up(BTH, roce.AETH)  # likewise inherited from roce.BTH

for _op, (_name, _chain) in OPCODES.items():
    if _chain:
        bind_bottom_up(BTH, _chain[0], opcode=_op)
# Crafting defaults: BTH()/RETH() is an RDMA WRITE ONLY, and so on.
bind_top_down(BTH, RETH, opcode=RC | Operation.RDMA_WRITE_ONLY)
bind_top_down(BTH, ImmDt, opcode=RC | Operation.SEND_ONLY_WITH_IMMEDIATE)
bind_top_down(BTH, IETH, opcode=RC | Operation.SEND_ONLY_WITH_INVALIDATE)
bind_top_down(BTH, DETH, opcode=UD | Operation.SEND_ONLY, dqpn=GSI_QPN)
bind_top_down(BTH, AtomicETH, opcode=RC | Operation.COMPARE_SWAP)
bind_top_down(BTH, RDETH, opcode=RD | Operation.SEND_ONLY)
bind_top_down(BTH, AETH, opcode=RC | Operation.ACKNOWLEDGE)

bind_bottom_up(LRH, BTH, lnh=LNH_IBA_LOCAL)
bind_bottom_up(LRH, GRH, lnh=LNH_IBA_GLOBAL)
bind_top_down(LRH, BTH, lnh=LNH_IBA_LOCAL)
bind_top_down(LRH, GRH, lnh=LNH_IBA_GLOBAL)
conf.l2types.register(DLT_INFINIBAND, LRH)
