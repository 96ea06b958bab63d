"""Link layers: where the InfiniBand transport sits in each frame (numba).

One pass over a chunk's records gives, per frame, the kind of encapsulation,
the offset of the IB headers (BTH for RoCEv2, GRH for RoCEv1, LRH on native
IB), the offset of the BTH, the end of the IB packet (after the ICRC; Ethernet
padding and FCS, and the IB VCRC, excluded) and the source and destination
addresses (docs/PROTOCOL.md#capture-encapsulations).

Addresses are 128-bit (hi, lo) pairs: IPv4 as its IPv4-mapped IPv6 form (the
GID RoCE derives from it), IPv6 and GIDs as they are, LIDs with ``hi`` all
ones.  ``address_text`` turns a pair back into text.

Link types: Ethernet (1) with any number of 802.1Q/802.1ad tags, Linux cooked
v1 (113) and v2 (276), raw IP (101, 12, 14: version nibble; 228 IPv4; 229
IPv6), InfiniBand (247) and ERF (197: Ethernet and InfiniBand records).  IPv4
options are honoured, fragments rejected; IPv6 must carry UDP or GRE directly.

The outer headers of switch mirrors and overlays are skipped, up to
``MAX_TUNNELS`` of them nested: GRE (ERSPAN type I/II/III, transparent Ethernet
bridging, IP), VXLAN, Geneve and MPLS label stacks, with VLAN tags anywhere
(docs/PROTOCOL.md#switch-mirrors-and-overlays).  The outermost one is the
frame's ``mirror`` code: the kind, and its session, VNI, key or label.
"""

import socket

import numpy as np

from ..layout import wire
from .columns import (P_DST_HI, P_DST_LO, P_KIND, X_BTH, X_END, X_HDR, X_MIRROR, X_SRC_HI,
                      X_SRC_LO)
from .jit import helper

NONE, ROCEV2, ROCEV1, IB = 0, 1, 2, 3
KIND_NAMES = {ROCEV2: "rocev2", ROCEV1: "rocev1", IB: "ib"}

ROCE_UDP_PORT = wire.ROCEV2_PORT
ETH_P_IP, ETH_P_IPV6, ETH_P_ROCEV1 = wire.ETHERTYPE_IPV4, wire.ETHERTYPE_IPV6, \
    wire.ROCEV1_ETHERTYPE
VLAN_A, VLAN_B, VLAN_C = wire.VLAN_ETHERTYPES
IP_PROTO_UDP = wire.IP_PROTO_UDP
GRH_NEXT_BTH = wire.GRH_NEXT_HEADER_BTH
IP_PROTO_GRE = wire.IP_PROTO_GRE
GRE_PROTO_TEB, GRE_PROTO_ERSPAN, GRE_PROTO_ERSPAN3 = wire.GRE_PROTO_TEB, \
    wire.GRE_PROTO_ERSPAN, wire.GRE_PROTO_ERSPAN3
ERSPAN2_VERSION, ERSPAN3_VERSION = wire.ERSPAN2_VERSION, wire.ERSPAN3_VERSION
ETH_P_MPLS_UC, ETH_P_MPLS_MC = wire.ETHERTYPE_MPLS
(VXLAN_PORT, VXLAN_LINUX_PORT), GENEVE_PORT = wire.VXLAN_PORT, wire.GENEVE_PORT
GENEVE_PROTO_ETHER, GENEVE_OPTION_UNIT = wire.GENEVE_PROTO_ETHER, wire.GENEVE_OPTION_UNIT
ERF_TYPE_ETH, ERF_TYPE_INFINIBAND = 2, 21
#: tunnels skipped in one frame at most: deeper nesting (a GRE loop) is not located
MAX_TUNNELS = 8
LID_HI = np.uint64(0xFFFFFFFFFFFFFFFF)
V4_MAPPED = np.uint64(0xFFFF00000000)

LINK_NAMES = {
    0: "null", 1: "ethernet", 12: "raw_ip", 14: "raw_ip", 101: "raw_ip", 113: "linux_sll",
    197: "erf", 228: "ipv4", 229: "ipv6", 247: "infiniband", 276: "linux_sll2",
}
#: Link types that the locator can look into.
SUPPORTED_LINK_TYPES = frozenset((1, 12, 14, 101, 113, 197, 228, 229, 247, 276))


