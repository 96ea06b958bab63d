#!/usr/bin/env python3
"""Regenerate rtrs_scapy/wire.py from the Scapy layers (``--check``: fail if stale).

    .venv/bin/python scripts/make_wire.py [--check]
"""

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rtrs_scapy.wiregen import render  # noqa: E402

OUT = REPO / "rtrs_scapy" / "wire.py"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = render()
    if args.check:
        if OUT.read_text() != text:
            print("%s is stale: run scripts/make_wire.py" % OUT, file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print("wrote %s" % OUT, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
