#!/usr/bin/env python3
"""Write tests/vectors/qdepth.json: request/response sequences of simulated RTRS
clients, with the truth they were made from.

    .venv/bin/python scripts/make_vectors.py [--check]

A client of queue depth QD takes the lowest free permit (buf_id) for each IO,
like the kernel's __rtrs_get_permit(), keeps up to CONCURRENCY IOs in flight and
completes them in random order.  The capture starts at a cut: responses of
earlier requests appear without theirs, and a request cut inside its message has
no offset.  The expected answer is the truth where the visible traffic can tell
(a nonzero buf_id answered, or offsets that leave one candidate); otherwise the
rule's documented fallback.  tests/test_qdepth.py holds the Python rule and the
analyzer's pairing to it, tests/test_lua_qdepth.py the plugin's lua/qdepth.lua.

Nothing here comes from the code under test: mem_bits, the candidates, the
default and the queue depth of a mem_bits are the kernel's own formulas and
constants (written out below), and the fallback's pairs come from the simple
reference pairing of the tests (tests/reference_pairing.py).
"""

import argparse
import json
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from generated import write_or_check  # noqa: E402
from reference_pairing import reference_pairs  # noqa: E402

OUT = REPO / "tests" / "vectors" / "qdepth.json"
SIZES = (512, 4096, 8192, 16384, 65536, 126976)
USR_LEN = 32
# the kernel's rtrs-pri.h: MAX_IMM_PAYL_BITS 28, MAX_SESS_QUEUE_DEPTH 65535;
# rtrs-srv.c: DEFAULT_SESS_QUEUE_DEPTH 512
MAX_IMM_PAYL_BITS = 28
MAX_SESS_QUEUE_DEPTH = 65535
DEFAULT_SESS_QUEUE_DEPTH = 512


def mem_bits(queue_depth):
    """rtrs-srv.c map_cont_bufs(): chunk_bits = ilog2(queue_depth - 1) + 1 (ilog2(0)
    is -1: fls(n) - 1), mem_bits = MAX_IMM_PAYL_BITS - chunk_bits."""
    return MAX_IMM_PAYL_BITS - (queue_depth - 1).bit_length()


def queue_depth_of(bits):
    """The largest queue depth the kernel allows whose mem_bits are ``bits``."""
    return min(1 << (MAX_IMM_PAYL_BITS - bits), MAX_SESS_QUEUE_DEPTH)


CANDIDATES = tuple(range(mem_bits(MAX_SESS_QUEUE_DEPTH), mem_bits(1) + 1))
DEFAULT_MEM_BITS = mem_bits(DEFAULT_SESS_QUEUE_DEPTH)


def simulate(rng, queue_depth, concurrency, ios, cut, partial_share):
    bits = mem_bits(queue_depth)
    free = list(range(queue_depth))
    inflight, events, truth_pairs = [], [], []
    req_index = {}
    issued = 0
    while issued < ios or inflight:
        if issued < ios and len(inflight) < min(concurrency, queue_depth) and (
                not inflight or rng.random() < 0.6):
            buf_id = min(free)
            free.remove(buf_id)
            size = rng.choice(SIZES)
            offset = size + USR_LEN if size + USR_LEN < (1 << bits) else USR_LEN
            events.append(["req", (buf_id << bits) | offset, offset])
            req_index[buf_id] = len(events) - 1
            inflight.append(buf_id)
            issued += 1
        else:
            buf_id = inflight.pop(rng.randrange(len(inflight)))
            free.append(buf_id)
            events.append(["rsp", buf_id])
            truth_pairs.append((req_index.pop(buf_id), len(events) - 1))
    visible = events[cut:]
    pairs = [(a - cut, b - cut) for a, b in truth_pairs if a >= cut]
    for event in visible:
        if event[0] == "req" and rng.random() < partial_share:
            event[2] = None
    return bits, visible, pairs


def expected(bits, events, pairs):
    """The truth when the traffic tells it, else the documented fallback."""
    answered_ids = {events[b][1] for _, b in pairs}
    consistent = [b for b in CANDIDATES
                  if all(e[2] is None or e[1] & ((1 << b) - 1) == e[2]
                         for e in events if e[0] == "req")]
    if answered_ids - {0} or len(consistent) == 1:
        return {"mem_bits": bits, "source": "inferred", "pairs": pairs}
    chosen = min(consistent, key=lambda b: (abs(b - DEFAULT_MEM_BITS), -b))
    return {"mem_bits": chosen, "source": "assumed",
            "pairs": [list(p) for p in reference_pairs(events, chosen)]}


def vectors():
    rng = random.Random(20261201)
    out = []
    for queue_depth in (1, 2, 16, 64, 128, 256, 512, 1024, 4096, 65535):
        for concurrency in (1, 4, 16, 64, 128):
            for cut in (0, 7):
                bits, events, pairs = simulate(rng, queue_depth, concurrency,
                                               ios=150, cut=cut, partial_share=0.02)
                want = expected(bits, events, pairs)
                want["pairs"] = [list(p) for p in want["pairs"]]
                want["queue_depth"] = queue_depth_of(want["mem_bits"])
                out.append({"name": "qd%d-c%d-cut%d" % (queue_depth, concurrency, cut),
                            "events": events, "expect": want})
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the file is stale")
    args = parser.parse_args()
    text = json.dumps(vectors(), separators=(",", ":")) + "\n"
    return write_or_check(OUT, text, args.check)


if __name__ == "__main__":
    sys.exit(main())
