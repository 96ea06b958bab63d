"""One capture in several files, mapped one file at a time and reduced in order
(analysis/parts.py): the same summary, records and IO rows as the whole capture
read in one pass (which the kernel counters and the crafters' truth vouch for)."""

import pickle

import numpy as np
import pytest

from conftest import PROJECT_PCAPS, REAL_ALL, real_pcap
from rtrs_scapy.analysis import analyze, iorows
from rtrs_scapy.analysis import io as io_module
from rtrs_scapy.analysis.io import acknowledged
from rtrs_scapy.analysis.parts import map_file, reduce_parts
from rtrs_scapy.craft.repeat import repeat_capture, session_uuids
from test_inputs import frames_of, without_capture_block, write_pcap

CAPTURES = [path for name, path, truth in REAL_ALL if truth["pcap_stats"]["frames"] < 20000] + [
    PROJECT_PCAPS / name for name in ("failover_inflight.pcap", "reconnect_timeout.pcap",
                                      "multipath_failover.pcap", "mid_session.pcap",
                                      "load_c64_qd128.pcap")]


def split(pcap, tmp_path, count):
    """``count`` files of about equal size: requests and responses, and multi-packet
    messages, fall on both sides of the cuts."""
    frames = frames_of(pcap)
    cuts = [len(frames) * k // count for k in range(count + 1)]
    return [str(write_pcap(tmp_path / ("part%02d.pcap" % k), frames[a:b]))
            for k, (a, b) in enumerate(zip(cuts, cuts[1:]))]


def rows_of(run):
    batches = []
    result = run(batches.append)
    return result, iorows.concat(batches)


@pytest.mark.parametrize("pcap", CAPTURES, ids=lambda p: p.name)
@pytest.mark.parametrize("count", [3, 11])
def test_parts_reduce_to_the_whole(pcap, tmp_path, count):
    files = split(pcap, tmp_path, count)
    whole, whole_rows = rows_of(lambda sink: analyze(pcap, keep_messages=True, io_sink=sink))
    parts = [pickle.loads(pickle.dumps(map_file(f))) for f in reversed(files)]
    reduced, reduced_rows = rows_of(lambda sink: reduce_parts(parts, io_sink=sink))
    assert without_capture_block(reduced.summary) == without_capture_block(whole.summary)
    assert reduced.messages == whole.messages
    order = np.lexsort((whole_rows["frame"],))
    again = np.lexsort((reduced_rows["frame"],))
    for name in iorows.NAMES:
        assert np.array_equal(whole_rows[name][order], reduced_rows[name][again]), name
    assert reduced.summary["capture"]["packets"] == whole.summary["capture"]["packets"]
    assert reduced.summary["capture"]["files"] == files


def test_requests_answered_in_the_next_file_are_paired(tmp_path):
    pcap = PROJECT_PCAPS / "load_c64_qd128.pcap"
    whole = analyze(pcap, keep_messages=True)
    pairs = [(m["frame"], m["paired_frame"]) for m in whole.messages
             if m["msg"] in ("read", "write") and m["paired_frame"]]
    frame = next(a for a, b in pairs if b - a > 20)
    frames = frames_of(pcap)
    files = [str(write_pcap(tmp_path / "a.pcap", frames[:frame + 5])),
             str(write_pcap(tmp_path / "b.pcap", frames[frame + 5:]))]
    reduced = reduce_parts([map_file(f) for f in files])
    assert reduced.messages == whole.messages


def test_waiting_answers_are_looked_at_when_acknowledgements_move(tmp_path, monkeypatch):
    """A file of many sessions in a reduce: its streams learn their ACKs only where
    the files join, so the answers waiting for an ACK are looked at again only then
    (each batch looked at all of them: quadratic, 3.1 M lookups and 42 s of the
    75 s reduce of 1 M short-session packets in four files, under cProfile); twice the sessions
    cost twice the lookups, and the reduce is still the one pass."""
    source = real_pcap("basic_inval")
    looked = []

    def counted(state, *response):
        looked.append(1)
        return acknowledged(state, *response)

    monkeypatch.setattr(io_module, "acknowledged", counted)
    work = {}
    for copies in (6, 12):
        path = tmp_path / ("copies_%d.pcap" % copies)
        repeat_capture(source, path, len(frames_of(source)) * copies, session_uuids(source))
        folder = tmp_path / str(copies)
        folder.mkdir()
        parts = [map_file(f) for f in split(path, folder, 2)]
        looked.clear()
        reduced = reduce_parts(parts, keep_messages=False)
        work[copies] = len(looked)
        whole = analyze(path, keep_messages=False)
        assert without_capture_block(reduced.summary) == without_capture_block(whole.summary)
    assert 0 < work[12] <= 2.2 * work[6], work
