"""What IO messages say, read a row at a time in compiled code: each row's kind, an IO
request's RTRS trailer and RNBD header, an IO response's immediate and rkey_rsp.

An IO request's message ends with its trailer (docs/PROTOCOL.md#request-trailers):
a WRITE with its RNBD header, then rtrs_msg_rdma_write; a READ with its RNBD header,
then rtrs_msg_rdma_read and its descriptors.  Which of them a request carries, where
the user header sits and what it says are a dozen conditional reads of a few bytes,
which as numpy columns cost a hundred passes over a batch (a tenth of the summary's
main thread on 3 M load packets); here they are one pass, 70–91 ns a request where
the numpy passes took 440–500.  A row's kind and a response's fields are as many
passes more, over every row of a batch.  analysis/decode.py tells what each column
means.  Every offset and size is read from the layouts (layout/wire.py) when this
module is imported.
"""

import numpy as np

from ..capture.jit import compiled, helper, prefetch
from ..layout.ir import LayoutError
from ..layout.plans import plan
from ..spec.constants import (DEFAULT_MAX_HDR_SIZE, RNBD_MSG_CLOSE, RNBD_MSG_IO, RNBD_OP_MASK,
                              RTRS_HB_ACK_IMM, RTRS_HB_MSG_IMM, RTRS_IO_REQ_IMM, RTRS_IO_RSP_IMM,
                              RTRS_IO_RSP_W_INV_IMM, RTRS_MSG_READ, RTRS_MSG_RKEY_RSP,
                              RTRS_MSG_WRITE)
from ..spec.imm import ERRNO_MASK, IMM_PAYLOAD_MASK, IMM_TYPE_SHIFT, MSG_ID_BITS, MSG_ID_MASK
from . import transport as T

# message kinds of a row
(K_REQUEST, K_RESPONSE, K_HB_MSG, K_HB_ACK, K_UNKNOWN_IMM, K_INVALIDATE, K_SEND, K_DATA) = range(8)


def _kind_of_type():
    """K_* of each immediate type (the immediate's top bits) up to the largest RTRS
    sends, then one entry for every type above: one look-up a row."""
    known = ((RTRS_IO_REQ_IMM, K_REQUEST), (RTRS_IO_RSP_IMM, K_RESPONSE),
             (RTRS_IO_RSP_W_INV_IMM, K_RESPONSE), (RTRS_HB_MSG_IMM, K_HB_MSG),
             (RTRS_HB_ACK_IMM, K_HB_ACK))
    table = np.full(max(value for value, _ in known) + 2, K_UNKNOWN_IMM, dtype=np.int64)
    for value, kind in known:
        table[value] = kind
    return table


KIND_OF_TYPE = _kind_of_type()

#: the columns of a decoded request, in ``decode_requests``' output rows
REQUEST_COLUMNS = ("op", "usr_len", "data_len", "offset", "sg_cnt", "desc_key", "desc_len", "desc_addr",
           "read_flags", "usr_at", "usr_seen", "rnbd_type", "device_id", "sector", "rw",
           "bi_size", "prio", "rnbd_op")
(OP, USR_LEN, DATA_LEN, OFFSET, SG_CNT, DESC_KEY, DESC_LEN, DESC_ADDR, READ_FLAGS, USR_AT,
 USR_SEEN, RNBD_TYPE, DEVICE_ID, SECTOR, RW, BI_SIZE, PRIO, RNBD_OP) = range(len(REQUEST_COLUMNS))
#: the columns of a decoded response, in ``decode_responses``' output rows (the flags 0/1)
RESPONSE_COLUMNS = ("msg_id", "errno", "with_invalidate", "rkey_rsp", "rkey_buf_id", "rkey")
(MSG_ID, ERRNO, WITH_INVALIDATE, RKEY_RSP, RKEY_BUF_ID, RKEY) = range(len(RESPONSE_COLUMNS))

#: a request's op: READ, WRITE, or HEADER_ONLY when the snaplen cut its trailer (its
#: immediate tells the op later); 0 when no trailer fits
READ, WRITE, HEADER_ONLY = 1, 2, 3


def _place(layout, name):
    """(offset, size) of an unsigned little-endian field of a layout."""
    spec = plan(layout).layout.field(name)
    if spec.kind != "uint" or spec.is_bits or (spec.size > 1 and spec.endian != "<"):
        raise LayoutError("%s.%s is no little-endian unsigned field" % (layout, name))
    return spec.offset, spec.size


