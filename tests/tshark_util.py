"""Helpers to compare the Scapy layers with tshark's own InfiniBand dissector.

``tshark_rows(pcap)`` runs tshark once and returns, per frame, the InfiniBand
fields of ``FIELDS`` (tests/ib_decode.py's ``ib_frames``, ``bth_rows`` and
``cm_rows`` read one run per capture and test run); ``scapy_view(pkt)`` gives the
same field names from the Scapy layers; ``differences(pkt, row)`` lists where the two disagree.  Values
are normalised to int (numbers, byte strings such as the immediate) or to
``ipaddress`` objects (GIDs, CMA addresses).

tshark 4.0 quirks handled here:
* ``infiniband.immdt`` and ``infiniband.ieth`` are FT_BYTES and added twice per
  packet: only the first occurrence is read (``-E occurrence=f``).
* ``infiniband.deth.q_key`` is FT_UINT64; ICRC is ``infiniband.invariant.crc``
  (the wire bytes read big-endian, like Scapy's ``BTH.icrc``).
* The CM REQ primary/alternate flow label and packet rate are not compared:
  Wireshark 4.0 reads the flow label as 3 bytes under a 4-byte mask and the
  packet rate from the first byte of that word (real REQ, basic_inval frame 1:
  bytes ``02 f1 40 00`` at MAD 112 → tshark flow label 0x2f, rate 2; the kernel's
  CM_REQ_PRIMARY_FLOW_LABEL (CM+88, 20 bits) gives 0x02f14 and
  CM_REQ_PRIMARY_PACKET_RATE (CM+91, bits 5..0) gives 0).
* tshark 4.0 shows no ICRC for CNP packets (opcode 0x81): not compared there.
* RD packets (opcodes 0x40-0x5F, unused by RTRS and by Linux) are not compared:
  tshark 4.0 reads their RDETH 8 bytes too late.
* The built-in RPC-over-RDMA heuristic claims RTRS SEND WITH INVALIDATE frames
  and marks them malformed (pcaps/README.md), hiding the ICRC: it is disabled.
"""

import atexit
import functools
import ipaddress
import os
import shutil
import subprocess
import tempfile

from rtrs_scapy.layers.cm import (
    MAD, CmaIpHdr, CMDrep, CMDreq, CMRej, CMRep, CMReq, CMRtu,
)
from rtrs_scapy.layers.ib import (
    CNP_OPCODE, AETH, BTH, DETH, GRH, IETH, LRH, RDETH, RETH, AtomicAckETH, AtomicETH, ImmDt,
)

TSHARK = shutil.which("tshark")
TSHARK_OPTIONS = ["--disable-heuristic", "rpcrdma_infiniband"]


@functools.lru_cache(maxsize=None)
def tshark_env():
    """tshark without personal plugins or preferences (an installed RTRS Lua plugin
    must not change what "tshark's own dissector" means here)."""
    home = tempfile.mkdtemp(prefix="tshark-home-")
    atexit.register(shutil.rmtree, home, True)
    return {**os.environ, "HOME": home, "XDG_CONFIG_HOME": home,
            "WIRESHARK_CONFIG_DIR": home}


def _run(cmd):
    assert TSHARK, "tshark is not installed (scripts/test.sh installs it)"
    done = subprocess.run(cmd, capture_output=True, text=True, env=tshark_env())
    assert done.returncode == 0, done.stderr
    return done.stdout

