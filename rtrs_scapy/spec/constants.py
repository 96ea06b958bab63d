"""Kernel constants of RTRS and RNBD, named as in the kernel.

One table per kernel enum; the Scapy layers, the layout IR, the analyzer and the
generated Wireshark dissector all read them from here (docs/PROTOCOL.md#constants,
docs/PROTOCOL.md#immediate-data, docs/PROTOCOL.md#rnbd).
"""

import errno as _errno

# drivers/infiniband/ulp/rtrs/rtrs-pri.h
RTRS_MAGIC = 0x1BBD
RTRS_PROTO_VER_MAJOR = 2
RTRS_PROTO_VER_MINOR = 0
RTRS_PROTO_VER = (RTRS_PROTO_VER_MAJOR << 8) | RTRS_PROTO_VER_MINOR
RTRS_PORT = 1234  # rnbd-proto.h: the RNBD server's default RTRS port

# enum rtrs_msg_types (first LE u16 of every RTRS message but conn_req/conn_rsp),
# docs/PROTOCOL.md#constants
RTRS_MSG_INFO_REQ = 0
RTRS_MSG_INFO_RSP = 1
RTRS_MSG_WRITE = 2
RTRS_MSG_READ = 3
RTRS_MSG_RKEY_RSP = 4
rtrs_msg_types = {
    RTRS_MSG_INFO_REQ: "RTRS_MSG_INFO_REQ",
    RTRS_MSG_INFO_RSP: "RTRS_MSG_INFO_RSP",
    RTRS_MSG_WRITE: "RTRS_MSG_WRITE",
    RTRS_MSG_READ: "RTRS_MSG_READ",
    RTRS_MSG_RKEY_RSP: "RTRS_MSG_RKEY_RSP",
}

# enum rtrs_msg_flags, docs/PROTOCOL.md#constants
RTRS_MSG_NEED_INVAL_F = 0x1  # in rtrs_msg_rdma_read.flags
RTRS_MSG_NEW_RKEY_F = 0x2  # in rtrs_msg_conn_rsp.flags (server runs always_invalidate=Y)
rtrs_msg_flags = {
    RTRS_MSG_NEED_INVAL_F: "RTRS_MSG_NEED_INVAL_F",
    RTRS_MSG_NEW_RKEY_F: "RTRS_MSG_NEW_RKEY_F",
}

# immediate types, bits 31..28 of the immediate (rtrs-pri.h enum), docs/PROTOCOL.md#immediate-data
RTRS_IO_REQ_IMM = 0
RTRS_IO_RSP_IMM = 1
RTRS_IO_RSP_W_INV_IMM = 2
RTRS_HB_MSG_IMM = 8
RTRS_HB_ACK_IMM = 9
rtrs_imm_types = {
    RTRS_IO_REQ_IMM: "RTRS_IO_REQ_IMM",
    RTRS_IO_RSP_IMM: "RTRS_IO_RSP_IMM",
    RTRS_IO_RSP_W_INV_IMM: "RTRS_IO_RSP_W_INV_IMM",
    RTRS_HB_MSG_IMM: "RTRS_HB_MSG_IMM",
    RTRS_HB_ACK_IMM: "RTRS_HB_ACK_IMM",
}

# Server defaults (rtrs-srv.c module parameters), docs/PROTOCOL.md#constants
DEFAULT_QUEUE_DEPTH = 512
DEFAULT_MAX_CHUNK_SIZE = 128 * 1024
DEFAULT_MAX_HDR_SIZE = 4096
DEFAULT_MAX_IO_SIZE = DEFAULT_MAX_CHUNK_SIZE - DEFAULT_MAX_HDR_SIZE
MAX_SESS_QUEUE_DEPTH = 65535
HEARTBEAT_INTERVAL_S = 5.0  # rtrs-pri.h RTRS_HB_INTERVAL_MS
# rtrs-pri.h; rtrs.c hb_work() calls the error handler on the tick where more than this many
# heartbeat ticks passed since the last heartbeat was sent without an answer
RTRS_HB_MISSED_MAX = 5

# drivers/block/rnbd/rnbd-proto.h, docs/PROTOCOL.md#rnbd
RNBD_PROTO_VER_MAJOR = 2

# enum rnbd_msg_type
RNBD_MSG_SESS_INFO = 0
RNBD_MSG_SESS_INFO_RSP = 1
RNBD_MSG_OPEN = 2
RNBD_MSG_OPEN_RSP = 3
RNBD_MSG_IO = 4
RNBD_MSG_CLOSE = 5
rnbd_msg_type = {
    RNBD_MSG_SESS_INFO: "RNBD_MSG_SESS_INFO",
    RNBD_MSG_SESS_INFO_RSP: "RNBD_MSG_SESS_INFO_RSP",
    RNBD_MSG_OPEN: "RNBD_MSG_OPEN",
    RNBD_MSG_OPEN_RSP: "RNBD_MSG_OPEN_RSP",
    RNBD_MSG_IO: "RNBD_MSG_IO",
    RNBD_MSG_CLOSE: "RNBD_MSG_CLOSE",
}

# enum rnbd_access_mode
rnbd_access_mode = {0: "RNBD_ACCESS_RO", 1: "RNBD_ACCESS_RW", 2: "RNBD_ACCESS_MIGRATION"}

