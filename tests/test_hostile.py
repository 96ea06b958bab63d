"""The analyzer on hostile captures (rtrs_scapy/craft/hostile.py): memory bounded
by rtrs_scapy/spec/limits.py, not by what the file claims; evictions counted in
``capture.limits``; anomalies counted per kind with the first examples kept.

Memory, measured in a fresh process (tests/memory_probe.py): what the analysis of
100k packets keeps alive is what that of 25k keeps, to 16 KiB (a leak of a fifth of
a byte per packet would show), and numba's runtime freed every allocation it
made.  Time is measured by benchmarks/hostile.py, not here.
"""

import json

import numpy as np
import pytest

from cli_run import run
from conftest import PROJECT_PCAPS, REAL_ALL, real_pcap
from memory_probe import probe
from rtrs_scapy.analysis import analyze
from rtrs_scapy.analysis import io as io_module
from rtrs_scapy.analysis import registry as registry_module
from rtrs_scapy.analysis.io import per_id
from rtrs_scapy.craft.repeat import repeat_capture, session_uuids as uuids
from rtrs_scapy.craft.hostile import KINDS, io_rsp_without_request, write_pcap
from rtrs_scapy.spec.limits import limit

SIZES = (25_000, 100_000)
#: what 75k more packets may leave alive (measured: 4 KiB at most)
RETAINED_SLACK = 16 * 1024


@pytest.fixture(scope="module", params=sorted(KINDS))
def hostile(request, tmp_path_factory):
    runs = {}
    for n in SIZES:
        path = tmp_path_factory.mktemp("hostile") / ("%s_%d.pcap" % (request.param, n))
        write_pcap(path, KINDS[request.param](n))
        runs[n] = probe("summary", path)
    return request.param, runs


def test_memory_does_not_grow_with_the_file(hostile):
    kind, runs = hostile
    small, large = runs[SIZES[0]], runs[SIZES[1]]
    assert small["numba_live"] == large["numba_live"] == 0, kind
    # numba's runtime allocates only to evict streams (np.argsort; the rest of the engine
    # is compiled without it, capture/jit.py): a flood of QPs shows its counters count
    if kind == "qps":
        assert large["numba_allocations"] > small["numba_allocations"] > 0, kind
    else:
        assert large["numba_allocations"] == small["numba_allocations"], kind
    assert abs(large["retained"] - small["retained"]) <= RETAINED_SLACK, (
        kind, small["retained"], large["retained"])


#: what the analysis may hold per packet of the load capture until its end (the latencies
#: for exact percentiles, the failovers' request log, the queues' spans: measured 5
#: bytes; kept as lists of int64 and float arrays they took 18, 555 MiB of peak at 10 M
#: packets), within the 300 MiB the summary of 10 M packets may take
HELD_PER_PACKET = 10


def test_what_the_summary_holds_grows_a_few_bytes_per_packet(tmp_path):
    """One and three copies of the real load capture (each copy a session of its
    own, ~10 k requests), each summarized in a fresh process: what is alive at the
    end of the analysis, while it is held, grows by a few bytes per packet."""
    source = real_pcap("load")
    frames = analyze(source, keep_messages=False).summary["capture"]["packets"]
    held = {}
    for copies in (1, 3):
        path = tmp_path / ("load_%d.pcap" % copies)
        repeat_capture(source, path, frames * copies, uuids(source))
        run = probe("summary", path)
        assert run["output"]["capture"]["packets"] == frames * copies
        held[copies] = run["held"]
    assert 0 < held[3] - held[1] <= HELD_PER_PACKET * 2 * frames, held


def test_what_the_limits_cost_is_counted(hostile):
    kind, runs = hostile
    summary = runs[SIZES[1]]["output"]
    limits = summary["capture"]["limits"]
    assert limits["sizes"]["streams"] == limit("streams")
    if kind == "qps":      # a stream per packet: all but the table's worth evicted
        assert limits["evicted"]["streams"] >= SIZES[1] - limit("streams")
        assert limits["evicted"]["messages"] == limits["evicted"]["streams"]
    elif kind == "cm_reqs":  # a session per REQ: CM transactions evicted, a table of paths
        assert limits["evicted"]["cm"] >= SIZES[1] - limit("cm")
        paths = [p for s in summary["sessions"] for p in s["paths"]]
        assert len(paths) == limit("idle_paths")
        assert summary["capture"]["rtrs_packets"] == SIZES[1]
    else:                  # one QP, one path, nothing to evict
        assert not limits["reached"]
        (session,) = summary["sessions"]
        assert session["paths"][0]["responses_without_request"] == SIZES[1]


