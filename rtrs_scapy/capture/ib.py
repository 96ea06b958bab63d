"""InfiniBand transport headers as columns: one pass per chunk of records.

Right after the record walk, while the records' first bytes are still in the
CPU cache, every frame is located (links.py) and its BTH and extension headers
(RETH, ImmDt, IETH, AETH: which ones, and where, follows from the opcode,
docs/PROTOCOL.md#opcodes-and-extension-headers) are read into packet columns.
The transport loop then works on those columns and touches a packet's bytes
only for the few it keeps.  Every offset comes from the layers' layouts
(wire.py).

A record cut by the capture's snaplen (captured length below the original
length) is located from its headers and its original length: the packet's end
and payload are what the headers say, and P_VIS tells where the captured bytes
stop (docs/PROTOCOL.md#header-only-captures).
"""

import numpy as np

from .jit import byte_array, compiled, copy_into, helper, read_only

from ..layout import wire
from .columns import (P_COLUMNS, P_DMALEN, P_DST_HI, P_DST_LO, P_IETH, P_IMM, P_KIND, P_OPCODE,
                      P_PSN, P_QPN, P_RKEY, P_START, P_STATUS, P_STOP, P_SYNDROME, P_VA,
                      P_VIS, X_BTH, X_COLUMNS, X_END, X_HDR, X_SRC_HI, X_SRC_LO)
from .links import GEOMETRY, KIND_NAMES, _locate_one, address_bytes

# opcode classes and positions in a message
C_UNKNOWN, C_OTHER, C_DATA, C_ACK, C_UD_SEND, C_CNP, C_FOREIGN = range(7)
P_NONE, P_FIRST, P_MIDDLE, P_LAST, P_ONLY = range(5)
# opcode table columns
T_CLASS, T_POS, T_SEND, T_EXT, T_RETH, T_IMM, T_IETH, T_AETH = range(8)

# packet status
S_OK, S_SHORT, S_HEADERS, S_UNKNOWN, S_CUT = range(5)   # short: < BTH + ICRC; headers: beyond
# the end; cut: the BTH is captured, its extension headers (or a MAD's end) are not
#: zero bytes behind a cut record's copy: the locator's reads past the captured bytes
#: (at most two headers' worth) find zeros, which no header accepts
CUT_PAD = 256


def _opcode_table():
    """opcode -> class, position, SEND?, extension size and header offsets."""
    sizes = {name: layout.fixed_size for name, layout in wire.LAYOUTS.items()}
    foreign = ("RDMA_READ", "COMPARE_SWAP", "FETCH_ADD", "ATOMIC_ACKNOWLEDGE")
    table = np.full((256, 8), -1, dtype=np.int64)
    table[:, T_CLASS] = C_UNKNOWN
    for opcode, (name, chain) in wire.OPCODES.items():
        row = table[opcode]
        row[T_POS] = P_NONE
        row[T_SEND] = 0
        at = 0
        for header in chain:
            column = {"RETH": T_RETH, "ImmDt": T_IMM, "IETH": T_IETH, "AETH": T_AETH}.get(header)
            if column is not None:
                row[column] = at
            at += sizes[header]
        row[T_EXT] = at
        operation = name[3:]
        if not name.startswith("RC_"):
            row[T_CLASS] = C_UD_SEND if name == "UD_SEND_ONLY" else (
                C_CNP if name == "CNP" else C_OTHER)
        elif operation == "ACKNOWLEDGE":
            row[T_CLASS] = C_ACK
        elif operation.startswith(foreign):
            row[T_CLASS] = C_FOREIGN
        else:
            row[T_CLASS] = C_DATA
            row[T_SEND] = operation.startswith("SEND")
            for word, pos in (("_FIRST", P_FIRST), ("_MIDDLE", P_MIDDLE), ("_LAST", P_LAST),
                              ("_ONLY", P_ONLY)):
                if word in operation:
                    row[T_POS] = pos
    return table


def _offset(layer, name):
    return next(f for f in wire.LAYOUTS[layer].fields if f.name == name)


OPCODE_TABLE = _opcode_table()
BTH_SIZE = wire.LAYOUTS["BTH"].fixed_size
ICRC_SIZE = wire.LAYOUTS["BTH"].trailer_size
_pad = _offset("BTH", "padcount")
FIELDS = np.array([
    _offset("BTH", "opcode").offset, _pad.offset, _pad.shift, _pad.width,
    _offset("BTH", "dqpn").offset, _offset("BTH", "psn").offset,
    _offset("RETH", "va").offset, _offset("RETH", "rkey").offset,
    _offset("RETH", "dma_len").offset, _offset("AETH", "syndrome").offset, BTH_SIZE, ICRC_SIZE,
], dtype=np.int64)
(F_OPCODE, F_PAD, F_PAD_SHIFT, F_PAD_WIDTH, F_DQPN, F_PSN, F_VA, F_RKEY, F_DMALEN, F_SYNDROME,
 F_BTH_SIZE, F_ICRC) = range(12)


@helper
def _be(buf, p, n):
    v = np.int64(0)
    for k in range(n):
        v = (v << 8) | np.int64(buf[p + k])
    return v