WRITE_SIZE = plan("RtrsMsgRdmaWrite").size
WRITE_TYPE, WRITE_USR_LEN = (_place("RtrsMsgRdmaWrite", name) for name in ("type", "usr_len"))
READ_SIZE = plan("RtrsMsgRdmaRead").size
READ_TYPE, READ_USR_LEN, READ_FLAGS_AT, READ_SG_CNT = (
    _place("RtrsMsgRdmaRead", name) for name in ("type", "usr_len", "flags", "sg_cnt"))
DESC_SIZE = plan("RtrsSgDesc").size
DESC_ADDR_AT, DESC_KEY_AT, DESC_LEN_AT = (_place("RtrsSgDesc", name)
                                          for name in ("addr", "key", "len"))
HDR_SIZE = plan("RnbdMsgHdr").size
HDR_TYPE = _place("RnbdMsgHdr", "type")
IO_DEVICE, IO_SECTOR, IO_RW, IO_BI_SIZE, IO_PRIO = (
    _place("RnbdMsgIo", name) for name in ("device_id", "sector", "rw", "bi_size", "prio"))
CLOSE_DEVICE = _place("RnbdMsgClose", "device_id")
RKEY_RSP_SIZE = plan("RtrsMsgRkeyRsp").size
RKEY_TYPE, RKEY_BUF_ID_AT, RKEY_AT = (_place("RtrsMsgRkeyRsp", name)
                                      for name in ("type", "buf_id", "rkey"))
#: the bytes at the end of a request read for an IO: its RNBD header and the longer trailer
LAST_BYTES = plan("RnbdMsgIo").size + READ_SIZE + DESC_SIZE
#: rows ahead whose last bytes are asked of the memory system: the transport wrote them
#: a batch ago, and the cache has let most go since (a row's decode waited on them)
AHEAD = 8


@helper
def _le(arena, at, place):
    """The field at ``place`` (offset, size) of the structure at ``at``; a field of 8
    bytes gives its bits (above 2**63: negative)."""
    p, value = at + place[0], np.uint64(0)
    for k in range(place[1]):
        value |= np.uint64(arena[p + k]) << np.uint64(8 * k)
    return np.int64(value)


@helper
def _if_seen(arena, at, seen, place):
    """The field at ``place`` of the user header at ``at`` when the ``seen`` bytes of it
    hold all of it, else 0."""
    return _le(arena, at, place) if seen >= place[0] + place[1] else 0


@compiled
def decode_requests(rows, arena, out):
    """The REQUEST_COLUMNS of each request row (transport.R_*), its bytes in ``arena``, into
    ``out[:, i]``."""
    n = rows.shape[0]
    for i in range(n):
        if i + AHEAD < n:
            end = rows[i + AHEAD, T.R_TAIL_OFF] + rows[i + AHEAD, T.R_TAIL_LEN]
            prefetch(arena, end - 1)
            prefetch(arena, end - LAST_BYTES)
        length, tlen = rows[i, T.R_LEN], rows[i, T.R_TAIL_LEN]
        tend = rows[i, T.R_TAIL_OFF] + tlen
        partial = rows[i, T.R_PARTIAL] != 0
        # READ: usr | rtrs_msg_rdma_read | sg_cnt descriptors (1 or 0) end the message
        is_read, usr_len, sg_cnt, read_at = False, 0, 0, 0
        for count in range(1, -1, -1):
            size = READ_SIZE + DESC_SIZE * count
            at = tend - size
            if (not partial and length >= size and tlen >= size
                    and _le(arena, at, READ_TYPE) == RTRS_MSG_READ
                    and _le(arena, at, READ_USR_LEN) == length - size
                    and _le(arena, at, READ_SG_CNT) == count):
                is_read, usr_len, sg_cnt, read_at = True, length - size, count, at
                break
        desc_key, desc_len, desc_addr, read_flags = -1, 0, 0, 0
        if is_read:
            read_flags = _le(arena, read_at, READ_FLAGS_AT)
            if sg_cnt:
                desc_at = read_at + READ_SIZE
                desc_key = _le(arena, desc_at, DESC_KEY_AT)
                desc_len = _le(arena, desc_at, DESC_LEN_AT)
                desc_addr = _le(arena, desc_at, DESC_ADDR_AT)
        # WRITE: ... usr | rtrs_msg_rdma_write at the very end
        write_at, wusr, is_write = tend - WRITE_SIZE, 0, False
        if not is_read and tlen >= WRITE_SIZE:
            wusr = _le(arena, write_at, WRITE_USR_LEN)
            fits = wusr < DEFAULT_MAX_HDR_SIZE if partial else wusr <= length - WRITE_SIZE
            is_write = fits and _le(arena, write_at, WRITE_TYPE) == RTRS_MSG_WRITE
        if is_read:
            op, usr_at, data_len, offset = READ, read_at - usr_len, desc_len, usr_len + desc_len
            usr_seen = usr_len if tlen == length else 0   # all of it kept, or none read
        else:
            usr_at, usr_seen, data_len, offset = write_at - wusr, 0, 0, -1
            if is_write:
                op, usr_len, data_len = WRITE, wusr, length - WRITE_SIZE - wusr
                usr_seen = wusr if wusr <= tlen - WRITE_SIZE else 0
                offset = -1 if partial else length - WRITE_SIZE
            else:
                op = HEADER_ONLY if rows[i, T.R_CUT] > 0 else 0
        column = out[:, i]
        column[OP], column[USR_LEN], column[DATA_LEN], column[OFFSET] = op, usr_len, data_len, \
            offset
        column[SG_CNT], column[DESC_KEY], column[DESC_LEN], column[DESC_ADDR] = \
            sg_cnt, desc_key, desc_len, desc_addr
        column[READ_FLAGS], column[USR_AT], column[USR_SEEN] = read_flags, usr_at, usr_seen
        _rnbd(arena, usr_at, usr_seen, column)