# Scapy layer -> [(tshark field, Scapy field)], in wire order.
LAYER_FIELDS = [
    (LRH, [("infiniband.lrh.vl", "vl"), ("infiniband.lrh.lver", "lver"),
           ("infiniband.lrh.sl", "sl"), ("infiniband.lrh.lnh", "lnh"),
           ("infiniband.lrh.dlid", "dlid"), ("infiniband.lrh.pktlen", "pktlen"),
           ("infiniband.lrh.slid", "slid"), ("infiniband.variant.crc", "vcrc")]),
    (GRH, [("infiniband.grh.ipver", "ipver"), ("infiniband.grh.tclass", "tclass"),
           ("infiniband.grh.flowlabel", "flowlabel"), ("infiniband.grh.paylen", "paylen"),
           ("infiniband.grh.nxthdr", "nexthdr"), ("infiniband.grh.hoplmt", "hoplmt"),
           ("infiniband.grh.sgid", "sgid"), ("infiniband.grh.dgid", "dgid")]),
    (BTH, [("infiniband.bth.opcode", "opcode"), ("infiniband.bth.se", "solicited"),
           ("infiniband.bth.m", "migreq"), ("infiniband.bth.padcnt", "padcount"),
           ("infiniband.bth.tver", "version"), ("infiniband.bth.p_key", "pkey"),
           ("infiniband.bth.destqp", "dqpn"), ("infiniband.bth.a", "ackreq"),
           ("infiniband.bth.reserved7", "resv7"), ("infiniband.bth.psn", "psn"),
           ("infiniband.invariant.crc", "icrc")]),
    (RDETH, [("infiniband.rdeth.eecnxt", "ee_context")]),
    (DETH, [("infiniband.deth.q_key", "qkey"), ("infiniband.deth.srcqp", "src_qp")]),
    (RETH, [("infiniband.reth.va", "va"), ("infiniband.reth.r_key", "rkey"),
            ("infiniband.reth.dmalen", "dma_len")]),
    # tshark shows the AtomicETH VA and R_Key with the RETH fields
    (AtomicETH, [("infiniband.reth.va", "va"), ("infiniband.reth.r_key", "rkey"),
                 ("infiniband.atomiceth.swapdt", "swap_add"),
                 ("infiniband.atomiceth.cmpdt", "compare")]),
    (AETH, [("infiniband.aeth.syndrome", "syndrome"), ("infiniband.aeth.msn", "msn")]),
    (AtomicAckETH, [("infiniband.atomicacketh.origremdt", "orig_remote_data")]),
    (ImmDt, [("infiniband.immdt", "imm")]),
    (IETH, [("infiniband.ieth", "rkey")]),
    (MAD, [("infiniband.mad.baseversion", "base_version"),
           ("infiniband.mad.mgmtclass", "mgmt_class"),
           ("infiniband.mad.classversion", "class_version"),
           ("infiniband.mad.method", "method"), ("infiniband.mad.status", "status"),
           ("infiniband.mad.classspecific", "class_specific"),
           ("infiniband.mad.transactionid", "transaction_id"),
           ("infiniband.mad.attributeid", "attribute_id"),
           ("infiniband.mad.attributemodifier", "attribute_modifier")]),
    (CMReq, [("infiniband.cm.req", "local_comm_id"),
             ("infiniband.cm.req.serviceid", "service_id"),
             ("infiniband.cm.req.localcaguid", "local_ca_guid"),
             ("infiniband.cm.req.localqkey", "local_qkey"),
             ("infiniband.cm.req.localqpn", "local_qpn"),
             ("infiniband.cm.req.responderres", "responder_resources"),
             ("infiniband.cm.req.localeecn", "local_eecn"),
             ("infiniband.cm.req.initdepth", "initiator_depth"),
             ("infiniband.cm.req.remoteeecn", "remote_eecn"),
             ("infiniband.cm.req.remoteresptout", "remote_cm_response_timeout"),
             ("infiniband.cm.req.transpsvctype", "transport_service_type"),
             ("infiniband.cm.req.e2eflowctrl", "end_to_end_flow_control"),
             ("infiniband.cm.req.startpsn", "starting_psn"),
             ("infiniband.cm.req.localresptout", "local_cm_response_timeout"),
             ("infiniband.cm.req.retrcount", "retry_count"),
             ("infiniband.cm.req.pkey", "partition_key"),
             ("infiniband.cm.req.pppmtu", "path_mtu"),
             ("infiniband.cm.req.rdcexist", "rdc_exists"),
             ("infiniband.cm.req.rnrretrcount", "rnr_retry_count"),
             ("infiniband.cm.req.maxcmretr", "max_cm_retries"),
             ("infiniband.cm.req.srq", "srq"),
             ("infiniband.cm.req.ext_transport", "extended_transport_type"),
             ("infiniband.cm.req.prim_locallid", "primary_local_port_lid"),
             ("infiniband.cm.req.prim_remotelid", "primary_remote_port_lid"),
             ("infiniband.cm.req.prim_tfcclass", "primary_traffic_class"),
             ("infiniband.cm.req.prim_hoplim", "primary_hop_limit"),
             ("infiniband.cm.req.prim_sl", "primary_sl"),
             ("infiniband.cm.req.prim_subnetlocal", "primary_subnet_local"),
             ("infiniband.cm.req.prim_localacktout", "primary_local_ack_timeout"),
             ("infiniband.cm.req.alt_locallid", "alternate_local_port_lid"),
             ("infiniband.cm.req.alt_remotelid", "alternate_remote_port_lid"),
             ("infiniband.cm.req.alt_tfcclass", "alternate_traffic_class"),
             ("infiniband.cm.req.alt_hoplim", "alternate_hop_limit"),
             ("infiniband.cm.req.alt_sl", "alternate_sl"),
             ("infiniband.cm.req.alt_subnetlocal", "alternate_subnet_local"),
             ("infiniband.cm.req.alt_localacktout", "alternate_local_ack_timeout")]),
    (CmaIpHdr, [("infiniband.cm.req.ip_cm.ipv", "ip_version"),
                ("infiniband.cm.req.ip_cm.sport", "port")]),
    (CMRep, [("infiniband.cm.rep", "local_comm_id"),
             ("infiniband.cm.rep.remotecommid", "remote_comm_id"),
             ("infiniband.cm.rep.localqkey", "local_qkey"),
             ("infiniband.cm.rep.localqpn", "local_qpn"),
             ("infiniband.cm.rep.localeecn", "local_eecn"),
             ("infiniband.cm.rep.startpsn", "starting_psn"),
             ("infiniband.cm.rep.respres", "responder_resources"),
             ("infiniband.cm.rep.initdepth", "initiator_depth"),
             ("infiniband.cm.rep.tgtackdelay", "target_ack_delay"),
             ("infiniband.cm.rep.failoveracc", "failover_accepted"),
             ("infiniband.cm.rep.e2eflowctrl", "end_to_end_flow_control"),
             ("infiniband.cm.rep.rnrretrcount", "rnr_retry_count"),
             ("infiniband.cm.rep.srq", "srq"),
             ("infiniband.cm.rep.localcaguid", "local_ca_guid")]),
    (CMRtu, [("infiniband.cm.rtu.localcommid", "local_comm_id"),
             ("infiniband.cm.rtu.remotecommid", "remote_comm_id")]),
    (CMRej, [("infiniband.cm.rej.localcommid", "local_comm_id"),
             ("infiniband.cm.rej.remotecommid", "remote_comm_id"),
             ("infiniband.cm.rej.msgrej", "message_rejected"),
             ("infiniband.cm.rej.rejinfolen", "reject_info_length"),
             ("infiniband.cm.rej.reason", "reason")]),
    (CMDreq, [("infiniband.cm.dreq.localcommid", "local_comm_id"),
              ("infiniband.cm.dreq.remotecommid", "remote_comm_id"),
              ("infiniband.cm.req.remoteqpneecn", "remote_qpn")]),
    (CMDrep, [("infiniband.cm.drsp.localcommid", "local_comm_id"),
              ("infiniband.cm.drsp.remotecommid", "remote_comm_id")]),
]

