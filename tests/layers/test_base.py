"""layers/base.py: header fields read without Scapy objects, at the offsets Scapy
itself builds them (the layers' own measure, below the layout IR)."""

import pytest
from scapy.layers.inet import IP
from scapy.layers.inet6 import IPv6

from conftest import real_frame
from rtrs_scapy.layers.base import field_bits, field_reader, field_writer, fixed_size
from rtrs_scapy.layers.cm import MAD
from rtrs_scapy.layers.ib import BTH, ImmDt
from rtrs_scapy.layers.rtrs import RtrsMsgConnReq, RtrsMsgInfoRsp, RtrsMsgRdmaRead, RtrsSgDesc
from rtrs_scapy.layers.rtrs_request import RtrsReadRequest


def test_fixed_size_leaves_counted_lists_empty():
    assert fixed_size(RtrsMsgInfoRsp) == 8 and fixed_size(RtrsMsgRdmaRead) == 8
    assert fixed_size(MAD) == 24


def test_reader_equals_scapy_on_a_real_read_trailer():
    # basic_inval frame 22: RNBD SESS_INFO as an RTRS READ, usr_len 36, one descriptor
    _, pkt = real_frame("basic_inval", 22)
    payload = bytes(pkt[ImmDt].payload)
    trailer = pkt[RtrsReadRequest].trailer
    read = field_reader(RtrsMsgRdmaRead, "type", "usr_len", "sg_cnt")
    assert read(payload, 36) == (trailer.type, trailer.usr_len, trailer.sg_cnt) == (3, 36, 1)


def test_reader_after_a_bit_group():
    # conn_req: magic after two bytes, sess_uuid after the counters; first_conn is a bit
    req = RtrsMsgConnReq(cid=2, cid_num=3, recon_cnt=7)
    assert field_reader(RtrsMsgConnReq, "magic", "cid", "recon_cnt")(bytes(req), 0) == \
        (0x1BBD, 2, 7)


@pytest.mark.parametrize("cls, names", [
    (RtrsMsgRdmaRead, ("usr_len", "type")),   # out of wire order
    (RtrsMsgRdmaRead, ("flags",)),            # a little-endian FlagsField (bits)
    (RtrsMsgConnReq, ("first_conn",)),        # a bit inside a byte
    (RtrsMsgConnReq, ("sess_uuid",)),         # not an integer
])
def test_reader_refuses_what_it_cannot_read(cls, names):
    with pytest.raises((ValueError, KeyError)):
        field_reader(cls, *names)


def test_field_bits_where_the_rfcs_put_them():
    # RFC 791: TOS in byte 1, TTL in byte 8, the header checksum in bytes 10-11;
    # RFC 8200: traffic class after the 4-bit version, the 20-bit flow label after it
    ip, ipv6 = field_bits(IP), field_bits(IPv6)
    assert (ip["tos"], ip["ttl"], ip["chksum"]) == ((8, 8), (64, 8), (80, 16))
    assert (ipv6["tc"], ipv6["fl"], ipv6["hlim"]) == ((4, 8), (12, 20), (56, 8))
    # the BTH's byte 4 (docs/PROTOCOL.md#base-transport-header): FECN, BECN, 6 reserved
    bth = field_bits(BTH)
    assert (bth["fecn"], bth["becn"], bth["resv6"]) == ((32, 1), (33, 1), (34, 6))


def test_field_writer_equals_scapy():
    write = field_writer(RtrsSgDesc)
    assert write(0x1122334455667788, 0xABCD, 4096) == \
        bytes(RtrsSgDesc(addr=0x1122334455667788, key=0xABCD, len=4096))
    with pytest.raises(ValueError):
        field_writer(RtrsMsgConnReq)   # a bit group and a UUID: no struct of integers