def link_name(link_type):
    """Short name of a LINKTYPE_ value, ``"unknown(N)"`` when not known."""
    return LINK_NAMES.get(link_type, "unknown(%d)" % link_type)


def _field(layout, name):
    """(offset, size, shift, width) of a field of a layer, from wire.py."""
    spec = next(f for f in wire.LAYOUTS[layout].fields if f.name == name)
    shift = spec.shift if spec.shift is not None else 0
    width = spec.width if spec.width is not None and spec.width <= 32 else 8 * spec.size
    return spec.offset, spec.size, shift, width


# header geometry from the layers' layouts (wire.py), not written by hand
BTH_SIZE = wire.LAYOUTS["BTH"].fixed_size
ICRC_SIZE = wire.LAYOUTS["BTH"].trailer_size
MIN_PACKET = BTH_SIZE + ICRC_SIZE
GRH_SIZE = wire.LAYOUTS["GRH"].fixed_size
LRH_SIZE = wire.LAYOUTS["LRH"].fixed_size
_GEO = [BTH_SIZE, ICRC_SIZE, GRH_SIZE, LRH_SIZE, wire.LNH_IBA_LOCAL, wire.LNH_IBA_GLOBAL]
for _layer, _name in (("GRH", "ipver"), ("GRH", "paylen"), ("GRH", "nexthdr"), ("GRH", "sgid"),
                      ("GRH", "dgid"), ("LRH", "lnh"), ("LRH", "pktlen"), ("LRH", "dlid"),
                      ("LRH", "slid")):
    _GEO.extend(_field(_layer, _name))
# tunnel headers (wire.TUNNELS, from Scapy's layers): GRE's optional words are the
# gaps between the offsets of the fields that follow its fixed part
_gre_size, _gre = wire.TUNNELS["GRE"]
_GEO.extend([_gre["chksum"][0], _gre["key"][0] - _gre["chksum"][0],
             _gre["sequence_number"][0] - _gre["key"][0],
             _gre_size - _gre["sequence_number"][0]]
            + [wire.TUNNELS[name][0] for name in ("ERSPAN_II", "ERSPAN_III",
                                                  "ERSPAN_PlatformSpecific", "VXLAN", "GENEVE",
                                                  "MPLS")])
for _layer, _name in (("GRE", "chksum_present"), ("GRE", "routing_present"),
                      ("GRE", "key_present"), ("GRE", "seqnum_present"), ("GRE", "version"),
                      ("GRE", "proto"), ("GRE", "key"), ("ERSPAN_II", "ver"),
                      ("ERSPAN_II", "session_id"), ("ERSPAN_III", "ver"),
                      ("ERSPAN_III", "session_id"), ("ERSPAN_III", "o"), ("VXLAN", "vni"),
                      ("GENEVE", "version"), ("GENEVE", "optionlen"), ("GENEVE", "proto"),
                      ("GENEVE", "vni"), ("MPLS", "label"), ("MPLS", "s")):
    _GEO.extend(wire.TUNNELS[_layer][1][_name])
GEOMETRY = np.array(_GEO, dtype=np.int64)
# indexes into GEOMETRY: sizes, LNH values, then (offset, size, shift, width) per field
(G_BTH, G_ICRC, G_GRH, G_LRH, G_LOCAL, G_GLOBAL) = range(6)
G_IPVER, G_PAYLEN, G_NEXTHDR, G_SGID, G_DGID, G_LNH, G_PKTLEN, G_DLID, G_SLID = range(6, 42, 4)
# tunnel sizes: GRE's fixed part and optional words, the headers' fixed parts
(G_GRE, G_GRE_CSUM, G_GRE_KEY, G_GRE_SEQ, G_ERSPAN2, G_ERSPAN3, G_ERSPAN3_PLATFORM, G_VXLAN,
 G_GENEVE, G_MPLS) = range(42, 52)
(G_GRE_C, G_GRE_R, G_GRE_K, G_GRE_S, G_GRE_VER, G_GRE_PROTO, G_GRE_KEY_VALUE, G_ERSPAN2_VER,
 G_ERSPAN2_SESSION, G_ERSPAN3_VER, G_ERSPAN3_SESSION, G_ERSPAN3_O, G_VXLAN_VNI, G_GENEVE_VER,
 G_GENEVE_OPTLEN, G_GENEVE_PROTO, G_GENEVE_VNI, G_MPLS_LABEL, G_MPLS_S) = range(52, 128, 4)
