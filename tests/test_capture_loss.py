"""Capture loss against network loss (docs/PROTOCOL.md#capture-loss).

Real captures with RoCE data frames dropped at random (fixed seeds, a few rates) by the
few lines of pcap reading and writing below, independent of the code under test; the
expected figures come from the dropped set and the BTH fields of the frames:

* ``capture_lost_packets`` (the capture's and per path) is the number of dropped
  (stream, PSN) that appear nowhere in the cut capture and that a later packet of the
  stream passes (a loss is known only by the gap it leaves before a later packet);
* the requests (read + write) and the responses a path counts are the uncut capture's
  minus those whose immediate-carrying packet is in the cut capture neither as a new
  packet nor as a single-packet retransmission that fills the gap;
* no ``psn_gap`` anomaly, no other anomaly kind than the uncut capture's but
  ``buf_id_reused``, at most once per lost response (its request waits for it until its
  buf_id comes again).

On failover.pcap, whose dead path's retransmissions are real, the per-path
``retransmissions`` equal tshark's count of frames whose BTH PSN repeats an earlier PSN of
the same destination and QP; dropping the first copy of every retransmitted packet leaves
them the network's (the copy fills the gap: no capture loss).
"""

import gzip
import random
import struct
from pathlib import Path

import pytest

from conftest import real_pcap
from ib_decode import bth_rows
from test_inputs import without_capture_block
from test_parts import split
from rtrs_scapy.analysis import analyze
from rtrs_scapy.analysis.parts import map_file, reduce_parts
from rtrs_scapy.report.text import render

DATA_OPCODES = set(range(12)) | {22, 23}   # RC SEND / RDMA WRITE packets: one PSN each
IMM_AT = {3: 12, 5: 12, 9: 12, 11: 28}     # the ImmDt after the BTH (and RETH, opcode 11)
ONLY = {4, 5, 10, 11, 23}                  # single-packet messages
IMM_TYPE_SHIFT = 28                        # rtrs-pri.h: the type above 28 payload bits
IO_REQ, IO_RSP, IO_RSP_W_INV = 0, 1, 2     # rtrs-pri.h: RTRS_IO_REQ_IMM, ..._RSP_...
ROCE_PORT = 4791
MASK, HALF = 0xFFFFFF, 0x800000
RATES = (0.003, 0.02)


def read_pcap(path):
    """(global header, [(record header, frame bytes)]) of a little-endian pcap."""
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    assert data[:4] == b"\xd4\xc3\xb2\xa1"
    records, pos = [], 24
    while pos + 16 <= len(data):
        caplen = struct.unpack_from("<I", data, pos + 8)[0]
        records.append((data[pos:pos + 16], data[pos + 16:pos + 16 + caplen]))
        pos += 16 + caplen
    return data[:24], records


