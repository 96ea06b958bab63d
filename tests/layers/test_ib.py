"""InfiniBand transport layers (rtrs_scapy/layers/ib.py) against real frames of
the kernel captures and docs/PROTOCOL.md#infiniband-transport: BTH extension headers
by opcode, pad, ICRC/VCRC, RoCEv2 (IPv4/IPv6), RoCEv1 and native IB (link type 247)."""

import struct
import zlib

import pytest
from scapy.config import conf
from scapy.contrib.roce import CNPPadding
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import rdpcap, wrpcap

from conftest import real_frame
from rtrs_scapy.layers.ib import (
    AETH, BTH, DETH, DLT_INFINIBAND, GRH, IETH, LRH, OPCODE_NAMES, RDETH, RETH,
    AtomicAckETH, AtomicETH, IBPad, ImmDt, compute_icrc, frame_bytes, header_chain, icrc_ok,
    opcode_value, transport_bytes,
)


# -- real frames ---------------------------------------------------------------

def test_real_rdma_write_only_with_immediate():
    # pcaps/real/basic_inval.pcap frame 22: RNBD SESS_INFO request, cid 0
    raw, pkt = real_frame("basic_inval", 22)
    bth = pkt[BTH]
    assert bth.opcode == 0x0B
    assert bth.sprintf("%opcode%") == "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"
    assert (bth.dqpn, bth.psn, bth.ackreq, bth.pkey, bth.padcount) == (0x11, 6030448, 1,
                                                                       0xFFFF, 0)
    assert (pkt[RETH].va, pkt[RETH].rkey, pkt[RETH].dma_len) == (0xFFFF890203380024, 0x3D7, 60)
    assert pkt[ImmDt].imm == 0x00000048
    # SESS_INFO imm offset 72 (docs/PROTOCOL.md#rnbd-messages)
    assert pkt[ImmDt].decoded(512).offset == 72
    assert bth.icrc == 0xCAF0CAFC
    assert bytes(pkt) == raw
    assert pkt[UDP].dport == 4791


def test_real_ack():
    # basic_inval frame 11: ACK of the INFO_REQ (credit count 31 = 0x1F, MSN 1)
    raw, pkt = real_frame("basic_inval", 11)
    assert pkt[BTH].opcode == 0x11
    assert (pkt[AETH].syndrome, pkt[AETH].msn) == (0x1F, 1)
    assert pkt[BTH].psn == 6030447  # the PSN of the acknowledged INFO_REQ (frame 10)
    assert bytes(pkt[AETH].payload) == b""
    assert bytes(pkt) == raw


def test_real_send_only_with_invalidate():
    # basic_inval frame 26: SEND-INV after the sess_info_rsp data, IETH = desc key 0x304
    raw, pkt = real_frame("basic_inval", 26)
    assert pkt[BTH].opcode == 0x17
    assert pkt[BTH].sprintf("%opcode%") == "RC_SEND_ONLY_WITH_INVALIDATE"
    assert pkt[IETH].rkey == 0x304
    assert bytes(pkt[IETH].payload) == b""
    assert bytes(pkt) == raw


def test_real_send_only_with_immediate():
    # basic_inval frame 27: IO_RSP_W_INV for msg_id 0 carrying an rkey_rsp
    raw, pkt = real_frame("basic_inval", 27)
    assert pkt[BTH].opcode == 0x05
    assert pkt[ImmDt].imm == 0x20000000
    assert RETH not in pkt
    assert bytes(pkt) == raw


def test_real_ud_send_only_deth():
    # basic_inval frame 1: CM REQ on QP1
    raw, pkt = real_frame("basic_inval", 1)
    assert pkt[BTH].opcode == 0x64 and pkt[BTH].dqpn == 1
    assert pkt[BTH].sprintf("%opcode%") == "UD_SEND_ONLY"
    assert (pkt[DETH].qkey, pkt[DETH].src_qp) == (0x80010000, 1)
    assert len(pkt) == 322  # docs/PROTOCOL.md#cm-mads
    assert bytes(pkt) == raw


