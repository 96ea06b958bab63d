"""Mutated real captures through the engine: no exception, ever, and the same
result whatever the chunking (one record at a time, or all at once).
A short budget here; scripts/fuzz.py runs the long campaign."""

import random

import pytest

from rtrs_scapy.analysis import analyze
from rtrs_scapy.capture import open_capture
from rtrs_scapy.craft import write_capture
from rtrs_scapy.craft.encap import DLT_EN10MB

PATTERNS = (b"\xff\xff", b"\x00\x00", b"\x02\x00", b"\x03\x00")


def mutate(frames, rng):
    out = []
    for ts, data in frames:
        data = bytearray(data)
        roll = rng.random()
        if roll < 0.05 and data:
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif roll < 0.07:
            data = data[:rng.randrange(len(data) + 1)]
        elif roll < 0.09 and len(data) > 60:
            at = rng.randrange(14, len(data) - 2)
            data[at:at + 2] = rng.choice(PATTERNS)  # length/count/type blow-ups
        out.append((ts, bytes(data)))
    if rng.random() < 0.1:
        rng.shuffle(out)
    return out


@pytest.mark.parametrize("seed", range(20))
def test_mutated_capture_never_raises_and_chunking_changes_nothing(real_capture, seed,
                                                                    tmp_path):
    pcap, _ = real_capture
    with open_capture(pcap) as cap:
        frames = [(ts, bytes(buf[s:e])) for _, ts, buf, s, e, _ in cap]
    mutated = tmp_path / "m.pcap"
    write_capture(mutated, mutate(frames, random.Random(seed)), DLT_EN10MB)
    whole = analyze(mutated, keep_messages=True)
    one_by_one = analyze(mutated, keep_messages=True, chunk_records=1)
    assert whole.summary == {**one_by_one.summary}
    assert whole.messages == one_by_one.messages
    assert whole.summary["capture"]["packets"] == len(frames)
