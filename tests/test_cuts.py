"""Captures cut at many points, as production hands them over: the summary of
what remains equals the whole capture's truth restricted to the remaining frames
(docs/PROTOCOL.md#captures-that-start-mid-session).

The whole capture's records are the reference: their counts and bytes equal
the kernel's counters (tests/test_truth.py) and the crafter's truth
(tests/test_corpus.py, tests/test_corpus_referee.py).  A request belongs to the
cut capture when its immediate does (the kernel counted it, even when its first
packets were cut away); a pair when both ends do; a response whose request was
cut away is a response without request, not an anomaly.

Where a capture is cut (tests/cut_points.py): once in each situation a cut of it can
start in, at the situation's last frame.  A situation is what the cut leaves the
analyzer: the messages it tears (a write request, READ data, the INFO response's SEND)
and what of them is left (middle packets, the last one), the requests it leaves waiting
for their responses (read or write, failed or not), the CM exchanges it goes through
(REQ and REP, the REP only), what follows (IO, heartbeats only, CM teardown only) and
the queue depths the rest can tell (handshake, inferred, assumed).  Every frame of a
capture is in one of them, so a cut anywhere else tests nothing these do not: 152 cuts
of the six small real captures (every 50th frame and the first "where it hurts" points
made 413, in 62 of the 152 situations), 140 of the crafted sessions under load (371 in
68).  load.pcap.gz (135k frames, up to 4 requests in flight on two connections) is cut
in each combination of torn messages and waiting requests that no cut of a small real
capture has (35 cuts; the 4 cuts it had were in situations the small captures have).
A cut whose rest cannot tell a queue depth other than the kernel default (two requests
left of load_c128_qd8192 from frame 532, a cut the old points never made) is read with
the default, as documented: ``restricted`` says what the analyzer must then find.
"""

import collections
import functools

import pytest

from conftest import PROJECT_PCAPS, REAL_ALL, real_pcap
from cut_points import covering, cut_points, io_situation
from ib_decode import decode
from rtrs_scapy.analysis import analyze
from rtrs_scapy.analysis.qdepth import queue_depth_of
from rtrs_scapy.capture import open_capture
from rtrs_scapy.craft import write_capture
from rtrs_scapy.spec.imm import mem_bits

PAIRING_ANOMALIES = {"buf_id_reused", "unmatched_response", "offset_mismatch", "bad_trailer"}
OPS = ("read", "write")
CRAFTED = sorted(PROJECT_PCAPS.glob("load_c*_qd*.pcap")) + [PROJECT_PCAPS / "io_errors.pcap"]
SMALL_REAL = [name for name, _, truth in REAL_ALL if truth["pcap_stats"]["frames"] < 20000]


#: a whole capture's summary and its records, as dicts
Whole = collections.namedtuple("Whole", "summary messages")


@functools.lru_cache(maxsize=None)
def whole_of(pcap):
    """(frames, link type, Whole) of a whole capture, once per worker
    (test_cut_outputs.py cuts the same captures; nothing changes them): its records
    made into dicts once, not again for each cut."""
    frames, link_type = frames_of(pcap)
    analysis = analyze(pcap, keep_messages=True)
    return frames, link_type, Whole(analysis.summary, list(analysis.messages))


def frames_of(pcap):
    with open_capture(pcap) as cap:
        return [(ts, bytes(buf[s:e])) for _, ts, buf, s, e, _ in cap], cap.link_type


def write_pcap(path, frames, link_type):
    write_capture(path, frames, link_type)
    return path


def restricted(whole, first, assumed=None):
    """What the whole capture's records say about frames first…

    ``assumed``: when the rest cannot tell the capture's queue depth and the kernel
    default the analyzer then assumes is not it (docs/PROTOCOL.md#queue-depth-inference),
    buf_ids and offsets are read with the default's mem_bits: (the capture's mem_bits,
    the default's, the pairs of the independent decode of the cut, tests/ib_decode.py,
    which reads them so too).  A request whose first packets are cut away has then the
    bytes of its offset under the default's mem_bits (data_len = offset − usr_len,
    docs/PROTOCOL.md#captures-that-start-mid-session), and a response answers the request
    the decode pairs it with."""
    want = {"count": dict.fromkeys(OPS, 0), "bytes": dict.fromkeys(OPS, 0),
            "latency": {op: [] for op in OPS}, "without_request": 0, "errnos": []}
    requests = {m["frame"]: m for m in whole.messages if m["msg"] in OPS}
    for m in whole.messages:
        if m["frame"] < first:
            continue
        if m["msg"] in OPS:
            fields = m["fields"]
            size = fields["data_len"] + fields["usr_len"]
            if assumed and fields["first_frame"] < first:
                real, default, _pairs = assumed
                payload = (fields["buf_id"] << real) | fields["offset"]
                size += (payload & ((1 << default) - 1)) - fields["offset"]
            want["count"][m["msg"]] += 1
            want["bytes"][m["msg"]] += size
        elif m["msg"] == "io_rsp":
            if m["fields"]["errno"]:
                want["errnos"].append(m["fields"]["errno"])
            if assumed:
                paired = assumed[2].get(m["frame"])
                request = requests.get(paired[0]) if paired else None
                latency = round(m["time"] - request["time"], 6) if request else None
            else:
                request, latency = requests.get(m["paired_frame"]), m["latency"]
            if request is None or request["frame"] < first:
                want["without_request"] += 1
            elif "failover_from" not in request["fields"]:
                want["latency"][request["msg"]].append(round(latency * 1e6, 1))
    return want


