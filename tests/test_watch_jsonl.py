"""``rtrs-dissect watch --jsonl``: per-interval records that add up to the summary
of the same input (every real capture, piped), intervals on the capture's clock
with --replay, the IO errors as the kernel logged them, the requests in flight at
each interval's end as the wire shows them."""

import json
import re
import shlex
import subprocess
import threading
import time
from collections import Counter
from datetime import datetime

import pytest

from conftest import REAL_PCAPS, real_pcap, real_truth
from ib_decode import in_flight_at, write_cut
from rtrs_scapy.engine.ahead import DEPTH
from rtrs_scapy.watch.watcher import CM_EVENTS
from watch_util import (OPS, RTRS_DISSECT, interval_totals, record_stamps, summary,
                        summary_totals, watch_jsonl, watch_jsonl_in_process)

CAPTURES = sorted(REAL_PCAPS.glob("*.pcap")) + sorted(REAL_PCAPS.glob("*.pcap.gz"))
PATH_KEYS = ["session", "sess_uuid", "client", "server", "state", "read", "write", "inflight",
             "queue_depth", "errors", "reconnects", "heartbeat_age_s", "retransmissions", "stall"]
#: "I/O error, dev rnbd0, sector 14336 op 0x0:(READ) flags ..." (block/blk-core.c)
IO_ERROR = re.compile(r"I/O error, dev (\w+), sector (\d+) op 0x\w+:\((\w+)\)")


