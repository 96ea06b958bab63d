"""Crafted frames for every RTRS/RNBD message type, over RoCEv2 (IPv4, IPv6),
RoCEv1 and native InfiniBand (pcap link type 247, with and without GRH),
checked by tshark: no malformed/error items, and the same IB/CM field values as
Scapy's (helpers shared with test_tshark_diff.py).
"""

import pytest
from scapy.contrib.roce import CNPPadding
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import rdpcap, wrpcap

from rtrs_scapy.spec.imm import encode_hb, encode_io_req, encode_io_rsp
from rtrs_scapy.layers.cm import (
    MAD, CmaIpHdr, CMDrep, CMDreq, CMMra, CMRej, CMRep, CMReq, CMRtu, service_id,
)
from rtrs_scapy.layers.ib import (
    AETH, BTH, DETH, DLT_INFINIBAND, GRH, IETH, LRH, RETH, AtomicAckETH, AtomicETH, IBPad,
    ImmDt, icrc_ok,
)
from rtrs_scapy.layers.rnbd import RnbdMsgIo, RnbdMsgOpen, RnbdMsgOpenRsp
from rtrs_scapy.layers.rtrs import (
    RtrsMsgConnReq, RtrsMsgConnRsp, RtrsMsgInfoReq, RtrsMsgInfoRsp, RtrsMsgRdmaRead,
    RtrsMsgRkeyRsp, RtrsSgDesc,
)
from rtrs_scapy.layers.rtrs_request import RtrsReadRequest, RtrsWriteRequest
from tshark_util import compared_fields, differences, tshark_problem_frames, tshark_rows

CLIENT_QPN, SERVER_QPN = 0x000123, 0x000456
SESS_UUID = "894d3ba1-50fa-4916-b23b-553160c763f0"
PATHS_UUID = "099515cc-5059-40ce-80bc-db2c1eb9079c"
TID = 0x00000002_0D5B12EF


def _cm(cm_layer, tid=TID):
    return (BTH(psn=7, pkey=0xFFFF) / DETH() / MAD(transaction_id=tid) / cm_layer)