# Fields whose value depends on the content (IPv4-mapped or not), handled in scapy_view.
GID_FIELDS = [
    ("infiniband.cm.req.prim_localgid", "primary_local_port_gid"),
    ("infiniband.cm.req.prim_remotegid", "primary_remote_port_gid"),
]
CMA_ADDR_FIELDS = [("infiniband.cm.req.ip_cm.sip", "src_addr"),
                   ("infiniband.cm.req.ip_cm.dip", "dst_addr")]

BYTES_FIELDS = {"infiniband.immdt", "infiniband.ieth"}
ADDRESS_FIELDS = {"infiniband.grh.sgid", "infiniband.grh.dgid"} | {
    f + suffix for f, _ in GID_FIELDS for suffix in ("", "_ipv4")} | {
    f + v for f, _ in CMA_ADDR_FIELDS for v in ("4", "6")}

FIELDS = list(dict.fromkeys([t for _, pairs in LAYER_FIELDS for t, _ in pairs]
                           + sorted(ADDRESS_FIELDS)))


def _value(field, text):
    if field in BYTES_FIELDS:
        return int(text.replace(":", ""), 16)
    if field in ADDRESS_FIELDS:
        return ipaddress.ip_address(text)
    if text in ("True", "False"):
        return int(text == "True")
    return int(text, 0)