@helper(allocates=True)
def _locate_cut(buf, start, caplen, origlen, link, g, out, extra, i):
    """A record cut by the snaplen, located as if it were whole: the headers are read
    from a copy of the captured bytes followed by zeros, the lengths they give are held
    against the original length."""
    copy = np.zeros(caplen + CUT_PAD, dtype=np.uint8)
    copy_into(copy[:caplen], buf[start:start + caplen])
    _locate_one(read_only(copy), 0, origlen, link, g, out, extra, i)
    if out[i, P_KIND] != 0:
        extra[i, X_HDR] += start
        extra[i, X_BTH] += start
        extra[i, X_END] += start


@helper
def decode_one(buf, start, caplen, origlen, link, g, optable, fields, out, extra, i):
    """Row ``i`` of the packet columns (``out``: P_*, ``extra``: X_*): where the IB
    packet is, and its headers; zero where the record holds none."""
    out[i, :] = 0
    extra[i, :] = 0
    if origlen > caplen:
        _locate_cut(buf, start, caplen, origlen, link, g, out, extra, i)
    else:
        _locate_one(buf, start, start + caplen, link, g, out, extra, i)
    if out[i, P_KIND] == 0:
        return
    bth, end = extra[i, X_BTH], extra[i, X_END]
    vis = min(end, start + caplen)
    if bth + fields[F_BTH_SIZE] > vis:        # not even the BTH was captured
        out[i, :] = 0
        extra[i, :] = 0
        return
    out[i, P_VIS] = vis
    out[i, P_IMM] = out[i, P_IETH] = out[i, P_RKEY] = -1
    if bth + fields[F_BTH_SIZE] + fields[F_ICRC] > end:
        out[i, P_STATUS] = S_SHORT
        return
    opcode = np.int64(buf[bth + fields[F_OPCODE]])
    out[i, P_OPCODE] = opcode
    out[i, P_QPN] = _be(buf, bth + fields[F_DQPN], 3)
    out[i, P_PSN] = _be(buf, bth + fields[F_PSN], 3)
    if optable[opcode, T_CLASS] == 0:
        out[i, P_STATUS] = S_UNKNOWN
        return
    pad = (np.int64(buf[bth + fields[F_PAD]]) >> fields[F_PAD_SHIFT]) & (
        (1 << fields[F_PAD_WIDTH]) - 1)
    hdr = bth + fields[F_BTH_SIZE]
    p_start = hdr + optable[opcode, T_EXT]
    p_stop = end - fields[F_ICRC] - pad
    if p_stop < p_start:
        out[i, P_STATUS] = S_HEADERS
        return
    out[i, P_START] = p_start
    out[i, P_STOP] = p_stop
    if p_start > vis or (optable[opcode, T_CLASS] == C_UD_SEND and p_stop > vis):
        out[i, P_STATUS] = S_CUT              # a MAD is read whole or not at all
        return
    at = optable[opcode, T_IMM]
    if at >= 0:
        out[i, P_IMM] = _be(buf, hdr + at, 4)
    at = optable[opcode, T_IETH]
    if at >= 0:
        out[i, P_IETH] = _be(buf, hdr + at, 4)
    at = optable[opcode, T_RETH]
    if at >= 0:
        out[i, P_VA] = _be(buf, hdr + at + fields[F_VA], 8)
        out[i, P_RKEY] = _be(buf, hdr + at + fields[F_RKEY], 4)
        out[i, P_DMALEN] = _be(buf, hdr + at + fields[F_DMALEN], 4)
    at = optable[opcode, T_AETH]
    if at >= 0:
        out[i, P_SYNDROME] = np.int64(buf[hdr + at + fields[F_SYNDROME]])


@compiled
def decode(buf, offs, caplens, origlens, links, geometry, optable, fields, out, extra):
    """Packet columns of records already walked into ``out`` (P_*) and ``extra`` (X_*):
    one row per record."""
    for i in range(offs.shape[0]):
        decode_one(buf, offs[i], caplens[i], origlens[i], links[i], geometry, optable, fields,
                   out, extra, i)


def decode_chunk(buf, offs, caplens, links, origlens=None):
    """Packet columns of records (``origlens``: their original lengths, when cut): the
    tables ``packets`` (P_*) and ``extra`` (X_*)."""
    packets = np.empty((len(offs), P_COLUMNS), dtype=np.int64)
    extra = np.empty((len(offs), X_COLUMNS), dtype=np.int64)
    decode(buf, offs, caplens, caplens if origlens is None else origlens, links,
           GEOMETRY, OPCODE_TABLE, FIELDS, packets, extra)
    return packets, extra


def ib_offset(buf, start, end, link_type):
    """One frame: ``(kind, hdr_off, ib_end, src, dst)`` or None (kind "rocev2",
    "rocev1" or "ib"; ``hdr_off`` the BTH, GRH or LRH; addresses as bytes)."""
    data = byte_array(buf)
    out, extra = decode_chunk(data, np.array([start], dtype=np.int64),
                              np.array([end - start], np.int64), np.array([link_type], np.int64))
    if not out[0, P_KIND]:
        return None
    return (KIND_NAMES[int(out[0, P_KIND])], int(extra[0, X_HDR]), int(extra[0, X_END]),
            address_bytes(extra[0, X_SRC_HI], extra[0, X_SRC_LO]),
            address_bytes(out[0, P_DST_HI], out[0, P_DST_LO]))
