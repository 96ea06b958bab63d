"""IB CM layers (rtrs_scapy/layers/cm.py): MAD header, REQ/REP/REJ/RTU/DREQ/
DREP/MRA and the RDMA CM IP header, against the real CM handshake of the kernel
captures and the offsets of docs/PROTOCOL.md#connection-management."""


import pytest
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from conftest import real_frame
from rtrs_scapy.layers.cm import (
    AF_IB_SERVICE_ID, MAD, CmaIpHdr, CMDrep, CMDreq, CMMra, CMRej, CMRep, CMReq, CMRtu,
    is_ip_service_id, service_id,
)
from rtrs_scapy.layers.ib import BTH, DETH, icrc_ok
from rtrs_scapy.layers.rtrs import RtrsMsgConnReq, RtrsMsgConnRsp


MAD_AT = 62  # RoCEv2/IPv4, no VLAN (docs/PROTOCOL.md#cm-mads)


def alone(layer):
    """The bytes of one layer without what follows it."""
    copy = layer.copy()
    copy.remove_payload()
    return bytes(copy)


def test_real_req():
    # pcaps/real/basic_inval.pcap frame 1: CM REQ for cid 0
    raw, pkt = real_frame("basic_inval", 1)
    mad = pkt[MAD]
    assert (mad.base_version, mad.mgmt_class, mad.class_version, mad.method) == (1, 7, 2, 3)
    assert mad.attribute_id == 0x0010 and mad.sprintf("%attribute_id%") == "ConnectRequest"
    assert mad.transaction_id == 0x000000020D5B12EF
    req = pkt[CMReq]
    assert req.local_comm_id == 0xEF125B0D
    assert req.service_id == 0x00000000010604D2 == service_id(1234)
    assert req.local_ca_guid == 0x505400FFFE770002
    assert req.local_qpn == 0x11
    # no RDMA READ (docs/PROTOCOL.md#cm-req)
    assert (req.responder_resources, req.initiator_depth) == (0, 0)
    assert req.remote_cm_response_timeout == 20 and req.local_cm_response_timeout == 20
    assert req.transport_service_type == 0 and req.sprintf("%transport_service_type%") == "RC"
    assert req.starting_psn == 4182839
    assert (req.retry_count, req.rnr_retry_count, req.max_cm_retries) == (7, 7, 15)
    assert req.partition_key == 0xFFFF
    assert req.path_mtu == 3 and req.sprintf("%path_mtu%") == "1024"
    assert req.primary_local_port_gid == "::ffff:10.77.0.2"
    assert req.primary_remote_port_gid == "::ffff:10.77.0.1"
    assert req.primary_hop_limit == 64 and req.primary_local_ack_timeout == 19
    assert req.primary_flow_label == 0x02F14  # kernel CM_REQ_PRIMARY_FLOW_LABEL, CM+88
    cma = pkt[CmaIpHdr]
    assert (cma.cma_version, cma.ip_version, cma.port) == (0, 4, 34174)
    assert (cma.src, cma.dst) == ("10.77.0.2", "10.77.0.1")
    assert RtrsMsgConnReq in pkt
    assert bytes(pkt) == raw
    # CMA header at MAD 164, conn_req at MAD 200 (magic at 202)
    assert raw[MAD_AT + 164:MAD_AT + 166] == b"\x00\x40"
    assert raw[MAD_AT + 202:MAD_AT + 204] == b"\xbd\x1b"
    assert alone(pkt[RtrsMsgConnReq]) == raw[MAD_AT + 200:MAD_AT + 256]


@pytest.mark.parametrize("number, comm_id, qpn", [(4, 0xEE125B0D, 0x12), (7, 0xED125B0D, 0x13)])
def test_real_req_other_cids(number, comm_id, qpn):
    # basic_inval frames 4 and 7: REQs of cid 1 and 2
    raw, pkt = real_frame("basic_inval", number)
    assert pkt[CMReq].local_comm_id == comm_id and pkt[CMReq].local_qpn == qpn
    assert bytes(pkt) == raw


def test_real_rep():
    # basic_inval frame 2: CM REP for cid 0
    raw, pkt = real_frame("basic_inval", 2)
    assert pkt[MAD].attribute_id == 0x0013
    # REP reuses the REQ's TID (docs/PROTOCOL.md#cm-mads)
    assert pkt[MAD].transaction_id == 0x000000020D5B12EF
    rep = pkt[CMRep]
    assert (rep.local_comm_id, rep.remote_comm_id) == (0xBE098478, 0xEF125B0D)
    assert rep.local_qpn == 0x11
    assert rep.starting_psn == 6030447
    assert rep.target_ack_delay == 15 and rep.rnr_retry_count == 7
    assert rep.local_ca_guid == 0x505400FFFE770001
    # REP private data starts directly with conn_rsp at MAD 60 (docs/PROTOCOL.md#conn_rsp)
    assert alone(pkt[RtrsMsgConnRsp]) == raw[MAD_AT + 60:MAD_AT + 116]
    assert len(bytes(rep.payload)) == 196
    assert bytes(pkt) == raw


