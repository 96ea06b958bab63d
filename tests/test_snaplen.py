"""Header-only captures (docs/PROTOCOL.md#header-only-captures): the real captures cut
by tshark's editcap (an independent tool) to 74, 96, 128, 192 and 256 bytes, as
``tcpdump -s N`` or a truncating mirror hands them over, tell what the headers prove
exactly as the whole capture does: requests by direction and their bytes, every
request's latency (its pairing), errnos and heartbeats, per path endpoints.  A cut
makes no anomaly.  The whole captures' counts are the kernel's (tests/test_truth.py).

What the cut left unknown is null (the RNBD figures of header-only requests), the JSON
``capture`` has the snaplen the records show, and the text says once what was cut.
tshark with the plugin decodes the cut frames from their headers, with an expert note.

The handshake's CM MADs are longer than these cuts: the paths are then inferred as in a
capture that starts mid-session, and two sessions between the same two addresses
(errors.pcap) are one inferred path; so the figures are compared per pair of endpoints.
"""

import struct
import subprocess

import pytest
from scapy.utils import RawPcapReader

from conftest import PROJECT_PCAPS, REPO, real_pcap
from rtrs_scapy.analysis import analyze
from rtrs_scapy.capture import open_capture
from rtrs_scapy.report.text import render
from tshark_util import TSHARK, TSHARK_OPTIONS, tshark_env

CAPTURES = ("basic_inval", "basic_noinval", "jumbo", "multipath", "errors", "discard")
#: (snaplen, editcap's output format): both record formats' original length; at 326
#: bytes the handshake is whole and only long requests lose their trailer
CUTS = ((74, "pcapng"), (96, "pcap"), (128, "pcapng"), (192, "pcap"), (256, "pcapng"),
        (326, "pcap"))
OPS = ("read", "write")
LUA = REPO / "wireshark" / "rtrs.lua"


def cut(src, dst, snaplen, fmt):
    subprocess.run(["editcap", "-F", fmt, "-s", str(snaplen), str(src), str(dst)], check=True,
                   capture_output=True)
    return dst


def figures(analysis):
    """Per (client, server) endpoints: request counts and bytes by op, every latency
    (sorted, by op), (frame, errno) of the failed requests, heartbeats by kind, rkey
    responses, the RC transport's counters."""
    out = {}
    paths = [p for p in analysis.analyzer.path_list if p.linked_to is None]
    for path in paths:
        key = (path.client_raw, path.server_raw)
        mine = out.setdefault(key, {"count": dict.fromkeys(OPS, 0), "bytes": dict.fromkeys(OPS, 0),
                                    "latency": {op: [] for op in OPS}, "errors": [],
                                    "heartbeats": {}, "rkey_refreshes": 0, "transport": {}})
        mine["rkey_refreshes"] += path.rkey_refreshes
        for kind, value in path.transport.items():
            mine["transport"][kind] = mine["transport"].get(kind, 0) + value
        for op in OPS:
            mine["count"][op] += path.io[op].count
            mine["bytes"][op] += path.io[op].bytes
            mine["latency"][op] += path.latencies[op].values().tolist()
        mine["errors"] += [(e["frame"], e["errno"]) for e in path.errors]
        for kind, value in path.heartbeats.items():
            mine["heartbeats"][kind] = mine["heartbeats"].get(kind, 0) + value
    for mine in out.values():
        for op in OPS:
            mine["latency"][op].sort()
        mine["errors"].sort()
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """{(capture, snaplen): (whole analysis, cut analysis)}: each whole capture analysed
    once."""
    folder = tmp_path_factory.mktemp("snaplen")
    out = {}
    for name in CAPTURES:
        whole = analyze(real_pcap(name))
        for snaplen, fmt in CUTS:
            path = cut(real_pcap(name), folder / ("%s_%d.%s" % (name, snaplen, fmt)), snaplen, fmt)
            out[name, snaplen] = whole, analyze(path)
    return out


CASES = [(name, snaplen) for name in CAPTURES for snaplen, _fmt in CUTS]


@pytest.mark.parametrize("name,snaplen", CASES, ids=["%s-%d" % c for c in CASES])
def test_cut_tells_what_the_headers_prove(results, name, snaplen):
    whole, part = results[name, snaplen]
    assert figures(part) == figures(whole)
    assert any(f["count"]["read"] + f["count"]["write"] for f in figures(part).values())


@pytest.mark.parametrize("name,snaplen", CASES, ids=["%s-%d" % c for c in CASES])
def test_cut_makes_no_anomaly(results, name, snaplen):
    whole, part = results[name, snaplen]
    assert part.summary["anomaly_counts"] == whole.summary["anomaly_counts"] == {}
    assert part.summary["capture"]["malformed"] == 0


@pytest.mark.parametrize("name,snaplen", CASES, ids=["%s-%d" % c for c in CASES])
def test_snaplen_in_json_and_said_once(results, name, snaplen):
    whole, part = results[name, snaplen]
    capture = part.summary["capture"]
    longer = sum(1 for _data, meta in RawPcapReader(str(real_pcap(name)))
                 if meta.wirelen > snaplen)
    assert capture["snaplen"] == snaplen and capture["cut_records"] == longer > 0
    assert whole.summary["capture"]["cut_records"] == 0
    text = render(part.summary)
    assert text.count("payloads cut at %d bytes" % snaplen) == 1
    assert "payloads cut" not in render(whole.summary)


