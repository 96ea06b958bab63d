"""What completed messages say, decoded for many at once (numpy).

The transport hands over message rows with the bytes the analysis reads: the
tail of a request (docs/PROTOCOL.md#request-trailers: an RDMA WRITE request
ends with its RNBD header and the rtrs_msg_rdma_write trailer; a READ request
is the RNBD header followed by rtrs_msg_rdma_read and its descriptors) and the
head of SENDs and READ data.  Fields are gathered by fancy indexing with the
plans' column readers; every offset comes from the layouts in wire.py.
"""

import numpy as np

from ..spec.constants import (
    RNBD_MSG_CLOSE, RNBD_MSG_IO, RNBD_OP_MASK, RTRS_IO_REQ_IMM, RTRS_IO_RSP_IMM, RTRS_IO_RSP_W_INV_IMM,
    RTRS_HB_ACK_IMM, RTRS_HB_MSG_IMM, RTRS_MSG_READ, RTRS_MSG_RKEY_RSP, RTRS_MSG_WRITE,
    DEFAULT_MAX_HDR_SIZE,
)
from ..engine import transport as T
from ..spec.imm import ERRNO_MASK, IMM_PAYLOAD_MASK, IMM_TYPE_SHIFT, MSG_ID_BITS, MSG_ID_MASK
from ..layout.plans import plan

WRITE_TRAILER = plan("RtrsMsgRdmaWrite")
READ_TRAILER = plan("RtrsMsgRdmaRead")
SG_DESC = plan("RtrsSgDesc")
RKEY_RSP = plan("RtrsMsgRkeyRsp")
RNBD_HDR = plan("RnbdMsgHdr")
RNBD_IO = plan("RnbdMsgIo")
RNBD_CLOSE = plan("RnbdMsgClose")

#: the op of a request whose trailer the snaplen cut, told later by its immediate
HEADER_ONLY = 3

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


def kinds(rows):
    """The kind of every row (K_*), from its immediate, IETH and opcode."""
    imm = rows[:, T.R_IMM]
    without = np.where(rows[:, T.R_IETH] >= 0, K_INVALIDATE,
                       np.where(rows[:, T.R_SEND] == 1, K_SEND, K_DATA))
    itype = np.clip(imm >> IMM_TYPE_SHIFT, 0, len(KIND_OF_TYPE) - 1)
    return np.where(imm >= 0, KIND_OF_TYPE[itype], without)


def _u(arena, base, layout, name, valid):
    """Field ``name`` of ``layout`` at arena offsets ``base`` where ``valid``."""
    at = np.where(valid, base, 0)
    return np.where(valid, layout.column(np, arena, at, name), 0)