@pytest.mark.parametrize("number, imm", [(1533, 0x80000000), (1535, 0x90000000)])
def test_real_heartbeats(number, imm):
    # basic_inval frames 1533/1535: HB_MSG and HB_ACK, zero-length 0x0B
    raw, pkt = real_frame("basic_inval", number)
    assert pkt[BTH].opcode == 0x0B
    assert pkt[RETH].dma_len == 0
    assert pkt[ImmDt].imm == imm
    assert bytes(pkt[ImmDt].payload) == b""
    assert bytes(pkt) == raw


def test_real_multi_packet_write():
    # basic_inval frames 71..75: a 4 KiB RNBD write, FIRST (RETH) / 3 MIDDLE / LAST WITH IMM
    opcodes = []
    for number in range(71, 76):
        raw, pkt = real_frame("basic_inval", number)
        opcodes.append(pkt[BTH].opcode)
        assert bytes(pkt) == raw
    assert opcodes == [0x06, 0x07, 0x07, 0x07, 0x09]
    _, first = real_frame("basic_inval", 71)
    assert first[RETH].dma_len == 4132 and len(first[RETH].payload) == 1024
    _, last = real_frame("basic_inval", 75)
    assert RETH not in last and last[ImmDt].imm == 0x1020
    assert len(last[ImmDt].payload) == 36  # rnbd_msg_io + rdma_write trailer


def test_real_rdma_write_first_middle_last_headers():
    # basic_inval frames 40-43: server READ data, 0x06 / 0x07 / 0x07 / 0x08
    chains = [tuple(type(l).__name__ for l in real_frame("basic_inval", n)[1][BTH].iterpayloads())
              for n in range(40, 44)]
    assert chains == [("BTH", "RETH", "Raw"), ("BTH", "Raw"), ("BTH", "Raw"), ("BTH", "Raw")]


# -- ICRC -------------------------------------------------------------------------

@pytest.mark.parametrize("number", [1, 2, 10, 11, 22, 26, 27, 40, 75, 1533])
def test_icrc_recomputed_equals_the_kernel_value(number):
    """Rebuilding with icrc=None reproduces the ICRC rxe put on the wire
    (docs/PROTOCOL.md#payload-pad-and-icrc)."""
    raw, pkt = real_frame("basic_inval", number)
    assert icrc_ok(pkt) is True
    pkt[BTH].icrc = None
    assert bytes(pkt) == raw


def test_icrc_formula_of_protocol_md():
    # crc32 over 8 x 0xFF + masked IP/UDP + masked BTH + rest, stored LE
    # (docs/PROTOCOL.md#payload-pad-and-icrc)
    raw, pkt = real_frame("basic_inval", 22)
    ip = bytearray(raw[14:34])
    ip[1], ip[8], ip[10:12] = 0xFF, 0xFF, b"\xff\xff"
    udp = bytearray(raw[34:42])
    udp[6:8] = b"\xff\xff"
    bth = bytearray(raw[42:-4])
    bth[4] = 0xFF
    expected = struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(bth)))
    assert expected == raw[-4:]
    assert compute_icrc(pkt[BTH], raw[42:-4]) == expected


@pytest.mark.parametrize("offset", [-5, -20, 42, 60])
def test_icrc_detects_a_flipped_byte(offset):
    raw, _ = real_frame("basic_inval", 22)
    broken = bytearray(raw)
    broken[offset] ^= 0x01
    assert icrc_ok(Ether(bytes(broken))) is False


def test_icrc_ignores_masked_fields():
    # TTL, TOS, UDP checksum and BTH byte 4 (FECN/BECN) are masked: ICRC stays valid
    raw, _ = real_frame("basic_inval", 22)
    changed = bytearray(raw)
    changed[22] = 17  # IPv4 TTL
    changed[40:42] = b"\x12\x34"  # UDP checksum
    changed[46] = 0x40  # BECN
    pkt = Ether(bytes(changed))
    assert icrc_ok(pkt) is True


def test_icrc_computed_on_build():
    pkt = (Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=0xC001, dport=4791)
           / BTH(opcode=0x11, dqpn=0x11, psn=5) / AETH(syndrome=0x1F, msn=9))
    wire = bytes(pkt)
    assert wire[-4:] != b"\0\0\0\0"
    assert icrc_ok(Ether(wire)) is True
    # an explicit (wrong) ICRC is kept, so bad frames can be crafted
    bad = pkt.copy()
    bad[BTH].icrc = 0x12345678
    assert bytes(bad)[-4:] == b"\x12\x34\x56\x78"
    assert icrc_ok(Ether(bytes(bad))) is False


