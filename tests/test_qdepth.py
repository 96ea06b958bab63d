"""The queue depth rule (rtrs_scapy/analysis/qdepth.py) against simulated RTRS
clients whose queue depth is known (tests/vectors/qdepth.json, written by
scripts/make_vectors.py from the simulation's truth)."""

import json
import subprocess
import sys

import pytest

from conftest import REPO
from rtrs_scapy.analysis.qdepth import (
    DEFAULT_MEM_BITS, PRUNE_MARGIN, MemBitsInference, infer, pair_events, queue_depth_of,
)
from rtrs_scapy.spec.imm import mem_bits

VECTORS = json.loads((REPO / "tests" / "vectors" / "qdepth.json").read_text())


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_vector(vector):
    rule = infer(vector["events"])
    want = vector["expect"]
    assert (rule.mem_bits, rule.source, rule.queue_depth) == (
        want["mem_bits"], want["source"], want["queue_depth"])
    pairs = pair_events([tuple(e) for e in vector["events"]], rule.mem_bits)
    assert [list(p) for p in pairs] == want["pairs"]


def test_vectors_are_fresh():
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "make_vectors.py"),
                             "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_vectors_cover_every_queue_depth_class_and_both_sources():
    sources = {v["expect"]["source"] for v in VECTORS}
    depths = {v["expect"]["queue_depth"] for v in VECTORS if v["expect"]["source"] == "inferred"}
    assert sources == {"inferred", "assumed"}
    assert {16, 64, 128, 512, 1024, 4096, 65535} <= depths


def test_only_buf_id_zero_assumes_the_kernel_default():
    events = []
    for _ in range(10):
        events += [("req", 4128, 4128), ("rsp", 0)]
    rule = infer(events)
    assert (rule.mem_bits, rule.source, rule.queue_depth) == (DEFAULT_MEM_BITS, "assumed", 512)


def test_offsets_alone_decide_when_one_candidate_is_left():
    bits = mem_bits(512)
    # buf_id 1 (odd) excludes every larger mem_bits, an offset of 2**18 every smaller one
    rule = infer([("req", (1 << bits) | (1 << 18), 1 << 18)])
    assert (rule.mem_bits, rule.source) == (bits, "inferred")


def test_a_wrong_guess_falls_behind_and_is_dropped():
    """qd 1024 (mem_bits 18) traffic with even buf_ids only: offsets leave 18..28 open,
    responses then separate the truth from the larger candidates."""
    bits = mem_bits(1024)
    events = []
    for round_ in range(PRUNE_MARGIN + 2):
        ids = [2, 4, 6, 8]
        events += [("req", (i << bits) | 4128, 4128) for i in ids]
        events += [("rsp", i) for i in reversed(ids)]
    rule = infer(events)
    assert (rule.mem_bits, rule.source, rule.queue_depth) == (bits, "inferred", 1024)


def test_a_contradicting_offset_narrows_nothing():
    rule = MemBitsInference()
    assert rule.request((3 << 19) | 4128, 4128)
    assert not rule.request(5, 4128)       # no candidate gives offset 4128 from payload 5
    assert len(rule.alive) > 1


def test_queue_depth_reported_for_each_mem_bits():
    assert [queue_depth_of(b) for b in (12, 13, 19, 27, 28)] == [65535, 32768, 512, 2, 1]


def analyzer_pairs(events, bits, batches):
    """The analyzer's own pairing (analysis/pairing.py: one sort per batch, the
    unanswered requests carried to the next) on a vector's events cut into ``batches``."""
    import numpy as np
    from rtrs_scapy.analysis import pairing
    found, carried = [], pairing.empty()
    bounds = np.linspace(0, len(events), batches + 1).astype(int)
    for start, stop in zip(bounds[:-1], bounds[1:]):
        batch = list(enumerate(events))[start:stop]
        reqs = [(i, e[1] >> bits) for i, e in batch if e[0] == "req"]
        rsps = [(i, e[1]) for i, e in batch if e[0] == "rsp"]
        fresh = {k: np.zeros(len(reqs), dtype=np.int64) for k in pairing.REQUEST_COLUMNS}
        fresh["frame"] = np.array([i for i, _ in reqs], dtype=np.int64)
        fresh["key"] = np.array([k for _, k in reqs], dtype=np.int64)
        table = pairing.concat(carried, fresh)
        result = pairing.pair(table, np.zeros(len(rsps), dtype=np.int64),
                              np.array([k for _, k in rsps], dtype=np.int64),
                              np.array([i for i, _ in rsps], dtype=np.int64))
        found += [(int(table["frame"][r]), i) for (i, _), r
                  in zip(rsps, result.response_request.tolist()) if r >= 0]
        carried = pairing.take(table, np.flatnonzero(result.pending))
    return [list(p) for p in sorted(found, key=lambda p: p[1])]


@pytest.mark.parametrize("batches", [1, 3])
def test_the_analyzers_pairing_gives_the_vectors_pairs(batches):
    """The vectors' pairs are the simulation's truth wherever the traffic tells the queue
    depth (the rule's own pair_events where it assumes one); the analyzer pairs with
    analysis/pairing.py, not pair_events: run it on every vector under the expected
    mem_bits, whole and in three batches."""
    wrong = [v["name"] for v in VECTORS
             if analyzer_pairs(v["events"], v["expect"]["mem_bits"], batches)
             != v["expect"]["pairs"]]
    assert wrong == []