assert len(GEOMETRY) == 128

# the frame's mirror code: kind + (id + 1) << MIRROR_ID_SHIFT (id: -1 when it has none)
(MIRROR_NONE, MIRROR_ERSPAN1, MIRROR_ERSPAN2, MIRROR_ERSPAN3, MIRROR_GRE_TEB, MIRROR_GRE,
 MIRROR_VXLAN, MIRROR_GENEVE, MIRROR_MPLS) = range(9)
MIRROR_ID_SHIFT = 8
#: kind -> (its name in the summary, the name of its id)
MIRRORS = {
    MIRROR_ERSPAN1: ("erspan1", None), MIRROR_ERSPAN2: ("erspan2", "session"),
    MIRROR_ERSPAN3: ("erspan3", "session"), MIRROR_GRE_TEB: ("gre_teb", "key"),
    MIRROR_GRE: ("gre", "key"), MIRROR_VXLAN: ("vxlan", "vni"),
    MIRROR_GENEVE: ("geneve", "vni"), MIRROR_MPLS: ("mpls", "label"),
}


@helper
def _uint(buf, p, geo, at):
    """The field described at geo[at:at+4] of the header at p (big-endian)."""
    v = np.int64(0)
    for k in range(geo[at + 1]):
        v = (v << 8) | np.int64(buf[p + geo[at] + k])
    return (v >> geo[at + 2]) & ((np.int64(1) << geo[at + 3]) - 1)


@helper
def _be16(buf, p):
    return (np.int64(buf[p]) << 8) | np.int64(buf[p + 1])


@helper
def _be64(buf, p):
    v = np.uint64(0)
    for i in range(8):
        v = (v << np.uint64(8)) | np.uint64(buf[p + i])
    return v


@helper
def _v4(buf, p):
    return V4_MAPPED | np.uint64(_be16(buf, p) << 16 | _be16(buf, p + 2))


@helper
def _grh(buf, p, end, g):
    """(end of the IB packet, or -1) of a GRH at p that carries a BTH."""
    grh_size = g[G_GRH]
    if end - p < grh_size:
        return -1
    paylen = _uint(buf, p, g, G_PAYLEN)
    if (_uint(buf, p, g, G_IPVER) != 6 or _uint(buf, p, g, G_NEXTHDR) != GRH_NEXT_BTH
            or p + grh_size + paylen > end):
        return -1
    return p + grh_size + paylen


@helper
def _lrh(buf, p, end, g, out, extra, i):
    """Native IB: LRH (and GRH) at p."""
    lrh_size, grh_size, min_packet = g[G_LRH], g[G_GRH], g[G_BTH] + g[G_ICRC]
    if end - p < lrh_size:
        return
    lnh = _uint(buf, p, g, G_LNH)
    ib_end = p + _uint(buf, p, g, G_PKTLEN) * 4
    if lnh == g[G_LOCAL]:
        bth = p + lrh_size
    elif lnh == g[G_GLOBAL] and _grh(buf, p + lrh_size, end, g) >= 0:
        bth = p + lrh_size + grh_size
    else:
        return
    if ib_end - bth < min_packet or ib_end > end:
        return
    out[i, P_KIND] = IB
    extra[i, X_HDR] = p
    extra[i, X_BTH] = bth
    extra[i, X_END] = ib_end
    extra[i, X_SRC_HI] = np.int64(LID_HI)
    extra[i, X_SRC_LO] = _uint(buf, p, g, G_SLID)
    out[i, P_DST_HI] = np.int64(LID_HI)
    out[i, P_DST_LO] = _uint(buf, p, g, G_DLID)


@helper
def _ether(buf, p, end):
    """(after the Ethernet header at p and its VLAN tags, its EtherType; -1 if cut)."""
    if end - p < 14:
        return p, -1
    et = _be16(buf, p + 12)
    return _vlans(buf, p + 14, end, et)


