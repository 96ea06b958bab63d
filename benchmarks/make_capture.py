"""Build a large capture by repeating a real one (benchmarks only, not a test).

Copy k of the input gets its timestamps shifted past the previous copy and its
IPv4 addresses moved to 10.<k/256>.<k%256>.x, so every copy is a distinct RTRS
path with its own handshake (repeating the same QPs and PSNs would only make
duplicates).  ICRCs are not recomputed; the analyzer does not check them.

    python benchmarks/make_capture.py IN.pcap OUT.pcap --packets 1000000
"""

import argparse
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rtrs_scapy.capture import open_capture  # noqa: E402

ETH_IPV4 = 14  # Ethernet header before IPv4 in the real captures (no VLAN)


def build(src, dst, packets):
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
