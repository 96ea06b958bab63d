#!/usr/bin/env python3
"""Regenerate rtrs_scapy/layout/wire.py from the Scapy layers (``--check``: fail if stale).

    .venv/bin/python scripts/make_wire.py [--check]
"""

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from generated import write_or_check  # noqa: E402
from rtrs_scapy.layout.wiregen import render  # noqa: E402

OUT = REPO / "rtrs_scapy" / "layout" / "wire.py"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = render()
    return write_or_check(OUT, text, args.check)


if __name__ == "__main__":
    sys.exit(main())
