"""The numpy batch path and the frame-by-frame path give identical results
(summary and every message record), on real, cut, crafted and damaged captures."""

import pytest

from rtrs_scapy.analysis import analyze
from rtrs_scapy.analysis import batch as batch_module

from conftest import PROJECT_PCAPS
from test_midsession import cut


def assert_same(path, monkeypatch):
    monkeypatch.setattr(batch_module, "MIN_BATCH", 1)  # batch even tiny captures
    serial = analyze(path, keep_messages=True, batch=False)
    batched = analyze(path, keep_messages=True, batch=True)
    assert batched.summary == serial.summary
    assert batched.messages == serial.messages
    return serial


def test_real_captures(real_capture, monkeypatch):
    pcap, _ = real_capture
    assert assert_same(pcap, monkeypatch).summary["sessions"]


@pytest.mark.parametrize("start", [2, 40, 75, 400, 777])
def test_cut_captures(real_capture, tmp_path, monkeypatch, start):
    pcap, _ = real_capture
    cut(pcap, tmp_path / "cut.pcap", start)
    assert_same(tmp_path / "cut.pcap", monkeypatch)


def test_gaps_and_duplicates(real_capture, tmp_path, monkeypatch):
    """Drop and repeat some middle packets: the runs replay frame by frame."""
    from rtrs_scapy.fastpath.reader import open_capture
    from test_midsession import write_pcap
    pcap, _ = real_capture
    with open_capture(pcap) as cap:
        frames = [(ts, bytes(buf[s:e])) for no, ts, buf, s, e, _ in cap]
    damaged = []
    for number, frame in enumerate(frames, 1):
        if number % 97 == 0:
            continue                      # a gap
        damaged.append(frame)
        if number % 89 == 0:
            damaged.append(frame)         # a retransmission
    write_pcap(tmp_path / "damaged.pcap", damaged, 1)
    result = assert_same(tmp_path / "damaged.pcap", monkeypatch)
    kinds = {a["kind"] for a in result.summary["anomalies"]}
    assert "psn_gap" in kinds
    (path,) = result.summary["sessions"][0]["paths"]
    assert path["transport"]["retransmissions"] > 0


@pytest.mark.parametrize("capture", sorted(
    str(p.relative_to(PROJECT_PCAPS)) for p in PROJECT_PCAPS.glob("**/*.pcap*")
    if not p.name.endswith(".json")))
def test_corpus(capture, monkeypatch):
    assert_same(PROJECT_PCAPS / capture, monkeypatch)
