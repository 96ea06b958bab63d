"""What completed messages say, decoded for many at once.

The transport hands over message rows with the bytes the analysis reads: the
tail of a request (docs/PROTOCOL.md#request-trailers: an RDMA WRITE request
ends with its RNBD header and the rtrs_msg_rdma_write trailer; a READ request
is the RNBD header followed by rtrs_msg_rdma_read and its descriptors) and the
head of SENDs and READ data.  A row's kind, a request's trailer and RNBD header and a
response's immediate and rkey_rsp are read in compiled code (engine/io_fields.py);
every offset comes from the layouts in wire.py.
"""

import numpy as np

from ..capture.jit import byte_array
from ..engine import io_fields
from ..engine import transport as T
from ..engine.io_fields import (  # the analysis reads them as D.*
    HEADER_ONLY, K_DATA, K_HB_ACK, K_HB_MSG, K_INVALIDATE, K_REQUEST, K_RESPONSE, K_SEND,
    K_UNKNOWN_IMM, READ, WRITE, WRITE_SIZE)
from ..spec.imm import IMM_PAYLOAD_MASK


def kinds(rows):
    """The kind of every row (K_*), from its immediate, IETH and opcode."""
    out = np.empty(len(rows), dtype=np.int64)
    io_fields.message_kinds(np.ascontiguousarray(rows), io_fields.KIND_OF_TYPE, out)
    return out


def requests(rows, arena):
    """Trailer and RNBD header of request rows: a dict of columns
    (engine/io_fields.py reads them, one row at a time).

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
    decoded = np.empty((len(io_fields.REQUEST_COLUMNS), len(rows)), dtype=np.int64)
    # the arena read-only, whoever made it (the engine's, or one stitched from pieces):
    # the one type the compiled decode is built for
    io_fields.decode_requests(np.ascontiguousarray(rows), byte_array(arena), decoded)
    out = dict(zip(io_fields.REQUEST_COLUMNS, decoded))
    out["partial"] = rows[:, T.R_PARTIAL] != 0
    return out


def op_from_headers(length, offset, partial):
    """The op of a request whose trailer the snaplen cut, from what its headers prove
    (docs/PROTOCOL.md#header-only-captures): a WRITE's trailer ends its message, so its
    immediate's offset is the message length − 4; a READ's offset is data_len +
    usr_len, never that.  0 when the message's start was not captured (its length is
    unknown)."""
    write = offset == length - WRITE_SIZE
    return np.where(partial, 0, np.where(write, WRITE, READ))


def responses(rows, arena):
    """msg_id, errno (negative), with-invalidate, and the rkey_rsp a SEND carries."""
    decoded = np.empty((len(io_fields.RESPONSE_COLUMNS), len(rows)), dtype=np.int64)
    io_fields.decode_responses(np.ascontiguousarray(rows), byte_array(arena), decoded)
    out = dict(zip(io_fields.RESPONSE_COLUMNS, decoded))
    out["with_invalidate"] = out["with_invalidate"] != 0
    out["rkey_rsp"] = out["rkey_rsp"] != 0
    return out


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

