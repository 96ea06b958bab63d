"""Compile the engine now: what ``rtrs-dissect compile``, the package build
(setup.py) and ``scripts/dissect.sh`` run, so that the user's first capture is read
at once (capture/jit.py says how the code is kept, capture/native.py how it is built).

The analysis is run under numba over the first 40 frames of the real capture
basic_inval (pcaps/real, cut with ``editcap -r … 1-40``; a CM handshake, RNBD's
open and three reads), as pcap and as pcapng together (two hosts' copies of one
capture): that calls every compiled entry point with the argument types every
capture gives them, the types the native module is then built for.
"""

import sys
import time
from pathlib import Path

import numpy as np

from ..capture import ib, open_capture
from ..capture import native
from ..capture.jit import ENTRY_POINTS, engine_sources_hash, missing, use_numba
from ..engine import record_columns, text, transport  # (their entry points register on import)
from . import analyze, records

SAMPLES = Path(__file__).resolve().parent / "warmup-captures"
#: what the compile takes on the 2-core machine of the README (seconds), for the notice:
#: 28 s of CPU with the native module's build (docs/install.md)
COMPILE_SECONDS = 30


def compile_engine():
    """Compile every entry point under numba, then build the native module; returns
    the seconds it took."""
    started = time.monotonic()
    use_numba()
    captures = [str(SAMPLES / "basic_inval_40.pcap"), str(SAMPLES / "basic_inval_40.pcapng")]
    result = analyze(captures, keep_messages=True)     # the records' recent reads too
    result.messages.records.partners()          # what the lines and tables pair by frame
    with open_capture(captures[0]) as capture:
        _, _, buf, start, end, link_type = next(iter(capture))
        ib.ib_offset(buf, start, end, link_type)
    streams = transport.TransportState(4)      # what an orphan DREQ asks (analyzer.py)
    transport.find(streams.table, streams.state, 0, 0, 0)
    text.warm_up()                             # what messages writes its lines with
    _number_an_address()
    try:
        native.build(ENTRY_POINTS, engine_sources_hash())
    except Exception as error:    # the toolchain's own (distutils, OSError): numba's code stays
        native.without(engine_sources_hash(), error)
        print("rtrs-dissect: the native engine was not built (%s): the engine runs under "
              "numba, 0.3 s more at each start and 65 MB more memory (docs/compile.md)"
              % (str(error).splitlines() or ["?"])[0], file=sys.stderr)
    left = missing()
    if left:
        raise RuntimeError("not compiled: %s" % ", ".join(left))
    return time.monotonic() - started


def _number_an_address():
    """What a batch of records whose addresses no CM record numbered first asks (a
    capture cut after the handshake, analysis/records.py)."""
    rows = np.zeros((1, transport.R_COLUMNS), dtype=np.int64)
    found = np.full(1, -1, dtype=records.SPEC["src"][0])
    record_columns.AddressIds().number(rows, np.zeros(1, dtype=np.int64), transport.R_SRC_HI,
                                       transport.R_SRC_LO, found, 0, 0)


def main():
    seconds = compile_engine()
    print("compiled %d entry points of the engine in %.1f s" % (len(ENTRY_POINTS), seconds))


if __name__ == "__main__":
    main()
