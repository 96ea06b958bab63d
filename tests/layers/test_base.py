"""layers/base.py: header fields read without Scapy objects, at the offsets Scapy
itself builds them (the layers' own measure, below the layout IR)."""

import pytest

from conftest import real_frame
from rtrs_scapy.layers.base import field_reader, fixed_size
from rtrs_scapy.layers.cm import MAD
from rtrs_scapy.layers.ib import ImmDt
from rtrs_scapy.layers.rtrs import RtrsMsgConnReq, RtrsMsgInfoRsp, RtrsMsgRdmaRead
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
