"""The report's figure data (report/view.py, series.py, figures.py) against what
lies outside it: the kernel's workload and counters in the real captures'
truth.json, tshark's CM fields, and the summary the report must never
contradict (itself held to the kernel's counters by test_truth.py)."""

import collections
import functools
import json

import numpy as np
import pytest

from conftest import PROJECT_PCAPS, real_pcap, real_truth
from rtrs_scapy.analysis import analyze
from rtrs_scapy.report import figures, series
from rtrs_scapy.report.view import CaptureView
from rtrs_scapy.spec.constants import RNBD_SECTOR_SIZE
from ib_decode import cm_rows

REAL = ("errors", "multipath", "load", "discard", "basic_inval", "jumbo")
CRAFTED = ("failover_inflight.pcap", "reconnect_timeout.pcap", "multipath_failover.pcap")
CAPTURES = [real_pcap(name) for name in REAL] + [PROJECT_PCAPS / name for name in CRAFTED]
#: IB CM attribute IDs (IBTA vol. 1, 16.7.2 CM attributes) and the ladder's words
CM_ATTRIBUTES = {0x10: "REQ", 0x12: "REJ", 0x13: "REP", 0x14: "RTU", 0x15: "DREQ",
                 0x16: "DREP"}


@functools.lru_cache(maxsize=None)
def view_of(pcap):
    batches = []
    result = analyze(str(pcap), keep_messages=True, io_sink=batches.append)
    return CaptureView(result, batches)


@pytest.mark.parametrize("pcap", CAPTURES, ids=lambda p: p.name)
def test_rates_add_up_to_each_paths_counts(pcap):
    """IOPS × bucket width, summed, is the path's request count; throughput the bytes."""
    view = view_of(pcap)
    for path in view.paths:
        tl = figures.Timeline(view, path.rows, [path], "t")
        for op, (iops, bps) in tl.rates.items():
            assert round(iops.sum() * tl.buckets.width) == path.summary["io"][op]["count"]
            assert round(bps.sum() * tl.buckets.width) == path.summary["io"][op]["bytes"]


@pytest.mark.parametrize("pcap", CAPTURES, ids=lambda p: p.name)
def test_one_bucket_gives_the_summarys_percentiles(pcap):
    """Per-bucket percentiles are nearest-rank like the summary's: with one bucket
    for the whole capture they are the summary's p50 and p99 of each path and op."""
    view = view_of(pcap)
    for path in view.paths:
        for op, code in series.RTRS_OPS:
            rows = path.rows.where(path.rows["op"] == code)
            stats = path.summary["latency_us"][op]
            pct = series.latency_percentiles(rows, series.Buckets(view.duration, 1))
            if stats["count"]:
                assert pct["p50"][0] == pytest.approx(stats["p50"], abs=0.05)
                assert pct["p99"][0] == pytest.approx(stats["p99"], abs=0.05)
            else:
                assert np.isnan(pct["p50"][0])


@pytest.mark.parametrize("pcap", CAPTURES, ids=lambda p: p.name)
def test_latency_distributions_hold_every_answered_request(pcap):
    view = view_of(pcap)
    paths = [p for p in view.paths if len(p.rows)]
    lat = figures.latency_by_path(paths, "t")
    for (label, count, edges, counts, x, shares), path in zip(lat.groups, paths):
        answered = sum(path.summary["latency_us"][op]["count"] for op in ("read", "write"))
        assert count == counts.sum() == answered
        low = min(path.summary["latency_us"][op]["min"] for op in ("read", "write")
                  if path.summary["latency_us"][op]["count"])
        high = max(path.summary["latency_us"][op]["max"] for op in ("read", "write")
                   if path.summary["latency_us"][op]["count"])
        assert edges[0] <= low and edges[-1] >= high
        assert x[0] == pytest.approx(low, abs=0.05) and x[-1] == pytest.approx(high, abs=0.05)
        assert shares[0] == 0 and shares[-1] == 1