def summed(summary, key):
    return sum(p[key] for s in summary["sessions"] for p in s["paths"])


def check_cut(whole, cut, first, qd, situation=None, pcap=None):
    """``situation`` (tests/cut_points.py) names the cut in the messages; ``pcap`` is
    the whole capture (for the independent decode of the cut, see ``restricted``)."""
    where = first if situation is None else "%d (%s)" % (first, situation)
    summary = cut.summary
    paths = [p for s in summary["sessions"] for p in s["paths"]]
    default = {p["queue_depth"] for p in paths if p["queue_depth_source"] == "assumed"}
    assumed = None
    if default and default != {queue_depth_of(mem_bits(qd))}:
        (depth,) = default
        assumed = (mem_bits(qd), mem_bits(depth), decode(pcap, first).pairs)
    want = restricted(whole, first, assumed)
    for op in OPS:
        assert sum(p["io"][op]["count"] for p in paths) == want["count"][op], (where, op)
        assert sum(p["io"][op]["bytes"] for p in paths) == want["bytes"][op], (where, op)
        latency = [p["latency_us"][op] for p in paths if p["latency_us"][op]["count"]]
        assert sum(s["count"] for s in latency) == len(want["latency"][op]), (where, op)
        if want["latency"][op]:
            assert min(s["min"] for s in latency) == pytest.approx(min(want["latency"][op]),
                                                                   abs=0.1)
            assert max(s["max"] for s in latency) == pytest.approx(max(want["latency"][op]),
                                                                   abs=0.1)
    assert summed(summary, "responses_without_request") == want["without_request"]
    assert sorted(e["errno"] for p in paths for e in p["errors"]) == sorted(want["errnos"])
    assert not [a for a in summary["anomalies"] if a["kind"] in PAIRING_ANOMALIES], where
    for path in paths:    # "assumed": the remaining traffic cannot tell (see restricted())
        assert path["queue_depth_source"] in ("handshake", "inferred", "assumed")
        if path["queue_depth_source"] in ("handshake", "inferred"):
            assert path["queue_depth"] == queue_depth_of(mem_bits(qd)), where
    if not paths:
        return        # only CM teardown left: who is the client cannot be told
    whole_disc = sorted((d["frame"], d["initiator"]) for p in
                        (p for s in whole.summary["sessions"] for p in s["paths"])
                        for d in p["disconnects"] if d["frame"] >= first)
    assert sorted((d["frame"], d["initiator"]) for p in paths
                  for d in p["disconnects"]) == [(f - first + 1, i) for f, i in whole_disc]


def run_cuts(pcap, tmp_path, qd, points):
    """Cut ``pcap`` at each (first frame, situation) of ``points``; check each cut."""
    frames, link_type, whole = whole_of(pcap)
    for first, situation in points:
        short = tmp_path / "cut.pcap"
        write_pcap(short, frames[first - 1:], link_type)
        check_cut(whole, analyze(short, keep_messages=False), first, qd, situation, pcap)
    return len(points)


def situation_cuts(pcap):
    """A cut in each situation of ``pcap`` (tests/cut_points.py), the uncut frame 1 aside."""
    return [(first, situation) for first, situation in cut_points(pcap) if first > 1]


@pytest.mark.parametrize("name", SMALL_REAL)
def test_real_captures_cut_in_every_situation(name, tmp_path):
    truth = next(t for n, _, t in REAL_ALL if n == name)
    qd = truth["config"]["server_module_params"]["sess_queue_depth"]
    assert run_cuts(real_pcap(name), tmp_path, qd, situation_cuts(real_pcap(name))) >= 20


@pytest.mark.parametrize("pcap", CRAFTED, ids=lambda p: p.stem)
def test_crafted_sessions_under_load_cut_in_every_situation(pcap, tmp_path):
    qd = int(pcap.stem.split("_qd")[1]) if "_qd" in pcap.stem else 512
    assert run_cuts(pcap, tmp_path, qd, situation_cuts(pcap)) >= 10


def test_the_load_capture_cut_where_no_small_capture_is(tmp_path):
    """135k frames of 4 parallel random IOs: cut in each combination of torn messages and
    waiting requests that no cut of a small real capture has."""
    cuts = covering(real_pcap("load"), io_situation, with_depth=False,
                    others=tuple(real_pcap(name) for name in SMALL_REAL))
    assert run_cuts(real_pcap("load"), tmp_path, 512, cuts) >= 20
