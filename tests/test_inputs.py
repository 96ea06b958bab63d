"""Inputs as production hands them over (capture/inputs.py): a pipe, a ring buffer
of files given in any order, a directory, the same traffic captured on two hosts.
Each gives the summary of the whole capture."""

import random
import subprocess
import sys

import pytest

from conftest import REAL, REPO, real_pcap
from rtrs_scapy.analysis import analyze
from rtrs_scapy.capture import CaptureError, open_capture
from rtrs_scapy.craft import write_capture
from rtrs_scapy.craft.encap import DLT_EN10MB
from rtrs_scapy.capture.inputs import open_inputs


def frames_of(pcap):
    with open_capture(pcap) as cap:
        return [(ts, bytes(buf[s:e])) for _, ts, buf, s, e, _ in cap]


def write_pcap(path, frames, shift=0.0):
    write_capture(path, [(ts + shift, data) for ts, data in frames], DLT_EN10MB)
    return path


def without_capture_block(summary):
    return {k: v for k, v in summary.items() if k != "capture"}


@pytest.fixture(params=[name for name, _, _ in REAL])
def whole(request):
    pcap = real_pcap(request.param)
    return pcap, analyze(pcap, keep_messages=True)


def test_standard_input(whole):
    pcap, result = whole
    with open(pcap, "rb") as stdin:
        out = subprocess.run([sys.executable, "-m", "rtrs_scapy.cli", "--format", "json", "-"],
                             stdin=stdin, capture_output=True, text=True, check=True)
    assert out.stdout == subprocess.run(
        [sys.executable, "-m", "rtrs_scapy.cli", "--format", "json", str(pcap)],
        capture_output=True, text=True, check=True).stdout.replace(str(pcap), "-")


def test_ring_buffer_in_any_order_and_as_a_directory(whole, tmp_path):
    pcap, result = whole
    frames = frames_of(pcap)
    cuts = [0, 97, 410, 411, 900, len(frames)]   # one file holds a single frame
    files = [write_pcap(tmp_path / ("ring%d.pcap" % k), frames[a:b])
             for k, (a, b) in enumerate(zip(cuts, cuts[1:]))]
    shuffled = files[3:] + files[:3]
    merged = analyze([str(f) for f in shuffled], keep_messages=True)
    assert without_capture_block(merged.summary) == without_capture_block(result.summary)
    assert merged.messages == result.messages
    assert merged.summary["capture"]["packets"] == len(frames)
    assert merged.summary["capture"]["files"] == [str(f) for f in shuffled]
    (tmp_path / "notes.txt").write_text("not a capture")
    by_directory = analyze(str(tmp_path), keep_messages=False)
    assert without_capture_block(by_directory.summary) == without_capture_block(result.summary)


def test_a_ring_of_repeated_sessions_loses_no_frame(tmp_path):
    """Files that follow one another hold copies of one session that differ only in
    addresses and UUIDs (benchmarks/make_capture.py): nothing is another host's copy."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from make_capture import build
    big = tmp_path / "copies.pcap"
    build(real_pcap("basic_inval"), big, 6000)
    frames = frames_of(big)
    files = [write_pcap(tmp_path / ("ring%d.pcap" % k), frames[a:a + 1500])
             for k, a in enumerate(range(0, 6000, 1500))]
    merged = analyze([str(f) for f in files], keep_messages=False).summary
    assert merged["capture"]["capture_duplicates"] == 0
    assert merged["capture"]["packets"] == 6000
    assert without_capture_block(merged) == without_capture_block(
        analyze(big, keep_messages=False).summary)


@pytest.mark.parametrize("offset", [0.00003, 0.0021, -0.0008])
def test_two_hosts_count_every_frame_once(whole, tmp_path, offset):
    """Each host misses some frames (never the same ones); the second host's clock is
    off by ``offset`` seconds.  Merged, they are the whole capture."""
    pcap, result = whole
    frames = frames_of(pcap)
    rng = random.Random(7)
    where = [rng.choice("ab") if rng.random() < 0.1 else "ab" for _ in frames]
    a = write_pcap(tmp_path / "a.pcap", [f for f, w in zip(frames, where) if "a" in w])
    b = write_pcap(tmp_path / "b.pcap", [f for f, w in zip(frames, where) if "b" in w],
                   shift=offset)
    merged = analyze([str(a), str(b)], keep_messages=False)
    capture = merged.summary["capture"]
    assert capture["packets"] == len(frames)
    assert capture["capture_duplicates"] == sum(1 for w in where if w == "ab")
    assert without_capture_block(merged.summary) == without_capture_block(
        analyze(pcap, keep_messages=False).summary)


def test_unusable_inputs_are_one_line_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(CaptureError, match="without capture files"):
        open_inputs([str(tmp_path / "empty")])
    with pytest.raises(CaptureError, match="standard input can be read only once"):
        open_inputs(["-", "-"])
