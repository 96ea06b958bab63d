"""tshark + the generated plugin on real captures cut mid-session, against an
independent decode of the same frames that does not use the plugin (tests/ib_decode.py:
tshark's own InfiniBand fields and the Scapy request layers).  Its request count on
each whole capture is held to the capture's truth (the kernel's requests on the wire),
so on a cut it is the kernel's count of the requests whose last packet remains.

Where the captures are cut (tests/cut_points.py): each frame of a capture starts a cut
in one situation (the messages it tears and what of them is left, the requests it
leaves waiting for their responses, the CM exchanges it cuts through, what follows,
the queue depths the rest can tell).  The plugin's partial messages and pairs turn on
the first, its pairing domains and queue depth rule on the others; each tshark run is
one cut, so the small captures are cut where, together, the cuts have every torn
message kind and part, every waiting op and outcome, every handshake state, every
"left" and every queue depth source that any cut of the capture has, each cut with
one of them that no other has, and the uncut capture (``covering``: 60 cuts where every
50th frame made 118).
load.pcap.gz (135k frames, up to 4 requests in flight on two connections) is cut where
only it goes: its cuts have the kinds of messages torn together (a write request with
READ data, two write requests, both with READ data) and the requests waiting together
(a read and a write) that no cut of a small capture has; every kind and part on its own
is the small captures' (``covering(..., together, others=...)``: 3 cuts in its last
4,300 frames, where a third in, past the half and three quarters in ran 191k frames).
"""

import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest

from conftest import REPO, real_pcap, real_truth
from cut_points import covering, together
from ib_decode import ib_frames, write_cut
from ib_decode import decode as decode_pcap
from tshark_util import TSHARK, tshark_env

LUA = REPO / "wireshark" / "rtrs.lua"
SMALL = ("basic_inval", "basic_noinval", "jumbo", "multipath", "errors", "discard")
PLUGIN_FIELDS = ("frame.number", "rtrs.queue_depth", "rtrs.queue_depth_source",
                 "rtrs.response_time", "rtrs.request_in", "rtrs.response_in", "rtrs.rdma_read.type",
                 "rtrs.rdma_write.type", "rtrs.partial", "_ws.expert.message")


def decode(name, first):
    """The independent decode of real capture ``name`` from frame ``first`` on."""
    return decode_pcap(real_pcap(name), first)


# -- the plugin ---------------------------------------------------------------------

@dataclass
class Shown:
    reads: set = field(default_factory=set)
    writes: set = field(default_factory=set)
    partial: set = field(default_factory=set)
    depth: dict = field(default_factory=dict)
    pairs: dict = field(default_factory=dict)
    response_in: dict = field(default_factory=dict)   # request frame -> response frame
    lua_errors: list = field(default_factory=list)


def plugin_view(path, shift):
    """The plugin's fields on a cut capture, frame numbers of the whole capture."""
    cmd = [TSHARK, "-n", "-2", "-Y", "frame", "-X", "lua_script:%s" % LUA, "-r", str(path),
           "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|"]
    for f in PLUGIN_FIELDS:
        cmd += ["-e", f]
    run = subprocess.run(cmd, capture_output=True, text=True, env=tshark_env(), timeout=900)
    assert run.returncode == 0, run.stderr
    shown = Shown()
    if "Lua Error" in run.stderr:
        shown.lua_errors.append(run.stderr)
    for line in run.stdout.splitlines():
        (number, depth, source, rtime, request_in, response_in, read, write, partial,
         expert) = line.split("\t")
        number = int(number) + shift
        if "Lua Error" in expert:
            shown.lua_errors.append((number, expert))
        if depth:
            shown.depth[number] = (int(depth.split("|")[0]), source.split("|")[0])
        if rtime:
            shown.pairs[number] = (int(request_in) + shift, float(rtime))
        if response_in:
            shown.response_in[number] = int(response_in) + shift
        if read:
            shown.reads.add(number)
        if write:
            shown.writes.add(number)
        if partial:
            shown.partial.add(number)
    return shown


