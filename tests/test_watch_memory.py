"""``watch`` keeps constant memory: a stream four times as long leaves nothing more
alive, and the analyzer under watch keeps no per-request latency lists."""

from conftest import real_pcap
from ib_decode import pcap_records
from memory_probe import probe
from watch_util import interval_totals, summary, summary_totals

#: packets of the real load capture's one session: the first N and 4N
PACKETS = (33_000, 132_000)
#: what 99k more packets may leave alive (measured: 4 KiB; a leak of a fifth of a
#: byte per packet would leave 20 KiB)
RETAINED_SLACK = 16 * 1024


def test_memory_does_not_grow_with_the_stream(tmp_path):
    """The watcher's 1 s intervals over the first 33k and 132k packets of load.pcap.gz
    (one session all along), each in a fresh process (tests/memory_probe.py): the
    Python objects and numpy arrays alive at the end the same to 16 KiB, every
    allocation of numba's runtime freed, and none made per packet (capture/jit.py)."""
    data, offsets = pcap_records(real_pcap("load"))
    runs = []
    for n in PACKETS:
        head = tmp_path / ("load_%d.pcap" % n)
        head.write_bytes(data[:offsets[n]])
        runs.append(probe("watch", head))
    short, long = runs
    assert long["output"] > short["output"] >= 1          # intervals of 1 s
    assert short["numba_live"] == long["numba_live"] == 0
    assert long["numba_allocations"] == short["numba_allocations"]   # none per packet
    assert abs(long["retained"] - short["retained"]) <= RETAINED_SLACK, (
        short["retained"], long["retained"])


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
