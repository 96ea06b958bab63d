"""How the crafter frames its IB packets: RoCEv2 (IPv4/IPv6, optional 802.1Q),
RoCEv1 (GRH in Ethernet) or native InfiniBand (LRH, pcap link type 247).  The
Ethernet types and the GRH next header come from the Scapy bindings."""

import socket
from dataclasses import dataclass, field
from typing import Optional

from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether

from ..layers.ib import (
    BTH, GRH, LRH, DLT_INFINIBAND, LNH_IBA_LOCAL, ROCEV1_ETHERTYPE, ROCEV2_PORT, frame_bytes,
)

DLT_EN10MB = 1


@dataclass
class Encap:
    """How frames are framed: RoCEv2 (IPv4/IPv6, optional 802.1Q), RoCEv1 or native IB."""
    kind: str = "rocev2"  # rocev2 | rocev1 | ib
    ip_version: int = 4
    vlan: Optional[int] = None
    vlan_prio: int = 3
    # (src, dst, sport) -> (placeholder BTH on its headers, their IP layer or None)
    _headers: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def linktype(self):
        return DLT_INFINIBAND if self.kind == "ib" else DLT_EN10MB

    def describe(self):
        if self.kind == "ib":
            return "InfiniBand (LRH, link type %d)" % DLT_INFINIBAND
        if self.kind == "rocev1":
            text = "RoCEv1 (EtherType 0x%04X)" % ROCEV1_ETHERTYPE
        else:
            text = "RoCEv2/IPv%d" % self.ip_version
        return text + (" VLAN %d" % self.vlan if self.vlan is not None else "")

    def frame(self, src, dst, body, sport):
        """The bytes of the frame of ``body`` (BTH .. pad, built without the ICRC: see
        layers.ib.transport_bytes) from host ``src`` to ``dst``, with the ICRC; RoCEv2
        takes the next IP id of ``src``.  The headers of each direction are Scapy layers
        made once, and only built per frame."""
        key = (src, dst, sport)
        if key not in self._headers:
            self._headers[key] = self._header_layers(src, dst, sport)
        bth, ip = self._headers[key]
        if self.kind == "rocev2":
            src.ip_id = (src.ip_id + 1) & 0xFFFF
            if ip is not None:
                ip.id = src.ip_id
        return frame_bytes(bth, body)

    def _header_layers(self, src, dst, sport):
        """A placeholder BTH on the headers from ``src`` to ``dst`` (the bindings give
        the Ethernet types and the GRH next header), and the IPv4 layer, whose id
        changes per frame (None without one)."""
        if self.kind == "ib":
            frame = LRH(lnh=LNH_IBA_LOCAL, dlid=dst.lid, slid=src.lid) / BTH()
            return frame[BTH], None
        if self.kind == "rocev1":
            l3 = GRH(ipver=6, tclass=0, flowlabel=0, hoplmt=64,
                     sgid=int.from_bytes(_gid_bytes(src.gid), "big"),
                     dgid=int.from_bytes(_gid_bytes(dst.gid), "big")) / BTH()
        else:
            udp = UDP(sport=sport, dport=ROCEV2_PORT, chksum=0) / BTH()
            if self.ip_version == 6:
                l3 = IPv6(src=src.ip, dst=dst.ip, hlim=64, fl=0, tc=0) / udp
            else:
                l3 = IP(src=src.ip, dst=dst.ip, flags="DF", ttl=64) / udp
        if self.vlan is not None:
            l3 = Dot1Q(vlan=self.vlan, prio=self.vlan_prio) / l3
        frame = Ether(src=src.mac, dst=dst.mac) / l3
        return frame[BTH], frame.getlayer(IP)


def _gid_bytes(gid):
    return socket.inet_pton(socket.AF_INET6, gid)