def compare(name, first, path):
    """Differences between the plugin and the independent decode on one cut."""
    want, got = decode(name, first), plugin_view(path, first - 1)
    problems = []
    if got.lua_errors:
        problems.append(("lua errors", got.lua_errors[:2]))
    for what in ("reads", "writes", "partial"):
        if getattr(got, what) != getattr(want, what):
            problems.append((what, sorted(getattr(want, what) ^ getattr(got, what))[:5]))
    wrong_depth = [(n, want.depth[n], got.depth.get(n)) for n in sorted(want.depth)
                   if got.depth.get(n) != want.depth[n]]
    if wrong_depth:
        problems.append(("queue depth", wrong_depth[:3]))
    if set(got.pairs) != set(want.pairs):
        problems.append(("response_time frames", sorted(set(got.pairs) ^ set(want.pairs))[:5]))
    else:
        for rsp, (req, seconds) in want.pairs.items():
            if got.pairs[rsp][0] != req or abs(got.pairs[rsp][1] - seconds) > 1e-6:
                problems.append(("pair", rsp, (req, seconds), got.pairs[rsp]))
                break
    if got.response_in != {req: rsp for rsp, (req, _s) in want.pairs.items()}:
        problems.append(("response_in links",))
    if want.pairs and abs(min(s for _r, s in got.pairs.values())
                          - min(s for _r, s in want.pairs.values())) > 1e-6:
        problems.append(("minimum response time",))
    return [(first,) + p for p in problems]


def run_cuts(name, firsts, tmp_path):
    def one(first):
        path = write_cut(real_pcap(name), first, tmp_path / ("%s-%d.pcap" % (name, first)))
        return compare(name, first, path)
    with ThreadPoolExecutor(max_workers=2) as pool:
        return [p for problems in pool.map(one, firsts) for p in problems]


# -- tests -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", SMALL + ("load",))
def test_independent_decode_counts_the_kernels_requests(name):
    want = decode(name, 1)
    wire = real_truth(name)["checks"]["pcap_rtrs_counts"]["IO_REQ"]
    assert len(want.reads) + len(want.writes) == wire
    assert not want.partial and want.pairs


@pytest.mark.parametrize("name", SMALL)
def test_a_cut_in_each_situation_equals_the_independent_decode(name, tmp_path):
    cuts = covering(real_pcap(name), keep=(1,))
    assert len(cuts) >= 6
    problems = run_cuts(name, [first for first, _situation in cuts], tmp_path)
    situation = dict(cuts)
    assert not problems, [(p, str(situation[p[0]])) for p in problems[:5]]


def test_load_capture_cut_where_no_small_capture_is(tmp_path):
    cuts = covering(real_pcap("load"), together, with_depth=False,
                    others=tuple(real_pcap(name) for name in SMALL))
    assert len(cuts) >= 3
    problems = run_cuts("load", [first for first, _situation in cuts], tmp_path)
    situation = dict(cuts)
    assert not problems, [(p, str(situation[p[0]])) for p in problems[:5]]
    # the write requests in progress at a cut are counted, decoded and marked partial
    for first, cut in cuts:
        if any(kind == "write request" for kind, _part in cut.torn):
            assert decode("load", first).partial, first


def test_a_cut_shows_partial_requests_and_early_responses(tmp_path):
    """Inside the first multi-packet write of basic_inval: the write's tail is a
    partial request with its RNBD header, paired with its response."""
    frames = ib_frames(real_pcap("basic_inval"))
    last = next(f for f in frames if f.opcode == 0x09 and f.imm >> 28 == 0)
    middle = max(f.number for f in frames[:last.number] if f.opcode == 0x07 and f.dst == last.dst)
    path = write_cut(real_pcap("basic_inval"), middle, tmp_path / "cut.pcap")
    run = subprocess.run([TSHARK, "-n", "-2", "-Y", "rtrs.partial || rtrs.request_before_capture",
                          "-X", "lua_script:%s" % LUA, "-r", str(path), "-P", "-V"],
                         capture_output=True, text=True, env=tshark_env(), timeout=300)
    assert run.returncode == 0 and "Lua Error" not in run.stdout
    assert "Request started before the capture: last" in run.stdout
    assert "RNBD WRITE dev 0 sector" in run.stdout and "[started before the capture]" in run.stdout
    assert "Response in:" in run.stdout
