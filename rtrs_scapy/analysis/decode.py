"""What completed messages say, decoded for many at once.

The transport hands over message rows with the bytes the analysis reads: the
tail of a request (docs/PROTOCOL.md#request-trailers: an RDMA WRITE request
ends with its RNBD header and the rtrs_msg_rdma_write trailer; a READ request
is the RNBD header followed by rtrs_msg_rdma_read and its descriptors) and the
head of SENDs and READ data.  A request's trailer and RNBD header are read in
compiled code (engine/trailers.py), the rest by numpy's fancy indexing with the
plans' column readers; every offset comes from the layouts in wire.py.
"""

import numpy as np

from ..spec.constants import (
    RTRS_IO_REQ_IMM, RTRS_IO_RSP_IMM, RTRS_IO_RSP_W_INV_IMM, RTRS_HB_ACK_IMM, RTRS_HB_MSG_IMM,
    RTRS_MSG_RKEY_RSP,
)
from ..capture.jit import byte_array
from ..engine import trailers
from ..engine import transport as T
from ..engine.trailers import HEADER_ONLY  # what io.py reads as D.HEADER_ONLY
from ..spec.imm import ERRNO_MASK, IMM_PAYLOAD_MASK, IMM_TYPE_SHIFT, MSG_ID_BITS, MSG_ID_MASK
from ..layout.plans import plan

WRITE_TRAILER = plan("RtrsMsgRdmaWrite")
RKEY_RSP = plan("RtrsMsgRkeyRsp")

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
    """Trailer and RNBD header of request rows: a dict of columns
    (engine/trailers.py reads them, one row at a time).

    ``op`` is 1 read, 2 write, 0 when no trailer fits (the caller reports it), or
    HEADER_ONLY when the snaplen cut the trailer: the immediate's offset tells the op
    then (``op_from_headers``); ``offset`` is the trailer's place in the chunk
    (data_len + usr_len, -1 when the beginning of the message is not in the capture
    or the trailer was cut: the immediate tells then), ``usr_at``/``usr_seen`` where
    the user (RNBD) header sits in the arena and how much of it was captured: all of
    it or nothing (docs/PROTOCOL.md#request-trailers).  A WRITE trailer's ``usr_len``
    is believed when it is at most the message before the trailer, or, when the
    message's start is not in the capture, below the largest header RTRS allows
    (DEFAULT_MAX_HDR_SIZE).  Of the RNBD header: ``rnbd_type`` (-1 when none was
    seen), the IO fields of RNBD_MSG_IO (a field beyond the bytes seen reads 0),
    ``device_id`` of IO and CLOSE (-1 for the others) and ``rnbd_op`` (-1 but for
    IO).
    """
    decoded = np.empty((len(trailers.COLUMNS), len(rows)), dtype=np.int64)
    # the arena read-only, whoever made it (the engine's, or one stitched from pieces):
    # the one type the compiled decode is built for
    trailers.decode_requests(np.ascontiguousarray(rows), byte_array(arena), decoded)
    out = dict(zip(trailers.COLUMNS, decoded))
    out["partial"] = rows[:, T.R_PARTIAL] != 0
    return out


def op_from_headers(length, offset, partial):
    """The op of a request whose trailer the snaplen cut, from what its headers prove
    (docs/PROTOCOL.md#header-only-captures): a WRITE's trailer ends its message, so its
    immediate's offset is the message length − 4; a READ's offset is data_len +
    usr_len, never that.  0 when the message's start was not captured (its length is
    unknown)."""
    write = offset == length - WRITE_TRAILER.size
    return np.where(partial, 0, np.where(write, 2, 1))


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

