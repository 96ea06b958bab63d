"""IO rows (analysis/iorows.py): one per request, and their sums are the summary's
figures, which the kernel's counters confirm (tests/test_truth.py)."""

import numpy as np
import pytest

from conftest import PROJECT_PCAPS, REAL_ALL
from rtrs_scapy.analysis import analyze, iorows

CAPTURES = [path for _name, path, _truth in REAL_ALL] + [
    PROJECT_PCAPS / name for name in ("failover_inflight.pcap", "multipath_failover.pcap",
                                      "io_errors.pcap", "mid_session.pcap")]


def rows_and_summary(path):
    batches = []
    result = analyze(path, keep_messages=False, io_sink=batches.append)
    return iorows.concat(batches) if batches else None, result.summary


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_rows_add_up_to_the_summary(path):
    rows, summary = rows_and_summary(path)
    paths = [p for s in summary["sessions"] for p in s["paths"]]
    for code, op in ((1, "read"), (2, "write")):
        mine = rows["op"] == code
        assert np.count_nonzero(mine) == sum(p["io"][op]["count"] for p in paths)
        assert int(rows["bytes"][mine].sum()) == sum(p["io"][op]["bytes"] for p in paths)
        answered = mine & (rows["outcome"] == iorows.ANSWERED)
        assert np.count_nonzero(answered) == sum(p["latency_us"][op]["count"] for p in paths)
        assert np.count_nonzero(answered & (rows["errno"] != 0)) == \
            sum(p["io"][op]["errors"] for p in paths)
    assert np.count_nonzero(rows["outcome"] == iorows.REPLACED) == \
        sum(p["failovers"] for p in paths) + sum(1 for a in summary["anomalies"]
                                                   if a["kind"] == "buf_id_reused")


def test_failed_over_rows_name_their_first_send():
    rows, _ = rows_and_summary(PROJECT_PCAPS / "failover_inflight.pcap")
    moved = rows["failover_from"] >= 0
    assert np.count_nonzero(moved) == 4
    assert np.all(rows["latency_ns"][moved] > rows["response_ns"][moved] - rows["time_ns"][moved])