def requests(rows, arena):
    """Trailer and RNBD header of request rows: a dict of columns.

    ``op`` is 1 read, 2 write, 0 when no trailer fits (the caller reports it), or
    HEADER_ONLY when the snaplen cut the trailer: the immediate's offset tells the op
    then (``op_from_headers``); ``offset`` is the trailer's place in the chunk
    (data_len + usr_len, -1 when the beginning of the message is not in the capture
    or the trailer was cut: the immediate tells then), ``usr_at``/``usr_seen`` where
    the user (RNBD) header sits in the arena and how much of it was captured.
    """
    length = rows[:, T.R_LEN]
    toff, tlen = rows[:, T.R_TAIL_OFF], rows[:, T.R_TAIL_LEN]
    tend = toff + tlen
    partial = rows[:, T.R_PARTIAL] != 0
    cut = rows[:, T.R_CUT] > 0
    n = len(rows)
    # READ: usr | rtrs_msg_rdma_read | sg_cnt descriptors (1 or 0): the trailer and its
    # descriptors end the message, the user header fills the rest of it
    is_read = np.zeros(n, dtype=bool)
    usr_len = np.zeros(n, dtype=np.int64)
    sg_cnt = np.zeros(n, dtype=np.int64)
    read_at = np.zeros(n, dtype=np.int64)
    for count in (1, 0):
        size = READ_TRAILER.size + SG_DESC.size * count
        ulen = length - size
        can = ~partial & ~is_read & (ulen >= 0) & (tlen >= size)
        at = np.where(can, tend - size, 0)
        ok = can & (_u(arena, at, READ_TRAILER, "type", can) == RTRS_MSG_READ) \
            & (_u(arena, at, READ_TRAILER, "usr_len", can) == ulen) \
            & (_u(arena, at, READ_TRAILER, "sg_cnt", can) == count)
        is_read |= ok
        usr_len = np.where(ok, ulen, usr_len)
        sg_cnt = np.where(ok, count, sg_cnt)
        read_at = np.where(ok, at, read_at)
    desc_at = read_at + READ_TRAILER.size
    has_desc = is_read & (sg_cnt > 0)
    desc_key = np.where(has_desc, _u(arena, desc_at, SG_DESC, "key", has_desc), -1)
    desc_len = _u(arena, desc_at, SG_DESC, "len", has_desc)
    desc_addr = _u(arena, desc_at, SG_DESC, "addr", has_desc)
    read_flags = _u(arena, read_at, READ_TRAILER, "flags", is_read)
    # WRITE: ... usr | rtrs_msg_rdma_write at the very end
    can = ~is_read & (tlen >= WRITE_TRAILER.size)
    wat = tend - WRITE_TRAILER.size
    wtype = _u(arena, wat, WRITE_TRAILER, "type", can)
    wusr = _u(arena, wat, WRITE_TRAILER, "usr_len", can)
    is_write = can & (wtype == RTRS_MSG_WRITE) & write_usr_fits(wusr, length, partial)
    usr_len = np.where(is_write, wusr, usr_len)
    usr_at = np.where(is_read, read_at - usr_len, wat - wusr)
    # the user header is read only when all of it was kept (docs/PROTOCOL.md#request-trailers)
    usr_seen = np.where(is_read, np.where(tlen == length, usr_len, 0),
                        np.where(is_write & (wusr <= tlen - WRITE_TRAILER.size), wusr, 0))
    op = np.where(is_read, 1, np.where(is_write, 2, np.where(cut, HEADER_ONLY, 0)))
    data_len = np.where(is_read, desc_len, np.where(is_write, length - WRITE_TRAILER.size - wusr,
                                                    0))
    offset = np.where(is_read, usr_len + desc_len, np.where(is_write & ~partial,
                                                            length - WRITE_TRAILER.size, -1))
    out = {"op": op, "partial": partial, "usr_len": usr_len, "data_len": data_len, "offset": offset,
           "sg_cnt": sg_cnt, "desc_key": desc_key, "desc_len": desc_len,
           "desc_addr": desc_addr, "read_flags": read_flags, "usr_at": usr_at,
           "usr_seen": usr_seen}
    out.update(rnbd(arena, usr_at, usr_seen))
    return out


def write_usr_fits(usr_len, length, partial):
    """A WRITE trailer's ``usr_len`` is plausible: at most the message before the
    trailer, or, when the message's start is not in the capture, below the largest
    header RTRS allows (DEFAULT_MAX_HDR_SIZE), however much of it was captured."""
    return np.where(partial, usr_len < DEFAULT_MAX_HDR_SIZE,
                    usr_len <= length - WRITE_TRAILER.size)


def op_from_headers(length, offset, partial):
    """The op of a request whose trailer the snaplen cut, from what its headers prove
    (docs/PROTOCOL.md#header-only-captures): a WRITE's trailer ends its message, so its
    immediate's offset is the message length − 4; a READ's offset is data_len +
    usr_len, never that.  0 when the message's start was not captured (its length is
    unknown)."""
    write = offset == length - WRITE_TRAILER.size
    return np.where(partial, 0, np.where(write, 2, 1))


