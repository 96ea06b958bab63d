"""Wrap every frame of an Ethernet capture in the outer headers of a switch mirror or an
overlay, written here with ``struct`` from the RFCs and drafts alone (not from the
code under test): ERSPAN type I, II and III (draft-foschiano-erspan-03), GRE
transparent Ethernet bridging (RFC 2784, 2890, 1701), VXLAN (RFC 7348), Geneve
(RFC 8926), MPLS (RFC 3032), over outer IPv4 or IPv6, with or without a VLAN tag.

``ENCAPSULATIONS`` names each wrapping and the ``capture.mirror`` entry a summary of
the wrapped capture should carry.
"""

import functools
import gzip
import struct

OUTER_MACS = bytes.fromhex("020000000002") + bytes.fromhex("020000000001")
OUTER_V4 = (bytes([192, 0, 2, 1]), bytes([192, 0, 2, 2]))
OUTER_V6 = (bytes.fromhex("20010db8000000000000000000000001"),
            bytes.fromhex("20010db8000000000000000000000002"))
GRE, UDP = 47, 17


def _checksum(data):
    data += b"\0" * (len(data) % 2)
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ipv4(proto, payload, ident=1):
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident, 0x4000, 64,
                         proto, 0, *OUTER_V4)
    return header[:10] + struct.pack("!H", _checksum(header)) + header[12:] + payload


def ipv6(proto, payload, _ident=1):
    return struct.pack("!IHBB16s16s", 6 << 28, len(payload), proto, 64, *OUTER_V6) + payload


def udp(dport, payload, sport=49152):
    return struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload


def gre(proto, payload, checksum=False, key=None, seq=None):
    flags = (0x8000 if checksum else 0) | (0x2000 if key is not None else 0) | (
        0x1000 if seq is not None else 0)
    out = struct.pack("!HH", flags, proto)
    if checksum:
        out += struct.pack("!HH", 0, 0)
    if key is not None:
        out += struct.pack("!I", key)
    if seq is not None:
        out += struct.pack("!I", seq)
    if checksum:
        out = out[:4] + struct.pack("!H", _checksum(out + payload)) + out[6:]
    return out + payload


def erspan2(session, frame, index=0):
    # ver 1 | vlan 0 ; cos 0 en 0 t 0 session ; reserved 0 | index
    return struct.pack("!HHI", 1 << 12, session & 0x3FF, index & 0xFFFFF) + frame


def erspan3(session, frame, platform=False, stamp=0):
    # ver 2 | vlan ; cos bso t session ; timestamp ; sgt ; p ft hw d gra o
    last = 1 if platform else 0
    out = struct.pack("!HHIHH", 2 << 12, session & 0x3FF, stamp, 0, last)
    if platform:
        out += struct.pack("!II", 3 << 26, 0x12345678)   # platform id 3
    return out + frame


def vxlan(vni, frame):
    return struct.pack("!II", 0x08 << 24, vni << 8) + frame


