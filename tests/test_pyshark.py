"""rtrs_scapy.wireshark.pyshark: pyshark's captures with the generated plugin loaded.

The real captures read through ``FileCapture`` give the kernel's request counts
(truth.json rtrs_stats, as the analyzer's summary does) and the analyzer's
request/response pairs, linked both ways."""

import subprocess

import pytest

from rtrs_scapy.wireshark import pyshark as rtrs_pyshark
from rtrs_scapy.analysis import analyze
from rtrs_scapy.wireshark.generate import generate

from conftest import REAL, real_pcap
from tshark_util import tshark_env

FIELDS = ("rdma_read", "rdma_write", "response_in", "request_in", "response_time")


def _frames(capture):
    """{frame number: {plugin field: value}} of the frames that carry RTRS."""
    frames = {}
    for pkt in capture:
        if not hasattr(pkt, "rtrs"):
            continue
        fields = {name: pkt.rtrs.get_field(name) for name in FIELDS}
        if hasattr(pkt, "rnbd") and pkt.rnbd.get_field("io_sector") is not None:
            fields["io_sector"] = int(pkt.rnbd.io_sector)
        frames[int(pkt.number)] = fields
    return frames


@pytest.fixture(scope="module", params=[name for name, _, _ in REAL])
def dissected(request):
    """(pyshark frames, analyzer result, truth) of one real capture."""
    name = request.param
    (truth,) = [truth for n, _, truth in REAL if n == name]
    with rtrs_pyshark.FileCapture(str(real_pcap(name)), keep_packets=False) as capture:
        frames = _frames(capture)
    return frames, analyze(real_pcap(name), keep_messages=True), truth


def test_request_frames_are_the_kernel_counts(dissected):
    frames, result, truth = dissected
    (stats,) = truth["rtrs_stats"]["client"]["pre_unmap"].values()
    (path,) = result.summary["sessions"][0]["paths"]
    reads = [n for n, f in frames.items() if f["rdma_read"] is not None]
    writes = [n for n, f in frames.items() if f["rdma_write"] is not None]
    assert len(reads) == path["io"]["read"]["count"] == stats["rdma"]["reads"]
    # the RNBD CLOSE of each unmap is an RTRS WRITE after the counters were read
    assert len(writes) == path["io"]["write"]["count"] == \
        stats["rdma"]["writes"] + len(truth["unmaps"])


def test_response_links_are_mutual_and_the_analyzers(dissected):
    frames, result, _truth = dissected
    forward = {(n, int(f["response_in"])) for n, f in frames.items() if f["response_in"]}
    backward = {(int(f["request_in"]), n) for n, f in frames.items() if f["request_in"]}
    assert forward == backward
    pairs = {(m["frame"], m["paired_frame"]) for m in result.messages
             if m["msg"] in ("read", "write")}
    assert forward == pairs
    latency = {m["paired_frame"]: m["latency"] for m in result.messages
               if m["msg"] in ("read", "write")}
    for _request, response in forward:
        assert float(frames[response]["response_time"]) == pytest.approx(latency[response],
                                                                         abs=1e-6)


def test_rnbd_fields(dissected):
    frames, result, _truth = dissected
    sectors = {m["frame"]: m["rnbd"]["sector"] for m in result.messages
               if m["rnbd"] and m["rnbd"]["msg"] == "io"}
    assert sectors
    assert {n: f["io_sector"] for n, f in frames.items() if "io_sector" in f} == sectors


def test_the_plugin_file_is_the_generated_one():
    (flag, script) = rtrs_pyshark.plugin_parameters()
    assert flag == "-X" and script.startswith("lua_script:")
    with open(script[len("lua_script:"):], encoding="utf-8") as fh:
        assert fh.read() == generate()


def truth_reads(name):
    (truth,) = [truth for n, _, truth in REAL if n == name]
    (stats,) = truth["rtrs_stats"]["client"]["pre_unmap"].values()
    return stats["rdma"]["reads"]


def test_an_installed_plugin_is_not_loaded_twice(tmp_path, monkeypatch):
    """tshark loads a plugin installed in the personal folder by itself; a second
    copy through -X could not register the same protocols."""
    monkeypatch.setenv("HOME", str(tmp_path))
    folder = tmp_path / ".local" / "lib" / "wireshark" / "plugins"
    folder.mkdir(parents=True)
    (folder / "rtrs.lua").write_text(generate(), encoding="utf-8")
    assert rtrs_pyshark.plugin_parameters() == []
    with rtrs_pyshark.FileCapture(str(real_pcap("basic_inval")),
                                  display_filter="rtrs.rdma_read") as capture:
        assert len([pkt for pkt in capture if pkt.rtrs.get_field("rdma_read")]) == \
            truth_reads("basic_inval")


def test_live_capture_runs_tshark_with_the_plugin():
    """LiveCapture's tshark reads dumpcap's stream on stdin in one pass: fed a real
    capture that way, every response links to its request."""
    live = rtrs_pyshark.LiveCapture("lo")
    params = live.get_parameters()
    assert "-2" not in params and params[-2:] == ["-i", "-"]
    pcap = real_pcap("basic_inval")
    with open(pcap, "rb") as stream:
        out = subprocess.run(["tshark", "-T", "fields", "-e", "rtrs.request_in"] + params,
                             stdin=stream, capture_output=True, text=True, check=True,
                             env=tshark_env()).stdout
    links = [line for line in out.splitlines() if line]
    result = analyze(pcap)
    (path,) = result.summary["sessions"][0]["paths"]
    assert len(links) == path["io"]["read"]["count"] + path["io"]["write"]["count"]
