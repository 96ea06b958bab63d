"""The exports, the report and ``watch`` on captures cut mid-session, as
production hands them over: what each tells equals the whole capture's records
restricted to the remaining frames, the reference of tests/test_cuts.py (whose
whole-capture counts equal the kernel's counters, tests/test_truth.py).

Cut where it hurts too: inside a multi-packet write, between a request and its
response, inside READ data (``cut_points`` of test_cuts.py).
"""

import pyarrow.parquet as pq
import pytest

from conftest import real_pcap
from rtrs_scapy.analysis import analyze
from rtrs_scapy.analysis.io import READ, WRITE
from rtrs_scapy.report.html import render
from rtrs_scapy.report.view import CaptureView
from rtrs_scapy.tables.export import export
from test_cuts import OPS, cut_points, frames_of, restricted, write_pcap
from watch_util import interval_totals, watch_jsonl

CAPTURES = ("errors", "multipath", "basic_inval")
#: cut points per capture: spread over the where-it-hurts points of test_cuts.py
PER_CAPTURE = 6
#: the 135 k-frame load capture (4 random IOs in flight): cuts through its busy part
LOAD_CUTS = (30001, 101777)


def _cuts():
    for name in CAPTURES + ("load",):
        pcap = real_pcap(name)
        frames, link_type = frames_of(pcap)
        whole = analyze(pcap, keep_messages=True)
        if name == "load":
            chosen = LOAD_CUTS
        else:
            points = cut_points(frames, whole, 97)
            chosen = points[::max(1, len(points) // PER_CAPTURE)][:PER_CAPTURE]
        for first in chosen:
            yield name, frames, link_type, whole, first


@pytest.fixture(scope="module")
def cuts(tmp_path_factory):
    """(name, first frame, cut capture, what the whole capture says of it)."""
    out = []
    for name, frames, link_type, whole, first in _cuts():
        path = tmp_path_factory.mktemp("cut") / ("%s_%d.pcap" % (name, first))
        write_pcap(path, frames[first - 1:], link_type)
        want = restricted(whole, first)
        want["answered_errnos"] = answered_errnos(whole, first)
        out.append((name, first, path, want))
    assert len(out) >= 3 * PER_CAPTURE - 3
    return out


def answered_errnos(whole, first):
    """The errnos of the responses whose request is in the cut capture too."""
    requests = {m["frame"]: m for m in whole.messages if m["msg"] in OPS}
    return sorted(m["fields"]["errno"] for m in whole.messages
                  if m["msg"] == "io_rsp" and m["frame"] >= first and m["fields"]["errno"]
                  and m["paired_frame"] in requests
                  and requests[m["paired_frame"]]["frame"] >= first)


def _io_table(path, out_dir):
    export(str(path), str(out_dir), tables=("ios",))
    return pq.read_table(out_dir / "ios").to_pylist()


def test_the_ios_table_of_a_cut_capture_holds_its_requests(cuts, tmp_path):
    """Rows, bytes (data_len + usr_len), answered latencies and errnos per op,
    partial requests at the cut included."""
    for name, first, path, want in cuts:
        rows = _io_table(path, tmp_path / ("%s_%d" % (name, first)))
        for op in OPS:
            mine = [r for r in rows if r["op"] == op]
            assert len(mine) == want["count"][op], (name, first, op)
            assert sum(r["bytes"] for r in mine) == want["bytes"][op], (name, first, op)
            latencies = sorted(round(r["latency_us"], 1) for r in mine
                               if r["latency_us"] is not None and r["failover_from"] is None)
            assert latencies == pytest.approx(sorted(want["latency"][op]), abs=0.1), \
                (name, first, op)
        assert sorted(r["errno"] for r in rows if r["errno"]) == want["answered_errnos"], \
            (name, first)


def test_watch_intervals_of_a_cut_capture_add_up_to_its_requests(cuts):
    for name, first, path, want in cuts:
        totals = interval_totals(watch_jsonl(path))
        for op in OPS:
            assert sum(t[op][0] for t in totals.values()) == want["count"][op], (name, first)
            assert sum(t[op][1] for t in totals.values()) == want["bytes"][op], (name, first)


def test_the_report_of_a_cut_capture_counts_its_requests(cuts):
    """The report's tables (the summary's paths) and its figures' IO rows hold the
    cut's requests."""
    for name, first, path, want in cuts:
        batches = []
        result = analyze(path, keep_messages=True, io_sink=batches.append)
        view = CaptureView(result, batches)
        html = render(view)
        assert html.startswith("<!DOCTYPE html>") and "</html>" in html, (name, first)
        for code, op in ((READ, "read"), (WRITE, "write")):
            assert sum(p.summary["io"][op]["count"] for p in view.paths) == \
                want["count"][op], (name, first, op)
            assert int((view.rows["op"] == code).sum()) == want["count"][op], (name, first)