@pytest.mark.parametrize("headers", [
    lambda: Ether() / IP(src="10.0.0.1", dst="10.0.0.2", id=7) / UDP(sport=0xC001, dport=4791),
    lambda: Ether() / IPv6(src="fe80::1", dst="fe80::2", fl=5) / UDP(sport=0xC001, dport=4791),
    lambda: Ether(type=0x8915) / GRH(sgid=1, dgid=2, hoplmt=64),
    lambda: LRH(lnh=2, dlid=3, slid=4),
], ids=["rocev2-ipv4", "rocev2-ipv6", "rocev1", "ib"])
def test_frame_bytes_equal_scapys_build(headers):
    """The crafters' in-place build (transport_bytes, frame_bytes) gives the bytes of
    Scapy's own build, ICRC (and VCRC) included."""
    transport = BTH(opcode=0x04, dqpn=0x11, psn=5, padcount=2) / Raw(b"\x01" * 10) / IBPad(b"\0\0")
    pkt = headers() / transport
    body = transport_bytes(pkt[BTH].copy())
    assert body == bytes(pkt[BTH])[:-4]
    assert frame_bytes(pkt[BTH], body) == bytes(pkt)


def test_transport_bytes_of_a_random_field_fall_back_to_scapys_build():
    from scapy.volatile import RandShort
    pkt = BTH(opcode=0x11, dqpn=0x11, pkey=RandShort()) / AETH(syndrome=0x1F, msn=9)
    body = transport_bytes(pkt)     # BTH 12 + AETH 4, the ICRC left out
    assert len(body) == 16 and body[:1] == b"\x11"
    assert struct.unpack(">I", body[4:8])[0] & 0xFFFFFF == 0x11


# -- opcodes, header chain ------------------------------------------------------

def test_send_with_invalidate_opcode_names():
    assert OPCODE_NAMES[0x16] == "RC_SEND_LAST_WITH_INVALIDATE"
    assert OPCODE_NAMES[0x17] == "RC_SEND_ONLY_WITH_INVALIDATE"
    assert opcode_value("RC_SEND_ONLY_WITH_INVALIDATE") == 0x17
    assert header_chain(0x16) == (IETH,) and header_chain(0x17) == (IETH,)
    pkt = BTH(bytes(BTH(opcode=0x16) / IETH(rkey=0xABCD) / Raw(b"tail")))
    assert pkt[IETH].rkey == 0xABCD and pkt[Raw].load == b"tail"


@pytest.mark.parametrize("opcode, chain", [
    (0x0D, ("AETH", "Raw")),                     # READ RESPONSE FIRST
    (0x0E, ("Raw",)),                            # READ RESPONSE MIDDLE: no AETH
    (0x0F, ("AETH", "Raw")),                     # READ RESPONSE LAST
    (0x10, ("AETH", "Raw")),                     # READ RESPONSE ONLY
    (0x12, ("AETH", "AtomicAckETH")),            # ATOMIC ACKNOWLEDGE
    (0x11, ("AETH",)),                           # ACKNOWLEDGE
])
def test_aeth_on_every_opcode_that_carries_it(opcode, chain):
    payload = b"" if opcode in (0x11, 0x12) else b"DATA"
    headers = [AETH(syndrome=0x03, msn=0x123456)] if "AETH" in chain else []
    if "AtomicAckETH" in chain:
        headers.append(AtomicAckETH(orig_remote_data=0x1122334455667788))
    pkt = BTH(opcode=opcode, dqpn=0x42, psn=3)
    for header in headers:
        pkt = pkt / header
    if payload:
        pkt = pkt / Raw(payload)
    decoded = BTH(bytes(pkt))
    assert tuple(type(l).__name__ for l in decoded.iterpayloads())[1:] == chain
    if "AETH" in chain:
        assert (decoded[AETH].syndrome, decoded[AETH].msn) == (0x03, 0x123456)
    if "AtomicAckETH" in chain:
        assert decoded[AtomicAckETH].orig_remote_data == 0x1122334455667788


