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
    # a failover's original is a row: replaced when it was never answered, answered (not
    # delivered) when the client never acknowledged the answer; none when it never
    # reached the wire (docs/PROTOCOL.md#failover-from-the-wire)
    records = [f for p in paths for f in p["failover_list"]]
    assert len(records) == sum(p["failovers"] for p in paths)
    kinds = {kind: sum(1 for f in records if f["kind"] == kind)
             for kind in ("no_response", "response_not_delivered", "original_not_on_wire")}
    assert sum(kinds.values()) == len(records)
    assert kinds["original_not_on_wire"] == sum(p["failovers_unseen"] for p in paths)
    assert np.count_nonzero(rows["outcome"] == iorows.REPLACED) == \
        kinds["no_response"] + sum(1 for a in summary["anomalies"]
                                   if a["kind"] == "buf_id_reused")
    originals = rows["failed_over"] == 1
    assert np.count_nonzero(originals) == kinds["no_response"] + kinds["response_not_delivered"]
    assert np.count_nonzero(originals & (rows["outcome"] == iorows.ANSWERED)
                            & (rows["delivered"] == 0)) == kinds["response_not_delivered"]
    assert sorted(rows["frame"][originals].tolist()) == \
        sorted(f["original_frame"] for f in records if f["original_frame"] is not None)
    assert sorted(rows["frame"][rows["failover_of"] >= 0].tolist()) == \
        sorted(f["frame"] for f in records if f["original_frame"] is not None)


def test_failed_over_rows_name_their_first_send():
    rows, _ = rows_and_summary(PROJECT_PCAPS / "failover_inflight.pcap")
    moved = rows["failover_from"] >= 0
    assert np.count_nonzero(moved) == 4
    assert np.all(rows["latency_ns"][moved] > rows["response_ns"][moved] - rows["time_ns"][moved])


def test_kept_rows_are_the_rows_narrowed():
    """What iostat and the report keep (iorows.Kept): the same values as the joined
    batches in fewer bytes, and a column joined across batches of different integer
    types holds each batch's values."""
    from rtrs_scapy.analysis.split import parts_ns
    from rtrs_scapy.report.view import kept_rows
    batches = []
    analyze(str(PROJECT_PCAPS / "multipath_failover.pcap"), io_sink=batches.append)
    whole = iorows.concat(batches)
    kept = kept_rows(batches).take()
    parts = parts_ns(whole)
    for name, column in kept.items():
        want = parts[name[len("part_"):]] if name.startswith("part_") else whole[name]
        assert np.array_equal(column.astype(np.int64), want), name
    assert sum(c.nbytes for c in kept.values()) < sum(whole[n].nbytes for n in iorows.NAMES) / 3
    mixed = iorows.Kept(("frame",))
    for values in ([-1, 5], [70_000, 3], [2 ** 40]):
        mixed({"frame": np.array(values, dtype=np.int64)})
    assert mixed.take()["frame"].tolist() == [-1, 5, 70_000, 3, 2 ** 40]