@helper
def _vlans(buf, p, end, et):
    """(after the VLAN tags at p, the EtherType they carry; -1 if cut)."""
    while et == VLAN_A or et == VLAN_B or et == VLAN_C:
        if end - p < 4:
            return p, -1
        et = _be16(buf, p + 2)
        p += 4
    return p, et


@helper
def _mirror(kind, ident):
    """A tunnel's mirror code: its kind and id (-1: none)."""
    return kind + ((ident + 1) << MIRROR_ID_SHIFT)


@helper
def _gre(buf, p, end, g):
    """(after the GRE header at p and what it carries up to the next EtherType, that
    EtherType or -1 when not followed, the mirror code) (RFC 2784, 2890; ERSPAN:
    draft-foschiano-erspan)."""
    if end - p < g[G_GRE]:
        return p, -1, 0
    if _uint(buf, p, g, G_GRE_VER) or _uint(buf, p, g, G_GRE_R):
        return p, -1, 0                         # PPTP's GRE, source routes
    proto = _uint(buf, p, g, G_GRE_PROTO)
    q = p + g[G_GRE]
    if _uint(buf, p, g, G_GRE_C):
        q += g[G_GRE_CSUM]
    key = -1
    if _uint(buf, p, g, G_GRE_K):
        if end - q < g[G_GRE_KEY]:
            return p, -1, 0
        key = _uint(buf, q - g[G_GRE_KEY_VALUE], g, G_GRE_KEY_VALUE)
        q += g[G_GRE_KEY]
    sequenced = _uint(buf, p, g, G_GRE_S)
    if sequenced:
        q += g[G_GRE_SEQ]
    if proto == GRE_PROTO_ERSPAN and not sequenced:
        code = _mirror(MIRROR_ERSPAN1, -1)      # type I: Ethernet right after GRE
    elif proto == GRE_PROTO_ERSPAN:
        if end - q < g[G_ERSPAN2] or _uint(buf, q, g, G_ERSPAN2_VER) != ERSPAN2_VERSION:
            return p, -1, 0
        code = _mirror(MIRROR_ERSPAN2, _uint(buf, q, g, G_ERSPAN2_SESSION))
        q += g[G_ERSPAN2]
    elif proto == GRE_PROTO_ERSPAN3:
        if end - q < g[G_ERSPAN3] or _uint(buf, q, g, G_ERSPAN3_VER) != ERSPAN3_VERSION:
            return p, -1, 0
        code = _mirror(MIRROR_ERSPAN3, _uint(buf, q, g, G_ERSPAN3_SESSION))
        q += g[G_ERSPAN3] + _uint(buf, q, g, G_ERSPAN3_O) * g[G_ERSPAN3_PLATFORM]
    elif proto == GRE_PROTO_TEB:
        code = _mirror(MIRROR_GRE_TEB, key)
    else:
        return q, proto, _mirror(MIRROR_GRE, key)   # IP or MPLS straight in GRE
    q, et = _ether(buf, q, end)
    return q, et, code


@helper
def _geneve(buf, p, end, g):
    """(after the Geneve header at p and its options, the EtherType of what it carries
    or -1 when not followed, the mirror code) (RFC 8926)."""
    if end - p < g[G_GENEVE] or _uint(buf, p, g, G_GENEVE_VER) != 0:
        return p, -1, 0
    code = _mirror(MIRROR_GENEVE, _uint(buf, p, g, G_GENEVE_VNI))
    proto = _uint(buf, p, g, G_GENEVE_PROTO)
    q = p + g[G_GENEVE] + _uint(buf, p, g, G_GENEVE_OPTLEN) * GENEVE_OPTION_UNIT
    if proto == GENEVE_PROTO_ETHER:
        q, proto = _ether(buf, q, end)
    return q, proto, code


@helper
def _mpls(buf, p, end, g):
    """(after the label stack at p, the EtherType guessed from the version nibble of
    what its bottom label carries, IPv4 or IPv6, or -1; the mirror code: the top
    label) (RFC 3032)."""
    if end - p < g[G_MPLS]:
        return p, -1, 0
    code = _mirror(MIRROR_MPLS, _uint(buf, p, g, G_MPLS_LABEL))
    while True:
        if end - p < g[G_MPLS]:
            return p, -1, 0
        bottom = _uint(buf, p, g, G_MPLS_S)
        p += g[G_MPLS]
        if bottom:
            break
    version = np.int64(buf[p]) >> 4 if end > p else 0
    if version == 4:
        return p, ETH_P_IP, code
    if version == 6:
        return p, ETH_P_IPV6, code
    return p, -1, 0