def test_real_rtu():
    # basic_inval frame 3
    raw, pkt = real_frame("basic_inval", 3)
    rtu = pkt[CMRtu]
    assert (rtu.local_comm_id, rtu.remote_comm_id) == (0xEF125B0D, 0xBE098478)
    assert bytes(rtu.payload) == b"\0" * 224
    assert bytes(pkt) == raw


def test_real_dreq_and_drep():
    # basic_inval frames 1553 (DREQ from the client, cid 0) and 1556 (DREP from the server)
    raw, pkt = real_frame("basic_inval", 1553)
    dreq = pkt[CMDreq]
    assert pkt[MAD].attribute_id == 0x0015
    assert (dreq.local_comm_id, dreq.remote_comm_id, dreq.remote_qpn) == (0xEF125B0D,
                                                                          0xBE098478, 0x11)
    assert len(bytes(dreq.payload)) == 220
    assert bytes(pkt) == raw
    raw, pkt = real_frame("basic_inval", 1556)
    drep = pkt[CMDrep]
    assert pkt[MAD].attribute_id == 0x0016
    assert (drep.local_comm_id, drep.remote_comm_id) == (0xBE098478, 0xEF125B0D)
    assert bytes(pkt) == raw


def test_every_cm_message_is_a_256_byte_mad():
    for cls, size in ((CMReq, 92), (CMRep, 196), (CMRej, 148), (CMRtu, 224), (CMDreq, 220),
                      (CMDrep, 224), (CMMra, 222)):
        wire = bytes(MAD() / cls())
        assert len(wire) == 256, cls.__name__
        assert cls.private_data_size == size
        assert len(bytes(cls())) == 232, cls.__name__


def test_mad_attribute_ids_set_by_the_message():
    ids = {CMReq: 0x10, CMMra: 0x11, CMRej: 0x12, CMRep: 0x13, CMRtu: 0x14, CMDreq: 0x15,
           CMDrep: 0x16}
    for cls, attr in ids.items():
        pkt = MAD(bytes(MAD(transaction_id=1) / cls()))
        assert pkt.attribute_id == attr and pkt.mgmt_class == 7
        assert isinstance(pkt.payload, cls)


def test_rej_with_conn_rsp_errno():
    # REJ reason 28 "consumer defined", conn_rsp.errno -104 as LE bytes 98 FF at MAD 112
    # (docs/PROTOCOL.md#conn_rsp)
    mad = (MAD(transaction_id=0x20D5B12EF)
           / CMRej(local_comm_id=0xBE098478, remote_comm_id=0xEF125B0D, message_rejected=0,
                   reason=28)
           / RtrsMsgConnRsp(errno=-104, queue_depth=0, max_io_size=0, max_hdr_size=0, flags=0))
    wire = bytes(mad)
    assert len(wire) == 256
    assert wire[34:36] == b"\x00\x1c"  # reason at MAD 34, BE
    assert wire[108:110] == b"\xbd\x1b"  # conn_rsp magic at MAD 108
    assert wire[112:114] == b"\x98\xff"
    pkt = MAD(wire)
    assert pkt[CMRej].reason == 28 and pkt[CMRej].sprintf("%reason%") == "Consumer Reject"
    assert pkt[RtrsMsgConnRsp].errno == -104
    assert bytes(pkt) == wire


def test_rej_without_rtrs_data():
    # REJ reason 8 (no listener) with all-zero private data: no conn_rsp
    # (docs/PROTOCOL.md#cm-rep-rej-rtu-dreq-drep-and-mra)
    pkt = MAD(bytes(MAD() / CMRej(reason=8)))
    assert pkt[CMRej].sprintf("%reason%") == "Invalid Service ID"
    assert RtrsMsgConnRsp not in pkt


def test_mra_round_trip():
    wire = bytes(MAD(transaction_id=5) / CMMra(local_comm_id=1, remote_comm_id=2,
                                               message_mraed=1, service_timeout=20))
    pkt = MAD(wire)
    mra = pkt[CMMra]
    assert (mra.local_comm_id, mra.remote_comm_id, mra.message_mraed, mra.service_timeout) == (
        1, 2, 1, 20)
    assert wire[24 + 8] == 0x40 and wire[24 + 9] == 20 << 3  # CM+8 bits 7..6, CM+9 bits 7..3
    assert bytes(pkt) == wire


