"""The Wireshark plugin against the analyzer on every real capture, frame by frame: the
same requests (READ or WRITE, on the frame of their last packet), the same responses,
the same request ↔ response links, the same errnos and rkey responses, the same RNBD
message of each request (type; device, sector, size and operation of an IO); and no Lua
error or malformed frame anywhere.

One tshark run per capture (the plugin's fields as ``-T fields``: the summary of each
frame without printing its tree), shared by the tests of the capture
(conftest.SHARED_WORK ``param``).  Two passes (``-2``) show a request frame its
``rtrs.response_in``; the three large captures (LARGE) are read in one pass, a third
less work (failover.pcap.gz: 16 s instead of 25 s), their links read off the responses'
``rtrs.request_in`` (the plugin writes both ends of a pair at once; the two-pass view is
held here on the six others and on cuts of the large ones, tests/test_lua_midsession.py).
The Lua error check of tests/test_lua_generated.py reads the crafted corpus; the real
captures' is here, on this run.  tests/test_wireshark_diff.py holds the plugin's every
field to the Scapy layers on the two basic captures, tests/test_lua_midsession.py the
plugin on cuts to an independent decode.
"""

import subprocess

import pytest

from conftest import REAL_ALL, REPO
from tshark_util import TSHARK, tshark_env
from rtrs_scapy.analysis import analyze

LUA = REPO / "wireshark" / "rtrs.lua"
NAMES = [name for name, _, _ in REAL_ALL]
PCAPS = {name: pcap for name, pcap, _ in REAL_ALL}
REAL_TRUTH = {name: truth for name, _, truth in REAL_ALL}
#: the RNBD messages a request carries (the plugin's presence fields rnbd.<msg>)
RNBD_REQUESTS = ("sess_info", "open", "close", "io")
IO_FIELDS = ("device_id", "sector", "bi_size", "rw.op")
FIELDS = ("frame.number", "_ws.lua.error", "_ws.malformed", "rtrs.rdma_read",
          "rtrs.rdma_write", "rtrs.response_in", "rtrs.request_in", "rtrs.imm.type",
          "rtrs.imm.errno", "rtrs.rkey_rsp") + tuple("rnbd." + m for m in RNBD_REQUESTS) \
    + tuple("rnbd.io." + f for f in IO_FIELDS)
#: read in one pass (see above)
LARGE = {"failover", "load", "deep"}
#: IO_RSP and IO_RSP_W_INV immediates (docs/PROTOCOL.md#immediate-data)
RESPONSE_IMMS = {"1", "2"}


def plugin_view(pcap, passes=2):
    """{frame: {field: text}} of the fields the plugin shows (empty ones left out)."""
    assert TSHARK, "tshark is required (scripts/test.sh installs it)"
    # a display filter makes tshark -2 build the tree in its first pass: the request
    # frames see their response_in (wireshark/README.md)
    two = ["-2", "-Y", "frame"] if passes == 2 else []
    cmd = [TSHARK, "-n", *two, "-X", "lua_script:%s" % LUA, "-r", str(pcap), "-T", "fields",
           "-E", "separator=/t", "-E", "occurrence=f"]
    for name in FIELDS:
        cmd += ["-e", name]
    run = subprocess.run(cmd, capture_output=True, text=True, env=tshark_env(), timeout=900)
    assert run.returncode == 0, run.stderr
    assert "Lua Error" not in run.stderr, run.stderr
    frames = {}
    for line in run.stdout.splitlines():
        values = line.split("\t")
        frames[int(values[0])] = {k: v for k, v in zip(FIELDS[1:], values[1:]) if v}
    return frames


