"""``watch -`` keeps constant memory: a stream three times as long takes no more
memory, and the analyzer under watch keeps no per-request latency lists."""

import os
import subprocess
import sys

from conftest import REPO, real_pcap
from watch_util import RTRS_DISSECT, interval_totals, summary, summary_totals

sys.path.insert(0, str(REPO / "benchmarks"))
from make_capture import build  # noqa: E402

#: MiB a stream three times as long may add (allocator noise; a leak of a few
#: bytes per packet would add more)
SLACK_MIB = 6


def peak_rss_mib(capture):
    """Peak RSS of ``cat CAPTURE | rtrs-dissect watch --jsonl -`` (the watch process)."""
    with open(capture, "rb") as data:
        proc = subprocess.Popen([RTRS_DISSECT, "watch", "--jsonl", "-"], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL)
        while True:
            block = data.read(1 << 20)
            if not block:
                break
            proc.stdin.write(block)
        proc.stdin.close()
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return usage.ru_maxrss / 1024


def test_memory_does_not_grow_with_the_stream(tmp_path):
    """100k and 300k packets of the real load capture repeated (make_capture.py:
    every copy a new path with its own handshake, one per 135k packets)."""
    short, long = tmp_path / "short.pcap", tmp_path / "long.pcap"
    build(real_pcap("load"), short, 100_000)
    build(real_pcap("load"), long, 300_000)
    first = peak_rss_mib(short)
    second = peak_rss_mib(long)
    assert second - first < SLACK_MIB, (first, second)


def test_watch_keeps_no_latency_lists(tmp_path):
    """The watcher's analyzer counts every request of the summary and keeps none
    of their latencies, per path or in the RNBD view (the summary's analyzer keeps
    one per answered request)."""
    from rtrs_scapy.capture import open_capture
    from rtrs_scapy.watch.pacing import capture_intervals
    from rtrs_scapy.watch.watcher import Watcher
    watcher = Watcher()
    capture = real_pcap("load")
    with open_capture(capture) as cap:
        intervals = [i.json() for i in capture_intervals(cap, watcher, 1.0)]
    assert interval_totals(intervals) == summary_totals(summary(capture))
    paths = watcher.analyzer.path_list
    assert sum(p.io["read"].count + p.io["write"].count for p in paths) > 10_000
    assert all(len(p.latencies[op]) == 0 for p in paths for op in ("read", "write"))
    view = watcher.analyzer.rnbd_view
    rnbd = [view.summary(session)["ops"] for session in view.sessions]
    assert sum(ops["read"]["count"] + ops["write"]["count"] for ops in rnbd) > 10_000
    assert all(stats["latency_us"]["count"] == 0 for ops in rnbd for stats in ops.values())