def messages(ip_version=4):
    """(name, IB stack from the BTH on, expected Scapy layer) of every message kind."""
    if ip_version == 4:
        cma = CmaIpHdr(ip_version=4, port=34174, src_addr="::10.77.0.2", dst_addr="::10.77.0.1")
        gids = ("::ffff:10.77.0.2", "::ffff:10.77.0.1")
    else:
        cma = CmaIpHdr(ip_version=6, port=34174, src_addr="fd00::2", dst_addr="fd00::1")
        gids = ("fd00::2", "fd00::1")
    conn_req = RtrsMsgConnReq(cid=1, cid_num=3, recon_cnt=2, sess_uuid=SESS_UUID,
                              paths_uuid=PATHS_UUID, first_conn=1)
    req = CMReq(local_comm_id=0xEF125B0D, service_id=service_id(1234),
                local_ca_guid=0x505400FFFE770002, local_qpn=CLIENT_QPN,
                starting_psn=4182839, path_mtu=5, primary_local_port_lid=0xFFFF,
                primary_remote_port_lid=0xFFFF,
                primary_local_port_gid=gids[0], primary_remote_port_gid=gids[1],
                primary_hop_limit=64,
                primary_local_ack_timeout=19)
    io = RnbdMsgIo(device_id=3, sector=2048, rw=0x301, bi_size=13, prio=0x4000)
    read_desc = RtrsSgDesc(addr=0xFFFF8D25C3433280, key=0x304, len=4096)
    return [
        ("cm_req", _cm(req / cma / conn_req), RtrsMsgConnReq),
        ("cm_rep", _cm(CMRep(local_comm_id=0xBE098478, remote_comm_id=0xEF125B0D,
                             local_qpn=SERVER_QPN, starting_psn=6030447,
                             target_ack_delay=15, local_ca_guid=0x505400FFFE770001)
                       / RtrsMsgConnRsp(queue_depth=128, flags=0)), RtrsMsgConnRsp),
        ("cm_rej", _cm(CMRej(local_comm_id=0xBE098478, remote_comm_id=0xEF125B0D,
                             message_rejected=0, reason=28)
                       / RtrsMsgConnRsp(errno=-104, queue_depth=0, max_io_size=0,
                                        max_hdr_size=0, flags=0)), RtrsMsgConnRsp),
        ("cm_rtu", _cm(CMRtu(local_comm_id=0xEF125B0D, remote_comm_id=0xBE098478)), CMRtu),
        ("cm_dreq", _cm(CMDreq(local_comm_id=0xEF125B0D, remote_comm_id=0xBE098478,
                               remote_qpn=SERVER_QPN), tid=0x3_0D5B12EF), CMDreq),
        ("cm_drep", _cm(CMDrep(local_comm_id=0xBE098478, remote_comm_id=0xEF125B0D),
                        tid=0x3_0D5B12EF), CMDrep),
        ("cm_mra", _cm(CMMra(local_comm_id=0xBE098478, remote_comm_id=0xEF125B0D,
                             message_mraed=0, service_timeout=20)), CMMra),
        ("info_req", BTH(opcode="RC_SEND_ONLY", dqpn=SERVER_QPN, psn=100, ackreq=1)
         / RtrsMsgInfoReq(pathname=b"lab1"), RtrsMsgInfoReq),
        ("info_rsp", BTH(opcode="RC_SEND_ONLY", dqpn=CLIENT_QPN, psn=200, ackreq=1)
         / RtrsMsgInfoRsp(desc=[RtrsSgDesc(addr=0xFFFF890203380000, key=0x3D7, len=131072),
                                RtrsSgDesc(addr=0xFFFF890203400000, key=0x3D8, len=131072)]),
         RtrsMsgInfoRsp),
        ("write_request", BTH(opcode="RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", dqpn=SERVER_QPN,
                              psn=101, ackreq=1, padcount=3)
         / RETH(va=0xFFFF890203380000, rkey=0x3D7, dma_len=13 + 32 + 4)
         / ImmDt(imm=encode_io_req(5, 13 + 32, 512))
         / RtrsWriteRequest(data=b"0123456789abc", usr=io) / IBPad(pad=b"\0\0\0"),
         RtrsWriteRequest),
        ("read_request", BTH(opcode="RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", dqpn=SERVER_QPN,
                             psn=102, ackreq=1)
         / RETH(va=0xFFFF890203380000 + 4096, rkey=0x3D7, dma_len=264 + 8 + 16)
         / ImmDt(imm=encode_io_req(6, 4096 + 264, 512))
         / RtrsReadRequest(usr=RnbdMsgOpen(dev_name=b"ram0"),
                           trailer=RtrsMsgRdmaRead(flags=1, desc=[read_desc])),
         RtrsReadRequest),
        ("io_response", BTH(opcode="RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", dqpn=CLIENT_QPN,
                            psn=201, ackreq=1)
         / RETH(dma_len=0) / ImmDt(imm=encode_io_rsp(5, -28)), ImmDt),
        ("heartbeat", BTH(opcode="RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", dqpn=CLIENT_QPN,
                          psn=202, ackreq=1)
         / RETH(dma_len=0) / ImmDt(imm=encode_hb()), ImmDt),
        ("rkey_rsp", BTH(opcode="RC_SEND_ONLY_WITH_IMMEDIATE", dqpn=CLIENT_QPN, psn=203,
                         ackreq=1)
         / ImmDt(imm=encode_io_rsp(5, with_invalidate=True))
         / RtrsMsgRkeyRsp(buf_id=5, rkey=0x3D8), RtrsMsgRkeyRsp),
        ("send_with_inv", BTH(opcode="RC_SEND_ONLY_WITH_INVALIDATE", dqpn=CLIENT_QPN,
                              psn=204, ackreq=1) / IETH(rkey=0x304), IETH),
        ("open_rsp", BTH(opcode="RC_RDMA_WRITE_ONLY", dqpn=CLIENT_QPN, psn=205, ackreq=1)
         / RETH(va=0xFFFF8D25C3433280, rkey=0x304, dma_len=56)
         / RnbdMsgOpenRsp(device_id=3, nsectors=131072, max_hw_sectors=248,
                          max_discard_sectors=8388607, discard_granularity=4096,
                          physical_block_size=4096, logical_block_size=512,
                          max_segments=128, cache_policy=2), RnbdMsgOpenRsp),
        ("ack", BTH(opcode="RC_ACKNOWLEDGE", dqpn=SERVER_QPN, psn=102)
         / AETH(syndrome=0x1F, msn=3), AETH),
        ("nak", BTH(opcode="RC_ACKNOWLEDGE", dqpn=SERVER_QPN, psn=103)
         / AETH(syndrome=0x60, msn=3), AETH),
    ]


