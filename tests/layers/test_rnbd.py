"""RNBD layers (rtrs_scapy/layers/rnbd.py) against docs/PROTOCOL.md#rnbd and the real
RNBD messages of the kernel captures, cross-checked with truth.json."""

import functools
import zlib

import pytest
from scapy.packet import Raw

from conftest import real_frame, real_truth
from rtrs_scapy.spec.constants import rnbd_rw_str
from rtrs_scapy.layers.ib import RETH
from rtrs_scapy.layers.rnbd import (
    RnbdMsgClose, RnbdMsgHdr, RnbdMsgIo, RnbdMsgOpen, RnbdMsgOpenRsp, RnbdMsgSessInfo,
    RnbdMsgSessInfoRsp, reply_class,
)
from rtrs_scapy.layers.rtrs_request import RtrsReadRequest, RtrsRequest, RtrsWriteRequest


@functools.lru_cache(maxsize=None)
def truth(capture):
    return real_truth(capture)


# -- sizes (docs/PROTOCOL.md#rnbd-messages)

@pytest.mark.parametrize("cls, size", [
    (RnbdMsgHdr, 4), (RnbdMsgSessInfo, 36), (RnbdMsgSessInfoRsp, 36), (RnbdMsgOpen, 264),
    (RnbdMsgOpenRsp, 56), (RnbdMsgClose, 8), (RnbdMsgIo, 32),
], ids=lambda v: v if isinstance(v, int) else v.__name__)
def test_sizes(cls, size):
    assert len(bytes(cls())) == size


@pytest.mark.parametrize("cls, kind", [
    (RnbdMsgSessInfo, 0), (RnbdMsgSessInfoRsp, 1), (RnbdMsgOpen, 2), (RnbdMsgOpenRsp, 3),
    (RnbdMsgIo, 4), (RnbdMsgClose, 5),
])
def test_type_and_dispatch(cls, kind):
    wire = bytes(cls())
    assert wire[:2] == bytes([kind, 0])
    assert type(RnbdMsgHdr(wire)) is cls


# -- rw (docs/PROTOCOL.md#the-rw-field)

@pytest.mark.parametrize("rw, text", [
    (0x000, "READ"), (0x001, "WRITE"), (0x101, "WRITE|SYNC"), (0x301, "WRITE|SYNC|FUA"),
    (0x002, "FLUSH"), (0x003, "DISCARD"), (0x004, "SECURE_ERASE"), (0x005, "WRITE_ZEROES"),
    (0x100, "READ|SYNC"), (0x805, "WRITE_ZEROES|NOUNMAP"),
])
def test_rw_names(rw, text):
    assert rnbd_rw_str(rw) == text
    io = RnbdMsgIo(rw=rw)
    assert io.get_field("rw").i2repr(io, rw) == "0x%x (%s)" % (rw, text)


def test_rw_shown_as_write_sync_fua():
    shown = RnbdMsgIo(rw=0x301).show(dump=True)
    assert "rw        = 0x301 (WRITE|SYNC|FUA)" in shown


# -- real messages ----------------------------------------------------------------

def test_real_sess_info():
    # pcaps/real/basic_inval.pcap frame 22: SESS_INFO, ver 2
    raw, pkt = real_frame("basic_inval", 22)
    msg = pkt[RtrsReadRequest].usr
    assert isinstance(msg, RnbdMsgSessInfo) and msg.type == 0 and msg.ver == 2
    assert bytes(msg) == raw[42 + 12 + 16 + 4:][:36]


def test_real_sess_info_rsp():
    # basic_inval frame 24: the server's RDMA WRITE ONLY of READ data = sess_info_rsp
    raw, pkt = real_frame("basic_inval", 24)
    msg = pkt[RnbdMsgSessInfoRsp]
    assert msg.type == 1 and msg.ver == 2
    assert pkt[RETH].dma_len == 36
    assert bytes(pkt) == raw


def test_real_open():
    # basic_inval frame 30: OPEN of the device mapped in truth.json, read-write
    _, pkt = real_frame("basic_inval", 30)
    msg = pkt[RtrsReadRequest].usr
    assert isinstance(msg, RnbdMsgOpen)
    assert msg.access_mode == 1 and msg.sprintf("%access_mode%") == "RNBD_ACCESS_RW"
    assert msg.dev_name.rstrip(b"\0") == b"/dev/ram0"
    assert msg.sprintf("%dev_name%") == "'/dev/ram0'"
    assert "device_path=/dev/ram0" in truth("basic_inval")["maps"][0]["opts"]


