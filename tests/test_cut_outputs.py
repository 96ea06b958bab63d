"""The exports, the report and ``watch`` on captures cut mid-session, as
production hands them over: what each tells equals the whole capture's records
restricted to the remaining frames, the reference of tests/test_cuts.py (whose
whole-capture counts equal the kernel's counters, tests/test_truth.py).

Where the captures are cut (tests/cut_points.py): the outputs list requests (a row each,
with its bytes and latency), failed responses and intervals of counts; what a cut can
change in them is a write request cut through (a row with the bytes of its offset,
middle packets or the last one left), a response whose request is cut away (read or
write, failed or not), what follows the cut (IO, or CM teardown only) and the queue
depth the rest can tell (handshake, inferred, assumed).  Each capture is cut where the
cuts together have every one of those any cut of it has, each cut one that no other has
(``covering`` with ``output_features``: 19 cuts).  load.pcap.gz (135k frames, up to 4
requests in flight) is cut where only it goes: messages torn together and requests
waiting together that no cut of the three captures has (3 cuts in its last 4,300 frames,
where frames 30001 and 101777 left 105k and 34k frames).
"""

import pyarrow.parquet as pq
import pytest

from conftest import real_pcap
from cut_points import covering, together
from rtrs_scapy.analysis import analyze
from rtrs_scapy.analysis.io import READ, WRITE
from rtrs_scapy.report.html import render
from rtrs_scapy.report.view import CaptureView
from rtrs_scapy.tables.export import export
from test_cuts import OPS, restricted, whole_of, write_pcap
from watch_util import interval_totals, watch_jsonl_in_process

CAPTURES = ("errors", "multipath", "basic_inval")


def output_features(situation):
    """What of a cut's situation the outputs can show (see the module's doc)."""
    s = situation
    return ({("torn", t) for t in s.torn if t[0] == "write request"} or {("torn", None)}) \
        | ({("waiting", w) for w in s.waiting} or {("waiting", None)}) \
        | {("left", s.left)} | ({("depth", d) for d in s.depth} or {("depth", None)})


def _cuts():
    small = tuple(real_pcap(name) for name in CAPTURES)
    for name in CAPTURES + ("load",):
        pcap = real_pcap(name)
        frames, link_type, whole = whole_of(pcap)
        if name == "load":
            chosen = covering(pcap, together, with_depth=False, others=small)
        else:
            chosen = covering(pcap, output_features)
        for first, _situation in chosen:
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
    assert len(out) >= 15
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
        totals = interval_totals(watch_jsonl_in_process(path))
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