@pytest.mark.parametrize("name,snaplen", CASES, ids=["%s-%d" % c for c in CASES])
def test_unknown_is_null_never_a_part(results, name, snaplen):
    """Where requests of an op lost their RNBD header, the RNBD figures of that op are
    null (session and devices); where none did, they equal the whole capture's."""
    whole, part = results[name, snaplen]
    blind = {op: 0 for op in OPS}
    for session in part.summary["sessions"]:
        counts = session["rnbd"].get("header_only_requests", {})
        for op in OPS:
            blind[op] += counts.get(op, 0)
        for op in OPS:
            if counts.get(op):
                assert session["rnbd"]["ops"][op] is None
                assert all(d["ops"][op] is None for d in session["rnbd"]["devices"].values())
    paths = [p for s in part.summary["sessions"] for p in s["paths"]]
    assert sum(p["header_only_requests"] for p in paths) == blind["read"] + blind["write"]
    whole_ops = {}
    for session in whole.summary["sessions"]:
        for op, stats in session["rnbd"]["ops"].items():
            whole_ops.setdefault(op, 0)
            whole_ops[op] += stats["count"]
    for op in OPS:
        if not blind[op]:   # every RNBD header of this op was captured
            seen = sum(s["rnbd"]["ops"][op]["count"] for s in part.summary["sessions"]
                       if s["rnbd"]["ops"].get(op))
            assert seen == whole_ops.get(op, 0)


def test_all_header_only_at_74_bytes(results):
    """At 74 bytes no request payload is captured: every request is header-only, and
    read versus write still equals the whole capture's."""
    whole, part = results["basic_inval", 74]
    paths = [p for s in part.summary["sessions"] for p in s["paths"]]
    total = sum(p["io"][op]["count"] for p in paths for op in OPS)
    assert sum(p["header_only_requests"] for p in paths) == total > 0


def test_ipv6_cut_at_its_headers(tmp_path):
    """IPv6 RoCEv2 needs 94 bytes (a crafted capture: the real ones are IPv4)."""
    src = PROJECT_PCAPS / "basic_ipv6.pcap"
    whole = analyze(src)
    part = analyze(cut(src, tmp_path / "v6.pcapng", 94, "pcapng"))
    assert figures(part) == figures(whole)
    assert part.summary["anomaly_counts"] == whole.summary["anomaly_counts"]
    assert part.summary["capture"]["snaplen"] == 94


def _plugin_rows(path):
    run = subprocess.run(
        [TSHARK, "-X", "lua_script:%s" % LUA, *TSHARK_OPTIONS, "-2", "-r", str(path), "-T",
         "fields", "-E", "separator=/t", "-E", "occurrence=f", "-e", "frame.number",
         "-e", "rtrs.imm.type", "-e", "rtrs.imm.errno", "-e", "_ws.lua.error",
         "-e", "_ws.malformed", "-e", "rtrs.expert.cut"],
        capture_output=True, text=True, env=tshark_env(), timeout=300)
    assert run.returncode == 0, run.stderr
    return [line.split("\t") for line in run.stdout.splitlines()]


def _plugin_counts(rows):
    """Frames by immediate type (requests 0, responses 1 and 2, heartbeats 8 and 9) and
    failed responses, as the plugin shows them."""
    counts = {}
    for row in rows:
        if row[1]:
            counts[row[1]] = counts.get(row[1], 0) + 1
    counts["errno"] = sum(1 for row in rows if row[2] not in ("", "0"))
    return counts


@pytest.mark.parametrize("name,snaplen", [("errors", 74)])
def test_plugin_on_a_cut_capture(results, name, snaplen, tmp_path):
    """tshark with the plugin: no Lua error and no malformed frame, the cut frames carry
    the expert note, and the immediates tell what they tell on the whole capture; the
    requests are the analyzer's."""
    assert TSHARK, "tshark is required (scripts/test.sh installs it)"
    rows = _plugin_rows(cut(real_pcap(name), tmp_path / "cut.pcapng", snaplen, "pcapng"))
    assert [r[0] for r in rows if r[3] or r[4]] == []
    assert any(r[5] for r in rows)
    counts = _plugin_counts(rows)
    assert counts == _plugin_counts(_plugin_rows(real_pcap(name)))
    paths = [p for s in results[name, snaplen][1].summary["sessions"] for p in s["paths"]]
    assert counts["0"] == sum(p["io"][op]["count"] for p in paths for op in OPS)


def _block(kind, body):
    body += bytes(-len(body) % 4)
    return struct.pack("<II", kind, len(body) + 12) + body + struct.pack("<I", len(body) + 12)


def test_simple_packet_blocks_keep_the_original_length(tmp_path):
    """A pcapng simple packet block holds the original length only; the interface's
    snaplen cuts what it captured (pcapng spec, section 4.4)."""
    frame = next(iter(RawPcapReader(str(real_pcap("basic_inval")))))[0]
    path = tmp_path / "spb.pcapng"
    path.write_bytes(_block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
                     + _block(1, struct.pack("<HHI", 1, 0, 80))
                     + _block(3, struct.pack("<I", len(frame)) + frame[:80]))
    with open_capture(path) as capture:
        chunk = next(capture.chunks())
        assert capture.snaplen == 80
    assert (chunk.caplens.tolist(), chunk.origlens.tolist()) == ([80], [len(frame)])
