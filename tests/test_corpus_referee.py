"""An independent referee for the crafted corpus: Wireshark's own InfiniBand
dissector plus a few lines of immediate decoding, held against the analyzer.

tests/test_corpus.py compares the analyzer with the crafter's truth.json, so the
two could share a mistake.  Here nothing of the project decodes the packets: tshark
gives addresses, destination QPs, PSNs, immediates, CM attribute IDs and the CM REP
private data, and the kernel's rules (drivers/infiniband/ulp/rtrs/rtrs-pri.h, rtrs-clt.c,
rtrs-srv.c) turn them into counts:

* an immediate's type is bits 31..28: IO_REQ 0, IO_RSP 1, IO_RSP_W_INV 2, HB_MSG 8,
  HB_ACK 9;
* an IO_REQ is a request; its payload ``(buf_id << mem_bits) | offset`` holds in
  ``offset`` where the trailer sits in the chunk, i.e. ``data_len + usr_len``, the
  bytes rtrs-client counts for the request (``mem_bits = 28 - chunk_bits``,
  ``chunk_bits = ilog2(queue_depth - 1) + 1``, the queue depth from the conn_rsp
  in the CM REP private data: LE u16 at byte 6 after magic 0x1BBD);
* an IO_RSP / IO_RSP_W_INV is a response; ``-((payload >> 19) & 0x1FF)`` its errno;
* a packet seen again with the same (addresses, QP, PSN) is a retransmission.

Counted per file and per path (client and server address).  Bytes are not compared
for a capture without the handshake (mid_session): the queue depth is not in it.
"""

import ipaddress
import os
import shutil
import struct
import subprocess
import tempfile
from collections import Counter, defaultdict

import pytest

from rtrs_scapy.analysis import analyze

from conftest import PROJECT_PCAPS

TSHARK_FIELDS = ("frame.number", "ip.src", "ip.dst", "ipv6.src", "ipv6.dst",
                 "infiniband.grh.sgid", "infiniband.grh.dgid",
                 "infiniband.lrh.slid", "infiniband.lrh.dlid",
                 "infiniband.bth.destqp", "infiniband.bth.psn",
                 "infiniband.immdt", "infiniband.mad.attributeid",
                 "infiniband.cm.rep.private")
IO_REQ, IO_RSP, IO_RSP_W_INV, HB_MSG, HB_ACK = 0, 1, 2, 8, 9
CM_REQ, CM_REP = 0x0010, 0x0013
RTRS_MAGIC = 0x1BBD
LINKTYPE_INFINIBAND = 247


def crafted_captures():
    """Every crafted capture with its truth, but pcaps of link type 247, which tshark
    4.0 cannot open (their ERF twins carry the same frames and are refereed)."""
    files = sorted(p.parent / p.name[:-len(".truth.json")]
                   for p in PROJECT_PCAPS.glob("*.truth.json"))
    return [f for f in files if pcap_link_type(f) != LINKTYPE_INFINIBAND]


def pcap_link_type(path):
    """The link type of a plain pcap file, None for other formats."""
    head = path.read_bytes()[:24]
    for order in "<>":
        if len(head) == 24 and struct.unpack(order + "I", head[:4])[0] in (0xA1B2C3D4,
                                                                           0xA1B23C4D):
            return struct.unpack(order + "I", head[20:24])[0] & 0x0FFFFFFF
    return None


def tshark_rows(path):
    """One dict per frame of ``TSHARK_FIELDS``, from tshark without personal plugins."""
    home = tempfile.mkdtemp(prefix="referee-home-")
    try:
        env = {**os.environ, "HOME": home, "XDG_CONFIG_HOME": home,
               "WIRESHARK_CONFIG_DIR": home}
        cmd = ["tshark", "-r", str(path), "--disable-heuristic", "rpcrdma_infiniband",
               "-T", "fields", "-E", "occurrence=f", "-E", "separator=\t"]
        for name in TSHARK_FIELDS:
            cmd += ["-e", name]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return [dict(zip(TSHARK_FIELDS, line.split("\t"))) for line in done.stdout.splitlines()]


IP_FIELDS = (("ip.src", "ip.dst"), ("ipv6.src", "ipv6.dst"))
OTHER_FIELDS = (("infiniband.grh.sgid", "infiniband.grh.dgid"),  # RoCEv1
                ("infiniband.lrh.slid", "infiniband.lrh.dlid"))  # native InfiniBand


def _addresses(row):
    """(source, destination, is IP) as the frame shows them: IP, else GID, else LID."""
    for src, dst in IP_FIELDS + OTHER_FIELDS:
        if row[src]:
            return row[src], row[dst], (src, dst) in IP_FIELDS
    raise AssertionError("frame %s has no address" % row["frame.number"])


def mem_bits(queue_depth):
    """rtrs-pri.h: MAX_IMM_PAYL_BITS (28) minus ilog2(queue_depth - 1) + 1."""
    return 28 - (queue_depth - 1).bit_length()


def new_counts():
    return {"requests": 0, "bytes": 0, "responses": 0, "errnos": Counter(), "hb": Counter()}


