"""The RTRS immediate codec against the worked examples of
docs/PROTOCOL.md#io_req-buf_id-and-offset and docs/PROTOCOL.md#io_rsp-and-io_rsp_w_inv."""

import pytest

from rtrs_scapy.spec import imm
from rtrs_scapy.spec.constants import (
    RTRS_HB_ACK_IMM, RTRS_HB_MSG_IMM, RTRS_IO_REQ_IMM, RTRS_IO_RSP_IMM,
    RTRS_IO_RSP_W_INV_IMM,
)


# docs/PROTOCOL.md#io_req-buf_id-and-offset table: queue_depth -> (chunk_bits, mem_bits)
@pytest.mark.parametrize("queue_depth, chunk_bits, mem_bits", [
    (1, 0, 28), (64, 6, 22), (128, 7, 21), (256, 8, 20), (512, 9, 19),
    (513, 10, 18), (1024, 10, 18), (4096, 12, 16), (65535, 16, 12),
])
def test_mem_bits_table(queue_depth, chunk_bits, mem_bits):
    assert imm.chunk_bits(queue_depth) == chunk_bits
    assert imm.mem_bits(queue_depth) == mem_bits


@pytest.mark.parametrize("bad", [0, -1])
def test_mem_bits_rejects_empty_queue(bad):
    with pytest.raises(ValueError):
        imm.mem_bits(bad)


# worked examples (docs/PROTOCOL.md#io_req-buf_id-and-offset): RNBD 4 KiB write,
# usr_len 32 -> offset 4096 + 32 = 0x1020
IO_REQ_EXAMPLES = [
    (128, 5, 0x1020, 0x00A01020),
    (128, 127, 0x1020, 0x0FE01020),
    (512, 5, 0x1020, 0x00281020),
    (512, 511, 0x1020, 0x0FF81020),
]


@pytest.mark.parametrize("queue_depth, buf_id, offset, value", IO_REQ_EXAMPLES)
def test_io_req_encode(queue_depth, buf_id, offset, value):
    assert imm.encode_io_req(buf_id, offset, queue_depth) == value


@pytest.mark.parametrize("queue_depth, buf_id, offset, value", IO_REQ_EXAMPLES)
def test_io_req_decode_is_inverse(queue_depth, buf_id, offset, value):
    decoded = imm.decode(value, queue_depth)
    assert decoded.type == RTRS_IO_REQ_IMM
    assert decoded.type_name == "RTRS_IO_REQ_IMM"
    assert (decoded.buf_id, decoded.offset) == (buf_id, offset)
    assert decoded.msg_id is None and decoded.errno is None
    assert decoded.raw == value


def test_io_req_decode_without_queue_depth_keeps_payload_only():
    decoded = imm.decode(0x00281020)
    assert decoded.type == RTRS_IO_REQ_IMM
    assert decoded.buf_id is None and decoded.offset is None
    assert "queue depth unknown" in decoded.describe()


def test_io_req_describe():
    assert imm.decode(0x00281020, 512).describe() == "IO_REQ buf_id 5 offset 4128"


@pytest.mark.parametrize("buf_id, offset, queue_depth", [
    (512, 0, 512),            # buf_id == queue_depth
    (128, 0, 128),
    (-1, 0, 512),
    (0, 1 << 19, 512),        # offset needs 20 bits, qd 512 leaves 19
    (0, 1 << 21, 128),
    (0, -1, 512),
    (0, 0, 0),                # no queue
])
def test_io_req_out_of_range(buf_id, offset, queue_depth):
    with pytest.raises(ValueError):
        imm.encode_io_req(buf_id, offset, queue_depth)


def test_io_req_largest_offset_fits():
    assert imm.encode_io_req(0, (1 << 19) - 1, 512) == 0x0007FFFF
    assert imm.encode_io_req(0, (1 << 28) - 1, 1) == 0x0FFFFFFF


# docs/PROTOCOL.md#io_rsp-and-io_rsp_w_inv table
IO_RSP_EXAMPLES = [
    (5, 0, False, 0x10000005),
    (5, 0, True, 0x20000005),
    (5, -5, False, 0x10280005),     # EIO
    (5, -28, False, 0x10E00005),    # ENOSPC
    (5, -95, False, 0x12F80005),    # EOPNOTSUPP
]