def geneve(vni, frame, options=b"", proto=0x6558):
    assert len(options) % 4 == 0
    return struct.pack("!BBHI", len(options) // 4, 0, proto, vni << 8) + options + frame


GENEVE_OPTIONS = struct.pack("!HBB", 0x0102, 0x80, 2) + b"\xaa" * 8   # one 12-byte option


def mpls(labels, payload):
    out = b""
    for k, label in enumerate(labels):
        out += struct.pack("!I", label << 12 | (1 if k == len(labels) - 1 else 0) << 8 | 64)
    return out + payload


def strip_ethernet(frame):
    """The IP packet of an Ethernet frame (its VLAN tags too), for MPLS."""
    at, ethertype = 14, struct.unpack("!H", frame[12:14])[0]
    while ethertype in (0x8100, 0x88A8, 0x9100):
        ethertype = struct.unpack("!H", frame[at + 2:at + 4])[0]
        at += 4
    return frame[at:]


def tagged(frame, vlan):
    """An Ethernet frame with an 802.1Q tag inserted after its addresses."""
    return frame[:12] + struct.pack("!HH", 0x8100, vlan) + frame[12:]


def ether(ethertype, payload, vlan=None):
    if vlan is not None:
        return OUTER_MACS + struct.pack("!HHH", 0x8100, vlan, ethertype) + payload
    return OUTER_MACS + struct.pack("!H", ethertype) + payload


def _ip(version):
    return (ipv6, 0x86DD) if version == 6 else (ipv4, 0x0800)


def wrapper(kind, version=4, vlan=None):
    """frame, frame number -> the frame wrapped in ``kind`` over IPv``version``."""
    ip, ethertype = _ip(version)

    def over_ip(proto, payload, n):
        return ether(ethertype, ip(proto, payload, n & 0xFFFF), vlan)
    wrappers = {
        "erspan1": lambda f, n: over_ip(GRE, gre(0x88BE, f), n),
        "erspan2": lambda f, n: over_ip(GRE, gre(0x88BE, erspan2(7, f, n), seq=n), n),
        "erspan3": lambda f, n: over_ip(GRE, gre(0x22EB, erspan3(9, f, stamp=n), seq=n), n),
        "erspan3_platform": lambda f, n: over_ip(
            GRE, gre(0x22EB, erspan3(9, f, platform=True, stamp=n)), n),
        "gre_teb": lambda f, n: over_ip(GRE, gre(0x6558, f, checksum=True, key=42, seq=n), n),
        "vxlan": lambda f, n: over_ip(UDP, udp(4789, vxlan(5001, f)), n),
        "geneve": lambda f, n: over_ip(UDP, udp(6081, geneve(77, f, GENEVE_OPTIONS)), n),
        "mpls": lambda f, n: ether(0x8847, mpls([1000, 2000], strip_ethernet(f)), vlan),
    }
    return wrappers[kind]


#: name -> (kind, outer IP version, outer VLAN, the capture.mirror entry expected)
ENCAPSULATIONS = {
    "erspan1": ("erspan1", 4, None, {"encapsulation": "erspan1"}),
    "erspan2": ("erspan2", 4, None, {"encapsulation": "erspan2", "session": 7}),
    "erspan2_ipv6": ("erspan2", 6, 100, {"encapsulation": "erspan2", "session": 7}),
    "erspan3": ("erspan3", 4, None, {"encapsulation": "erspan3", "session": 9}),
    "erspan3_platform": ("erspan3_platform", 4, None,
                         {"encapsulation": "erspan3", "session": 9}),
    "gre_teb": ("gre_teb", 4, None, {"encapsulation": "gre_teb", "key": 42}),
    "vxlan": ("vxlan", 4, None, {"encapsulation": "vxlan", "vni": 5001}),
    "vxlan_ipv6": ("vxlan", 6, None, {"encapsulation": "vxlan", "vni": 5001}),
    "geneve": ("geneve", 4, 200, {"encapsulation": "geneve", "vni": 77}),
    "mpls": ("mpls", 4, None, {"encapsulation": "mpls", "label": 1000}),
}


@functools.lru_cache(maxsize=None)
def read_frames(path, limit=None):
    """(byte order, pcap global header, [((seconds, fraction, bytes cut), frame)]) of
    a classic pcap (.gz too): its first ``limit`` records."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        header = fh.read(24)
        endian = "<" if header[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        frames = []
        while limit is None or len(frames) < limit:
            record = fh.read(16)
            if len(record) < 16:
                break
            sec, frac, incl, orig = struct.unpack(endian + "IIII", record)
            frames.append(((sec, frac, orig - incl), fh.read(incl)))
    return endian, header, tuple(frames)


def write_frames(path, endian, header, frames, wrap=None):
    """The frames as a pcap, each wrapped by ``wrap(frame, n)`` (None: as they are)."""
    linktype_snap = struct.pack(endian + "II", 262144, 1)
    out = [header[:16] + linktype_snap]
    for n, ((sec, frac, cut), frame) in enumerate(frames):
        if wrap is not None:
            frame = wrap(frame, n)
        out.append(struct.pack(endian + "IIII", sec, frac, len(frame), len(frame) + cut))
        out.append(frame)
    path.write_bytes(b"".join(out))
    return path


def wrap_capture(source, target, name, limit=None):
    """``source`` (its first ``limit`` frames) wrapped in encapsulation ``name``."""
    kind, version, vlan, _entry = ENCAPSULATIONS[name]
    endian, header, frames = read_frames(source, limit)
    return write_frames(target, endian, header, frames, wrapper(kind, version, vlan))


def plain_capture(source, target, limit=None):
    """``source``'s first ``limit`` frames, unwrapped (the reference)."""
    endian, header, frames = read_frames(source, limit)
    return write_frames(target, endian, header, frames)
