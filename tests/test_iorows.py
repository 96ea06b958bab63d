"""IO rows (analysis/iorows.py): one per request, and their sums are the summary's
figures, which the kernel's counters confirm (tests/test_truth.py)."""

import numpy as np
import pytest

from conftest import PROJECT_PCAPS, REAL_ALL
from rtrs_scapy.analysis import analyze, iorows
from rtrs_scapy.analysis.growing import Growing

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


def test_kept_joins_small_batches_as_they_come():
    """Thousands of short sessions hand over batches of a row or two: a Kept joins
    every JOIN of them into one block (the arrays' own bytes would outweigh their
    rows), keeps the newest two blocks in memory and the others on disk, and gives
    them back in order, whatever types the batches were narrowed to."""
    kept = iorows.Kept(("frame", "path"))
    values = list(range(-300, 700, 3)) * 2 + [70_000, 2 ** 40]
    for at in range(0, len(values), 2):
        pair = np.array(values[at:at + 2], dtype=np.int64)
        kept({"frame": pair, "path": pair % 5})
    assert len(values) // 2 > 2 * iorows.JOIN
    assert len(kept.blocks) == len(values) // 2 // iorows.JOIN
    assert len(kept.pending) == len(values) // 2 % iorows.JOIN
    assert len(kept.blocks) == 5 and kept.blocks.base == 3 and len(kept.blocks.held) == 2
    taken = kept.take()
    assert taken["frame"].tolist() == values
    assert taken["path"].tolist() == [v % 5 for v in values]


@pytest.mark.parametrize("times,instants", [(False, False), (True, False), (True, True)])
def test_a_growing_array_gives_back_the_values_appended(times, instants):
    """growing.py: what the summary keeps per IO row until the end (µs while every
    time is a whole µs, instants after the first) comes back as appended: batches of
    whole µs, then of ns, -1 and int64 extremes; the oldest batches dropped; reordered;
    read whole, at positions and one by one."""
    rng = np.random.default_rng(24)
    stamp = 1_764_000_000 * 10**9
    batches = [stamp + rng.integers(0, 10**6, 50) * 1000, rng.integers(0, 300, 7) * 1000,
               np.array([], dtype=np.int64), stamp + rng.integers(0, 10**9, 60),
               np.array([-1, 0, 1, -(2**62), 2**62], dtype=np.int64),
               rng.integers(-100, 100, 100).astype(np.int8)]
    kept = Growing(times=times, instants=instants)
    for batch in batches:
        kept.extend(batch)
    expected = np.concatenate([b.astype(np.int64) for b in batches])
    assert kept.values().tolist() == expected.tolist()
    kept.drop(57)
    expected = expected[57:]
    assert kept.values().tolist() == expected.tolist()
    kept.extend(batches[0])
    expected = np.concatenate((expected, batches[0]))
    order = rng.permutation(len(expected))
    kept.reorder(order)
    expected = expected[order]
    assert kept.values().tolist() == expected.tolist()
    at = np.array([0, 3, len(expected) - 1])
    assert kept.take(at).tolist() == expected[at].tolist()
    assert [kept.at(k) for k in range(len(expected))] == expected.tolist()
    if times:   # instants of 1 s in whole µs in four bytes, latencies below 300 µs in two
        sample, size = (batches[0], 4) if instants else (batches[1], 2)
        whole_us = Growing(times=True, instants=instants)
        whole_us.extend(sample)
        assert whole_us.values().tolist() == sample.tolist()
        assert whole_us.data.itemsize == size