@helper
def _ethertype(buf, p, end, et, g, out, extra, i):
    """The IB packet in what EtherType ``et`` at p carries, through at most MAX_TUNNELS
    tunnels; the innermost IP header's addresses are the frame's."""
    min_packet = g[G_BTH] + g[G_ICRC]
    mirror, code, found = 0, 0, False
    for _ in range(MAX_TUNNELS + 1):
        if mirror == 0:
            mirror = code
        if et == ETH_P_IP:
            if end - p < 20:
                return
            vihl = np.int64(buf[p])
            ihl = (vihl & 0x0F) * 4
            proto = np.int64(buf[p + 9])
            if vihl >> 4 != 4 or ihl < 20 or (proto != IP_PROTO_UDP and proto != IP_PROTO_GRE):
                return
            if ((np.int64(buf[p + 6]) & 0x3F) << 8) | np.int64(buf[p + 7]):
                return                          # a fragment
            total = _be16(buf, p + 2)
            u = p + ihl
            if total and p + total < end:
                if total < ihl:
                    return
                end = p + total
            src_hi, src_lo = np.uint64(0), _v4(buf, p + 12)
            dst_hi, dst_lo = np.uint64(0), _v4(buf, p + 16)
        elif et == ETH_P_IPV6:
            if end - p < 40:
                return
            proto = np.int64(buf[p + 6])
            if np.int64(buf[p]) >> 4 != 6 or (proto != IP_PROTO_UDP and proto != IP_PROTO_GRE):
                return
            u = p + 40
            plen = _be16(buf, p + 4)
            if plen and u + plen < end:
                end = u + plen
            src_hi, src_lo = _be64(buf, p + 8), _be64(buf, p + 16)
            dst_hi, dst_lo = _be64(buf, p + 24), _be64(buf, p + 32)
        elif et == ETH_P_ROCEV1:
            ib_end = _grh(buf, p, end, g)
            if ib_end < 0 or ib_end - p - g[G_GRH] < min_packet:
                return
            sgid, dgid = p + g[G_SGID], p + g[G_DGID]
            out[i, P_KIND] = ROCEV1
            extra[i, X_HDR] = p
            extra[i, X_BTH] = p + g[G_GRH]
            extra[i, X_END] = ib_end
            extra[i, X_SRC_HI] = np.int64(_be64(buf, sgid))
            extra[i, X_SRC_LO] = np.int64(_be64(buf, sgid + 8))
            out[i, P_DST_HI] = np.int64(_be64(buf, dgid))
            out[i, P_DST_LO] = np.int64(_be64(buf, dgid + 8))
            extra[i, X_MIRROR] = mirror
            return
        elif et == ETH_P_MPLS_UC or et == ETH_P_MPLS_MC:
            p, et, code = _mpls(buf, p, end, g)
            continue
        elif et == VLAN_A or et == VLAN_B or et == VLAN_C:
            p, et = _vlans(buf, p, end, et)
            continue
        else:
            return
        if proto == IP_PROTO_GRE:
            p, et, code = _gre(buf, u, end, g)
            continue
        if end - u < 8:
            return
        ulen = _be16(buf, u + 4)
        if ulen < 8 or u + ulen > end:
            return
        port = _be16(buf, u + 2)
        if port == ROCE_UDP_PORT:
            found = True
            break
        end = u + ulen
        if port == VXLAN_PORT or port == VXLAN_LINUX_PORT:
            if end - u - 8 < g[G_VXLAN]:
                return
            code = _mirror(MIRROR_VXLAN, _uint(buf, u + 8, g, G_VXLAN_VNI))
            p, et = _ether(buf, u + 8 + g[G_VXLAN], end)
        elif port == GENEVE_PORT:
            p, et, code = _geneve(buf, u + 8, end, g)
        else:
            return
    if not found or ulen < 8 + min_packet:     # not RoCEv2, nested deeper than MAX_TUNNELS
        return
    ib_end = u + ulen
    out[i, P_KIND] = ROCEV2
    extra[i, X_HDR] = u + 8
    extra[i, X_BTH] = u + 8
    extra[i, X_END] = ib_end
    extra[i, X_SRC_HI] = np.int64(src_hi)
    extra[i, X_SRC_LO] = np.int64(src_lo)
    out[i, P_DST_HI] = np.int64(dst_hi)
    out[i, P_DST_LO] = np.int64(dst_lo)
    extra[i, X_MIRROR] = mirror


