#!/usr/bin/env python3
"""Write a hostile capture (rtrs_scapy/craft/hostile.py) or its benign reference.

    .venv/bin/python scripts/hostile.py KIND -n PACKETS -o FILE

KIND: qps (a new QP per packet, each opening a WRITE that never ends), cm_reqs (a
CM REQ per packet, each with its own comm id and session), io_rsps (IO responses
whose requests never appear), benign (the real load capture repeated).
"""

import argparse
import sys
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rtrs_scapy.analysis import analyze  # noqa: E402
from rtrs_scapy.craft.hostile import KINDS, write_hostile  # noqa: E402
from rtrs_scapy.craft.repeat import repeat_capture  # noqa: E402

BENIGN = REPO / "pcaps" / "real" / "load.pcap.gz"


def uuids_of(capture):
    """The session and path UUIDs of a capture's handshakes, as bytes."""
    summary = analyze(capture, keep_messages=False).summary
    found = {s["paths_uuid"] for s in summary["sessions"]}
    found.update(p["sess_uuid"] for s in summary["sessions"] for p in s["paths"])
    return [uuid.UUID(u).bytes for u in found if u]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=sorted(KINDS) + ["benign"])
    parser.add_argument("-n", "--packets", type=int, default=1_000_000)
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    if args.kind == "benign":
        repeat_capture(BENIGN, args.output, args.packets, uuids_of(BENIGN))
    else:
        write_hostile(args.kind, args.packets, args.output)
    print("wrote %d %s packets to %s" % (args.packets, args.kind, args.output))


if __name__ == "__main__":
    main()