MAC_C, MAC_S = "52:54:00:77:00:02", "52:54:00:77:00:01"


def rocev2_ipv4(ib):
    return (Ether(src=MAC_C, dst=MAC_S) / IP(src="10.77.0.2", dst="10.77.0.1", flags="DF")
            / UDP(sport=0xC123, dport=4791, chksum=0) / ib)


def rocev2_ipv6(ib):
    # a UDP checksum of 0 is an error for tshark over IPv6: let Scapy compute it
    # (the ICRC masks it anyway, docs/PROTOCOL.md#payload-pad-and-icrc)
    return (Ether(src=MAC_C, dst=MAC_S) / IPv6(src="fd00::2", dst="fd00::1", hlim=64)
            / UDP(sport=0xC123, dport=4791, chksum=None) / ib)


GID_C = int("fe80000000000000505400fffe770002", 16)
GID_S = int("fe80000000000000505400fffe770001", 16)


def rocev1(ib):
    return (Ether(src=MAC_C, dst=MAC_S, type=0x8915)
            / GRH(tclass=0, flowlabel=0x2F14, hoplmt=64, sgid=GID_C, dgid=GID_S) / ib)


def ib_local(ib):
    return LRH(vl=0, sl=0, dlid=0x0002, slid=0x0001) / ib


def ib_global(ib):
    return (LRH(vl=0, sl=0, dlid=0x0002, slid=0x0001)
            / GRH(tclass=0, flowlabel=0x2F14, hoplmt=64, sgid=GID_C, dgid=GID_S) / ib)


ETHERNET = {"rocev2_ipv4": (rocev2_ipv4, 4), "rocev2_ipv6": (rocev2_ipv6, 6),
            "rocev1": (rocev1, 6)}
INFINIBAND = {"ib_lrh": (ib_local, 6), "ib_lrh_grh": (ib_global, 6)}


def _frames(framings):
    frames = []
    for framing, (wrap, ip_version) in framings.items():
        for name, ib, expected in messages(ip_version):
            frame = wrap(ib)
            frames.append(("%s/%s" % (framing, name), frame.__class__(bytes(frame)), expected))
    return frames


# tshark 4.0 does not know pcap link type 247 (LINKTYPE_INFINIBAND): it reads a
# copy of the file relabelled as user DLT 147 mapped to its "infiniband" dissector.
USER_DLT = 147
USER_DLT_OPTIONS = ("-o", 'uat:user_dlts:"User 0 (DLT=147)","infiniband","0","","0",""')


def _relabel(path, linktype):
    data = bytearray(path.read_bytes())
    data[20:24] = linktype.to_bytes(4, "little")  # pcap global header, network field
    copy = path.with_name(path.stem + "_dlt%d.pcap" % linktype)
    copy.write_bytes(bytes(data))
    return copy


@pytest.fixture(scope="module")
def crafted(tmp_path_factory):
    """The crafted frames written to two pcaps (Ethernet; link type 247), with the
    file and options tshark reads them with."""
    out = tmp_path_factory.mktemp("crafted")
    result = []
    for link, framings, linktype in (("ether", ETHERNET, 1),
                                     ("ib", INFINIBAND, DLT_INFINIBAND)):
        frames = _frames(framings)
        path = out / ("%s.pcap" % link)
        wrpcap(str(path), [frame for _, frame, _ in frames], linktype=linktype)
        if linktype == DLT_INFINIBAND:
            result.append((path, _relabel(path, USER_DLT), USER_DLT_OPTIONS, frames))
        else:
            result.append((path, path, (), frames))
    return result


def test_crafted_frames_cover_every_message_and_framing(crafted):
    names = [name for _, _, _, frames in crafted for name, _, _ in frames]
    assert len(names) == len(set(names)) == 5 * len(messages())