def piped(path):
    """``cat FILE | rtrs-dissect watch --jsonl -`` (zcat for .gz)."""
    reader = "zcat" if path.suffix == ".gz" else "cat"
    done = subprocess.run("%s %s | %s watch --jsonl -" % (reader, shlex.quote(str(path)),
                                                            shlex.quote(RTRS_DISSECT)),
                          shell=True, capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr.decode()
    return [json.loads(line) for line in done.stdout.decode().splitlines()]


def parse_time(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_piped_intervals_add_up_to_the_summary(capture):
    """Counts, bytes, errors by name and reconnects, summed over all intervals,
    equal ``summary --format json`` of the same capture."""
    intervals = piped(capture)
    assert intervals
    assert interval_totals(intervals) == summary_totals(summary(capture))


def test_all_real_captures_in_one_pipe(tmp_path):
    """``cat pcaps/real/*.pcap | watch -``: a pcap header at each file's start
    (as when tcpdump restarts); the intervals add up to the summary of the same
    bytes read as one file."""
    whole = tmp_path / "all.pcap"
    files = sorted(REAL_PCAPS.glob("*.pcap"))
    whole.write_bytes(b"".join(p.read_bytes() for p in files))
    intervals = watch_jsonl("-", stdin=whole.read_bytes())
    expected = summary_totals(summary(whole))
    assert len(expected) == sum(len(summary_totals(summary(p))) for p in files)
    assert interval_totals(intervals) == expected


def test_interval_objects_have_the_documented_shape():
    intervals = watch_jsonl(real_pcap("multipath"))
    for interval in intervals:
        assert list(interval) == ["time", "interval_s", "paths", "events"]
        assert interval["time"].endswith("Z")
        for path in interval["paths"]:
            assert list(path) == PATH_KEYS
            for op in OPS:
                assert list(path[op]) == ["count", "bytes", "latency_us"]
                assert list(path[op]["latency_us"]) == ["p50", "p99"]
        for event in interval["events"]:
            assert {"time", "frame", "kind", "session", "client", "server"} <= set(event)


@pytest.mark.parametrize("seconds", [1.0, 0.5])
def test_replay_intervals_follow_the_capture_clock(seconds):
    """With --replay the intervals end at the first record's time plus whole
    intervals, the last one at the last record, at the pace of --speed; a silence
    of more than 60 intervals is skipped (errors.pcap is silent for 40 s)."""
    capture = real_pcap("errors")
    stamps = record_stamps(capture)
    speed = 20
    began = time.monotonic()
    intervals = watch_jsonl("--replay", "--speed", speed, "--interval", seconds, capture)
    took = time.monotonic() - began
    ends = [parse_time(i["time"]) for i in intervals]
    steps = [(end - stamps[0]) / seconds for end in ends[:-1]]
    assert steps == [pytest.approx(round(k), abs=1e-4) for k in steps]
    assert ends[-1] == pytest.approx(stamps[-1], abs=1e-5)
    skipped = 0
    for before, after in zip([0] + steps, steps):
        if round(after - before) > 1:      # nothing was captured in between
            gap = (stamps[0] + before * seconds, stamps[0] + (after - 1) * seconds)
            assert not [t for t in stamps if gap[0] <= t < gap[1]]
            assert after - before > 60
            skipped += round(after - before) - 1
    assert all(i["interval_s"] == seconds for i in intervals[:-1])
    assert (skipped > 0) == (seconds == 0.5)     # 40 s: more than 60 intervals of 0.5 s
    assert took >= 0.9 * (stamps[-1] - stamps[0] - skipped * seconds) / speed
    # as fast as possible: the same intervals
    fast = watch_jsonl("--interval", seconds, capture)
    assert [i["time"] for i in fast] == [i["time"] for i in intervals]
    assert interval_totals(fast) == interval_totals(intervals)


def test_io_error_events_are_the_kernels_io_errors():
    """The io_error events name the device, sector and op of every 'I/O error'
    line of the client kernel's log, and the failed OPEN."""
    truth = real_truth("errors")
    devices = {}
    for entry in truth["maps"]:
        opts = dict(item.split("=", 1) for item in entry["opts"].split())
        devices[entry["dev"] or None] = opts["device_path"]
    logged = Counter()
    for line in truth["kernel_log"]["client"]:
        found = IO_ERROR.search(line)
        if found:
            logged[(devices[found.group(1)], int(found.group(2)), found.group(3))] += 1
    assert logged
    events = [e for i in watch_jsonl(real_pcap("errors")) for e in i["events"]
              if e["kind"] == "io_error"]
    seen = Counter((e["device"], e["sector"], e["rnbd_op"].upper()) for e in events
                   if "sector" in e)
    assert seen == logged
    opens = [e for e in events if e.get("rnbd") == "open"]
    assert [e["name"] for e in opens] == ["ENOENT"]


def test_connects_and_disconnects_are_events():
    """multipath: each path's connect and its disconnect appear once, in time order."""
    events = [e for i in watch_jsonl(real_pcap("multipath")) for e in i["events"]]
    expected = Counter()
    for session in summary(real_pcap("multipath"))["sessions"]:
        for path in session["paths"]:
            for e in path["events"]:
                if e["kind"] in ("connect", "disconnect"):
                    expected[(path["client"], e["kind"], e["frame"])] += 1
    seen = Counter((e["client"], e["kind"], e["frame"]) for e in events
                   if e["kind"] in ("connect", "disconnect"))
    assert seen == expected and len(seen) >= 4
    times = [parse_time(e["time"]) for e in events]
    assert times == sorted(times)


def test_unusable_input_is_one_line():
    done = subprocess.run([RTRS_DISSECT, "watch", "--jsonl", "-"], input=b"not a capture",
                          capture_output=True)
    assert done.returncode == 1
    assert done.stderr.decode().strip().splitlines() == [
        "Error: standard input: not a pcap or pcapng capture (magic 0x6e6f7420)"]


def test_quiet_paths_age_out_and_their_totals_stay():
    """errors.pcap: the laberr session ends at 15:17:12; with --age-out 5 its path
    leaves the intervals after 15:17:17, and the sums still equal the summary."""
    capture = real_pcap("errors")
    intervals = watch_jsonl("--age-out", 5, capture)
    shown = [(i["time"], {p["session"] for p in i["paths"]}) for i in intervals]
    laberr = [t for t, sessions in shown if "laberr" in sessions]
    assert laberr and max(laberr) < "2026-11-29T15:17:19"
    assert any(t > "2026-11-29T15:17:19" and "lab1" in sessions for t, sessions in shown)
    assert interval_totals(intervals) == summary_totals(summary(capture))


@pytest.mark.parametrize("name", ["basic_inval", "multipath", "errors"])
def test_in_flight_at_each_interval_end_is_the_wires(name):
    """``inflight`` of each path at the end of each 10 ms interval: the requests sent by
    then whose response comes later or never, as a decode without the analyzer finds
    them (tests/ib_decode.py: tshark's InfiniBand fields and the Scapy layers), per
    client and server (errors.pcap holds three sessions between the same two hosts)."""
    pcap = real_pcap(name)
    intervals = watch_jsonl("--interval", "0.01", pcap)
    shown = []
    for interval in intervals:
        paths = Counter()
        for path in interval["paths"]:
            paths[(path["client"], path["server"])] += path["inflight"]
        shown.append(dict(paths))
    wire = in_flight_at(pcap, [parse_time(i["time"]) for i in intervals])
    want = [{key: counts[key] for key in paths} for paths, counts in zip(shown, wire)]
    assert shown == want
    assert any(any(counts.values()) for counts in want)


def _dead_path(intervals):
    """(interval, path object) of failover.pcap's dead path 10.77.1.2, in order."""
    return [(i, p) for i in intervals for p in i["paths"] if p["client"] == "10.77.1.2"]


def test_failover_replayed_stalls_where_the_summary_does():
    """failover.pcap replayed on its clock: path 10.77.1.2 turns ``stalled`` in the first
    interval that ends more than one interval after the summary's stall frame (its
    oldest transmission never acknowledged), with a ``stalled`` event at that frame,
    stays so until the kernel's verdict, never shows ``closed``; the retransmissions of
    the intervals add up to the summary's per path."""
    capture = real_pcap("failover")
    whole = summary(capture)
    (dead,) = [p for s in whole["sessions"] for p in s["paths"] if p["client"] == "10.77.1.2"]
    (stall,) = dead["stalls"]
    intervals = watch_jsonl("--replay", "--speed", "200", capture)
    rows = _dead_path(intervals)
    states = [p["state"] for _, p in rows]
    first = states.index("stalled")
    interval, path = rows[first]
    end = parse_time(interval["time"])
    seconds = interval["interval_s"]
    assert stall["time"] + seconds < end <= stall["time"] + 2 * seconds
    assert path["stall"]["frame"] == stall["frame"] == 22153
    assert path["stall"]["sender"] == stall["sender"] == "server"
    assert [e["frame"] for e in interval["events"] if e["kind"] == "stalled"] == [22153]
    assert set(states[:first]) == {"up"}
    verdict = next(e for e in dead["events"] if e["kind"] == "heartbeat_lost")
    stalled = [parse_time(i["time"]) for i, p in rows if p["state"] == "stalled"]
    assert stalled == sorted(stalled) and max(stalled) < verdict["time"] + 2
    assert "closed" not in states and states[-1] == "down"
    retransmissions = {}
    for i in intervals:
        for p in i["paths"]:
            retransmissions[p["client"]] = retransmissions.get(p["client"], 0) + \
                p["retransmissions"]
    assert retransmissions == {p["client"]: p["transport"]["retransmissions"]
                               for s in whole["sessions"] for p in s["paths"]}
    assert retransmissions["10.77.1.2"] == stall["retransmissions"] == 47


def test_failover_piped_ages_heartbeats_on_the_capture_s_clock():
    """``zcat failover.pcap.gz | watch -``: intervals of the wall clock, but the
    heartbeat ages of the capture's: at the end, each path's age is the capture's last
    record time less the path's last heartbeat (not days of the wall clock); the stall
    and the retransmissions are the summary's: one ``stalled`` event, shown where an
    interval's end saw it or, when the pipe brought the link's whole death within one
    interval, in the last one."""
    capture = real_pcap("failover")
    whole = summary(capture)
    intervals = piped(capture)
    last = intervals[-1]
    last_ts = whole["capture"]["last_ts"]
    for session in whole["sessions"]:
        for want in session["paths"]:
            (shown,) = [p for p in last["paths"] if p["client"] == want["client"]]
            age = last_ts - want["heartbeat"]["last_time"]
            assert age - 0.001 <= shown["heartbeat_age_s"] < age + 5
    stalls = [p["stall"] for _, p in _dead_path(intervals) if p["state"] == "stalled"]
    assert {s["frame"] for s in stalls} <= {22153}
    stalled = [(e["client"], e["frame"], e["sender"]) for i in intervals
               for e in i["events"] if e["kind"] == "stalled"]
    assert stalled == [("10.77.1.2", 22153, "server")]
    assert sum(p["retransmissions"] for _, p in _dead_path(intervals)) == 47


@pytest.mark.parametrize("first", [20000, 22000])
def test_failover_cut_mid_session_shows_each_event_once(tmp_path, first):
    """failover.pcap.gz cut mid-failover (frame 20000: the dead path's stall still ahead;
    22000: just before it), without the handshake of the dead path's first connection:
    the analysis merges the path it inferred into the one the reconnect attempts'
    handshakes name, at the end.  Piped (one wall-clock interval) and read from the
    file (intervals of the capture's clock) alike, every CM event and every stall of
    the summary is shown once, no more: the merged path's events are not shown again
    under the path that took them over."""
    cut = write_cut(real_pcap("failover"), first, tmp_path / ("failover_%d.pcap" % first))
    whole = summary(cut)
    paths = [p for s in whole["sessions"] for p in s["paths"]]
    want = Counter((p["client"], e["kind"], e["frame"]) for p in paths for e in p["events"]
                   if e["kind"] in CM_EVENTS)
    want.update((p["client"], "stalled", s["frame"]) for p in paths for s in p["stalls"])
    assert want[("10.77.1.2", "stalled", 22153 - first + 1)] == 1
    assert want[("10.77.1.2", "disconnect", 186660 - first + 1)] == 1
    for intervals in (piped(cut), watch_jsonl_in_process(cut)):
        shown = Counter((e["client"], e["kind"], e["frame"]) for i in intervals
                        for e in i["events"] if e["kind"] in CM_EVENTS + ("stalled",))
        assert shown == want


@pytest.mark.parametrize("name", ["errors", "discard"])
def test_intervals_without_the_rnbd_totals_are_the_same_records(name):
    """Only the exporter shows the RNBD totals; made in every interval from every
    session's RNBD summary, they would cost a capture of many short sessions time
    quadratic in its length.  The records are the same without them."""
    from rtrs_scapy.capture import open_capture
    from rtrs_scapy.watch.pacing import capture_intervals
    from rtrs_scapy.watch.watcher import Watcher

    def intervals(rnbd_totals):
        with open_capture(real_pcap(name)) as cap:
            return [(interval.json(), interval.rnbd) for interval in
                    capture_intervals(cap, Watcher(rnbd_totals=rnbd_totals), 1.0)]
    kept, bare = intervals(True), intervals(False)
    assert [record for record, _ in bare] == [record for record, _ in kept]
    assert all(not totals for _, totals in bare)
    assert sum(count for _, totals in kept[-1:] for count, _, _ in totals.values()) > 0


def test_a_file_is_walked_ahead_on_the_other_thread(monkeypatch):
    """A capture file's records are walked and decoded on the read-ahead thread
    (engine/ahead.py) while the watcher analyses the chunks before, which are given
    back behind it; the intervals are those of reading the file chunk by chunk in the
    watcher's own thread."""
    from rtrs_scapy.capture import open_capture
    from rtrs_scapy.engine import ahead as ahead_module
    from rtrs_scapy.watch import pacing
    from rtrs_scapy.watch.watcher import Watcher
    monkeypatch.setattr(ahead_module, "usable_cores", lambda: 2)   # (a thread on one core too)

    def intervals():
        walked, threads, given_back = [], set(), []
        with open_capture(real_pcap("load")) as cap:
            chunks, done = cap.chunks, cap.done

            def watched_chunks(records):
                for chunk in chunks(records):
                    threads.add(threading.current_thread().name)
                    walked.append(chunk.first_frame)
                    yield chunk

            def watched_done(chunk):
                given_back.append(chunk.first_frame)
                done(chunk)
            cap.chunks, cap.done = watched_chunks, watched_done
            got = [interval.json() for interval in
                   pacing.capture_intervals(cap, Watcher(), 1.0, records=4096)]
        return got, walked, threads, given_back

    ahead, walked, threads, given_back = intervals()
    assert threads == {"rtrs-read-ahead"} and len(walked) > 30
    # the consumer's chunk and those queued ahead of it go with the capture
    assert given_back == walked[:-(DEPTH + 1)]
    monkeypatch.setattr(pacing, "ahead", lambda chunks, behind, idle: chunks)
    alone, _, threads, _ = intervals()
    assert threads == {threading.current_thread().name}
    assert ahead == alone
