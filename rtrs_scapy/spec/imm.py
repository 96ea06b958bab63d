"""The 32-bit RDMA immediate of RTRS: encode and decode, no Scapy
(docs/PROTOCOL.md#immediate-data).

The immediate travels big-endian in the ImmDt header; bits 31..28 hold the type.
IO_REQ carries (buf_id << mem_bits) | offset, where mem_bits depends on the
session's queue depth; IO_RSP/IO_RSP_W_INV carry a 9-bit errno magnitude and a
19-bit msg_id; heartbeats carry nothing.
"""

from dataclasses import dataclass
from typing import Optional

from .constants import (
    RTRS_HB_ACK_IMM, RTRS_HB_MSG_IMM, RTRS_IO_REQ_IMM, RTRS_IO_RSP_IMM,
    RTRS_IO_RSP_W_INV_IMM, errno_name, rtrs_imm_types,
)

IMM_TYPE_SHIFT = 28
IMM_PAYLOAD_MASK = (1 << IMM_TYPE_SHIFT) - 1
MSG_ID_BITS = 19
MSG_ID_MASK = (1 << MSG_ID_BITS) - 1
ERRNO_MASK = 0x1FF


def chunk_bits(queue_depth):
    """ilog2(queue_depth - 1) + 1 in the kernel; 0 for a queue depth of 1
    (docs/PROTOCOL.md#io_req-buf_id-and-offset)."""
    if queue_depth < 1:
        raise ValueError("queue_depth must be >= 1")
    return (queue_depth - 1).bit_length()


def mem_bits(queue_depth):
    """Offset bits of an IO_REQ immediate for this queue depth (qd 512 -> 19)."""
    return IMM_TYPE_SHIFT - chunk_bits(queue_depth)


def imm_type(imm):
    return (imm >> IMM_TYPE_SHIFT) & 0xF


def imm_payload(imm):
    return imm & IMM_PAYLOAD_MASK


def encode_io_req(buf_id, offset, queue_depth):
    bits = mem_bits(queue_depth)
    if not 0 <= buf_id < (1 << (IMM_TYPE_SHIFT - bits)) or buf_id >= queue_depth:
        raise ValueError("buf_id %d out of range for queue depth %d" % (buf_id, queue_depth))
    if not 0 <= offset < (1 << bits):
        raise ValueError("offset %d does not fit %d bits" % (offset, bits))
    return (RTRS_IO_REQ_IMM << IMM_TYPE_SHIFT) | (buf_id << bits) | offset


def encode_io_rsp(msg_id, errno=0, with_invalidate=False):
    """errno may be given negative (kernel style) or positive; only 9 bits survive
    (docs/PROTOCOL.md#io_rsp-and-io_rsp_w_inv)."""
    kind = RTRS_IO_RSP_W_INV_IMM if with_invalidate else RTRS_IO_RSP_IMM
    payload = ((abs(errno) & ERRNO_MASK) << MSG_ID_BITS) | (msg_id & MSG_ID_MASK)
    return (kind << IMM_TYPE_SHIFT) | payload


def encode_hb(ack=False):
    return (RTRS_HB_ACK_IMM if ack else RTRS_HB_MSG_IMM) << IMM_TYPE_SHIFT


@dataclass(frozen=True)
class Imm:
    """A decoded immediate.  Fields that the type does not carry are None."""
    raw: int
    type: int
    buf_id: Optional[int] = None     # IO_REQ, needs the queue depth
    offset: Optional[int] = None     # IO_REQ, needs the queue depth
    msg_id: Optional[int] = None     # IO_RSP / IO_RSP_W_INV
    errno: Optional[int] = None      # IO_RSP / IO_RSP_W_INV, negative like the kernel

    @property
    def type_name(self):
        return rtrs_imm_types.get(self.type, "UNKNOWN(%d)" % self.type)

    @property
    def known(self):
        return self.type in rtrs_imm_types

    def describe(self):
        short = self.type_name.replace("RTRS_", "").replace("_IMM", "")
        if self.type == RTRS_IO_REQ_IMM:
            if self.buf_id is None:
                return "%s payload 0x%07x (queue depth unknown)" % (short, imm_payload(self.raw))
            return "%s buf_id %d offset %d" % (short, self.buf_id, self.offset)
        if self.msg_id is not None:
            return "%s msg_id %d errno %d (%s)" % (short, self.msg_id, self.errno,
                                                   errno_name(self.errno))
        return short


def decode(imm, queue_depth=None):
    """Decode an immediate; IO_REQ buf_id/offset only when queue_depth is given."""
    kind = imm_type(imm)
    payload = imm_payload(imm)
    if kind == RTRS_IO_REQ_IMM:
        if queue_depth is None:
            return Imm(imm, kind)
        bits = mem_bits(queue_depth)
        return Imm(imm, kind, buf_id=payload >> bits, offset=payload & ((1 << bits) - 1))
    if kind in (RTRS_IO_RSP_IMM, RTRS_IO_RSP_W_INV_IMM):
        return Imm(imm, kind, msg_id=payload & MSG_ID_MASK,
                   errno=-((payload >> MSG_ID_BITS) & ERRNO_MASK))
    return Imm(imm, kind)