def test_ib_pcap_has_link_type_247(crafted):
    path = crafted[1][0]
    assert int.from_bytes(path.read_bytes()[20:24], "little") == 247
    assert all(LRH in pkt for pkt in rdpcap(str(path)))


def test_crafted_frames_read_back_with_their_layers(crafted):
    for path, _, _, frames in crafted:
        packets = rdpcap(str(path))
        assert len(packets) == len(frames)
        for pkt, (name, frame, expected) in zip(packets, frames):
            assert bytes(pkt) == bytes(frame), name
            assert expected in pkt, "%s: %s missing in %r" % (name, expected.__name__,
                                                              pkt.summary())
            assert icrc_ok(pkt) is True, name


def test_tshark_sees_no_malformed_or_error_item(crafted):
    for _, tshark_path, options, _ in crafted:
        assert tshark_problem_frames(tshark_path, options) == []


def test_tshark_decodes_the_same_fields(crafted):
    compared = 0
    for path, tshark_path, options, frames in crafted:
        rows = tshark_rows(tshark_path, extra_options=options)
        packets = rdpcap(str(path))
        assert len(rows) == len(packets) == len(frames)
        for pkt, row, (name, _, _) in zip(packets, rows, frames):
            assert "infiniband.bth.opcode" in compared_fields(pkt, row), name
            assert differences(pkt, row) == [], name
            compared += 1
    assert compared == 5 * len(messages())


# IB opcodes RTRS does not use, so the transport layer is checked beyond RTRS too
# (RD is left out: tshark 4.0 misplaces its RDETH, see tshark_util.py).
OTHER_OPCODES = [
    BTH(opcode=0x0C, dqpn=0x11, psn=1, ackreq=1) / RETH(va=0x1000, rkey=0x22, dma_len=4096),
    BTH(opcode=0x0D, dqpn=0x11, psn=1) / AETH(syndrome=0x1F, msn=2) / Raw(b"A" * 256),
    BTH(opcode=0x0E, dqpn=0x11, psn=2) / Raw(b"B" * 256),
    BTH(opcode=0x0F, dqpn=0x11, psn=3) / AETH(syndrome=0x1F, msn=2) / Raw(b"C" * 16),
    BTH(opcode=0x10, dqpn=0x11, psn=4) / AETH(syndrome=0x1F, msn=3) / Raw(b"D" * 8),
    BTH(opcode=0x13, dqpn=0x11, psn=5, ackreq=1)
    / AtomicETH(va=0x2000, rkey=0x33, swap_add=5, compare=6),
    BTH(opcode=0x14, dqpn=0x11, psn=6, ackreq=1) / AtomicETH(va=0x2008, rkey=0x33, swap_add=1),
    BTH(opcode=0x12, dqpn=0x11, psn=5) / AETH(syndrome=0x1F, msn=4)
    / AtomicAckETH(orig_remote_data=0x77),
    BTH(opcode=0x81, dqpn=0x11, becn=1) / CNPPadding(),
    BTH(opcode=0x65, dqpn=0x99, psn=7) / DETH(qkey=0x1234, src_qp=0x88)
    / ImmDt(imm=0xABCDEF01) / Raw(b"hello!!!"),
    BTH(opcode=0x2B, dqpn=0x11, psn=8) / RETH(va=1, rkey=2, dma_len=4) / ImmDt(imm=3)
    / Raw(b"wxyz"),
    BTH(opcode=0x11, dqpn=0x11, psn=9) / AETH(syndrome=0x23, msn=9),
    BTH(opcode=0x16, dqpn=0x11, psn=10) / IETH(rkey=0x55) / Raw(b"last"),
    BTH(opcode=0x03, dqpn=0x11, psn=11) / ImmDt(imm=0x10000005) / Raw(b"last"),
]


def test_other_ib_opcodes_agree_with_tshark(tmp_path):
    path = tmp_path / "other.pcap"
    wrpcap(str(path), [rocev2_ipv4(ib) for ib in OTHER_OPCODES])
    assert tshark_problem_frames(path) == []
    rows = tshark_rows(path)
    packets = rdpcap(str(path))
    assert len(rows) == len(packets) == len(OTHER_OPCODES)
    for pkt, row in zip(packets, rows):
        assert icrc_ok(pkt) is True
        assert differences(pkt, row) == [], pkt.summary()
