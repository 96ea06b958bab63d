#!/usr/bin/env python3
"""Write a hostile capture (rtrs_scapy/craft/hostile.py).

    .venv/bin/python scripts/hostile.py KIND -n PACKETS -o FILE

KIND: qps (a new QP per packet, each opening a WRITE that never ends), cm_reqs (a
CM REQ per packet, each with its own comm id and session), io_rsps (IO responses
whose requests never appear).  The benign reference of as many packets:
``benchmarks/make_capture.py pcaps/real/load.pcap.gz FILE --packets N``.
"""

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rtrs_scapy.craft.hostile import KINDS, write_hostile  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=sorted(KINDS))
    parser.add_argument("-n", "--packets", type=int, default=1_000_000)
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    write_hostile(args.kind, args.packets, args.output)
    print("wrote %d %s packets to %s" % (args.packets, args.kind, args.output))


if __name__ == "__main__":
    main()