def test_load_sizes_and_sectors_are_the_workloads():
    """load: every write of the workload (truth.json ios) is a request of its size,
    at its sector; the reads add the kernel's own partition scan at map time."""
    truth = real_truth("load")
    view = view_of(real_pcap("load"))
    (device,) = view.devices
    sizes = {op: dict(zip(s.tolist(), c.tolist())) for op, s, c in figures.Sizes(device).ops}
    workload = collections.Counter((io["op"], io["size"]) for io in truth["ios"])
    assert sizes["write"] == {size: n for (op, size), n in workload.items() if op == "write"}
    for (op, size), n in workload.items():
        if op == "read":
            assert sizes["read"][size] >= n
    writes = device.rows.where(device.rows["rnbd_op"] == 1)
    buckets = series.Buckets(view.duration, figures.HEATMAP_BUCKETS)
    edges, counts = series.heatmap(writes, buckets, device.sectors)
    offsets = [io["off"] // RNBD_SECTOR_SIZE for io in truth["ios"] if io["op"] == "write"]
    assert counts.sum(axis=1).tolist() == np.histogram(offsets, bins=edges)[0].tolist()


def test_load_in_flight_peaks_at_its_processes():
    """load: four processes, each with one O_DIRECT IO at a time (truth.json
    io_summary), and the kernel's own reads before them: never more than four
    requests in flight, and four while all run."""
    processes = {p["tag"] for p in real_truth("load")["io_summary"]["per_process"]}
    view = view_of(real_pcap("load"))
    (path,) = view.paths
    fl = figures.InFlight(view, [path], "t")
    (_label, peaks, depth), = fl.paths
    assert peaks.max() == len(processes) == 4
    assert depth == real_truth("load")["config"]["server_module_params"]["sess_queue_depth"]


def test_in_flight_steps():
    """+1 at a request, -1 at its end; a bucket shows its highest level, also one
    carried in from before it."""
    buckets = series.Buckets(10.0, 10)
    starts = np.array([0.5, 1.2, 1.4, 5.0])
    ends = np.array([3.5, 1.3, 2.1, 5.0])
    assert series.in_flight(starts, ends, buckets).tolist() == [1, 2, 2, 1, 0, 0, 0, 0, 0, 0]


def test_grouped_percentiles_are_nearest_rank():
    group = np.array([0, 0, 0, 0, 2])
    values = np.array([40.0, 10.0, 30.0, 20.0, 7.0])
    pct = series.grouped_percentiles(group, values, 3)
    assert pct["p50"][[0, 2]].tolist() == [20.0, 7.0] and np.isnan(pct["p50"][1])
    assert pct["p99"][[0, 2]].tolist() == [40.0, 7.0]


@pytest.mark.parametrize("width,expected", [(0.013, 0.02), (0.1, 0.1), (3.2, 5.0),
                                            (7.0, 10.0), (1e-9, 1e-6)])
def test_bucket_widths_are_round(width, expected):
    assert series.nice_width(width) == pytest.approx(expected)


def tshark_cm_frames(pcap):
    """{ladder word: frames} of every CM MAD, as tshark's InfiniBand dissector reads it."""
    frames = collections.defaultdict(set)
    for row in cm_rows(pcap):
        frames[CM_ATTRIBUTES[int(row["infiniband.mad.attributeid"], 16)]].add(
            int(row["frame.number"]))
    return frames


@pytest.mark.parametrize("name", ("errors", "multipath", "load", "discard", "basic_inval"))
def test_ladders_hold_every_cm_message_tshark_sees(name):
    """Each CM REQ/REP/REJ/RTU/DREQ/DREP of a real capture (none is retransmitted
    there) is an arrow of its path's ladder, and the info exchange is there too."""
    pcap = real_pcap(name)
    view = view_of(pcap)
    ladder = collections.defaultdict(set)
    for path in view.paths:
        steps, total = path.ladder()
        assert len(steps) == total
        for step in steps:
            ladder[step.label.split()[0]].add(step.frame)
    want = tshark_cm_frames(pcap)
    for word in CM_ATTRIBUTES.values():
        assert ladder[word] == want[word], word
    counts = real_truth(name)["checks"]["pcap_rtrs_counts"]
    assert len(ladder["INFO_REQ"]) == counts["INFO_REQ"]
    assert len(ladder["INFO_RSP"]) == counts["INFO_RSP"]


def test_ladder_directions_and_reject_reason():
    """errors: the rejected session's ladder is the client's REQ and the server's
    REJ with reason 8 (nothing listens on port 4321: truth.json checks)."""
    view = view_of(real_pcap("errors"))
    rejected = [p for p in view.paths if p.summary["port"] == 4321]
    (path,) = rejected
    steps, _ = path.ladder()
    assert [(s.label.split()[0], s.from_client) for s in steps] == [("REQ", True),
                                                                   ("REJ", False)]
    assert real_truth("errors")["checks"]["pcap_rtrs_counts"]["cm_reject_reason_8"] == 1
    assert "Invalid Service ID" in steps[1].label


def test_events_carry_failovers_and_errors():
    """failover_inflight: each path has a failover event per request failed over to
    it (the kernel's failover_cnt in the crafter's truth); errors: each failed IO
    response of the capture (truth.json checks) is an event."""
    truth = json.loads((PROJECT_PCAPS / "failover_inflight.pcap.truth.json").read_text())
    view = view_of(PROJECT_PCAPS / "failover_inflight.pcap")
    for path in view.paths:
        (kernel,) = [p["kernel"] for p in truth["paths"]
                     if p["client_addr"] == path.summary["client"]]
        moved = [e for e in path.events() if e.kind == "failover"]
        assert len(moved) == kernel["failover_cnt"]
    assert truth["failovers"] == 4
    errors = view_of(real_pcap("errors"))
    got = [e.frame for p in errors.paths for e in p.events() if e.kind == "io_error"]
    errnos = real_truth("errors")["checks"]["pcap_io_rsp_errnos"]
    assert len(got) == len(set(got)) == sum(errnos.values())


@pytest.mark.parametrize("pcap", CAPTURES, ids=lambda p: p.name)
def test_size_histograms_are_the_rnbd_views(pcap):
    """The IO size histogram of each device (from the IO rows) is the summary's
    RNBD view of that device (sizes per operation), itself held to an independent
    decode of the RNBD headers by test_rnbd_view.py."""
    view = view_of(pcap)
    for session in view.sessions:
        devices = (session.summary.get("rnbd") or {}).get("devices") or {}
        for device in session.devices:
            got = {op: {str(s): n for s, n in zip(sizes.tolist(), counts.tolist())}
                   for op, sizes, counts in figures.Sizes(device).ops}
            want = {op: stats["sizes"] for op, stats in
                    devices.get(str(device.id), {}).get("ops", {}).items() if stats["count"]}
            assert got == want


def test_timelines_show_failovers_stalls_and_outages():
    """failover.pcap: the session's timeline has a failover marker for each failover of
    the summary, on the path that took it over (those whose original never reached the
    wire on a lane of their own), the stall of path 10.77.1.2 at its first
    unacknowledged transmission, and its outage shaded from there to the capture end."""
    from rtrs_scapy.report.view import INFERRED_FAILOVER
    batches = []
    view = CaptureView(analyze(str(real_pcap("failover")), keep_messages=False,
                               io_sink=batches.append), batches)
    tl = figures.Timeline(view, view.rows, view.paths, "t")
    t0 = view.t0
    want_failovers, want_stalls, want_outages = set(), [], []
    for path in view.paths:
        client = path.summary["client"]
        for f in path.summary["failover_list"]:
            lane = INFERRED_FAILOVER if f["kind"] == "original_not_on_wire" else "failover"
            want_failovers.add((f["frame"], "%s: %s" % (client, lane)))
        for stall in path.summary["stalls"]:
            want_stalls.append((stall["frame"], "%s: stall (%s)" % (client, stall["sender"]),
                                pytest.approx(stall["time"] - t0)))
        for outage in path.summary["outages"]:
            end = outage["up_time"] - t0 if outage["up_time"] is not None else view.duration
            want_outages.append((pytest.approx(outage["down_time"] - t0), pytest.approx(end)))
    assert len(want_failovers) == 8 and len(want_stalls) == 1 and len(want_outages) == 1
    assert {(e.frame, e.lane) for e in tl.events if e.kind == "failover"} == want_failovers
    stalls = [(e.frame, e.lane, e.time) for e in tl.events if e.kind == "stall"]
    assert stalls == want_stalls
    assert tl.outages == want_outages
    (stall,) = want_stalls
    assert tl.outages[0][0] == stall[2]        # the outage starts at the stall
