"""Mutated real captures through the analyzer (both paths): no exception, ever.
A short budget here; scripts/fuzz.py runs the long campaign."""

import random

import pytest

from rtrs_scapy.analysis import Analyzer
from rtrs_scapy.analysis import batch as batch_module
from rtrs_scapy.analysis.batch import feed_batch
from rtrs_scapy.fastpath.reader import open_capture

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
def test_mutated_capture_never_raises(real_capture, seed, monkeypatch):
    monkeypatch.setattr(batch_module, "MIN_BATCH", 1)
    pcap, _ = real_capture
    with open_capture(pcap) as cap:
        frames = [(ts, bytes(buf[s:e])) for _, ts, buf, s, e, _ in cap]
    mutated = mutate(frames, random.Random(seed))
    serial = Analyzer(keep_messages=True)
    for number, (ts, data) in enumerate(mutated, 1):
        serial.feed(number, ts, data, 0, len(data), 1)
    serial.close()
    batched = Analyzer(keep_messages=True)
    buf = b"".join(data for _, data in mutated)
    starts, ends, pos = [], [], 0
    for _, data in mutated:
        starts.append(pos)
        pos += len(data)
        ends.append(pos)
    feed_batch(batched, 1, [ts for ts, _ in mutated], buf, starts, ends, 1)
    batched.close()
    assert batched.frames == serial.frames == len(mutated)
    assert batched.anomalies == serial.anomalies