@pytest.mark.parametrize("msg_id, errno, with_inv, value", IO_RSP_EXAMPLES)
def test_io_rsp_encode(msg_id, errno, with_inv, value):
    assert imm.encode_io_rsp(msg_id, errno, with_invalidate=with_inv) == value
    # positive errno magnitude gives the same immediate
    assert imm.encode_io_rsp(msg_id, -errno, with_invalidate=with_inv) == value


@pytest.mark.parametrize("msg_id, errno, with_inv, value", IO_RSP_EXAMPLES)
def test_io_rsp_decode_is_inverse(msg_id, errno, with_inv, value):
    decoded = imm.decode(value)
    assert decoded.type == (RTRS_IO_RSP_W_INV_IMM if with_inv else RTRS_IO_RSP_IMM)
    assert decoded.msg_id == msg_id
    assert decoded.errno == errno
    assert decoded.buf_id is None
    # the queue depth does not matter for responses
    assert imm.decode(value, 128) == decoded


def test_io_rsp_describe_names_errno():
    assert imm.decode(0x10280005).describe() == "IO_RSP msg_id 5 errno -5 (EIO)"
    assert imm.decode(0x20000005).describe() == "IO_RSP_W_INV msg_id 5 errno 0 (OK)"


def test_io_rsp_errno_truncated_to_9_bits():
    # ENOTSUPP (524) is truncated modulo 512 to 12, which looks like ENOMEM
    # (docs/PROTOCOL.md#io_rsp-and-io_rsp_w_inv)
    value = imm.encode_io_rsp(5, -524)
    assert value == imm.encode_io_rsp(5, -12)
    assert imm.decode(value).errno == -12


def test_io_rsp_largest_msg_id():
    value = imm.encode_io_rsp(0x7FFFF, -0x1FF)
    assert value == 0x1FFFFFFF
    decoded = imm.decode(value)
    assert (decoded.msg_id, decoded.errno) == (0x7FFFF, -511)


# docs/PROTOCOL.md#heartbeats
def test_heartbeats():
    assert imm.encode_hb() == 0x80000000
    assert imm.encode_hb(ack=True) == 0x90000000
    assert imm.decode(0x80000000).type == RTRS_HB_MSG_IMM
    assert imm.decode(0x90000000).type == RTRS_HB_ACK_IMM
    assert imm.decode(0x80000000).describe() == "HB_MSG"
    assert imm.decode(0x90000000).describe() == "HB_ACK"


@pytest.mark.parametrize("kind", [3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15])
def test_undefined_types_are_unknown(kind):
    decoded = imm.decode(kind << 28 | 0x1234)
    assert not decoded.known
    assert decoded.type == kind
    assert decoded.type_name == "UNKNOWN(%d)" % kind


@pytest.mark.parametrize("queue_depth", [1, 2, 3, 64, 128, 129, 512, 1000, 4096, 65535])
def test_io_req_round_trip_every_corner(queue_depth):
    bits = imm.mem_bits(queue_depth)
    for buf_id in {0, min(1, queue_depth - 1), queue_depth - 1}:
        for offset in {0, 1, (1 << bits) - 1}:
            value = imm.encode_io_req(buf_id, offset, queue_depth)
            assert value >> 28 == RTRS_IO_REQ_IMM
            decoded = imm.decode(value, queue_depth)
            assert (decoded.buf_id, decoded.offset) == (buf_id, offset)


# -- properties -------------------------------------------------------------------

from hypothesis import given, strategies as st  # noqa: E402


@st.composite
def io_reqs(draw):
    queue_depth = draw(st.integers(1, 65535))
    buf_id = draw(st.integers(0, queue_depth - 1))
    offset = draw(st.integers(0, (1 << imm.mem_bits(queue_depth)) - 1))
    return queue_depth, buf_id, offset


@given(io_reqs())
def test_io_req_round_trip_property(case):
    queue_depth, buf_id, offset = case
    value = imm.encode_io_req(buf_id, offset, queue_depth)
    assert 0 <= value < 1 << 28  # type 0
    decoded = imm.decode(value, queue_depth)
    assert (decoded.buf_id, decoded.offset) == (buf_id, offset)


@given(st.integers(0, 0x7FFFF), st.integers(0, 511), st.booleans())
def test_io_rsp_round_trip_property(msg_id, errno, with_inv):
    value = imm.encode_io_rsp(msg_id, -errno, with_invalidate=with_inv)
    decoded = imm.decode(value)
    assert (decoded.msg_id, decoded.errno) == (msg_id, -errno)
    assert decoded.type == (2 if with_inv else 1)