def test_req_round_trip_non_default():
    req = CMReq(local_comm_id=0x11223344, vendor_id=0x123456, service_id=service_id(4321),
                local_ca_guid=0x0102030405060708, local_qkey=0x55, local_qpn=0xABCDEF,
                responder_resources=4, local_eecn=0x10, initiator_depth=3, remote_eecn=0x20,
                remote_cm_response_timeout=18, transport_service_type=1,
                end_to_end_flow_control=1, starting_psn=0xFEDCBA, local_cm_response_timeout=17,
                retry_count=5, partition_key=0x8001, path_mtu=5, rdc_exists=1,
                rnr_retry_count=6, max_cm_retries=14, srq=1, extended_transport_type=2,
                primary_local_port_lid=0x10, primary_remote_port_lid=0x20,
                primary_local_port_gid="fe80::1", primary_remote_port_gid="fe80::2",
                primary_flow_label=0xABCDE, primary_packet_rate=3, primary_traffic_class=0x20,
                primary_hop_limit=2, primary_sl=5, primary_subnet_local=1,
                primary_local_ack_timeout=14, alternate_local_port_lid=7)
    wire = bytes(MAD() / req)
    # spot checks of docs/PROTOCOL.md#cm-req offsets (MAD = CM + 24)
    assert wire[56:59] == b"\xab\xcd\xef" and wire[59] == 4
    assert wire[67] == (18 << 3) | (1 << 1) | 1
    assert wire[68:71] == b"\xfe\xdc\xba" and wire[71] == (17 << 3) | 5
    assert wire[74] == (5 << 4) | (1 << 3) | 6 and wire[75] == (14 << 4) | (1 << 3) | 2
    assert wire[112:116] == bytes.fromhex("abcde003")  # flow label 20 bits | rate 6 bits
    decoded = MAD(wire)[CMReq]
    for field in req.fields_desc:
        assert decoded.getfieldval(field.name) == req.getfieldval(field.name), field.name
    assert bytes(MAD(wire)) == wire


@pytest.mark.parametrize("cls, fields", [
    (CMRep, dict(local_comm_id=1, remote_comm_id=2, local_qkey=3, local_qpn=0x123456,
                 vendor_id_high=0x0A, local_eecn=5, vendor_id_mid=0x0B, starting_psn=0x654321,
                 vendor_id_low=0x0C, responder_resources=1, initiator_depth=2,
                 target_ack_delay=9, failover_accepted=1, end_to_end_flow_control=1,
                 rnr_retry_count=3, srq=1, local_ca_guid=0x99)),
    (CMRej, dict(local_comm_id=1, remote_comm_id=2, message_rejected=1, reject_info_length=5,
                 reason=26, additional_reject_information=b"\x01" * 72)),
    (CMRtu, dict(local_comm_id=0xAAAA5555, remote_comm_id=0x5555AAAA)),
    (CMDreq, dict(local_comm_id=1, remote_comm_id=2, remote_qpn=0xABCDEF)),
    (CMDrep, dict(local_comm_id=3, remote_comm_id=4)),
])
def test_cm_round_trip_non_default(cls, fields):
    wire = bytes(MAD() / cls(**fields))
    decoded = MAD(wire)[cls]
    for name, value in fields.items():
        assert decoded.getfieldval(name) == value, name
    assert bytes(MAD(wire)) == wire


def test_rep_offsets():
    wire = bytes(MAD() / CMRep(local_qpn=0x123456, starting_psn=0x654321))
    assert wire[36:39] == b"\x12\x34\x56" and wire[44:47] == b"\x65\x43\x21"


def test_cma_header_ipv6_round_trip():
    cma = CmaIpHdr(ip_version=6, port=0xC001, src_addr="fd00::2", dst_addr="fd00::1")
    wire = bytes(cma)
    assert len(wire) == 36 and wire[1] == 0x60
    decoded = CmaIpHdr(wire)
    assert (decoded.ip_version, decoded.port, decoded.src, decoded.dst) == (
        6, 0xC001, "fd00::2", "fd00::1")


def test_af_ib_req_has_no_cma_header():
    # AF_IB service ID -> conn_req directly at REQ private-data offset 0 (MAD 164)
    # (docs/PROTOCOL.md#rdma-cm-service-id-and-ip-header)
    sid = AF_IB_SERVICE_ID | 1234
    assert sid == 0x00000000013F04D2 and not is_ip_service_id(sid)
    assert is_ip_service_id(service_id(1234))
    wire = bytes(MAD() / CMReq(service_id=sid) / RtrsMsgConnReq(cid=2, cid_num=3))
    assert wire[166:168] == b"\xbd\x1b"
    pkt = MAD(wire)
    assert CmaIpHdr not in pkt and pkt[RtrsMsgConnReq].cid == 2


def test_whole_cm_frame_builds_with_icrc():
    from scapy.layers.inet import IP, UDP
    frame = (Ether() / IP(src="10.77.0.2", dst="10.77.0.1") / UDP(sport=0xC000, dport=4791)
             / BTH(psn=3) / DETH() / MAD(transaction_id=9) / CMRtu(local_comm_id=1))
    wire = bytes(frame)
    assert len(wire) == 322  # docs/PROTOCOL.md#cm-mads
    pkt = Ether(wire)
    assert pkt[BTH].opcode == 0x64 and pkt[BTH].dqpn == 1
    assert pkt[DETH].qkey == 0x80010000 and pkt[DETH].src_qp == 1
    assert icrc_ok(pkt) is True
    assert isinstance(pkt[CMRtu].payload, Raw)