@pytest.mark.parametrize("opcode, expected", [
    (0x03, [ImmDt]), (0x05, [ImmDt]), (0x06, [RETH]), (0x09, [ImmDt]), (0x0A, [RETH]),
    (0x0B, [RETH, ImmDt]), (0x0C, [RETH]), (0x13, [AtomicETH]), (0x14, [AtomicETH]),
    (0x64, [DETH]), (0x65, [DETH, ImmDt]),
    (0x2B, [RETH, ImmDt]),                       # UC RDMA WRITE ONLY WITH IMMEDIATE
    (0x44, [RDETH, DETH]),                       # RD SEND ONLY
    (0x50, [RDETH, AETH]),                       # RD READ RESPONSE ONLY: no DETH
])
def test_header_chain_by_opcode(opcode, expected):
    assert list(header_chain(opcode)) == expected


def test_uc_and_rd_opcode_names():
    assert OPCODE_NAMES[0x2B] == "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"
    assert OPCODE_NAMES[0x44] == "RD_SEND_ONLY"
    assert OPCODE_NAMES[0x81] == "CNP"


def test_cnp():
    pkt = BTH(bytes(BTH(opcode=0x81, dqpn=0x11, becn=1) / CNPPadding()))
    assert CNPPadding in pkt and len(bytes(pkt)) == 12 + 16 + 4


# -- pad bytes --------------------------------------------------------------------

def test_pad_bytes_split_off_into_ibpad():
    frame = (Ether() / IP() / UDP(sport=0xC000, dport=4791)
             / BTH(opcode="RC_SEND_ONLY", dqpn=0x11, padcount=3) / Raw(b"abcde") / IBPad(pad=b"\0\0\0"))
    pkt = Ether(bytes(frame))
    assert pkt[BTH].padcount == 3
    assert pkt[Raw].load == b"abcde"
    assert pkt[IBPad].pad == b"\0\0\0"
    assert icrc_ok(pkt) is True  # pad is covered by the ICRC
    assert bytes(pkt) == bytes(frame)


def test_no_pad_layer_without_padcount():
    _, pkt = real_frame("basic_inval", 10)
    assert IBPad not in pkt


# -- round trips with non-default values --------------------------------------

ROUND_TRIPS = [
    RETH(va=0xFFFF890203380024, rkey=0x3D7, dma_len=4132),
    ImmDt(imm=0x0FF81020),
    IETH(rkey=0xDEADBEEF),
    DETH(qkey=0x12345678, reserved=0, src_qp=0xABCDEF),
    RDETH(ee_context=0x654321),
    AtomicETH(va=0x1122334455667788, rkey=0x99AABBCC, swap_add=0x0102030405060708,
              compare=0x1112131415161718),
    AtomicAckETH(orig_remote_data=0xCAFEBABE00000001),
    AETH(syndrome=0x62, msn=0xFEDCBA),
]


@pytest.mark.parametrize("layer", ROUND_TRIPS, ids=lambda l: type(l).__name__)
def test_extension_header_round_trip(layer):
    wire = bytes(layer)
    assert len(wire) == {"RETH": 16, "ImmDt": 4, "IETH": 4, "DETH": 8, "RDETH": 4,
                         "AtomicETH": 28, "AtomicAckETH": 8, "AETH": 4}[type(layer).__name__]
    decoded = type(layer)(wire)
    for field in layer.fields_desc:
        assert decoded.getfieldval(field.name) == layer.getfieldval(field.name), field.name
    assert bytes(decoded) == wire


def test_bth_round_trip_non_default():
    bth = BTH(opcode=0x0B, solicited=1, migreq=1, padcount=2, pkey=0x8001, fecn=1, becn=1,
              dqpn=0xABCDEF, ackreq=1, psn=0xFFFFFE, icrc=0x01020304)
    wire = bytes(bth / RETH(va=1, rkey=2, dma_len=3) / ImmDt(imm=4) / Raw(b"xy") / IBPad(pad=b"\0\0"))
    decoded = BTH(wire)
    for name in ("opcode", "solicited", "migreq", "padcount", "pkey", "fecn", "becn", "dqpn",
                 "ackreq", "psn", "icrc"):
        assert decoded.getfieldval(name) == bth.getfieldval(name), name
    assert decoded[Raw].load == b"xy" and decoded[IBPad].pad == b"\0\0"
    assert bytes(decoded) == wire