def rnbd(arena, usr_at, usr_seen):
    """The RNBD header of user messages: type, the IO fields of RNBD_MSG_IO and the
    device of RNBD_MSG_CLOSE (fields beyond what the capture shows read as 0;
    device_id -1 for other messages)."""
    has_hdr = usr_seen >= RNBD_HDR.size
    kind = np.where(has_hdr, _u(arena, usr_at, RNBD_HDR, "type", has_hdr), -1)
    io = kind == RNBD_MSG_IO
    out = {"rnbd_type": kind}
    for name in ("device_id", "sector", "rw", "bi_size", "prio"):
        spec = RNBD_IO.layout.field(name)
        fits = io & (usr_seen >= spec.offset + spec.size)
        out[name] = _u(arena, usr_at, RNBD_IO, name, fits)
    spec = RNBD_CLOSE.layout.field("device_id")
    close = (kind == RNBD_MSG_CLOSE) & (usr_seen >= spec.offset + spec.size)
    out["device_id"] = np.where(io, out["device_id"], np.where(
        close, _u(arena, usr_at, RNBD_CLOSE, "device_id", close), -1))
    out["rnbd_op"] = np.where(io, out["rw"] & RNBD_OP_MASK, -1)
    return out


def responses(rows, arena):
    """msg_id, errno (negative), with-invalidate, and the rkey_rsp a SEND carries."""
    imm = rows[:, T.R_IMM]
    payload = imm & IMM_PAYLOAD_MASK
    hoff, hlen = rows[:, T.R_HEAD_OFF], rows[:, T.R_HEAD_LEN]
    is_rkey = (rows[:, T.R_SEND] == 1) & (rows[:, T.R_LEN] == RKEY_RSP.size) & (
        hlen >= RKEY_RSP.size)
    is_rkey &= _u(arena, hoff, RKEY_RSP, "type", is_rkey) == RTRS_MSG_RKEY_RSP
    return {"msg_id": payload & MSG_ID_MASK,
            "errno": -((payload >> MSG_ID_BITS) & ERRNO_MASK),
            "with_invalidate": (imm >> IMM_TYPE_SHIFT) == RTRS_IO_RSP_W_INV_IMM,
            "rkey_rsp": is_rkey,
            "rkey_buf_id": _u(arena, hoff, RKEY_RSP, "buf_id", is_rkey),
            "rkey": _u(arena, hoff, RKEY_RSP, "rkey", is_rkey)}


def bare_immediates(rows, exact=False):
    """Rows that are an RDMA WRITE WITH IMMEDIATE of no data to address 0 with rkey 0,
    as RTRS sends its responses and heartbeats; ``exact``: with an immediate of no
    payload, as heartbeats carry (docs/PROTOCOL.md#rtrs-without-a-handshake)."""
    bare = (rows[:, T.R_SEND] == 0) & (rows[:, T.R_LEN] == 0) & (rows[:, T.R_DMALEN] == 0) \
        & (rows[:, T.R_VA] == 0) & (rows[:, T.R_RKEY] == 0) & (rows[:, T.R_PARTIAL] == 0)
    if exact:
        bare &= (rows[:, T.R_IMM] >= 0) & (rows[:, T.R_IMM] & IMM_PAYLOAD_MASK == 0)
    return bare


def proven_responses(rows, arena):
    """Response rows (immediate type 1 or 2) in a form that only RTRS's responses have
    (docs/PROTOCOL.md#rtrs-without-a-handshake): a bare RDMA WRITE WITH IMMEDIATE
    (``bare_immediates``), or a SEND WITH IMMEDIATE carrying an rkey_rsp for the
    buf_id the immediate names."""
    fields = responses(rows, arena)
    return bare_immediates(rows) | (fields["rkey_rsp"]
                                     & (fields["rkey_buf_id"] == fields["msg_id"]))


def head_bytes(rows, arena, i):
    """The kept head of row ``i`` as bytes."""
    off = int(rows[i, T.R_HEAD_OFF])
    return arena[off:off + int(rows[i, T.R_HEAD_LEN])].tobytes()

