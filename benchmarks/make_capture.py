"""Build a large capture by repeating a real one (benchmarks only, not a test).

Copy k of the input gets its timestamps shifted past the previous copy, its
IPv4 addresses moved to 10.<k/256>.<k%256>.x and the last two bytes of its
session and path UUIDs (in the CM REQ private data) set to k, so every copy is
a distinct RTRS path with its own handshake (repeating the same QPs and PSNs
would only make duplicates; the same UUIDs would make every copy's handshake
one path's).  ICRCs are not recomputed; the analyzer does not check them.

    python benchmarks/make_capture.py IN.pcap OUT.pcap --packets 1000000
"""

import argparse
import struct
import uuid
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rtrs_scapy.analysis import analyze  # noqa: E402
from rtrs_scapy.capture import open_capture  # noqa: E402

ETH_IPV4 = 14  # Ethernet header before IPv4 in the real captures (no VLAN)


def uuids(src):
    """The session and path UUIDs of a capture, as the CM private data holds them."""
    summary = analyze(src, keep_messages=False).summary
    found = set()
    for session in summary["sessions"]:
        found.update(p["sess_uuid"] for p in session["paths"])
        found.add(session["paths_uuid"])
    return [uuid.UUID(u).bytes for u in found if u]


def build(src, dst, packets):
    ids = uuids(src)
    with open_capture(src) as cap:
        frames = [(ts, bytes(buf[s:e])) for _no, ts, buf, s, e, _lt in cap]
        link_type = cap.link_type
    span = frames[-1][0] - frames[0][0] + 1.0
    written = 0
    with open(dst, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, link_type))
        copy = 0
        while written < packets:
            hi, lo = divmod(copy, 256)
            for ts, data in frames:
                if written == packets:
                    break
                frame = bytearray(data)
                if frame[12:14] == b"\x08\x00":
                    for addr in (ETH_IPV4 + 12, ETH_IPV4 + 16):
                        frame[addr + 1], frame[addr + 2] = hi, lo
                for old in ids:
                    at = frame.find(old)
                    if at >= 0:
                        frame[at + 14], frame[at + 15] = hi, lo
                t = ts + copy * span
                sec = int(t)
                out.write(struct.pack("<IIII", sec, int((t - sec) * 1e6), len(frame),
                                      len(frame)))
                out.write(frame)
                written += 1
            copy += 1
    return written


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--packets", type=int, default=1_000_000)
    args = parser.parse_args()
    print("wrote %d packets to %s" % (build(args.input, args.output, args.packets), args.output))


if __name__ == "__main__":
    main()
