"""A large capture made of copies of a real one, for benchmarks and as the benign
reference of the hostile captures (craft/hostile.py).

Copy k gets its timestamps shifted past copy k-1, its IPv4 addresses moved to
10.<m/256>.<m%256>.x and the last two bytes of the given UUIDs (the session's and
paths' in the CM REQs) set to k, so each copy is a session of its own with its
handshake, and the QPs and PSNs of the original (repeating them unchanged would
only make duplicates, the same UUIDs one path's reconnects).  m is k × n + s for
the original's n subnets (the addresses' middle two bytes), s an address's own: a
capture of one subnet moves to 10.<k/256>.<k%256>.x, and the paths of a multipath
capture on several subnets stay apart in every copy.  ICRCs are
not recomputed: the analyzer does not check them.  A copy is patched as whole
columns, so a 10 M-packet file is written at disk speed.
"""

import uuid

import numpy as np

from ..capture import open_capture
from .capture_files import pcap_header, pcap_record
from .encap import DLT_EN10MB

IPV4_ADDRESSES = (14 + 12, 14 + 16)   # source and destination after an untagged Ethernet header
RECORD_HEADER = 16


def _frames(src):
    with open_capture(src) as cap:
        frames = [(ts, bytes(buf[s:e])) for _no, ts, buf, s, e, _lt in cap]
        return frames, cap.link_type


def session_uuids(src):
    """The session and path UUIDs of a capture's handshakes, as the CM private data
    holds them (what repeat_capture makes distinct per copy)."""
    from ..analysis import analyze
    summary = analyze(src, keep_messages=False).summary
    found = {session["paths_uuid"] for session in summary["sessions"]}
    found.update(p["sess_uuid"] for session in summary["sessions"] for p in session["paths"])
    return [uuid.UUID(u).bytes for u in found if u]


def repeat_capture(src, dst, packets, uuids=()):
    """Write ``packets`` records to the pcap ``dst`` from copies of ``src``;
    ``uuids``: the 16-byte UUIDs to make distinct per copy."""
    frames, link_type = _frames(src)
    if not frames:
        raise ValueError("%s holds no frames" % src)
    sizes = np.array([len(data) for _ts, data in frames], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(sizes + RECORD_HEADER)[:-1]))
    base = np.frombuffer(b"".join(pcap_record(0, 0, data) for _ts, data in frames),
                         dtype=np.uint8)
    stamps = np.array([ts for ts, _data in frames]) - frames[0][0]
    span = stamps[-1] + 1.0
    ipv4 = starts[[link_type == DLT_EN10MB and data[12:14] == b"\x08\x00"
                   for _ts, data in frames]] + RECORD_HEADER
    subnet, subnets = _subnets(base, ipv4)
    tagged = np.array([at + 14 for raw in uuids for at in _find_all(base.tobytes(), raw)],
                      dtype=np.int64)
    written = 0
    with open(dst, "wb") as out:
        out.write(pcap_header(link_type))
        copy = 0
        while written < packets:
            take = min(len(frames), packets - written)
            chunk = base.copy()
            when = frames[0][0] + stamps + copy * span
            seconds = np.floor(when)
            _put32(chunk, starts, seconds)
            _put32(chunk, starts + 4, np.minimum((when - seconds) * 1e6, 999999))
            for offset in IPV4_ADDRESSES:
                moved = copy * subnets + subnet[offset]
                chunk[ipv4 + offset + 1] = moved >> 8 & 0xFF
                chunk[ipv4 + offset + 2] = moved & 0xFF
            chunk[tagged] = copy >> 8 & 0xFF
            chunk[tagged + 1] = copy & 0xFF
            end = starts[take - 1] + RECORD_HEADER + sizes[take - 1]
            out.write(chunk[:end].tobytes())
            written += take
            copy += 1
    return written


def _subnets(base, ipv4):
    """The number of each IPv4 address's subnet (its middle two bytes, numbered in
    order) by address offset, and how many subnets there are."""
    middle = [base[ipv4 + offset + 1].astype(np.int64) << 8 | base[ipv4 + offset + 2]
              for offset in IPV4_ADDRESSES]
    found, number = np.unique(np.concatenate(middle), return_inverse=True)
    numbers = np.split(number.reshape(-1), len(IPV4_ADDRESSES))
    return dict(zip(IPV4_ADDRESSES, numbers)), max(len(found), 1)


def _find_all(data, raw):
    at = data.find(raw)
    while at >= 0:
        yield at
        at = data.find(raw, at + 1)


def _put32(buf, offsets, values):
    """Little-endian 32-bit ``values`` at byte ``offsets`` of ``buf``."""
    raw = values.astype("<u4").view(np.uint8).reshape(-1, 4)
    buf[offsets[:, None] + np.arange(4)] = raw