def bth(frame):
    """(src, dst, opcode, dest QP, PSN, imm or None) of an Ethernet/IPv4/UDP 4791 frame."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
        return None
    udp = 14 + (frame[14] & 0xF) * 4
    if struct.unpack_from(">H", frame, udp + 2)[0] != ROCE_PORT:
        return None
    at = udp + 8
    opcode = frame[at]
    qpn = int.from_bytes(frame[at + 5:at + 8], "big")
    psn = int.from_bytes(frame[at + 9:at + 12], "big")
    imm = struct.unpack_from(">I", frame, at + IMM_AT[opcode])[0] if opcode in IMM_AT else None
    return frame[26:30], frame[30:34], opcode, qpn, psn, imm


def data_frames(records):
    """Per data frame (index, stream key, PSN unwrapped along its stream, opcode, imm,
    src, dst)."""
    last, out = {}, []
    for index, (_, frame) in enumerate(records):
        fields = bth(frame)
        if fields is None or fields[2] not in DATA_OPCODES:
            continue
        src, dst, opcode, qpn, psn, imm = fields
        key = (dst, qpn)
        before = last.get(key)
        if before is not None:        # 24-bit serial arithmetic along the stream
            psn = before + ((psn - before + HALF) & MASK) - HALF
        last[key] = psn
        out.append((index, key, psn, opcode, imm, src, dst))
    return out


def drop(records, frames, rate, seed, also=()):
    """The records without a random share ``rate`` of the data frames (and ``also``):
    (kept records, dropped data frames)."""
    rng = random.Random(seed)
    dropped = [f for f in frames if rng.random() < rate or f[0] in also]
    gone = {f[0] for f in dropped}
    return [r for i, r in enumerate(records) if i not in gone], dropped


def write_pcap(path, header, records):
    with open(path, "wb") as out:
        out.write(header)
        for head, frame in records:
            out.write(head + frame)
    return path


def expected_loss(frames, dropped):
    """Per (client, server) address pair, by the rules of the module docstring:
    packets lost by the capture, requests and responses made unknowable."""
    gone = {f[0] for f in dropped}
    kept = [f for f in frames if f[0] not in gone]
    seen, highest, counted = {}, {}, set()
    for index, key, psn, opcode, imm, src, dst in kept:
        top = highest.get(key)
        fill = top is not None and psn < top and psn not in seen.get(key, ())
        if psn not in seen.setdefault(key, set()) and (not fill or opcode in ONLY):
            counted.add((key, psn))   # a message completes here (new, or a gap's fill)
        seen[key].add(psn)
        highest[key] = psn if top is None else max(top, psn)
    lost, unknowable = {}, {}
    for index, key, psn, opcode, imm, src, dst in dropped:
        pair = _pair(src, dst, imm)
        if psn not in seen.get(key, ()) and psn < highest.get(key, psn):
            lost.setdefault(pair, set()).add((key, psn))
        if imm is not None and (key, psn) not in counted:
            kind = {IO_REQ: "requests", IO_RSP: "responses", IO_RSP_W_INV: "responses"}.get(
                imm >> IMM_TYPE_SHIFT)
            if kind:
                unknowable.setdefault((pair, kind), set()).add((key, psn))
    return ({pair: len(v) for pair, v in lost.items()},
            {k: len(v) for k, v in unknowable.items()})


def _pair(src, dst, imm):
    """(client, server) of a frame: a request goes client → server, all else back
    (the direction of the RTRS immediate's type; frames without one: lowest last octet
    is the client in these captures, 10.77.x.2 → 10.77.x.1)."""
    a, b = ".".join(map(str, src)), ".".join(map(str, dst))
    if imm is not None:
        return (a, b) if imm >> IMM_TYPE_SHIFT == IO_REQ else (b, a)
    return (a, b) if src[3] > dst[3] else (b, a)


def per_pair(summary):
    """Per (client, server): capture_lost_packets, retransmissions, requests, responses."""
    out = {}
    for session in summary["sessions"]:
        for path in session["paths"]:
            pair = (path["client"], path["server"])
            t = out.setdefault(pair, {"lost": 0, "rtx": 0, "requests": 0, "responses": 0})
            t["lost"] += path["transport"]["capture_lost_packets"]
            t["rtx"] += path["transport"]["retransmissions"]
            t["requests"] += sum(path["io"][op]["count"] for op in ("read", "write"))
            t["responses"] += sum(path["latency_us"][op]["count"] for op in ("read", "write"))
            t["responses"] += path["responses_without_request"]
    return out


@pytest.fixture(scope="module")
def uncut():
    """name -> (pcap header, records, data frames, summary of the uncut capture)."""
    out = {}
    for name in ("multipath", "failover"):
        header, records = read_pcap(real_pcap(name))
        out[name] = (header, records, data_frames(records),
                     analyze(real_pcap(name), keep_messages=False).summary)
    return out


def _cut(uncut, name, tmp_path, rate, seed, also=()):
    header, records, frames, whole = uncut[name]
    kept, dropped = drop(records, frames, rate, seed, also)
    path = write_pcap(tmp_path / ("%s-%g.pcap" % (name, rate)), header, kept)
    return whole, frames, dropped, analyze(path, keep_messages=False).summary


def _hold(whole, frames, dropped, cut, copied=()):
    lost, unknowable = expected_loss(frames, dropped)
    # every dropped packet but those of ``copied`` (a copy of each remains) and those
    # after the last packet the cut keeps of their stream (no later packet shows the gap)
    gone = {f[0] for f in dropped}
    last = {}
    for index, key, psn, *_ in frames:
        if index not in gone:
            last[key] = max(psn, last.get(key, psn))
    unseen = [f for f in dropped if f[2] > last.get(f[1], -1)]
    assert sum(lost.values()) == len(dropped) - len(copied) - len(unseen)
    assert cut["capture"]["capture_lost_packets"] == sum(lost.values())
    before, after = per_pair(whole), per_pair(cut)
    assert set(before) == set(after)
    for pair, figures in after.items():
        assert figures["lost"] == lost.get(pair, 0), pair
        for kind in ("requests", "responses"):
            assert figures[kind] == before[pair][kind] - unknowable.get((pair, kind), 0), \
                (pair, kind)
    assert "psn_gap" not in cut["anomaly_counts"]
    counts = dict(cut["anomaly_counts"])   # a lost response leaves its request pending:
    reused = counts.pop("buf_id_reused", 0) - whole["anomaly_counts"].get("buf_id_reused", 0)
    assert 0 <= reused <= sum(v for (_, kind), v in unknowable.items() if kind == "responses")
    assert set(counts) <= set(whole["anomaly_counts"])
    assert not whole["capture"]["capture_lost_packets"]


@pytest.mark.parametrize("rate", RATES)
def test_random_drops_on_multipath(uncut, tmp_path, rate):
    whole, frames, dropped, cut = _cut(uncut, "multipath", tmp_path, rate, seed=20)
    _hold(whole, frames, dropped, cut)
    lines = render(cut).splitlines()
    assert lines[2] == "  capture loss: %d packets not in the capture (PSN gaps no " \
        "retransmission filled): a message whose last packet is lost is not counted" \
        % cut["capture"]["capture_lost_packets"]
    assert not any("capture loss" in line for line in render(whole).splitlines())


def test_random_drops_on_failover_keep_the_retransmissions_the_network_s(uncut, tmp_path):
    """The first copy of every retransmitted packet dropped as well: each is filled by
    its retransmission (the network's loss), only the random drops are the capture's."""
    header, records, frames, whole = uncut["failover"]
    firsts, seen = set(), {}
    for index, key, psn, *_ in frames:
        if psn in seen.setdefault(key, {}):
            firsts.add(seen[key][psn])
        else:
            seen[key][psn] = index
    whole, frames, dropped, cut = _cut(uncut, "failover", tmp_path, 0.002, seed=21,
                                       also=firsts)
    assert firsts
    _hold(whole, frames, dropped, cut, copied=firsts)
    gone = {f[0] for f in dropped}
    assert {pair: f["rtx"] for pair, f in per_pair(cut).items() if f["rtx"]} == \
        _backward([f for f in frames if f[0] not in gone])


def _backward(frames):
    """Per (client, server): frames whose PSN is not past every one seen before on their
    stream (a copy of a packet seen before, or the copy of one the capture did not see)."""
    highest, out = {}, {}
    for index, key, psn, opcode, imm, src, dst in frames:
        if key in highest and psn <= highest[key]:
            pair = _pair(src, dst, imm)
            out[pair] = out.get(pair, 0) + 1
        highest[key] = max(psn, highest.get(key, psn))
    return out


def test_failover_retransmissions_per_path_are_tshark_s(uncut):
    """tshark's BTH fields: a frame whose PSN repeats an earlier PSN of the same
    destination and QP is a retransmission; counted per path, as the summary does."""
    seen, repeats = set(), {}
    for row in bth_rows(real_pcap("failover")):
        if row.opcode is None or row.opcode == 17 or row.destqp == 1:  # ACKs, MADs
            continue
        key = (row.dst, row.destqp, row.psn)
        if key in seen:
            pair = (row.dst, row.src) if row.src.endswith(".1") else (row.src, row.dst)
            repeats[pair] = repeats.get(pair, 0) + 1
        seen.add(key)
    # the same frames as this module's own reading of the pcap bytes
    assert repeats == _backward(uncut["failover"][2])
    figures = per_pair(uncut["failover"][3])
    assert {pair: f["rtx"] for pair, f in figures.items() if f["rtx"]} == repeats


@pytest.mark.parametrize("count", [3, 11])
def test_a_lossy_capture_in_files_reduces_to_one_pass(uncut, tmp_path, count):
    """parts.py: files of a capture with loss, some cut inside a gap, mapped apart and
    reduced, give the one pass's summary and its capture loss."""
    header, records, frames, _ = uncut["multipath"]
    kept, dropped = drop(records, frames, 0.02, seed=22)
    pcap = write_pcap(tmp_path / "lossy.pcap", header, kept)
    whole = analyze(pcap, keep_messages=False).summary
    parts = [map_file(f) for f in split(pcap, tmp_path, count)]
    reduced = reduce_parts(parts, keep_messages=False).summary
    assert without_capture_block(reduced) == without_capture_block(whole)
    assert reduced["capture"]["capture_lost_packets"] == \
        whole["capture"]["capture_lost_packets"] == \
        sum(expected_loss(frames, dropped)[0].values())