# -- encapsulations ---------------------------------------------------------------

@pytest.mark.parametrize("sport", [4791, 0xC000, 0xC123, 0xFFFF])
def test_rocev2_recognised_by_dport(sport):
    # RoCEv2 is recognised by the destination port (docs/PROTOCOL.md#capture-encapsulations)
    # from any entropy source port (0xC000-0xFFFF), where no other Scapy binding sits
    # (tests/layers/test_scapy_untouched.py)
    frame = (Ether() / IP() / UDP(sport=sport, dport=4791)
             / BTH(opcode=0x11, dqpn=7) / AETH(msn=1))
    pkt = Ether(bytes(frame))
    assert BTH in pkt and pkt[AETH].msn == 1
    assert icrc_ok(pkt) is True


def test_rocev2_craft_defaults():
    wire = bytes(Ether() / IP() / UDP() / BTH(opcode=0x11) / AETH())
    pkt = Ether(wire)
    assert pkt[UDP].dport == 4791 and pkt[UDP].chksum == 0


def test_rocev2_ipv6():
    frame = (Ether() / IPv6(src="fd00::2", dst="fd00::1", tc=0x12, fl=0x54321, hlim=7)
             / UDP(sport=0xC123, dport=4791, chksum=0)
             / BTH(opcode=0x0B, dqpn=0x13, psn=99)
             / RETH(va=0x1000, rkey=0x77, dma_len=0) / ImmDt(imm=0x90000000))
    wire = bytes(frame)
    # with IPv6, UDP at 54 and BTH at 62 (docs/PROTOCOL.md#capture-encapsulations)
    assert wire[54 + 8:54 + 9] == b"\x0b"
    pkt = Ether(wire)
    assert pkt[ImmDt].imm == 0x90000000 and pkt[RETH].rkey == 0x77
    assert icrc_ok(pkt) is True
    # the masked IPv6 fields (traffic class, flow label, hop limit) do not enter the ICRC
    other = Ether(wire)
    other[IPv6].hlim, other[IPv6].tc, other[IPv6].fl = 1, 0, 0
    assert bytes(other)[-4:] == wire[-4:]


def test_rocev1():
    frame = (Ether(type=0x8915) / GRH(tclass=3, flowlabel=0x12345, hoplmt=64,
                                      sgid=0xFE80 << 112 | 2, dgid=0xFE80 << 112 | 1)
             / BTH(opcode=0x17, dqpn=0x11, psn=10) / IETH(rkey=0x305))
    wire = bytes(frame)
    pkt = Ether(wire)
    assert GRH in pkt and pkt[GRH].nexthdr == 0x1B
    assert pkt[GRH].paylen == 12 + 4 + 4  # BTH + IETH + ICRC
    assert pkt[IETH].rkey == 0x305
    assert wire[-4:] != b"\0\0\0\0" and icrc_ok(pkt) is True


def _ib_frame():
    return (LRH(vl=1, sl=3, dlid=0x0002, slid=0x0001)
            / BTH(opcode=0x0B, dqpn=0x11, psn=1)
            / RETH(va=0xFFFF890203380000, rkey=0x309, dma_len=12) / ImmDt(imm=8)
            / Raw(bytes.fromhex("0500000000000000") + bytes.fromhex("02000800")))


def test_native_ib_lrh_lengths_and_crcs():
    wire = bytes(_ib_frame())
    assert len(wire) == 8 + 12 + 16 + 4 + 12 + 4 + 2
    pkt = LRH(wire)
    assert pkt.lnh == 2  # IBA local: BTH follows
    # words LRH .. ICRC, VCRC excluded (docs/PROTOCOL.md#capture-encapsulations)
    assert pkt.pktlen == (len(wire) - 2) // 4
    assert pkt.vcrc is not None and pkt[ImmDt].imm == 8
    assert icrc_ok(pkt) is True
    assert bytes(pkt) == wire
    # VL is masked in the ICRC, not in the VCRC
    other = bytearray(wire)
    other[0] = (other[0] & 0x0F) | 0x70
    assert icrc_ok(LRH(bytes(other))) is True


