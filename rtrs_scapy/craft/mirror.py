"""Crafted frames as a switch mirror or an overlay's underlay hands them over: each
Ethernet frame wrapped in Scapy's own ERSPAN, GRE, VXLAN, Geneve or MPLS layers
(docs/PROTOCOL.md#switch-mirrors-and-overlays), from the switch 192.0.2.1 to the
collector 192.0.2.2, ERSPAN session 7, GRE key 7, VNI 5001, MPLS labels 1000/2000."""

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import GRE, Ether
from scapy.packet import Raw

from ..layers.tunnels import ERSPAN_II, ERSPAN_III, GENEVE, MPLS, VXLAN

SESSION, VNI, LABELS = 7, 5001, (1000, 2000)


def _outer(n):
    return Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(
        src="192.0.2.1", dst="192.0.2.2", id=n & 0xFFFF, flags="DF", ttl=64)


def _mpls(frame):
    """The IP packet of an Ethernet frame under a stack of two labels."""
    inner = Ether(frame)
    return Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / MPLS(
        label=LABELS[0], s=0, ttl=64) / MPLS(label=LABELS[1], s=1, ttl=64) / Raw(
        bytes(inner.payload))


#: name (as the summary names it) -> frame bytes, frame number -> the wrapped frame
WRAPPERS = {
    "erspan1": lambda f, n: _outer(n) / GRE(proto=0x88BE) / Raw(f),
    "erspan2": lambda f, n: _outer(n) / GRE(seqnum_present=1, sequence_number=n) / ERSPAN_II(
        session_id=SESSION, index=n & 0xFFFFF) / Raw(f),
    "erspan3": lambda f, n: _outer(n) / GRE(seqnum_present=1, sequence_number=n) / ERSPAN_III(
        session_id=SESSION, timestamp=n) / Raw(f),
    "gre_teb": lambda f, n: _outer(n) / GRE(proto=0x6558, key_present=1, key=SESSION) / Raw(f),
    "vxlan": lambda f, n: _outer(n) / UDP(sport=49152, dport=4789, chksum=0) / VXLAN(
        vni=VNI) / Raw(f),
    "geneve": lambda f, n: _outer(n) / UDP(sport=49152, dport=6081, chksum=0) / GENEVE(
        vni=VNI, proto=0x6558) / Raw(f),
    "mpls": lambda f, n: _mpls(f),
}


def mirrored(frames, name):
    """(time, bytes) Ethernet frames, each wrapped as ``name`` says."""
    wrap = WRAPPERS[name]
    return [(t, bytes(wrap(data, n))) for n, (t, data) in enumerate(frames)]