# enum rnbd_io_flags: low 8 bits of rnbd_msg_io.rw = operation, higher bits = flags,
# docs/PROTOCOL.md#the-rw-field
RNBD_OP_BITS = 8
RNBD_OP_MASK = (1 << RNBD_OP_BITS) - 1
RNBD_OP_READ = 0
RNBD_OP_WRITE = 1
RNBD_OP_FLUSH = 2
RNBD_OP_DISCARD = 3
RNBD_OP_SECURE_ERASE = 4
RNBD_OP_WRITE_ZEROES = 5  # WRITE_SAME before ~v6.8
rnbd_io_op = {
    RNBD_OP_READ: "RNBD_OP_READ",
    RNBD_OP_WRITE: "RNBD_OP_WRITE",
    RNBD_OP_FLUSH: "RNBD_OP_FLUSH",
    RNBD_OP_DISCARD: "RNBD_OP_DISCARD",
    RNBD_OP_SECURE_ERASE: "RNBD_OP_SECURE_ERASE",
    RNBD_OP_WRITE_ZEROES: "RNBD_OP_WRITE_ZEROES",
}
RNBD_F_SYNC = 1 << (RNBD_OP_BITS + 0)
RNBD_F_FUA = 1 << (RNBD_OP_BITS + 1)
RNBD_F_PREFLUSH = 1 << (RNBD_OP_BITS + 2)  # proposed, Dec 2025
RNBD_F_NOUNMAP = 1 << (RNBD_OP_BITS + 3)  # proposed, Dec 2025
rnbd_io_flags = {
    RNBD_F_SYNC: "RNBD_F_SYNC",
    RNBD_F_FUA: "RNBD_F_FUA",
    RNBD_F_PREFLUSH: "RNBD_F_PREFLUSH",
    RNBD_F_NOUNMAP: "RNBD_F_NOUNMAP",
}

# enum rnbd_cache_policy (open_rsp.cache_policy bits)
rnbd_cache_policy = {0x1: "RNBD_FUA", 0x2: "RNBD_WRITEBACK"}

#: RNBD counts 512-byte sectors whatever the device's block size (docs/PROTOCOL.md#rnbd)
RNBD_SECTOR_SIZE = 512


def rnbd_end_sector(sector, bi_size):
    """The sector after an IO's last one, as the block layer counts it (``bio_end_sector()``:
    ``bi_sector + (bi_size >> 9)``, include/linux/bio.h), which the server's bio gets
    straight from the message (``process_rdma()``, rnbd-srv.c): an IO covers
    ``[sector, end)``, an IO of less than a sector covers none (docs/PROTOCOL.md#rnbd).
    Numbers or numpy arrays."""
    return sector + bi_size // RNBD_SECTOR_SIZE


def short_name(table, value, prefix):
    """'RNBD_OP_WRITE' -> 'WRITE' for compact displays; unknown values as numbers."""
    name = table.get(value)
    if name is None:
        return str(value)
    return name[len(prefix):] if name.startswith(prefix) else name


def rnbd_op_name(rw):
    """The operation of rnbd_msg_io.rw in lower case: 'read', 'write', 'flush', 'discard',
    'secure_erase', 'write_zeroes' (flags ignored; an unknown code as its number)."""
    return short_name(rnbd_io_op, rw & RNBD_OP_MASK, "RNBD_OP_").lower()


#: the RNBD operations by name, in the kernel's order, and back to their codes
RNBD_OP_NAMES = tuple(rnbd_op_name(code) for code in sorted(rnbd_io_op))
RNBD_OP_CODES = {rnbd_op_name(code): code for code in rnbd_io_op}


def rnbd_rw_str(rw):
    """rnbd_msg_io.rw as 'WRITE|SYNC|FUA' (docs/PROTOCOL.md#the-rw-field)."""
    parts = [short_name(rnbd_io_op, rw & RNBD_OP_MASK, "RNBD_OP_")]
    rest = rw & ~RNBD_OP_MASK
    for bit, name in rnbd_io_flags.items():
        if rest & bit:
            parts.append(name[len("RNBD_F_"):])
            rest &= ~bit
    if rest:
        parts.append(hex(rest))
    return "|".join(parts)


def errno_name(err):
    """Name of a (positive or negative) errno value, e.g. -5 -> 'EIO'."""
    err = abs(err)
    if err == 0:
        return "OK"
    return _errno.errorcode.get(err, "E%d" % err)

# Other RDMA protocols on the same fabrics (docs/PROTOCOL.md#other-rdma-protocols):
# their well-known RDMA CM ports and what their CM REQ private data starts with
ULP_PORTS = {
    4420: "NVMe-oF/RDMA",     # NVMe-oF RDMA transport binding; nvme_rdma_cm_req
    20049: "NFS/RDMA",        # RFC 8267 (NFS upper-layer binding of RPC-over-RDMA)
    3260: "iSER",             # RFC 7145; iser_cm_hdr
    5445: "SMB Direct",       # MS-SMBD
}
RPCRDMA_CONNECT_MAGIC = 0xF6AB0E18   # RFC 8797 rpcrdma_connect_private.cp_magic (BE)
SRP_LOGIN_REQ = 0x00                 # include/scsi/srp.h: the opcode of srp_login_req
SRP_LOGIN_REQ_SIZE = 64
SRP_BUF_FORMATS = 0x6                # SRP_BUF_FORMAT_DIRECT | SRP_BUF_FORMAT_INDIRECT