def test_native_ib_with_grh():
    wire = bytes(LRH(dlid=2, slid=1) / GRH(hoplmt=1, sgid=1, dgid=2)
                 / BTH(opcode=0x11, dqpn=5) / AETH(msn=4))
    pkt = LRH(wire)
    assert pkt.lnh == 3 and GRH in pkt and pkt[AETH].msn == 4
    assert icrc_ok(pkt) is True


def test_link_type_247_reads_as_lrh(tmp_path):
    assert conf.l2types.num2layer[DLT_INFINIBAND] is LRH
    path = tmp_path / "ib.pcap"
    wrpcap(str(path), [_ib_frame()], linktype=DLT_INFINIBAND)
    assert int.from_bytes(path.read_bytes()[20:24], "little") == 247
    (pkt,) = rdpcap(str(path))
    assert isinstance(pkt, LRH) and pkt[RETH].rkey == 0x309
    assert bytes(pkt) == bytes(_ib_frame())


def test_lrh_and_grh_round_trip_non_default():
    lrh = LRH(vl=15, lver=0, sl=9, lnh=3, dlid=0xC001, slid=0x0042)
    grh = GRH(ipver=6, tclass=0xA5, flowlabel=0xFEDCB, hoplmt=3,
              sgid=0xFE800000000000000002C90300A1B2C3, dgid=0xFE800000000000000002C90300D4E5F6)
    wire = bytes(lrh / grh / BTH(opcode=0x04, dqpn=0x77, psn=1) / Raw(b"abcd"))
    decoded = LRH(wire)
    for layer, cls in ((lrh, LRH), (grh, GRH)):
        for field in layer.fields:
            assert decoded[cls].getfieldval(field) == layer.getfieldval(field), field
    assert decoded[GRH].nexthdr == 0x1B and decoded[GRH].paylen == 12 + 4 + 4
    assert decoded.pktlen * 4 == len(wire) - 2
    assert bytes(decoded) == wire and icrc_ok(decoded) is True


def test_rocev2_in_vlan():
    # an 802.1Q tag shifts everything by 4; the ICRC still starts at the IP header
    # (docs/PROTOCOL.md#capture-encapsulations)
    from scapy.layers.l2 import Dot1Q
    frame = (Ether() / Dot1Q(vlan=100, prio=3) / IP(src="10.0.0.1", dst="10.0.0.2")
             / UDP(sport=0xC001, dport=4791) / BTH(opcode=0x17, dqpn=0x11) / IETH(rkey=0x304))
    pkt = Ether(bytes(frame))
    assert pkt[Dot1Q].vlan == 100 and pkt[IETH].rkey == 0x304
    assert icrc_ok(pkt) is True
    untagged = Ether(bytes(Ether() / IP(src="10.0.0.1", dst="10.0.0.2")
                           / UDP(sport=0xC001, dport=4791) / BTH(opcode=0x17, dqpn=0x11)
                           / IETH(rkey=0x304)))
    assert pkt[BTH].icrc == untagged[BTH].icrc


def test_icrc_of_a_connectx4_cnp():
    """A CNP captured on a ConnectX-4 Lx, ICRC computed by the NIC (the hardware
    vector of secdev/scapy test/contrib/roce.uts): UDP source port 0, BECN set."""
    dump = """e41d 2dab 2bc2 7cfe 9064 3b32 0800 45c2
              003c 718c 4000 4011 9161 0a00 1101 0a00
              1201 0000 12b7 0028 0000 8100 ffff 4000
              0118 0000 0000 0000 0000 0000 0000 0000
              0000 0000 0000 82fd 002a"""
    raw = bytes.fromhex("".join(dump.split()))
    pkt = Ether(raw)
    assert pkt[BTH].opcode == 0x81 and pkt[BTH].becn == 1 and CNPPadding in pkt
    assert pkt[BTH].icrc == 0x82FD002A
    assert icrc_ok(pkt) is True
    pkt[BTH].icrc = None
    assert bytes(pkt) == raw