@pytest.mark.parametrize("capture, number", [("basic_inval", 32), ("basic_noinval", 24)])
def test_real_open_rsp(capture, number):
    # the server's open_rsp (RDMA WRITE ONLY, 56 B), checked against the client's sysfs
    raw, pkt = real_frame(capture, number)
    rsp = pkt[RnbdMsgOpenRsp]
    sysfs = truth(capture)["sysfs"]["client"]["client.dev.rnbd0"]
    assert rsp.type == 3 and rsp.device_id == 0
    assert rsp.nsectors == int(sysfs["/sys/block/rnbd0/size"]) == 131072
    assert rsp.logical_block_size == int(sysfs["/sys/block/rnbd0/queue/logical_block_size"])
    assert rsp.max_segments == int(sysfs["/sys/block/rnbd0/queue/max_segments"])
    assert rsp.physical_block_size == 4096 and rsp.max_hw_sectors == 255
    assert rsp.max_write_zeroes_sectors == 0  # 6.1 server (docs/PROTOCOL.md#kernel-versions)
    assert rsp.obsolete_rotational == 0 and rsp.cache_policy == 0
    assert reply_class(bytes(rsp)) is RnbdMsgOpenRsp
    assert bytes(pkt) == raw


def test_real_close():
    # basic_inval frame 1549: CLOSE of device 0 at unmap
    _, pkt = real_frame("basic_inval", 1549)
    msg = pkt[RtrsWriteRequest].usr
    assert isinstance(msg, RnbdMsgClose) and msg.device_id == 0


def test_real_io_read():
    # basic_inval frame 38: 4 KiB read (READ|SYNC) on cid 2, class BE prio
    _, pkt = real_frame("basic_inval", 38)
    io = pkt[RtrsReadRequest].usr
    assert isinstance(io, RnbdMsgIo)
    assert (io.device_id, io.sector, io.rw, io.bi_size) == (0, 0, 0x100, 4096)
    assert io.prio >> 13 == 2  # IOPRIO_CLASS_BE
    assert io.sprintf("%rw%") == "0x100 (READ|SYNC)"


def test_real_io_write_matches_truth():
    # basic_inval frames 71..75: the first workload write (truth ios[0]: off 0, 4096 B, crc)
    data = b"".join(real_frame("basic_inval", n)[1][Raw].load for n in range(71, 76))
    req = RtrsRequest(data)
    io = req.usr
    first = truth("basic_inval")["ios"][0]
    assert first["op"] == "write"
    assert io.sector * 512 == first["off"] and io.bi_size == first["size"] == len(req.data)
    assert io.rw & 0xFF == 1 and rnbd_rw_str(io.rw).startswith("WRITE")
    assert "%08x" % zlib.crc32(req.data) == first["crc"]
    assert bytes(io) == data[4096:4128]


# -- round trips with non-default values --------------------------------------------

ROUND_TRIPS = [
    RnbdMsgSessInfo(ver=1),
    RnbdMsgSessInfoRsp(ver=1),
    RnbdMsgOpen(access_mode=2, dev_name=b"nvme0n1".ljust(255, b"\0")),
    RnbdMsgOpenRsp(device_id=7, nsectors=1 << 40, max_hw_sectors=2048,
                   max_write_zeroes_sectors=65535, max_discard_sectors=8388607,
                   discard_granularity=4096, discard_alignment=512, physical_block_size=4096,
                   logical_block_size=4096, max_segments=256, secure_discard=1,
                   obsolete_rotational=1, cache_policy=3),
    RnbdMsgClose(device_id=42),
    RnbdMsgIo(device_id=3, sector=0x123456789, rw=0x301, bi_size=131072, prio=0x6007,
              **{"__padding": 0xBEEF, "__tail_padding": b"garbag"}),
]


@pytest.mark.parametrize("layer", ROUND_TRIPS, ids=lambda l: type(l).__name__)
def test_round_trip_non_default(layer):
    wire = bytes(layer)
    decoded = RnbdMsgHdr(wire)
    assert type(decoded) is type(layer)
    for field in layer.fields_desc:
        assert decoded.getfieldval(field.name) == layer.getfieldval(field.name), field.name
    assert bytes(decoded) == wire


def test_io_offsets():
    wire = bytes(ROUND_TRIPS[-1])
    assert wire[4:8] == (3).to_bytes(4, "little")
    assert wire[8:16] == (0x123456789).to_bytes(8, "little")
    assert wire[16:20] == bytes.fromhex("01030000")
    assert wire[20:24] == (131072).to_bytes(4, "little")
    assert wire[24:26] == (0x6007).to_bytes(2, "little")


def test_open_rsp_cache_policy_offset_45():
    wire = bytes(RnbdMsgOpenRsp(cache_policy=2, obsolete_rotational=1))
    assert wire[44] == 1 and wire[45] == 2
    assert RnbdMsgOpenRsp(wire).sprintf("%cache_policy%") == "RNBD_WRITEBACK"


def test_reply_class_needs_exact_size():
    assert reply_class(bytes(RnbdMsgSessInfoRsp())) is RnbdMsgSessInfoRsp
    assert reply_class(bytes(RnbdMsgSessInfoRsp()) + b"\0") is None
    assert reply_class(bytes(RnbdMsgOpenRsp())[:55]) is None