def plugin_messages(frames, passes=2):
    """The plugin's requests, responses and links in the analyzer's words (read off the
    requests' response_in after two passes, off the responses' request_in after one)."""
    out = {"requests": {}, "responses": {}, "links": {}, "errnos": {}, "rkeys": set(),
           "rnbd": {}}
    for number, shown in frames.items():
        for op in ("read", "write"):
            if "rtrs.rdma_" + op in shown:
                out["requests"][number] = op
        if shown.get("rtrs.imm.type") in RESPONSE_IMMS:
            out["responses"][number] = shown.get("rtrs.request_in")
            if passes == 1 and "rtrs.request_in" in shown:
                out["links"][int(shown["rtrs.request_in"])] = number
            out["errnos"][number] = int(shown["rtrs.imm.errno"])
            if "rtrs.rkey_rsp" in shown:
                out["rkeys"].add(number)
        if passes == 2 and "rtrs.response_in" in shown:
            out["links"][number] = int(shown["rtrs.response_in"])
        kinds = [m for m in RNBD_REQUESTS if "rnbd." + m in shown]
        if number in out["requests"]:
            out["rnbd"][number] = (kinds, tuple(int(shown["rnbd.io." + f], 0) for f in IO_FIELDS
                                                if "rnbd.io." + f in shown))
    out["responses"] = {n: None if r is None else int(r) for n, r in out["responses"].items()}
    return out


def analyzer_messages(pcap):
    """The same, from the analyzer's message records."""
    out = {"requests": {}, "responses": {}, "links": {}, "errnos": {}, "rkeys": set(),
           "rnbd": {}}
    for rec in analyze(pcap, keep_messages=("read", "write", "io_rsp")).messages:
        number = rec["frame"]
        if rec["msg"] in ("read", "write"):
            out["requests"][number] = rec["msg"]
            if rec["paired_frame"] is not None:
                out["links"][number] = rec["paired_frame"]
            rnbd = rec["rnbd"]
            kinds = [rnbd["msg"]] if rnbd and rnbd["msg"] in RNBD_REQUESTS else []
            io = tuple(rnbd[f] for f in ("device_id", "sector", "bi_size")) + (
                rnbd["rw"] & 0xFF,) if kinds == ["io"] else ()
            out["rnbd"][number] = (kinds, io)
        elif rec["msg"] == "io_rsp":
            out["responses"][number] = rec["paired_frame"]
            out["errnos"][number] = rec["fields"]["errno"]
            if "rkey_rsp" in rec["fields"]:
                out["rkeys"].add(number)
    return out


@pytest.fixture(scope="module", params=NAMES)
def capture(request):
    """(name, the plugin's frames, its messages, the analyzer's messages)."""
    pcap, passes = PCAPS[request.param], 1 if request.param in LARGE else 2
    frames = plugin_view(pcap, passes)
    return request.param, frames, plugin_messages(frames, passes), analyzer_messages(pcap)


def test_no_lua_error_and_no_malformed_frame(capture):
    _name, frames, shown, _want = capture
    assert [n for n, f in frames.items() if "_ws.lua.error" in f] == []
    assert [n for n, f in frames.items() if "_ws.malformed" in f] == []
    assert shown["requests"]


def _differences(got, want):
    frames = sorted(set(got) | set(want))
    return [(n, want.get(n), got.get(n)) for n in frames if got.get(n) != want.get(n)][:5]


def test_the_plugin_shows_what_the_analyzer_finds(capture):
    """Requests (frame: op), responses (frame: its request), links (request: its
    response), errnos (response: errno) and RNBD messages (request: kind, IO fields);
    the first differences of each, (frame, analyzer, plugin)."""
    _name, _frames, shown, want = capture
    kinds = ("requests", "responses", "links", "errnos", "rnbd")
    assert [what for what in kinds if not want[what]] == []
    differences = {what: _differences(shown[what], want[what]) for what in kinds}
    assert {what: d for what, d in differences.items() if d} == {}


def test_rkey_responses_are_the_same_frames(capture):
    """An RKEY_RSP rides on a response: the same frames in both (none without
    always_invalidate)."""
    name, _frames, shown, want = capture
    assert shown["rkeys"] == want["rkeys"]
    assert bool(want["rkeys"]) is REAL_TRUTH[name]["config"]["always_invalidate"]