@helper
def _rnbd(arena, at, seen, column):
    """The RNBD header's type, the IO fields of RNBD_MSG_IO and the device of
    RNBD_MSG_CLOSE (a field beyond the bytes seen reads 0; device_id -1 for other
    messages, rnbd_op -1 for all but IO)."""
    kind = _le(arena, at, HDR_TYPE) if seen >= HDR_SIZE else -1
    column[RNBD_TYPE] = kind
    column[DEVICE_ID], column[RNBD_OP] = -1, -1
    column[SECTOR], column[RW], column[BI_SIZE], column[PRIO] = 0, 0, 0, 0
    if kind == RNBD_MSG_IO:
        column[DEVICE_ID] = _if_seen(arena, at, seen, IO_DEVICE)
        column[SECTOR] = _if_seen(arena, at, seen, IO_SECTOR)
        column[RW] = _if_seen(arena, at, seen, IO_RW)
        column[BI_SIZE] = _if_seen(arena, at, seen, IO_BI_SIZE)
        column[PRIO] = _if_seen(arena, at, seen, IO_PRIO)
        column[RNBD_OP] = column[RW] & RNBD_OP_MASK
    elif kind == RNBD_MSG_CLOSE and seen >= CLOSE_DEVICE[0] + CLOSE_DEVICE[1]:
        column[DEVICE_ID] = _le(arena, at, CLOSE_DEVICE)


@compiled
def message_kinds(rows, kind_of_type, kinds):
    """The kind (K_*) of each row into ``kinds``: its immediate's type (``kind_of_type``:
    KIND_OF_TYPE), or without one a SEND WITH INVALIDATE, another SEND, or data."""
    for i in range(rows.shape[0]):
        imm = rows[i, T.R_IMM]
        if imm >= 0:
            kinds[i] = kind_of_type[min(imm >> IMM_TYPE_SHIFT, kind_of_type.shape[0] - 1)]
        elif rows[i, T.R_IETH] >= 0:
            kinds[i] = K_INVALIDATE
        elif rows[i, T.R_SEND] == 1:
            kinds[i] = K_SEND
        else:
            kinds[i] = K_DATA


@compiled
def decode_responses(rows, arena, out):
    """The RESPONSE_COLUMNS of each response row into ``out[:, i]``: what its immediate
    names, and the rkey_rsp a SEND WITH IMMEDIATE carries (docs/PROTOCOL.md#rkey_rsp)."""
    for i in range(rows.shape[0]):
        imm = rows[i, T.R_IMM]
        payload = imm & IMM_PAYLOAD_MASK
        column = out[:, i]
        column[MSG_ID] = payload & MSG_ID_MASK
        column[ERRNO] = -((payload >> MSG_ID_BITS) & ERRNO_MASK)
        column[WITH_INVALIDATE] = (imm >> IMM_TYPE_SHIFT) == RTRS_IO_RSP_W_INV_IMM
        at = rows[i, T.R_HEAD_OFF]
        rkey = (rows[i, T.R_SEND] == 1 and rows[i, T.R_LEN] == RKEY_RSP_SIZE
                and rows[i, T.R_HEAD_LEN] >= RKEY_RSP_SIZE
                and _le(arena, at, RKEY_TYPE) == RTRS_MSG_RKEY_RSP)
        column[RKEY_RSP] = rkey
        column[RKEY_BUF_ID] = _le(arena, at, RKEY_BUF_ID_AT) if rkey else 0
        column[RKEY] = _le(arena, at, RKEY_AT) if rkey else 0