def tshark_rows(pcap, fields=FIELDS, extra_options=()):
    """One dict {field: value} per frame (in frame order), from a single tshark run."""
    cmd = [TSHARK, "-n", "-r", str(pcap), *TSHARK_OPTIONS, *extra_options, "-T", "fields",
           "-E", "separator=\t", "-E", "occurrence=f", "-e", "frame.number"]
    for field in fields:
        cmd += ["-e", field]
    rows = []
    for line in _run(cmd).splitlines():
        values = line.split("\t")
        row = {"frame.number": int(values[0])}
        for field, text in zip(fields, values[1:]):
            if text != "":
                row[field] = _value(field, text)
        rows.append(row)
    return rows


def tshark_problem_frames(pcap, extra_options=()):
    """Frame numbers with a malformed item or an expert item of severity >= error."""
    cmd = [TSHARK, "-n", "-r", str(pcap), *TSHARK_OPTIONS, *extra_options,
           "-Y", "_ws.malformed || _ws.expert.severity >= error",
           "-T", "fields", "-e", "frame.number", "-e", "_ws.expert.message"]
    return [line for line in _run(cmd).splitlines() if line.strip()]


def _norm(value, field=None):
    if field in ADDRESS_FIELDS and isinstance(value, int):  # GRH GIDs are 128-bit ints
        return ipaddress.IPv6Address(value)
    if isinstance(value, str):
        return ipaddress.ip_address(value)
    if isinstance(value, bytes):
        return int.from_bytes(value, "big")
    return int(value)


def _gid(field, value, view, ipv4):
    addr = ipaddress.ip_address(value)
    if ipv4 and addr.ipv4_mapped is not None:
        view[field + "_ipv4"] = addr.ipv4_mapped
    else:
        view[field] = addr


def scapy_view(pkt):
    """{tshark field name: value} for every field that the Scapy layers decoded."""
    view = {}
    for cls, pairs in LAYER_FIELDS:
        layer = pkt.getlayer(cls)
        if layer is None:
            continue
        for tshark_field, scapy_field in pairs:
            value = layer.getfieldval(scapy_field)
            if value is None:
                continue
            view[tshark_field] = _norm(value, tshark_field)
    req = pkt.getlayer(CMReq)
    cma = pkt.getlayer(CmaIpHdr)
    if req is not None:
        # tshark shows the GIDs as IPv4 when the RDMA CM header says IPv4
        ipv4 = cma is not None and cma.ip_version == 4
        for tshark_field, scapy_field in GID_FIELDS:
            _gid(tshark_field, req.getfieldval(scapy_field), view, ipv4)
    if cma is not None:
        suffix = "4" if cma.ip_version == 4 else "6"
        for tshark_field, scapy_field in CMA_ADDR_FIELDS:
            addr = ipaddress.ip_address(cma.getfieldval(scapy_field))
            if suffix == "4":
                addr = ipaddress.ip_address(int(addr) & 0xFFFFFFFF)
            view[tshark_field + suffix] = addr
    return view


def differences(pkt, row, ignore=()):
    """[(field, scapy value, tshark value)] for every compared field that differs.

    A field decoded by only one side counts as a difference.
    """
    view = scapy_view(pkt)
    bth = pkt.getlayer(BTH)
    if bth is not None and bth.opcode == CNP_OPCODE:
        ignore = tuple(ignore) + ("infiniband.invariant.crc",)
    diffs = []
    for field in FIELDS:
        if field in ignore:
            continue
        mine, theirs = view.get(field), row.get(field)
        if mine != theirs:
            diffs.append((field, mine, theirs))
    return diffs


def compared_fields(pkt, row):
    """The fields that both sides decoded for this frame."""
    view = scapy_view(pkt)
    return sorted(f for f in view if f in row)
