"""Tests for rtrs_scapy.capture (pcap/pcapng/gzip reading and the IB locator)."""

import gzip
import os
import struct
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ib_decode import RECORD_HEADER, pcap_records
from rtrs_scapy.capture import CaptureError, ib_offset, link_name, open_capture, sources

BASIC_INVAL = Path(__file__).resolve().parents[1] / "pcaps" / "real" / "basic_inval.pcap"


# ---------------------------------------------------------------------------
# capture builders

def pcap_bytes(frames, bo="<", ns=False, linktype=1, snaplen=65535):
    """frames: [(ts_sec, ts_frac, data)]"""
    magic = 0xA1B23C4D if ns else 0xA1B2C3D4
    out = [struct.pack(bo + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]
    for sec, frac, data in frames:
        out.append(struct.pack(bo + "IIII", sec, frac, len(data), len(data)) + data)
    return b"".join(out)


def _pad4(b):
    return b + b"\0" * (-len(b) % 4)


def block(btype, body, bo="<"):
    body = _pad4(body)
    n = len(body) + 12
    return struct.pack(bo + "II", btype, n) + body + struct.pack(bo + "I", n)


def opt(code, value, bo="<"):
    return struct.pack(bo + "HH", code, len(value)) + _pad4(value)


def shb(bo="<", options=b""):
    return block(0x0A0D0D0A, struct.pack(bo + "IHHq", 0x1A2B3C4D, 1, 0, -1) + options, bo)


def idb(linktype, snaplen=0, tsresol=None, tsoffset=None, bo="<"):
    opts = b""
    if tsresol is not None:
        opts += opt(9, bytes([tsresol]), bo)
    if tsoffset is not None:
        opts += opt(14, struct.pack(bo + "q", tsoffset), bo)
    if opts:
        opts += opt(2, b"eth0", bo) + struct.pack(bo + "HH", 0, 0)
    return block(1, struct.pack(bo + "HHI", linktype, 0, snaplen) + opts, bo)


def epb(iface, ticks, data, bo="<", options=b""):
    body = struct.pack(bo + "IIIII", iface, ticks >> 32, ticks & 0xFFFFFFFF,
                       len(data), len(data)) + _pad4(data) + options
    return block(6, body, bo)


def spb(data, origlen=None, bo="<"):
    return block(3, struct.pack(bo + "I", len(data) if origlen is None else origlen) + data, bo)


def old_pb(iface, ticks, data, bo="<"):
    body = struct.pack(bo + "HHIIII", iface, 0, ticks >> 32, ticks & 0xFFFFFFFF,
                       len(data), len(data)) + data
    return block(2, body, bo)


def write(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def read_all(path):
    with open_capture(path) as cap:
        frames = [(n, ts, bytes(buf[s:e]), lt) for n, ts, buf, s, e, lt in cap]
        return cap, frames


FR = [(1700000000, 1, b"\x01" * 60), (1700000000, 999999, b"\x02" * 1514),
      (1700000001, 500000, b"")]


# ---------------------------------------------------------------------------
# pcap

@pytest.mark.parametrize("bo", ["<", ">"])
def test_pcap_us(tmp_path, bo):
    data = pcap_bytes(FR, bo=bo)
    cap, frames = read_all(write(tmp_path, "a.pcap", data))
    assert cap.fmt == "pcap"
    assert (cap.link_type, cap.link_name) == (1, "ethernet")
    assert not cap.truncated and cap.problems == []
    assert [f[0] for f in frames] == [1, 2, 3]
    assert [f[2] for f in frames] == [d for _, _, d in FR]
    assert frames[0][1] == pytest.approx(1700000000.000001, abs=1e-7)
    assert frames[1][1] == pytest.approx(1700000000.999999, abs=1e-7)
    assert frames[2][1] == pytest.approx(1700000001.5, abs=1e-7)
    assert all(f[3] == 1 for f in frames)
    assert cap.bytes_total == len(data) == cap.position()


@pytest.mark.parametrize("bo", ["<", ">"])
def test_pcap_ns_and_linktype(tmp_path, bo):
    data = pcap_bytes([(10, 123456789, b"abc"), (11, 999999999, b"d")], bo=bo, ns=True,
                      linktype=247 | (1 << 28) | (2 << 26))      # FCS bits set
    cap, frames = read_all(write(tmp_path, "a.pcap", data))
    assert cap.fmt == "pcap-ns"
    assert (cap.link_type, cap.link_name) == (247, "infiniband")
    assert frames[0][1] == pytest.approx(10.123456789, abs=1e-9)
    assert frames[1][1] == pytest.approx(11.999999999, abs=1e-9)
    assert [f[2] for f in frames] == [b"abc", b"d"]
    assert [f[3] for f in frames] == [247, 247]


def test_link_names():
    assert [link_name(x) for x in (1, 113, 276, 101, 228, 229, 247, 197)] == [
        "ethernet", "linux_sll", "linux_sll2", "raw_ip", "ipv4", "ipv6", "infiniband", "erf"]
    assert link_name(4242) == "unknown(4242)"


def test_unknown_linktype_still_yielded(tmp_path):
    cap, frames = read_all(write(tmp_path, "a.pcap", pcap_bytes(FR, linktype=4242)))
    assert cap.link_name == "unknown(4242)" and len(frames) == 3 and frames[0][3] == 4242


def test_yield_is_zero_copy_offsets(tmp_path):
    p = write(tmp_path, "a.pcap", pcap_bytes(FR))
    with open_capture(p) as cap:
        for n, ts, buf, s, e, lt in cap:
            if n == 2:
                assert s == 24 + 16 + 60 + 16 and e - s == 1514
                assert struct.unpack_from("!H", buf, s + 12)[0] == 0x0202


def test_chunks_held_together_keep_their_own_columns():
    """The walk fills each chunk's columns and goes on in fresh ones: chunks kept while
    later ones are read (as the read-ahead thread does) still hold their own records,
    the offsets a plain walk of the real capture finds (tests/ib_decode.py)."""
    _, offsets = pcap_records(BASIC_INVAL)
    with open_capture(BASIC_INVAL) as cap:
        chunks = list(cap.chunks(100))
    assert len(chunks) == -(-len(offsets) // 100)
    assert [int(o) - RECORD_HEADER for chunk in chunks for o in chunk.offs] == offsets
    assert [chunk.first_frame for chunk in chunks] == list(range(1, len(offsets) + 1, 100))
    assert all(len(chunk.packets) == len(chunk.offs) for chunk in chunks)


def test_iterate_once(tmp_path):
    with open_capture(write(tmp_path, "a.pcap", pcap_bytes(FR))) as cap:
        assert len(list(cap)) == 3
        with pytest.raises(RuntimeError):
            iter(cap)


# ---------------------------------------------------------------------------
# pcapng

def pcapng_sample():
    """2 interfaces (ethernet ns, infiniband 2^-10 s with offset), EPB/SPB/PB,
    skipped blocks, then a big-endian second section."""
    blocks = [
        shb("<", opt(4, b"test app") + struct.pack("<HH", 0, 0)),
        idb(1, 262144, tsresol=9),
        block(4, b"\x01\x00\x04\x00\x0a\x00\x00\x01name\x00\x00\x00\x00"),  # NRB: skip
        idb(247, 0, tsresol=0x80 | 10, tsoffset=1000),
        epb(0, 1_700_000_000_123_456_789, b"eth-frame"),
        epb(1, 1024 * 5 + 512, b"ib-frame!!"),                 # 5.5 s + 1000 s
        block(5, b"\0" * 16),                                   # ISB: skip
        block(0x40000BAD, b"custom"),                           # custom: skip
        spb(b"simple-packet"),                                  # iface 0, snaplen 262144
        old_pb(1, 2048, b"old"),
        shb(">"),
        idb(113, 0, bo=">"),                                    # default us
        epb(0, 3_000_001, b"sll", bo=">"),
    ]
    return b"".join(blocks)


def check_pcapng_sample(cap, frames):
    assert cap.link_type == 1 and cap.link_name == "ethernet"
    assert not cap.truncated and cap.problems == []
    assert [f[0] for f in frames] == [1, 2, 3, 4, 5]
    assert [f[2] for f in frames] == [b"eth-frame", b"ib-frame!!", b"simple-packet", b"old", b"sll"]
    assert [f[3] for f in frames] == [1, 247, 1, 247, 113]
    ts = [f[1] for f in frames]
    assert ts[0] == pytest.approx(1700000000.123456789, abs=1e-6)
    assert ts[1] == 1005.5
    assert ts[2] == ts[1]                   # SPB has no timestamp: last one seen
    assert ts[3] == 1002.0
    assert ts[4] == pytest.approx(3.000001, abs=1e-9)


def test_pcapng(tmp_path):
    cap, frames = read_all(write(tmp_path, "a.pcapng", pcapng_sample()))
    assert cap.fmt == "pcapng"
    check_pcapng_sample(cap, frames)
    assert cap.position() == cap.bytes_total


@pytest.mark.parametrize("records", [1, 2, 100])
def test_the_walk_tallies_link_types_and_cut_records_as_the_columns_do(tmp_path, records):
    """A chunk's link types and the records the snaplen cut come from the walk's tally
    (capture/records.py ``_tally``): the same as the chunk's columns say, with two
    interfaces of different link types in one chunk and a simple packet block cut."""
    data = pcapng_sample()[:-len(shb(">") + idb(113, 0, bo=">") + epb(0, 3_000_001, b"sll",
                                                                     bo=">"))]
    data += shb() + idb(1, 4) + spb(b"abcdefgh") + spb(b"ab")
    cut = links = 0
    with open_capture(write(tmp_path, "a.pcapng", data)) as cap:
        for chunk in cap.chunks(records):
            assert chunk.counts()[1] == np.unique(chunk.links).tolist()
            cut += int(np.count_nonzero(chunk.caplens < chunk.origlens))
            links += len(chunk.counts()[1]) > 1
        assert (cap.cut.records, cap.cut.caplen) == (cut, 4) and cut == 1
    assert (links > 0) == (records > 1)       # one chunk holds both link types


def test_pcapng_big_endian_first(tmp_path):
    data = shb(">") + idb(276, 0, bo=">") + epb(0, 7_000_000, b"x" * 5, bo=">")
    cap, frames = read_all(write(tmp_path, "a.pcapng", data))
    assert cap.link_name == "linux_sll2"
    assert frames == [(1, 7.0, b"xxxxx", 276)]


def test_pcapng_spb_snaplen(tmp_path):
    data = shb() + idb(1, 4) + spb(b"abcdefgh")
    cap, frames = read_all(write(tmp_path, "a.pcapng", data))
    assert frames[0][2] == b"abcd"


def test_pcapng_unknown_interface_skipped(tmp_path):
    data = shb() + idb(1) + epb(3, 1, b"nope") + epb(0, 2, b"ok")
    cap, frames = read_all(write(tmp_path, "a.pcapng", data))
    assert [f[2] for f in frames] == [b"ok"]
    assert not cap.truncated
    assert cap.problems[0][:2] == (1, "bad_interface")


def test_pcapng_clock_offset_beyond_64_bit_nanoseconds(tmp_path):
    """An if_tsoffset no clock of int64 nanoseconds can hold (found by the fuzz test)
    is a problem named with its interface, read as 0: the packets are all there."""
    data = shb() + idb(1, tsoffset=2 ** 62) + epb(0, 5_000_000, b"\x01" * 60) \
        + epb(0, 6_000_000, b"\x02" * 60)
    cap, frames = read_all(write(tmp_path, "a.pcapng", data))
    assert [(n, ts, payload) for n, ts, payload, _ in frames] == [
        (1, 5.0, b"\x01" * 60), (2, 6.0, b"\x02" * 60)]
    assert cap.problems == [(1, "bad_option", "interface 0: if_tsoffset of %d s is beyond "
                             "a clock of 64-bit nanoseconds; read as 0" % 2 ** 62)]
    assert not cap.truncated


def test_pcapng_no_idb_in_prefix(tmp_path):
    cap, frames = read_all(write(tmp_path, "a.pcapng", shb()))
    assert frames == [] and cap.link_type == -1 and cap.link_name == "none"
    assert not cap.truncated


# ---------------------------------------------------------------------------
# gzip and chunked reading

@pytest.mark.parametrize("chunk", [7, 64, 4 * 1024 * 1024])
def test_gzip_pcap(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(sources, "CHUNK", chunk)
    frames_in = [(i, i, bytes([i & 255]) * (i % 300)) for i in range(500)]
    raw = pcap_bytes(frames_in, bo=">")
    gz = gzip.compress(raw)
    p = write(tmp_path, "capture.bin", gz)              # detected by magic, not name
    cap, frames = read_all(p)
    assert cap.fmt == "pcap+gzip"
    assert cap.bytes_total == len(gz)
    assert cap.position() == len(gz)
    assert [f[2] for f in frames] == [d for _, _, d in frames_in]
    assert not cap.truncated and cap.problems == []


@pytest.mark.parametrize("chunk", [13, 4 * 1024 * 1024])
def test_gzip_pcapng(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(sources, "CHUNK", chunk)
    cap, frames = read_all(write(tmp_path, "a.pcapng.gz", gzip.compress(pcapng_sample())))
    assert cap.fmt == "pcapng+gzip"
    check_pcapng_sample(cap, frames)


def test_gzip_multi_member_and_zero_padding(tmp_path):
    raw = pcap_bytes(FR)
    gz = gzip.compress(raw[:50]) + gzip.compress(raw[50:]) + b"\0" * 100
    cap, frames = read_all(write(tmp_path, "a.gz", gz))
    assert [f[2] for f in frames] == [d for _, _, d in FR]
    assert not cap.truncated


def test_gzip_streams_with_bounded_memory(tmp_path, monkeypatch):
    """Decompressed data are read in CHUNK-sized pieces, never as a whole."""
    monkeypatch.setattr(sources, "CHUNK", 64 * 1024)
    raw = pcap_bytes([(0, i, b"\0" * 1500) for i in range(4000)])   # ~6 MB, compresses well
    p = write(tmp_path, "big.pcap.gz", gzip.compress(raw))
    biggest = 0
    with open_capture(p) as cap:
        n = 0
        for n, ts, buf, s, e, lt in cap:
            biggest = max(biggest, len(buf))
        assert n == 4000 and not cap.truncated
    assert biggest <= 2 * 64 * 1024


def test_uncompressed_pcap_is_mmapped(tmp_path):
    import mmap
    with open_capture(write(tmp_path, "a.pcap", pcap_bytes(FR))) as cap:
        assert isinstance(next(iter(cap))[2], mmap.mmap)


@pytest.mark.parametrize("ng", [False, True])
def test_mmap_release_keeps_offsets_valid(tmp_path, monkeypatch, ng):
    monkeypatch.setattr(sources, "RELEASE_EVERY", 1)          # release after every chunk
    payloads = [os.urandom(3000) for _ in range(50)]
    if ng:
        data = shb() + idb(1) + b"".join(epb(0, i, d) for i, d in enumerate(payloads))
    else:
        data = pcap_bytes([(0, i, d) for i, d in enumerate(payloads)])
    seen = []
    with open_capture(write(tmp_path, "a.cap", data)) as cap:
        for chunk in cap.chunks(4):                           # 13 chunks, 13 releases
            seen += [(chunk.data, int(o), int(o + n))
                     for o, n in zip(chunk.offs, chunk.caplens)]
            cap.done(chunk)
        # released up to the last chunk's end (to the page), not stopped by a failure
        assert cap._src._can_release and cap._src._released > len(data) - 2 * 3100 - 4096
        assert [bytes(b[s:e]) for b, s, e in seen] == payloads   # re-read after release


def _resident_kib(path):
    """This process's resident KiB of the mappings of ``path`` (/proc/self/smaps)."""
    resident, mine = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and not fields[0].endswith(":"):
                mine = fields[-1] == str(path)
            elif mine and fields[0] == "Rss:":
                resident += int(fields[1])
    return resident


def test_mmap_release_lets_the_pages_go(tmp_path):
    """The pages before a chunk the consumer is through with leave the process (the
    C library's madvise, called without the GIL): reading a capture four times
    RELEASE_EVERY whole leaves RELEASE_EVERY and a chunk or two of it resident, not all
    of it."""
    payload = os.urandom(4000)
    records = 4 * sources.RELEASE_EVERY // len(payload)
    path = write(tmp_path, "big.pcap", pcap_bytes([(0, i, payload) for i in range(records)]))
    with open_capture(path) as cap:
        for chunk in cap.chunks(256):                      # about 1 MiB a chunk
            assert int(chunk.buf[chunk.offs].sum()) >= 0   # every record's first page read
            cap.done(chunk)
        assert _resident_kib(path) < (sources.RELEASE_EVERY >> 10) + 3 * 1024 \
            < os.path.getsize(path) // 1024


def test_pipe_input(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    data = pcap_bytes(FR)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        with open(fifo, "wb") as f:
            f.write(data)
        os._exit(0)
    try:
        cap, frames = read_all(fifo)
    finally:
        os.waitpid(pid, 0)
    assert cap.bytes_total is None
    assert [f[2] for f in frames] == [d for _, _, d in FR]
    assert cap.position() == len(data)


# ---------------------------------------------------------------------------
# robustness

def test_truncated_record(tmp_path):
    data = pcap_bytes(FR)
    cut = data[:24 + 16 + 60 + 16 + 200]            # second record cut after 200 bytes
    cap, frames = read_all(write(tmp_path, "a.pcap", cut))
    assert len(frames) == 1 and frames[0][2] == FR[0][2]
    assert cap.truncated
    assert cap.problems == [(2, "truncated_record", "record says 1514 bytes, 200 left")]


def test_cut_in_record_header(tmp_path):
    data = pcap_bytes(FR)[:24 + 16 + 60 + 5]
    cap, frames = read_all(write(tmp_path, "a.pcap", data))
    assert len(frames) == 1 and cap.truncated
    assert cap.problems[0][:2] == (2, "truncated_record")


def test_header_only_is_fine(tmp_path):
    cap, frames = read_all(write(tmp_path, "a.pcap", pcap_bytes([])))
    assert frames == [] and not cap.truncated


def test_huge_incl_len_is_not_allocated(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "CHUNK", 64)        # stream path would have to allocate
    data = pcap_bytes(FR[:1]) + struct.pack("<IIII", 0, 0, 0xFFFFFFF0, 60) + b"x" * 100
    for name, payload in (("a.pcap", data), ("a.pcap.gz", gzip.compress(data))):
        cap, frames = read_all(write(tmp_path, name, payload))
        assert len(frames) == 1 and cap.truncated
        assert cap.problems[0][:2] == (2, "bad_record_length")


def test_incl_len_above_snaplen_allowed_up_to_max_record(tmp_path):
    data = pcap_bytes([(0, 0, b"y" * 9000)], snaplen=100)
    cap, frames = read_all(write(tmp_path, "a.pcap", data))
    assert len(frames[0][2]) == 9000 and not cap.truncated


def _ng_base():
    return shb() + idb(1) + epb(0, 1, b"first")


@pytest.mark.parametrize("bad,kind,tail", [
    (struct.pack("<II", 6, 8) + b"\0" * 8, "bad_block_length", True),            # < 12
    (struct.pack("<II", 6, 34) + b"\0" * 40, "bad_block_length", True),          # not 4-aligned
    (struct.pack("<II", 6, 0x7FFFFFF0) + b"\0" * 40, "bad_block_length", True),  # absurd
    (struct.pack("<II", 6, 64) + b"\0" * 40, "truncated_block", False),           # > remaining
    (epb(0, 2, b"second")[:-4] + struct.pack("<I", 999), "bad_block_trailer", True),
    (block(6, struct.pack("<IIIII", 0, 0, 0, 500, 500) + b"z" * 8), "bad_record_length", True),
    (block(6, b"\0" * 8), "bad_block_length", True),                             # EPB too small
    (b"\x0a\x0d\x0d\x0a" + b"\0" * 24, "bad_section_header", True),
    (b"\x06\x00\x00", "truncated_block", False),
])
def test_pcapng_bad_blocks(tmp_path, bad, kind, tail):
    data = _ng_base() + bad + (epb(0, 3, b"never") if tail else b"")
    cap, frames = read_all(write(tmp_path, "a.pcapng", data))
    assert [f[2] for f in frames] == [b"first"]
    assert cap.truncated
    assert cap.problems[0][:2] == (2, kind)
    assert isinstance(cap.problems[0][2], str) and cap.problems[0][2]


def test_pcapng_cut_file(tmp_path):
    data = _ng_base() + epb(0, 2, b"second" * 10)
    cap, frames = read_all(write(tmp_path, "a.pcapng", data[:-10]))
    assert len(frames) == 1 and cap.truncated
    assert cap.problems[0][:2] == (2, "truncated_block")


def _stored_gzip(raw):
    """gzip made of stored deflate blocks, so corruption can be placed exactly."""
    c = zlib.compressobj(0, zlib.DEFLATED, 31)
    gz = c.compress(raw) + c.flush()
    blocks = []                                      # (compressed offset, raw offset)
    q, r = 10, 0
    while True:
        final = gz[q] & 1
        assert (gz[q] >> 1) & 3 == 0
        n = struct.unpack_from("<H", gz, q + 1)[0]
        blocks.append((q, r))
        q += 5 + n
        r += n
        if final:
            return gz, blocks


@pytest.mark.parametrize("chunk", [4096, 4 * 1024 * 1024])
def test_gzip_corrupt_midstream(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(sources, "CHUNK", chunk)
    frames_in = [(0, i, os.urandom(200)) for i in range(2000)]
    raw = pcap_bytes(frames_in)
    gz, blocks = _stored_gzip(raw)
    q, r = blocks[len(blocks) // 2]
    gz = bytearray(gz)
    gz[q + 3] ^= 0xFF                                # NLEN no longer ~LEN: zlib error
    cap, frames = read_all(write(tmp_path, "a.pcap.gz", bytes(gz)))
    complete = sum(1 for i in range(2000) if 24 + (i + 1) * 216 <= r)
    assert len(frames) == complete                   # everything before the bad block
    assert [f[2] for f in frames] == [d for _, _, d in frames_in[:complete]]
    assert cap.truncated
    kinds = [k for _, k, _ in cap.problems]
    assert "gzip_error" in kinds
    assert cap.problems[0][0] == complete + 1


def test_gzip_cut(tmp_path):
    raw = pcap_bytes([(0, i, b"q" * 100) for i in range(100)])
    gz = gzip.compress(raw)
    cap, frames = read_all(write(tmp_path, "a.pcap.gz", gz[:len(gz) // 2]))
    assert cap.truncated
    assert {k for _, k, _ in cap.problems} <= {"gzip_error", "truncated_record"}
    assert "gzip_error" in {k for _, k, _ in cap.problems}
    assert all(f[2] == b"q" * 100 for f in frames)


def test_gzip_bad_crc_at_end(tmp_path):
    gz = bytearray(gzip.compress(pcap_bytes(FR)))
    gz[-8] ^= 0xFF                                   # CRC32 of the member
    cap, frames = read_all(write(tmp_path, "a.pcap.gz", bytes(gz)))
    assert cap.truncated and cap.problems[-1][1] == "gzip_error"


def test_gzip_trailing_garbage(tmp_path):
    cap, frames = read_all(write(tmp_path, "a.gz", gzip.compress(pcap_bytes(FR)) + b"junk"))
    assert len(frames) == 3
    assert cap.truncated and cap.problems[-1][1] == "gzip_error"


@pytest.mark.parametrize("content,fragment", [
    (b"", "empty file"),
    (b"\xd4\xc3\xb2\xa1\x02\x00", "too short for a pcap header"),
    (b"\x0a\x0d\x0d\x0a\x1c\x00\x00\x00", "too short for a pcapng section header"),
    (b"\x0a\x0d\x0d\x0a\x1c\x00\x00\x00XXXX" + b"\0" * 16, "bad byte-order magic"),
    (b"GET / HTTP/1.1\r\n" * 4, "not a pcap or pcapng capture (magic 0x47455420)"),
    (b"\x7fELF", "not a pcap or pcapng capture (magic 0x7f454c46)"),
    (b"ab", "not a pcap or pcapng capture"),
    (b"\x28\xb5\x2f\xfd" + b"\0" * 30, "zstd"),
    # mtime=0: the same bytes, hence the same test id, in every process that collects
    # them (the pytest-xdist workers must collect the same tests)
    (gzip.compress(b"", mtime=0), "empty gzip-compressed data"),
    (gzip.compress(b"hello world", mtime=0), "gzip-compressed data is not a pcap or pcapng capture"),
    (b"\x1f\x8b" + b"\xff" * 30, "corrupt gzip data"),
])
def test_not_a_capture(tmp_path, content, fragment):
    p = write(tmp_path, "x.pcap", content)
    with pytest.raises(CaptureError) as ei:
        open_capture(p)
    msg = str(ei.value)
    assert fragment in msg and str(p) in msg and "\n" not in msg


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(CaptureError, match="no such file"):
        open_capture(tmp_path / "nope.pcap")
    with pytest.raises(CaptureError, match="is a directory"):
        open_capture(tmp_path)


def _iterate_bytes(data):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "f"
        p.write_bytes(data)
        try:
            cap = open_capture(p)
        except CaptureError:
            return None
        with cap:
            n = 0
            for fn, ts, buf, s, e, lt in cap:
                assert fn == n + 1 and 0 <= s <= e <= len(buf)
                n = fn
                ib_offset(buf, s, e, lt)
            return n, cap.truncated, list(cap.problems)


_VALID = [pcap_bytes(FR), pcap_bytes(FR, bo=">", ns=True), pcapng_sample()]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.integers(0, 2), cut=st.integers(0, 4000),
       edits=st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 255)), max_size=6),
       gz=st.booleans())
def test_fuzz_never_raises(which, cut, edits, gz):
    data = bytearray(_VALID[which])
    for pos, val in edits:
        if data:
            data[pos % len(data)] = val
    data = bytes(data[:cut])
    if gz:
        data = gzip.compress(data)
    _iterate_bytes(data)


# ---------------------------------------------------------------------------
# ib_offset

def bth(opcode=0x04, qpn=0x11):
    return struct.pack("!BBHII", opcode, 0x40, 0xFFFF, qpn, 0x123)


ICRC = b"\xaa\xbb\xcc\xdd"
IB_PAYLOAD = bth() + b"P" * 20 + ICRC


def udp(payload, dport=4791):
    return struct.pack("!HHHH", 51000, dport, 8 + len(payload), 0) + payload


def ipv4(payload, proto=17, options=b"", frag=0, src=b"\x0a\x00\x00\x01", dst=b"\x0a\x00\x00\x02"):
    ihl = (20 + len(options)) // 4
    return struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, 20 + len(options) + len(payload), 0,
                       frag, 64, proto, 0, src, dst) + options + payload


SRC6 = bytes(range(16))
DST6 = bytes(range(16, 32))


def ipv6(payload, nh=17):
    return struct.pack("!IHBB16s16s", 0x60000000, len(payload), nh, 64, SRC6, DST6) + payload


def eth(payload, et, tags=()):
    hdr = b"\x02" * 6 + b"\x04" * 6
    for tpid in tags:
        hdr += struct.pack("!HH", tpid, 100)
    return hdr + struct.pack("!H", et) + payload


def grh(payload, nh=0x1B):
    return struct.pack("!IHBB16s16s", 0x60000000, len(payload), nh, 1, SRC6, DST6) + payload


def lrh(payload, lnh=2, dlid=0x12, slid=0x34):
    total = 8 + len(payload)
    return struct.pack("!BBHHH", 0x00, lnh, dlid, total // 4, slid) + payload


def _check(frame, link, kind, bth_rel, ib_len, src, dst, prefix=b"\xee" * 3, suffix=b""):
    """frame embedded in a larger buffer, to prove offsets are absolute."""
    buf = prefix + frame + suffix + b"\xee" * 5
    start, end = len(prefix), len(prefix) + len(frame) + len(suffix)
    r = ib_offset(buf, start, end, link)
    assert r is not None
    assert r == (kind, start + bth_rel, start + bth_rel + ib_len, src, dst)
    # memoryview and bytearray inputs behave the same
    assert ib_offset(memoryview(buf), start, end, link) == r
    assert ib_offset(bytearray(buf), start, end, link) == r
    return buf, start, end, r


def test_rocev2_ethernet_with_fcs_and_padding():
    frame = eth(ipv4(udp(IB_PAYLOAD)), 0x0800)
    _check(frame, 1, "rocev2", 14 + 20 + 8, len(IB_PAYLOAD),
           b"\x0a\x00\x00\x01", b"\x0a\x00\x00\x02", suffix=b"\0" * 6 + b"FCS!")


def test_rocev2_vlan_qinq_and_ip_options():
    frame = eth(ipv4(udp(IB_PAYLOAD), options=b"\x01" * 8), 0x0800, tags=(0x88A8, 0x8100))
    _check(frame, 1, "rocev2", 14 + 8 + 28 + 8, len(IB_PAYLOAD),
           b"\x0a\x00\x00\x01", b"\x0a\x00\x00\x02")


def test_rocev2_ipv6_and_cooked():
    pkt6 = ipv6(udp(IB_PAYLOAD))
    _check(eth(pkt6, 0x86DD), 1, "rocev2", 14 + 48, len(IB_PAYLOAD), SRC6, DST6)
    sll = struct.pack("!HHH8sH", 0, 1, 6, b"\x02" * 8, 0x86DD)
    _check(sll + pkt6, 113, "rocev2", 16 + 48, len(IB_PAYLOAD), SRC6, DST6)
    sll2 = struct.pack("!HHIHBB8s", 0x0800, 0, 2, 1, 0, 6, b"\x02" * 8)
    _check(sll2 + ipv4(udp(IB_PAYLOAD)), 276, "rocev2", 20 + 28, len(IB_PAYLOAD),
           b"\x0a\x00\x00\x01", b"\x0a\x00\x00\x02")


@pytest.mark.parametrize("lt", [101, 12, 14, 228])
def test_rocev2_raw_ipv4(lt):
    _check(ipv4(udp(IB_PAYLOAD)), lt, "rocev2", 28, len(IB_PAYLOAD),
           b"\x0a\x00\x00\x01", b"\x0a\x00\x00\x02")


def test_rocev2_raw_ipv6():
    _check(ipv6(udp(IB_PAYLOAD)), 101, "rocev2", 48, len(IB_PAYLOAD), SRC6, DST6)
    _check(ipv6(udp(IB_PAYLOAD)), 229, "rocev2", 48, len(IB_PAYLOAD), SRC6, DST6)
    assert ib_offset(ipv6(udp(IB_PAYLOAD)), 0, 100, 228) is None
    assert ib_offset(ipv4(udp(IB_PAYLOAD)), 0, 60, 229) is None


def test_rocev1():
    _check(eth(grh(IB_PAYLOAD), 0x8915), 1, "rocev1", 14, 40 + len(IB_PAYLOAD), SRC6, DST6,
           suffix=b"\0" * 4)


def test_infiniband_lrh():
    _check(lrh(IB_PAYLOAD), 247, "ib", 0, 8 + len(IB_PAYLOAD), b"\x00\x34", b"\x00\x12",
           suffix=b"VC")                                                   # VCRC excluded
    _check(lrh(grh(IB_PAYLOAD), lnh=3), 247, "ib", 0, 48 + len(IB_PAYLOAD),
           b"\x00\x34", b"\x00\x12", suffix=b"VC")


def test_erf_infiniband_and_ethernet():
    hdr_ib = struct.pack("!QBBHHH", 0, 21, 0, 0, 0, 0)
    _check(hdr_ib + lrh(IB_PAYLOAD), 197, "ib", 16, 8 + len(IB_PAYLOAD), b"\x00\x34", b"\x00\x12")
    hdr_ext = struct.pack("!QBBHHH", 0, 21 | 0x80, 0, 0, 0, 0) + b"\x81" + b"\0" * 7 + b"\x02" + b"\0" * 7
    _check(hdr_ext + lrh(IB_PAYLOAD), 197, "ib", 32, 8 + len(IB_PAYLOAD), b"\x00\x34", b"\x00\x12")
    hdr_eth = struct.pack("!QBBHHH", 0, 2, 0, 0, 0, 0) + b"\0\0"
    _check(hdr_eth + eth(ipv4(udp(IB_PAYLOAD)), 0x0800), 197, "rocev2", 18 + 42,
           len(IB_PAYLOAD), b"\x0a\x00\x00\x01", b"\x0a\x00\x00\x02")


@pytest.mark.parametrize("frame,lt", [
    (eth(b"\x00\x01\x08\x00\x06\x04\x00\x01" + b"\0" * 20, 0x0806), 1),         # ARP
    (eth(ipv4(udp(IB_PAYLOAD, dport=53)), 0x0800), 1),                        # other UDP port
    (eth(ipv4(b"\0" * 40, proto=6), 0x0800), 1),                              # TCP
    (eth(ipv4(udp(IB_PAYLOAD), frag=0x2000), 0x0800), 1),                     # MF fragment
    (eth(ipv4(udp(IB_PAYLOAD), frag=0x0010), 0x0800), 1),                     # later fragment
    (eth(ipv6(b"\0" * 8 + udp(IB_PAYLOAD), nh=0), 0x86DD), 1),                # ext header
    (eth(ipv4(udp(b"short")), 0x0800), 1),                                    # no room for BTH
    (eth(grh(IB_PAYLOAD, nh=0x11), 0x8915), 1),                               # GRH not BTH
    (lrh(IB_PAYLOAD, lnh=0), 247),                                            # raw IB packet
    (lrh(grh(IB_PAYLOAD, nh=0x11), lnh=3), 247),
    (ipv4(udp(IB_PAYLOAD)), 1),                                               # wrong link type
    (eth(ipv4(udp(IB_PAYLOAD)), 0x0800), 4242),
    (struct.pack("!QBBHHH", 0, 7, 0, 0, 0, 0) + lrh(IB_PAYLOAD), 197),
])
def test_not_roce(frame, lt):
    assert ib_offset(frame, 0, len(frame), lt) is None


@pytest.mark.parametrize("frame,lt", [
    (eth(ipv4(udp(IB_PAYLOAD), options=b"\0" * 4), 0x0800, tags=(0x8100,)), 1),
    (eth(ipv6(udp(IB_PAYLOAD)), 0x86DD), 1),
    (eth(grh(IB_PAYLOAD), 0x8915), 1),
    (lrh(grh(IB_PAYLOAD), lnh=3), 247),
    (struct.pack("!HHIHBB8s", 0x86DD, 0, 2, 1, 0, 6, b"\x02" * 8) + ipv6(udp(IB_PAYLOAD)), 276),
])
def test_every_cut_is_none(frame, lt):
    full = ib_offset(frame, 0, len(frame), lt)
    assert full is not None and full[2] == len(frame)
    buf = frame + b"\0" * 64      # bytes beyond `end` must not be used
    for cut in range(len(frame)):
        assert ib_offset(buf, 0, cut, lt) is None


@settings(max_examples=500, deadline=None)
@given(data=st.binary(max_size=120), lt=st.sampled_from([1, 12, 101, 113, 197, 228, 229, 247, 276, 9]),
       start=st.integers(0, 10))
def test_ib_offset_fuzz(data, lt, start):
    end = len(data)
    start = min(start, end)
    r = ib_offset(data, start, end, lt)
    if r is not None:
        kind, off, ib_end, src, dst = r
        assert kind in ("rocev2", "rocev1", "ib")
        assert start <= off < ib_end <= end


# ---------------------------------------------------------------------------
# the real capture

def test_real_capture_frames_and_roce():
    shapes = {}
    with open_capture(BASIC_INVAL) as cap:
        assert cap.fmt == "pcap" and cap.link_type == 1 and cap.link_name == "ethernet"
        n = 0
        for n, ts, buf, s, e, lt in cap:
            r = ib_offset(buf, s, e, lt)
            if r is None:
                et = struct.unpack_from("!H", buf, s + 12)[0]
                key = ("none", et)
            else:
                kind, off, ib_end, src, dst = r
                assert off == s + 14 + 20 + 8          # plain Ethernet + IPv4 w/o options
                assert ib_end <= e and ib_end - off >= 16
                key = (kind, ".".join(map(str, src)), ".".join(map(str, dst)))
            shapes[key] = shapes.get(key, 0) + 1
        assert n == 1558
        assert not cap.truncated and cap.problems == []
        assert cap.position() == cap.bytes_total
    # the capture is RoCEv2 only (see truth.json pcap_stats.rocev2_by_direction)
    assert shapes == {("rocev2", "10.77.0.2", "10.77.0.1"): 785,
                      ("rocev2", "10.77.0.1", "10.77.0.2"): 773}


def test_real_capture_matches_scapy(tmp_path):
    from scapy.utils import RawPcapReader
    ours = []
    with open_capture(BASIC_INVAL) as cap:
        for n, ts, buf, s, e, lt in cap:
            ours.append((ts, bytes(buf[s:e])))
    theirs = []
    with RawPcapReader(str(BASIC_INVAL)) as rd:
        for pkt, meta in rd:
            theirs.append((meta.sec + meta.usec * 1e-6, pkt))
    assert len(ours) == len(theirs) == 1558
    for (t1, b1), (t2, b2) in zip(ours, theirs):
        assert abs(t1 - t2) < 1e-6
        assert b1 == b2
    # the same capture gzip-compressed gives the same frames
    gz = tmp_path / "b.pcap.gz"
    gz.write_bytes(gzip.compress(BASIC_INVAL.read_bytes(), 6))
    with open_capture(gz) as cap:
        assert cap.fmt == "pcap+gzip"
        assert [(ts, bytes(buf[s:e])) for n, ts, buf, s, e, lt in cap] == ours
