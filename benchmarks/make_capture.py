"""Build a large capture by repeating a real one (benchmarks and memory tests).

Each copy is a session of its own with its handshake (rtrs_scapy/craft/repeat.py):
shifted timestamps, its own IPv4 addresses and the last two bytes of the
capture's session and path UUIDs set to the copy number.

    python benchmarks/make_capture.py IN.pcap OUT.pcap --packets 1000000
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rtrs_scapy.craft.repeat import repeat_capture, session_uuids  # noqa: E402


def build(src, dst, packets):
    return repeat_capture(src, dst, packets, session_uuids(src))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--packets", type=int, default=1_000_000)
    args = parser.parse_args()
    print("wrote %d packets to %s" % (build(args.input, args.output, args.packets), args.output))


if __name__ == "__main__":
    main()
