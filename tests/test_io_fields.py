"""The compiled reading of IO messages (engine/io_fields.py, through analysis/decode.py)
against the Scapy layers and the immediate's own decode: requests split and their
RNBD header read (READ and WRITE requests with an RNBD IO, CLOSE or OPEN header, one
cut short or a few bytes of none, whole or with only their tail captured, side by
side in one arena), each row's kind, and what a response says."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.compat import raw
from scapy.config import conf

from rtrs_scapy.analysis import decode as D
from rtrs_scapy.engine import transport as T
from rtrs_scapy.layers.rnbd import RnbdMsgClose, RnbdMsgHdr, RnbdMsgIo, RnbdMsgOpen
from rtrs_scapy.layers.rtrs import RtrsMsgRdmaRead, RtrsMsgRkeyRsp, RtrsSgDesc
from rtrs_scapy.layers.rtrs_request import (RtrsReadRequest, RtrsWriteRequest,
                                            WRITE_TRAILER_SIZE, split_read, split_write)
from rtrs_scapy.spec.constants import (RNBD_OP_MASK, RTRS_HB_ACK_IMM, RTRS_HB_MSG_IMM,
                                       RTRS_IO_REQ_IMM, RTRS_IO_RSP_IMM, RTRS_IO_RSP_W_INV_IMM,
                                       RTRS_MSG_RKEY_RSP)
from rtrs_scapy.spec.imm import MSG_ID_MASK, encode_io_rsp, imm_type
from rtrs_scapy.spec.imm import decode as decode_imm

U64 = (1 << 64) - 1

user_headers = st.one_of(
    st.builds(RnbdMsgIo, device_id=st.integers(0, (1 << 32) - 1),
              sector=st.integers(0, U64), rw=st.integers(0, (1 << 32) - 1),
              bi_size=st.integers(0, (1 << 32) - 1), prio=st.integers(0, (1 << 16) - 1)),
    st.builds(RnbdMsgClose, device_id=st.integers(0, (1 << 32) - 1)),
    st.builds(RnbdMsgOpen, dev_name=st.binary(max_size=8)),
    st.binary(max_size=3))
# an IO or CLOSE header of which only the first bytes were sent (usr_len says how many)
user_headers = st.one_of(user_headers, st.builds(
    lambda header, size: conf.raw_layer(raw(header)[:size]),
    user_headers.filter(lambda usr: isinstance(usr, (RnbdMsgIo, RnbdMsgClose))),
    st.integers(4, 31)))
descriptors = st.lists(st.builds(RtrsSgDesc, addr=st.integers(0, U64),
                                 key=st.integers(0, (1 << 32) - 1),
                                 len=st.integers(0, (1 << 32) - 1)), max_size=1)
writes = st.builds(lambda data, usr: RtrsWriteRequest(data=data, usr=usr),
                   st.binary(max_size=48), user_headers)
reads = st.builds(lambda usr, desc, flags: RtrsReadRequest(
    usr=usr, trailer=RtrsMsgRdmaRead(flags=flags, desc=desc)),
    user_headers, descriptors, st.integers(0, (1 << 16) - 1))
# a request, and how many bytes of its end the capture kept (None: all of it)
requests = st.tuples(st.one_of(writes, reads, st.binary(max_size=40)),
                     st.one_of(st.none(), st.integers(0, 64)))


def _header_fields(usr, seen):
    """What the RNBD header ``usr`` (bytes) tells when it was captured (``seen``), read
    by the Scapy layers: a field the bytes end before reads 0."""
    fields = {"rnbd_type": -1, "device_id": -1, "rnbd_op": -1, "sector": 0, "rw": 0,
              "bi_size": 0, "prio": 0}
    if not seen or len(usr) < len(RnbdMsgHdr()):
        return fields
    header = RnbdMsgHdr(usr + bytes(64))       # dispatched on its type
    fields["rnbd_type"] = header.type
    ends, end = {}, 0
    for field in header.fields_desc:
        end += field.sz
        ends[field.name] = end

    def value(name):
        return header.getfieldval(name) if ends[name] <= len(usr) else 0
    if isinstance(header, RnbdMsgIo):
        fields.update({name: value(name) for name in ("device_id", "sector", "rw", "bi_size",
                                                       "prio")})
        fields["rnbd_op"] = fields["rw"] & RNBD_OP_MASK
    elif isinstance(header, RnbdMsgClose) and ends["device_id"] <= len(usr):
        fields["device_id"] = header.device_id
    return fields


def _expected(payload, kept):
    """The columns the Scapy layers give a request of ``payload`` whose last ``kept``
    bytes were captured: its trailer when the kept bytes hold it (a READ's first, as
    both read it), its user header only when they hold all of the message (a READ) or
    all of the header (a WRITE); None when they hold no trailer."""
    whole = kept == len(payload)
    read = split_read(payload)
    if read is not None and kept >= len(payload) - read[0]:
        request = RtrsReadRequest(payload)
        desc, usr_len = request.trailer.desc, read[0]
        fields = {"op": 1, "usr_len": usr_len, "data_len": request.data_len,
                  "offset": request.imm_offset, "sg_cnt": len(desc),
                  "desc_key": desc[0].key if desc else -1,
                  "desc_len": desc[0].len if desc else 0,
                  "desc_addr": desc[0].addr if desc else 0,
                  "read_flags": int(request.trailer.flags),
                  "usr_seen": usr_len if whole else 0}
        fields.update(_header_fields(request._usr_bytes(), whole))
        return fields
    if split_write(payload) is not None and kept >= WRITE_TRAILER_SIZE:
        request = RtrsWriteRequest(payload)
        usr_len = len(request._usr_bytes())
        seen = usr_len <= kept - WRITE_TRAILER_SIZE
        fields = {"op": 2, "usr_len": usr_len, "data_len": len(request.data),
                  "offset": request.imm_offset, "sg_cnt": 0, "desc_key": -1, "desc_len": 0,
                  "desc_addr": 0, "read_flags": 0, "usr_seen": usr_len if seen else 0}
        fields.update(_header_fields(request._usr_bytes(), seen))
        return fields
    return None


def _batch(cases, gap):
    """Rows and an arena holding the kept tail of each request, ``gap`` bytes apart."""
    rows = np.zeros((len(cases), T.R_COLUMNS), dtype=np.int64)
    arena = bytearray(b"\xa5" * gap)
    for i, (payload, kept) in enumerate(cases):
        rows[i, T.R_LEN] = len(payload)
        rows[i, T.R_TAIL_OFF], rows[i, T.R_TAIL_LEN] = len(arena), kept
        arena += payload[len(payload) - kept:] + b"\x5a" * gap
    return rows, np.frombuffer(bytes(arena), dtype=np.uint8).copy()


@settings(max_examples=300, deadline=None)
@given(st.lists(requests, min_size=1, max_size=6), st.integers(0, 40))
def test_requests_read_as_the_scapy_layers_split_them(cases, gap):
    cases = [(raw(request) if not isinstance(request, bytes) else request, kept)
             for request, kept in cases]
    cases = [(payload, len(payload) if kept is None else min(kept, len(payload)))
             for payload, kept in cases]
    rows, arena = _batch(cases, gap)
    got = D.requests(rows, arena)
    for i, (payload, kept) in enumerate(cases):
        want = _expected(payload, kept)
        if want is None:
            assert got["op"][i] == 0 and got["usr_seen"][i] == 0 and got["offset"][i] == -1
            assert got["rnbd_type"][i] == -1
            continue
        for name, value in want.items():
            assert int(got[name][i]) & U64 == value & U64, name
        start = rows[i, T.R_TAIL_OFF] + kept - len(payload)    # where the message begins
        if want["usr_seen"]:
            usr_at = start + (want["data_len"] if want["op"] == 2 else 0)
            assert got["usr_at"][i] == usr_at
    assert not got["partial"].any()


def test_a_cut_trailer_leaves_the_op_to_the_immediate():
    """A request whose captured bytes end before its trailer: HEADER_ONLY when the
    snaplen cut it, no op when the bytes were simply not there."""
    payload = raw(RtrsWriteRequest(data=b"x" * 8, usr=RnbdMsgIo(device_id=3)))
    rows, arena = _batch([(payload, 2), (payload, 2)], 4)
    rows[0, T.R_CUT] = 100
    got = D.requests(rows, arena)
    assert got["op"].tolist() == [D.HEADER_ONLY, 0]
    assert got["rnbd_type"].tolist() == [-1, -1]


def test_a_request_without_its_start_is_read_by_its_write_trailer_alone():
    """A request whose message start the capture lost (``partial``): a READ's trailer
    cannot be checked against the message length, a WRITE's is believed for a header
    below the largest RTRS allows, and its offset in the chunk is unknown."""
    write = raw(RtrsWriteRequest(data=b"d" * 16, usr=RnbdMsgClose(device_id=9)))
    read = raw(RtrsReadRequest(usr=RnbdMsgIo(device_id=2), trailer=RtrsMsgRdmaRead(
        desc=[RtrsSgDesc(addr=1, key=2, len=4096)])))
    tail = len(RnbdMsgClose()) + WRITE_TRAILER_SIZE - 2      # less than its header
    rows, arena = _batch([(write, len(write)), (read, len(read)), (write, tail)], 8)
    rows[2, T.R_LEN] = tail          # all the capture saw of that message
    rows[:, T.R_PARTIAL] = 1
    got = D.requests(rows, arena)
    assert got["op"].tolist() == [2, 0, 2]
    assert got["offset"].tolist() == [-1, -1, -1]
    assert got["usr_len"][0] == got["usr_len"][2] == len(RnbdMsgClose())
    assert got["usr_seen"][2] == 0 and got["device_id"].tolist() == [9, -1, -1]
    assert got["partial"].all()


def test_a_read_trailer_with_a_descriptor_is_tried_first():
    """A READ whose descriptor's last bytes would also pass for a trailer without one
    (sg_cnt 0): it has its descriptor, as the Scapy layers and the kernel read it."""
    usr = raw(RnbdMsgIo(device_id=1))
    size = len(usr) + len(raw(RtrsMsgRdmaRead(desc=[RtrsSgDesc()])))
    bare = raw(RtrsMsgRdmaRead(flags=16))       # the shorter form, as the descriptor ends
    shorter = raw(RtrsMsgRdmaRead(usr_len=size - len(bare), flags=16))
    desc = RtrsSgDesc(raw(RtrsSgDesc(addr=7))[:-len(bare)] + shorter)
    read = raw(RtrsReadRequest(usr=RnbdMsgIo(device_id=1), trailer=RtrsMsgRdmaRead(
        desc=[desc])))
    assert read.endswith(shorter) and split_read(read) == (len(usr), 1)
    got = D.requests(*_batch([(read, len(read))], 0))
    assert got["sg_cnt"].tolist() == [1] and got["desc_key"].tolist() == [desc.key]
    assert got["device_id"].tolist() == [1]


# -- each row's kind, and what a response says ----------------------------------------

IMMEDIATE_KINDS = {RTRS_IO_REQ_IMM: D.K_REQUEST, RTRS_IO_RSP_IMM: D.K_RESPONSE,
                   RTRS_IO_RSP_W_INV_IMM: D.K_RESPONSE, RTRS_HB_MSG_IMM: D.K_HB_MSG,
                   RTRS_HB_ACK_IMM: D.K_HB_ACK}
# a row: its immediate (None: without one), IETH (None: none) and whether a SEND
rows_of_kinds = st.lists(st.tuples(st.one_of(st.none(), st.integers(0, (1 << 32) - 1)),
                                   st.one_of(st.none(), st.integers(0, (1 << 32) - 1)),
                                   st.booleans()), min_size=1, max_size=20)


@settings(max_examples=200, deadline=None)
@given(rows_of_kinds)
def test_a_row_is_of_its_immediate_s_kind_else_of_its_operation_s(cases):
    rows = np.zeros((len(cases), T.R_COLUMNS), dtype=np.int64)
    for i, (imm, ieth, send) in enumerate(cases):
        rows[i, T.R_IMM] = -1 if imm is None else imm
        rows[i, T.R_IETH] = -1 if ieth is None else ieth
        rows[i, T.R_SEND] = send
    want = [IMMEDIATE_KINDS.get(imm_type(imm), D.K_UNKNOWN_IMM) if imm is not None
            else D.K_INVALIDATE if ieth is not None else D.K_SEND if send else D.K_DATA
            for imm, ieth, send in cases]
    assert D.kinds(rows).tolist() == want


# a response: msg_id, errno, with invalidate, and the SEND's payload (None: an RDMA WRITE)
responses = st.tuples(st.integers(0, MSG_ID_MASK), st.integers(0, 511), st.booleans(),
                      st.one_of(st.none(), st.binary(max_size=12), st.builds(
                          lambda rsp, more: raw(rsp) + more,
                          st.builds(RtrsMsgRkeyRsp, buf_id=st.integers(0, (1 << 16) - 1),
                                    rkey=st.integers(0, (1 << 32) - 1)),
                          st.sampled_from([b"", b"", b"\0"]))))


@settings(max_examples=200, deadline=None)
@given(st.lists(responses, min_size=1, max_size=8), st.integers(0, 24))
def test_a_response_reads_as_its_immediate_and_rkey_rsp_decode(cases, gap):
    rows = np.zeros((len(cases), T.R_COLUMNS), dtype=np.int64)
    arena = bytearray(b"\xa5" * gap)
    for i, (msg_id, errno, inval, payload) in enumerate(cases):
        rows[i, T.R_IMM] = encode_io_rsp(msg_id, errno, inval)
        rows[i, T.R_SEND] = payload is not None
        payload = payload or b""
        rows[i, T.R_LEN] = len(payload)
        rows[i, T.R_HEAD_OFF], rows[i, T.R_HEAD_LEN] = len(arena), len(payload)
        arena += payload + b"\x5a" * gap
    got = D.responses(rows, np.frombuffer(bytes(arena), dtype=np.uint8))
    for i, (msg_id, errno, inval, payload) in enumerate(cases):
        imm = decode_imm(int(rows[i, T.R_IMM]))
        assert (got["msg_id"][i], got["errno"][i]) == (imm.msg_id, imm.errno)
        assert got["with_invalidate"][i] == (imm.type == RTRS_IO_RSP_W_INV_IMM) == inval
        rkey = payload is not None and len(payload) == len(RtrsMsgRkeyRsp()) and \
            RtrsMsgRkeyRsp(payload).type == RTRS_MSG_RKEY_RSP
        assert got["rkey_rsp"][i] == rkey
        if rkey:
            assert (got["rkey_buf_id"][i], got["rkey"][i]) == (
                RtrsMsgRkeyRsp(payload).buf_id, RtrsMsgRkeyRsp(payload).rkey)
        else:
            assert got["rkey_buf_id"][i] == got["rkey"][i] == 0