def referee(path):
    """({(client, server): counts}, whether those are IP addresses) of one capture,
    from tshark's fields alone."""
    rows = tshark_rows(path)
    clients, queue_depth, seen, messages, by_ip = set(), {}, set(), [], True
    for row in rows:
        if row["infiniband.mad.attributeid"]:
            src, dst, _ = _addresses(row)
            attr = int(row["infiniband.mad.attributeid"], 16)
            if attr == CM_REQ:
                clients.add(src)
            elif attr == CM_REP and row["infiniband.cm.rep.private"]:
                private = bytes.fromhex(row["infiniband.cm.rep.private"])
                magic, _version, _errno, depth = struct.unpack_from("<HHhH", private)
                if magic == RTRS_MAGIC:
                    queue_depth[(dst, src)] = depth
        if row["infiniband.immdt"]:
            src, dst, is_ip = _addresses(row)
            by_ip &= is_ip
            key = (src, dst, row["infiniband.bth.destqp"], row["infiniband.bth.psn"])
            if key not in seen:  # else a go-back-N retransmission
                seen.add(key)
                imm = int(row["infiniband.immdt"], 16)  # the 4 bytes, big-endian
                messages.append((src, dst, imm >> 28, imm & (2 ** 28 - 1)))
    # without a handshake the client is the side that sends IO_REQ immediates
    clients |= {src for src, _dst, kind, _payload in messages if kind == IO_REQ}
    paths = defaultdict(new_counts)
    for src, dst, kind, payload in messages:
        to_server = src in clients
        pair = (src, dst) if to_server else (dst, src)
        counts = paths[pair]
        if kind == IO_REQ:
            counts["requests"] += 1
            if pair in queue_depth and counts["bytes"] is not None:
                counts["bytes"] += payload & (2 ** mem_bits(queue_depth[pair]) - 1)
            else:
                counts["bytes"] = None  # the queue depth is not in this capture
        elif kind in (IO_RSP, IO_RSP_W_INV):
            counts["responses"] += 1
            errno = -((payload >> 19) & 0x1FF)
            if errno:
                counts["errnos"][errno] += 1
        elif kind in (HB_MSG, HB_ACK):
            direction = "client_to_server" if to_server else "server_to_client"
            counts["hb"][("acks_" if kind == HB_ACK else "") + direction] += 1
    return dict(paths), by_ip


def analyzer_counts(summary):
    """The same counts from the analyzer's summary, keyed by (client, server): requests
    and bytes from ``io``, answered requests from ``latency_us``, errnos, heartbeats."""
    paths = defaultdict(new_counts)
    for session in summary["sessions"]:
        for path in session["paths"]:
            counts = paths[(path["client"], path["server"])]
            io, latency = path["io"], path["latency_us"]
            counts["requests"] += io["read"]["count"] + io["write"]["count"]
            counts["bytes"] += io["read"]["bytes"] + io["write"]["bytes"]
            counts["responses"] += sum(latency[op].get("count", 0) for op in ("read", "write"))
            counts["errnos"].update(error["errno"] for error in path["errors"])
            counts["hb"].update(path["heartbeats"])
    return dict(paths)


def comparable(counts, with_bytes):
    """Counts without zero entries, and without bytes where the referee cannot tell."""
    return {"requests": counts["requests"], "responses": counts["responses"],
            "bytes": counts["bytes"] if with_bytes else None,
            "errnos": dict(+counts["errnos"]), "hb": dict(+counts["hb"])}


def total(paths):
    summed = new_counts()
    for counts in paths.values():
        summed["requests"] += counts["requests"]
        summed["responses"] += counts["responses"]
        summed["bytes"] = None if None in (summed["bytes"], counts["bytes"]) \
            else summed["bytes"] + counts["bytes"]
        summed["errnos"].update(counts["errnos"])
        summed["hb"].update(counts["hb"])
    return summed


CAPTURES = crafted_captures()


@pytest.fixture(scope="module", params=CAPTURES, ids=[p.name for p in CAPTURES])
def refereed(request):
    """(referee's paths, whether keyed by IP, the analyzer's paths) of one capture."""
    wire, by_ip = referee(request.param)
    return wire, by_ip, analyzer_counts(analyze(request.param).summary)


def test_the_referee_covers_the_corpus():
    names = {p.name for p in CAPTURES}
    assert "basic_ib.pcap" not in names and "basic_ib_erf.pcap" in names
    assert len(names) >= 20


def test_file_totals(refereed):
    """Requests, bytes, responses, errnos and heartbeats of the whole file."""
    wire, _by_ip, analyzer = refereed
    want = total(wire)
    with_bytes = want["bytes"] is not None
    assert comparable(total(analyzer), with_bytes) == comparable(want, with_bytes)


def test_per_path(refereed):
    """The same per client/server pair.  The analyzer names a path by the IP addresses
    of its RDMA CM header, the packets' own addresses on RoCEv2; RoCEv1 and native IB
    frames show GIDs and LIDs instead, and those captures hold one pair."""
    wire, by_ip, analyzer = refereed
    active = {pair: counts for pair, counts in analyzer.items()
              if comparable(counts, True) != comparable(new_counts(), True)}
    if not by_ip:
        assert len(wire) == 1 and len(active) == 1
    else:
        bytes_known = {(_ip(c), _ip(s)): v["bytes"] is not None for (c, s), v in wire.items()}
        want = {(_ip(c), _ip(s)): comparable(v, v["bytes"] is not None)
                for (c, s), v in wire.items()}
        got = {(_ip(c), _ip(s)): comparable(v, bytes_known.get((_ip(c), _ip(s)), True))
               for (c, s), v in active.items()}
        assert got == want


def _ip(text):
    return ipaddress.ip_address(text)