def test_a_gap_per_packet_is_counted_as_capture_loss(tmp_path):
    """Every other packet of a stream missing, never retransmitted: 50k packets lost by
    the capture (docs/PROTOCOL.md#capture-loss), counted, no anomaly for them."""
    frames = [frame for i, frame in enumerate(io_rsp_without_request(100_000)) if i % 2 == 0]
    summary = analyze(write_pcap(tmp_path / "gaps.pcap", frames), keep_messages=False).summary
    assert summary["capture"]["capture_lost_packets"] == len(frames) - 1
    (session,) = summary["sessions"]
    assert session["paths"][0]["transport"]["capture_lost_packets"] == len(frames) - 1
    assert session["paths"][0]["responses_without_request"] == len(frames)
    assert summary["anomaly_counts"] == {}


CRAFTED = sorted(p for p in PROJECT_PCAPS.glob("*.pcap*") if not p.name.endswith(".json"))


@pytest.mark.parametrize("pcap", [real_pcap(name) for name, _, _ in REAL_ALL] + CRAFTED,
                         ids=lambda p: p.name)
def test_no_real_or_crafted_capture_reaches_a_limit(pcap):
    summary = analyze(pcap, keep_messages=False).summary
    assert summary["capture"]["limits"]["reached"] is False
    assert sum(summary["anomaly_counts"].values()) == len(summary["anomalies"])


def test_a_flood_of_requests_taken_in_bulk_is_the_flood_taken_one_by_one(tmp_path):
    """CmTracker.requests_in_bulk takes the head of a long run of MADs at once; runs of
    1,000 records (chunks) are too short for it: both give the same summary."""
    path = write_pcap(tmp_path / "reqs.pcap", KINDS["cm_reqs"](30_000))
    bulk = analyze(path, keep_messages=True)
    one_by_one = analyze(path, keep_messages=True, chunk_records=1000)
    assert bulk.summary == one_by_one.summary
    assert bulk.messages == one_by_one.messages
    assert bulk.summary["capture"]["limits"]["evicted"]["cm"] == 30_000 - limit("cm")


def test_per_id_asks_once_per_distinct_id():
    asked = []
    values = per_id(np.array([5, 5, 2, -1, 2]), lambda i: asked.append(i) or i * 10)
    assert values.tolist() == [50, 50, 20, -10, 20]
    assert sorted(asked) == [-1, 2, 5]
    assert per_id(np.zeros(0, dtype=np.int64), lambda i: 1 / 0).tolist() == []


def test_per_batch_work_does_not_grow_with_the_sessions_seen(tmp_path, monkeypatch):
    """A capture of N sessions one after the other: the path and connection
    lookups of each batch cost that batch, not every path seen so far (repeated
    basic_inval at 10 M packets took 55 s instead of 15 s when they did)."""
    source = real_pcap("basic_inval")
    asked = []

    def counted(ids, value):
        return per_id(ids, lambda i: asked.append(i) or value(i))

    monkeypatch.setattr(io_module, "per_id", counted)
    monkeypatch.setattr(registry_module, "per_id", counted)
    work = {}
    for copies in (20, 40):
        path = tmp_path / ("copies_%d.pcap" % copies)
        frames = analyze(source, keep_messages=False).summary["capture"]["packets"]
        repeat_capture(source, path, frames * copies, uuids(source))
        asked.clear()
        summary = analyze(path, keep_messages=False).summary
        assert len(summary["sessions"]) >= copies
        work[copies] = len(asked)
    assert work[40] <= 2.2 * work[20], work


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_command_reads_a_hostile_capture(kind, tmp_path):
    """The commands that keep message records (export, messages) read each hostile
    capture to its end: responses that no request preceded pair with nothing."""
    path = tmp_path / ("%s.pcap" % kind)
    write_pcap(path, KINDS[kind](2000))
    assert run("export", path, "-o", tmp_path / "out").exit_code == 0
    assert (tmp_path / "out" / "messages").is_dir()
    listed = run("messages", "--format", "json", path)
    assert listed.exit_code == 0
    if kind != "qps":       # a flood of QPs carries no RTRS message
        assert json.loads(listed.output.splitlines()[-1])["frame"] > 1000
