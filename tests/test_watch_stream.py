"""Reading a capture as a stream: pcap global headers in the middle (a restarted
tcpdump, concatenated files), a pipe read as its bytes arrive, a stream cut in
the middle of a record."""

import os
import struct
import threading
import time
from pathlib import Path

import pytest

from rtrs_scapy.analysis import analyze
from rtrs_scapy.capture import open_capture

REAL = Path(__file__).resolve().parents[1] / "pcaps" / "real"
CAPTURES = sorted(REAL.glob("*.pcap"))


def records(path):
    """(sec, usec, bytes) of every record of a little-endian microsecond pcap."""
    data = path.read_bytes()
    assert data[:4] == b"\xd4\xc3\xb2\xa1"
    out, pos = [], 24
    while pos < len(data):
        sec, usec, incl, _ = struct.unpack_from("<IIII", data, pos)
        out.append((sec, usec, data[pos + 16:pos + 16 + incl]))
        pos += 16 + incl
    return out


def pcap_bytes(recs, big=False, nano=False, link=1):
    bo = ">" if big else "<"
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = [struct.pack(bo + "IHHiIII", magic, 2, 4, 0, 0, 262144, link)]
    for sec, usec, data in recs:
        out.append(struct.pack(bo + "IIII", sec, usec * 1000 if nano else usec, len(data),
                               len(data)) + data)
    return b"".join(out)


def frames(path, live=False):
    with open_capture(path, live=live) as cap:
        got = [(no, ts, bytes(buf[s:e])) for no, ts, buf, s, e, _ in cap]
        return got, cap.problems


def io_totals(summary):
    return {p["sess_uuid"]: p["io"] for s in summary["sessions"] for p in s["paths"]}


def test_concatenated_real_captures_read_as_one(tmp_path):
    """Every real capture after the other: each new global header is taken, every
    record is read, and the summary holds each capture's IO."""
    whole = tmp_path / "all.pcap"
    whole.write_bytes(b"".join(p.read_bytes() for p in CAPTURES))
    got, problems = frames(whole)
    assert problems == []
    assert len(got) == sum(len(records(p)) for p in CAPTURES)
    together = analyze(whole, keep_messages=False).summary
    expected = {}
    for path in CAPTURES:
        expected.update(io_totals(analyze(path, keep_messages=False).summary))
    assert io_totals(together) == expected


def test_restart_with_other_byte_order_and_resolution(tmp_path):
    """A second header may change byte order and timestamp resolution."""
    recs = records(REAL / "basic_inval.pcap")[:300]
    mixed = tmp_path / "mixed.pcap"
    mixed.write_bytes(pcap_bytes(recs[:100]) + pcap_bytes(recs[100:200], big=True)
                      + pcap_bytes(recs[200:], nano=True))
    plain = tmp_path / "plain.pcap"
    plain.write_bytes(pcap_bytes(recs))
    assert frames(mixed) == frames(plain)


def test_live_pipe_gives_records_as_they_arrive():
    """A live pipe's records come out while the writer still holds it open; a
    record cut by a pause of the writer waits for its rest."""
    recs = records(REAL / "basic_inval.pcap")[:21]
    data = pcap_bytes(recs)
    last = 16 + len(recs[-1][2])
    read_fd, write_fd = os.pipe()
    os.write(write_fd, data[:len(data) - last + 10])      # 20 records and a cut header
    seen = []
    twenty, all_of_them = threading.Event(), threading.Event()

    def reader():
        with open_capture("/dev/fd/%d" % read_fd, live=True) as cap:
            for chunk in cap.chunks():
                seen.append(len(chunk))
                if sum(seen) == 20:
                    twenty.set()
                if sum(seen) == 21:
                    all_of_them.set()
    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        assert twenty.wait(30), "records of an open pipe were held back"
        time.sleep(0.2)
        assert sum(seen) == 20 and thread.is_alive()      # waiting for the cut record
        os.write(write_fd, data[len(data) - last + 10:])
        assert all_of_them.wait(30)
    finally:
        os.close(write_fd)
        thread.join(30)
        os.close(read_fd)
    assert sum(seen) == 21


@pytest.mark.parametrize("cut", [5, 20])
def test_stream_cut_inside_a_record_ends_cleanly(tmp_path, cut):
    """A stream that ends inside a record header or body: the records before it,
    one truncated_record problem, no exception."""
    recs = records(REAL / "basic_inval.pcap")[:50]
    data = pcap_bytes(recs)
    last = 16 + len(recs[-1][2])
    path = tmp_path / "cut.pcap"
    path.write_bytes(data[:len(data) - last + cut])
    got, problems = frames(path)
    assert len(got) == len(recs) - 1
    assert [kind for _, kind, _ in problems] == ["truncated_record"]
