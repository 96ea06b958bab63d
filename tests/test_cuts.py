"""Captures cut at many points, as production hands them over: the summary of
what remains equals the whole capture's truth restricted to the remaining frames
(docs/PROTOCOL.md#captures-that-start-mid-session).

The whole capture's records are the reference: their counts and bytes equal
the kernel's counters (tests/test_truth.py) and the crafter's truth
(tests/test_corpus.py, tests/test_corpus_referee.py).  A request belongs to the
cut capture when its immediate does (the kernel counted it, even when its first
packets were cut away); a pair when both ends do; a response whose request was
cut away is a response without request, not an anomaly.
"""

import struct

import pytest

from conftest import PROJECT_PCAPS, REAL_ALL, real_pcap
from rtrs_scapy.analysis import analyze
from rtrs_scapy.analysis.qdepth import queue_depth_of
from rtrs_scapy.capture import open_capture
from rtrs_scapy.spec.imm import mem_bits

PAIRING_ANOMALIES = {"buf_id_reused", "unmatched_response", "offset_mismatch", "bad_trailer"}
OPS = ("read", "write")
CRAFTED = sorted(PROJECT_PCAPS.glob("load_c*_qd*.pcap")) + [PROJECT_PCAPS / "io_errors.pcap"]
SMALL_REAL = [name for name, _, truth in REAL_ALL if truth["pcap_stats"]["frames"] < 20000]


def frames_of(pcap):
    with open_capture(pcap) as cap:
        return [(ts, bytes(buf[s:e])) for _, ts, buf, s, e, _ in cap], cap.link_type


def write_pcap(path, frames, link_type):
    with open(path, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, link_type))
        for ts, data in frames:
            sec = int(ts)
            usec = int(round((ts - sec) * 1e6))
            if usec == 1000000:
                sec, usec = sec + 1, 0
            out.write(struct.pack("<IIII", sec, usec, len(data), len(data)) + data)


def restricted(whole, first):
    """What the whole capture's records say about frames first…"""
    want = {"count": dict.fromkeys(OPS, 0), "bytes": dict.fromkeys(OPS, 0),
            "latency": {op: [] for op in OPS}, "without_request": 0, "errnos": []}
    requests = {m["frame"]: m for m in whole.messages if m["msg"] in OPS}
    for m in whole.messages:
        if m["frame"] < first:
            continue
        if m["msg"] in OPS:
            want["count"][m["msg"]] += 1
            want["bytes"][m["msg"]] += m["fields"]["data_len"] + m["fields"]["usr_len"]
        elif m["msg"] == "io_rsp":
            if m["fields"]["errno"]:
                want["errnos"].append(m["fields"]["errno"])
            request = requests.get(m["paired_frame"])
            if request is None or request["frame"] < first:
                want["without_request"] += 1
            elif "failover_from" not in request["fields"]:
                want["latency"][request["msg"]].append(round(m["latency"] * 1e6, 1))
    return want


def summed(summary, key):
    return sum(p[key] for s in summary["sessions"] for p in s["paths"])


def check_cut(whole, cut, first, qd):
    want = restricted(whole, first)
    summary = cut.summary
    paths = [p for s in summary["sessions"] for p in s["paths"]]
    for op in OPS:
        assert sum(p["io"][op]["count"] for p in paths) == want["count"][op], (first, op)
        assert sum(p["io"][op]["bytes"] for p in paths) == want["bytes"][op], (first, op)
        latency = [p["latency_us"][op] for p in paths if p["latency_us"][op]["count"]]
        assert sum(s["count"] for s in latency) == len(want["latency"][op]), (first, op)
        if want["latency"][op]:
            assert min(s["min"] for s in latency) == pytest.approx(min(want["latency"][op]),
                                                                   abs=0.1)
            assert max(s["max"] for s in latency) == pytest.approx(max(want["latency"][op]),
                                                                   abs=0.1)
    assert summed(summary, "responses_without_request") == want["without_request"]
    assert sorted(e["errno"] for p in paths for e in p["errors"]) == sorted(want["errnos"])
    assert not [a for a in summary["anomalies"] if a["kind"] in PAIRING_ANOMALIES], first
    for path in paths:    # "assumed": the remaining traffic cannot tell (the pairs above hold)
        assert path["queue_depth_source"] in ("handshake", "inferred", "assumed")
        if path["queue_depth_source"] in ("handshake", "inferred"):
            assert path["queue_depth"] == queue_depth_of(mem_bits(qd)), first
    if not paths:
        return        # only CM teardown left: who is the client cannot be told
    whole_disc = sorted((d["frame"], d["initiator"]) for p in
                        (p for s in whole.summary["sessions"] for p in s["paths"])
                        for d in p["disconnects"] if d["frame"] >= first)
    assert sorted((d["frame"], d["initiator"]) for p in paths
                  for d in p["disconnects"]) == [(f - first + 1, i) for f, i in whole_disc]


def cut_points(frames, whole, step):
    """Every ``step``-th frame, and where it hurts: inside a multi-packet message, just
    after a request whose response follows, inside READ data."""
    points = set(range(2, len(frames), step))
    for m in whole.messages:
        if m["msg"] in OPS and m["fields"]["first_frame"] < m["frame"]:
            points.add(m["fields"]["first_frame"] + 1)          # inside the write
        if m["msg"] in OPS and m["paired_frame"] and m["paired_frame"] > m["frame"] + 1:
            points.add(m["frame"] + 1)                           # between the two
        if m["fields"].get("reply_frame"):
            points.add(m["fields"]["reply_frame"])               # inside READ data
    return sorted(p for p in points if 1 < p <= len(frames))[:80]


def run_cuts(pcap, tmp_path, step, qd):
    frames, link_type = frames_of(pcap)
    whole = analyze(pcap, keep_messages=True)
    points = cut_points(frames, whole, step)
    for first in points:
        short = tmp_path / "cut.pcap"
        write_pcap(short, frames[first - 1:], link_type)
        check_cut(whole, analyze(short, keep_messages=False), first, qd)
    return len(points)


@pytest.mark.parametrize("name", SMALL_REAL)
def test_real_captures_cut_every_50th_frame(name, tmp_path):
    truth = next(t for n, _, t in REAL_ALL if n == name)
    qd = truth["config"]["server_module_params"]["sess_queue_depth"]
    assert run_cuts(real_pcap(name), tmp_path, 50, qd) >= 20


@pytest.mark.parametrize("pcap", CRAFTED, ids=lambda p: p.stem)
def test_crafted_sessions_under_load_cut_at_many_points(pcap, tmp_path):
    qd = int(pcap.stem.split("_qd")[1]) if "_qd" in pcap.stem else 512
    assert run_cuts(pcap, tmp_path, 23, qd) >= 15


def test_the_load_capture_cut_inside_its_traffic(tmp_path):
    """135k frames of 4 parallel random IOs: a few cuts through the busy part."""
    pcap = real_pcap("load")
    frames, link_type = frames_of(pcap)
    whole = analyze(pcap, keep_messages=True)
    for first in (30001, 67613, 67614, 101777):
        write_pcap(tmp_path / "cut.pcap", frames[first - 1:], link_type)
        check_cut(whole, analyze(tmp_path / "cut.pcap", keep_messages=False), first, 512)
