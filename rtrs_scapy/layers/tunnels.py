"""The outer headers of switch mirrors and overlays, from Scapy's own layers
(docs/PROTOCOL.md#switch-mirrors-and-overlays).

A capture from a mirror port or an overlay underlay carries every RoCE frame
inside GRE (ERSPAN type I/II/III, transparent Ethernet bridging), VXLAN,
Geneve or an MPLS label stack.  Scapy has these layers; their field lists and
bindings are the source of the geometry and numbers that the engine's locator
reads (written out into the generated ``layout/wire.py``).  Importing this
module binds Scapy's ERSPAN, Geneve and MPLS contrib layers, so the package
itself does not import it: only the generator and the tests do.
"""

from scapy.contrib.erspan import ERSPAN_II, ERSPAN_III, ERSPAN_PlatformSpecific
from scapy.contrib.geneve import GENEVE
from scapy.contrib.mpls import MPLS
from scapy.fields import ConditionalField, PacketListField
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import GRE, Ether
from scapy.layers.vxlan import VXLAN

#: Each header's fixed part as the locator reads it: GRE with all of its optional
#: words present (checksum and offset, key, sequence number; RFC 2890), VXLAN with
#: the I flag alone (RFC 7348), Geneve up to its options (RFC 8926).
HEADERS = {
    "GRE": GRE(chksum_present=1, key_present=1, seqnum_present=1),
    "ERSPAN_II": ERSPAN_II(),
    "ERSPAN_III": ERSPAN_III(),
    "ERSPAN_PlatformSpecific": ERSPAN_PlatformSpecific(),
    "VXLAN": VXLAN(),
    "GENEVE": GENEVE(),
    "MPLS": MPLS(),
}

#: VXLAN's IANA port and Linux's default (the vxlan driver's udp_port parameter, used
#: when ``ip link add … type vxlan`` has no ``dstport``); Scapy binds others too
#: (VXLAN-GPE, Cisco ACI)
VXLAN_IANA_PORT, VXLAN_LINUX_PORT = 4789, 8472
#: MPLS multicast (RFC 5332); Scapy binds the unicast EtherType only
ETHERTYPE_MPLS_MULTICAST = 0x8848
#: Geneve's Opt Len counts 4-byte words (RFC 8926, section 3.4)
GENEVE_OPTION_UNIT = 4


def bound(lower, upper, field, value=None):
    """The value of ``field`` with which Scapy binds ``upper`` on ``lower`` (``value``:
    the one of several that is meant, checked to be bound)."""
    values = sorted({fields[field] for fields, cls in lower.payload_guess
                     if cls is upper and field in fields})
    if value is not None and value in values:
        return value
    if value is not None or len(values) != 1:
        raise LookupError("%s/%s: %s bound to %r" % (lower.__name__, upper.__name__, field,
                                                     values))
    return values[0]


def constants():
    """The numbers of the bindings the locator follows, by the name wire.py gives them."""
    mpls_unicast = bound(Ether, MPLS, "type")
    return {
        "IP_PROTO_GRE": bound(IP, GRE, "proto"),
        "GRE_PROTO_TEB": bound(GRE, Ether, "proto"),
        "GRE_PROTO_ERSPAN": bound(GRE, ERSPAN_II, "proto"),
        "GRE_PROTO_ERSPAN3": bound(GRE, ERSPAN_III, "proto"),
        "ERSPAN2_VERSION": ERSPAN_II().ver,
        "ERSPAN3_VERSION": ERSPAN_III().ver,
        "ETHERTYPE_MPLS": (mpls_unicast, ETHERTYPE_MPLS_MULTICAST),
        "VXLAN_PORT": (bound(UDP, VXLAN, "dport", VXLAN_IANA_PORT),
                       bound(UDP, VXLAN, "dport", VXLAN_LINUX_PORT)),
        "GENEVE_PORT": bound(UDP, GENEVE, "dport"),
        "GENEVE_PROTO_ETHER": bound(GENEVE, Ether, "proto"),
        "GENEVE_OPTION_UNIT": GENEVE_OPTION_UNIT,
    }


def geometry(pkt):
    """(size, {field: (offset, size, shift, width)}) of a header's fixed part: the
    fields present in ``pkt``, up to a list of variable length; a bit field's offset
    and size are those of the bytes that hold it, its shift counted from their LSB."""
    fields, bit = {}, 0
    for fld in pkt.fields_desc:
        if isinstance(fld, ConditionalField):
            if not fld._evalcond(pkt):
                continue
            fld = fld.fld
        if isinstance(fld, PacketListField):
            break
        width = fld.size if hasattr(fld, "size") and isinstance(fld.size, int) \
            else 8 * fld.sz
        first, size = bit // 8, (bit % 8 + width + 7) // 8
        fields[fld.name] = (first, size, 8 * size - bit % 8 - width, width)
        bit += width
    assert bit % 8 == 0, pkt.name
    return bit // 8, fields