@helper
def _locate_one(buf, start, end, link, g, out, extra, i):
    if link == 197:                             # ERF: Ethernet or InfiniBand records
        kind = _erf_type(buf, start, end)
        p = _erf_payload(buf, start, end)
        if kind == ERF_TYPE_INFINIBAND:
            _lrh(buf, p, end, g, out, extra, i)
            return
        if kind != ERF_TYPE_ETH or end - p < 2:
            return
        link, start = 1, p + 2                  # 2 bytes offset/pad, then Ethernet
    if link == 1:
        p, et = _ether(buf, start, end)
        _ethertype(buf, p, end, et, g, out, extra, i)
    elif link == 113:
        if end - start >= 16:
            _ethertype(buf, start + 16, end, _be16(buf, start + 14), g, out, extra, i)
    elif link == 276:
        if end - start >= 20:
            _ethertype(buf, start + 20, end, _be16(buf, start), g, out, extra, i)
    elif link == 101 or link == 12 or link == 14 or link == 228 or link == 229:
        if end - start < 1:
            return
        version = np.int64(buf[start]) >> 4
        if version == 4 and link != 229:
            _ethertype(buf, start, end, ETH_P_IP, g, out, extra, i)
        elif version == 6 and link != 228:
            _ethertype(buf, start, end, ETH_P_IPV6, g, out, extra, i)
    elif link == 247:
        _lrh(buf, start, end, g, out, extra, i)


@helper
def _erf_type(buf, start, end):
    """ERF record type, -1 when the header or its extension headers are cut."""
    if end - start < 16 or _erf_payload(buf, start, end) < 0:
        return -1
    return np.int64(buf[start + 8]) & 0x7F


@helper
def _erf_payload(buf, start, end):
    """After the 16-byte ERF header and its extension headers (-1: cut)."""
    if end - start < 16:
        return -1
    p = start + 16
    more = np.int64(buf[start + 8]) & 0x80
    while more:
        if end - p < 8:
            return -1
        more = np.int64(buf[p]) & 0x80
        p += 8
    return p


def address_text(raw):
    """Text of an address: IPv4 (also from its IPv4-mapped form), IPv6/GID, or LID.

    ``raw`` is a (hi, lo) pair as the engine carries addresses, or the bytes a
    header holds (4, 16, or 2 for a LID)."""
    if isinstance(raw, tuple):
        raw = address_bytes(*raw)
    raw = bytes(raw)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw)
    if len(raw) == 16:
        text = socket.inet_ntop(socket.AF_INET6, raw)
        return text[7:] if text.startswith("::ffff:") and "." in text else text
    return "LID 0x%04x" % int.from_bytes(raw, "big")


def address_bytes(hi, lo):
    """The address as the packet carries it: 4 bytes (IPv4), 2 (LID) or 16."""
    hi, lo = int(hi) & 0xFFFFFFFFFFFFFFFF, int(lo) & 0xFFFFFFFFFFFFFFFF
    if hi == int(LID_HI):
        return lo.to_bytes(2, "big")
    if hi == 0 and lo >> 32 == 0xFFFF:
        return (lo & 0xFFFFFFFF).to_bytes(4, "big")
    return hi.to_bytes(8, "big") + lo.to_bytes(8, "big")


def mirror_codes(packets_mirror):
    """The distinct mirror codes of a chunk's frames (their packet column), 0 left out."""
    if not packets_mirror.any():
        return []
    return [code for code in np.unique(packets_mirror).tolist() if code]


def mirror_entry(code):
    """The summary's entry of one mirror code: ``{"encapsulation": name, id: value}``."""
    name, id_name = MIRRORS[code & ((1 << MIRROR_ID_SHIFT) - 1)]
    ident = (code >> MIRROR_ID_SHIFT) - 1
    entry = {"encapsulation": name}
    if id_name is not None and ident >= 0:
        entry[id_name] = ident
    return entry
