"""Hostile captures: what a fuzzer, a misconfigured mirror port or an attacker hands
a dissector.  Each kind makes every packet open new state somewhere:

- ``qps``: a new destination QP per packet, each an RDMA WRITE FIRST that never ends
  (stream and reassembly tables);
- ``cm_reqs``: a CM REQ to the RTRS port per packet with its own transaction id,
  comm id and session (CM state, paths and sessions);
- ``io_rsps``: IO_RSP immediates on one QP whose requests never appear (pairing).

Their benign reference is a real capture repeated (craft/repeat.py).

One Scapy template frame per kind, the varying fields patched per packet (their
ICRC left stale, like a hostile file's).  ``scripts/hostile.py`` writes them.
"""

import struct
import uuid

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from ..spec.constants import RTRS_MAGIC, RTRS_PORT, RTRS_PROTO_VER
from ..spec.imm import encode_io_rsp
from ..layers.cm import CMReq, CmaIpHdr, MAD, service_id
from ..layers.ib import BTH, DETH, ImmDt, RETH, ROCEV2_PORT, opcode_value
from ..layers.rtrs import RtrsMsgConnReq
from .capture_files import pcap_header, pcap_record
from .encap import DLT_EN10MB

CLIENT, SERVER = "10.66.0.2", "10.66.0.1"

# marker values: where a template carries them, the generator patches each packet
QPN_MARK, PSN_MARK = 0xABCDEF, 0x7EDCBA
TID_MARK, COMM_MARK = 0x1122334455667788, 0x99AABBCC
IMM_MARK = 0x1357ACE0
UUID_MARK = uuid.UUID("0badc0de-0000-4000-8000-00000000beef")


def _roce(ib, sport=49152):
    return bytes(Ether(src="52:54:00:66:00:02", dst="52:54:00:66:00:01") /
                 IP(src=CLIENT, dst=SERVER, flags="DF", ttl=64) /
                 UDP(sport=sport, dport=ROCEV2_PORT, chksum=0) / ib)


def _at(template, value, size, order=">"):
    fmt = {3: None, 4: "I", 8: "Q"}[size]
    raw = value.to_bytes(3, "big") if fmt is None else struct.pack(order + fmt, value)
    pos = template.find(raw)
    assert pos > 0 and template.find(raw, pos + 1) < 0, "marker %#x not unique" % value
    return pos


def _put(frame, pos, value, size):
    frame[pos:pos + size] = value.to_bytes(size, "big")


def open_write_per_qp(n):
    """A new destination QP per packet, each an RDMA WRITE FIRST (RETH, 64 bytes)
    whose message never completes."""
    template = _roce(BTH(opcode=opcode_value("RC_RDMA_WRITE_FIRST"), dqpn=QPN_MARK, psn=0) /
                     RETH(va=0x1000, rkey=0x42, dma_len=1 << 20) / (b"\xa5" * 64))
    at = _at(template, QPN_MARK, 3)
    for i in range(n):
        frame = bytearray(template)
        _put(frame, at, 0x100 + i, 3)
        yield bytes(frame)


def cm_req_per_comm_id(n):
    """A CM REQ to the RTRS port per packet, each with its own transaction id,
    comm id and session (paths_uuid)."""
    body = (CMReq(local_comm_id=COMM_MARK, service_id=service_id(RTRS_PORT), local_qpn=0x11) /
            CmaIpHdr(ip_version=4, port=40000, src_addr="::" + CLIENT, dst_addr="::" + SERVER) /
            RtrsMsgConnReq(magic=RTRS_MAGIC, version=RTRS_PROTO_VER, cid=0, cid_num=3,
                           recon_cnt=1, sess_uuid=UUID_MARK, paths_uuid=UUID_MARK, first_conn=1))
    template = _roce(BTH(opcode=0x64, dqpn=1, psn=PSN_MARK) / DETH() /
                     MAD(transaction_id=TID_MARK, attribute_id=0x0010) / body)
    tid, comm, psn = _at(template, TID_MARK, 8), _at(template, COMM_MARK, 4), _at(template, PSN_MARK, 3)
    uuids = [i for i in range(len(template)) if template.startswith(UUID_MARK.bytes, i)]
    assert len(uuids) == 2
    for i in range(n):
        frame = bytearray(template)
        _put(frame, tid, (7 << 32) | i, 8)
        _put(frame, comm, 0x10000 + i, 4)
        _put(frame, psn, i & 0xFFFFFF, 3)
        for pos in uuids:
            frame[pos + 12:pos + 16] = i.to_bytes(4, "big")
        yield bytes(frame)


def io_rsp_without_request(n):
    """IO_RSP immediates (zero-length RDMA WRITE ONLY WITH IMMEDIATE) on one QP,
    no request ever seen."""
    template = _roce(BTH(opcode=opcode_value("RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"), dqpn=0x11,
                         psn=PSN_MARK) / RETH(va=0, rkey=0, dma_len=0) / ImmDt(imm=IMM_MARK))
    psn, imm = _at(template, PSN_MARK, 3), _at(template, IMM_MARK, 4)
    for i in range(n):
        frame = bytearray(template)
        _put(frame, psn, i & 0xFFFFFF, 3)
        _put(frame, imm, encode_io_rsp(i % 4096), 4)
        yield bytes(frame)


KINDS = {"qps": open_write_per_qp, "cm_reqs": cm_req_per_comm_id,
         "io_rsps": io_rsp_without_request}


def write_hostile(kind, n, path):
    """``n`` packets of ``kind`` into the pcap ``path``."""
    return write_pcap(path, KINDS[kind](n))


def write_pcap(path, frames):
    with open(path, "wb") as out:
        out.write(pcap_header(DLT_EN10MB, snaplen=65535))
        for i, frame in enumerate(frames):
            out.write(pcap_record(1800000000 + i // 1000, (i % 1000) * 1000, frame))
    return path


