"""tshark + the generated plugin on hostile captures: every table of the
plugin's state is bounded (rtrs_scapy/spec/limits.py), so a file that
opens a new QP, CM transaction or unanswered response per packet runs without a
Lua error and within twice the memory of tshark without the plugin, and the
evictions are shown (rtrs.limit.*).

The captures are those of rtrs_scapy/craft/hostile.py (scripts/hostile.py)."""

import subprocess
import sys

import pytest

from rtrs_scapy.craft.hostile import KINDS, io_rsp_without_request, write_pcap
from rtrs_scapy.spec.limits import limit

from conftest import REPO
from tshark_util import TSHARK, tshark_env

LUA = REPO / "wireshark" / "rtrs.lua"
PACKETS = 30000


PEAK_RSS = ("import resource, subprocess, sys\n"
            "run = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)\n"
            "sys.stdout.buffer.write(run.stdout)\n"
            "sys.stderr.buffer.write(run.stderr)\n"
            "sys.stderr.write('\\nPEAK_RSS_KIB %d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
            "sys.exit(run.returncode)\n")


PLUGIN_FIELDS = ("rtrs.limit.table", "rtrs.limit.evicted")


def tshark_peak(path, plugin):
    """(stdout, stderr, peak RSS in KiB) of one tshark run, tshark alone measured."""
    cmd = [TSHARK, "-n", "-2", "-Y", "frame", "-r", str(path), "-T", "fields", "-E", "occurrence=a",
           "-E", "aggregator=|", "-e", "frame.number", "-e", "_ws.expert.message"]
    if plugin:
        cmd += ["-X", "lua_script:%s" % LUA]
        for name in PLUGIN_FIELDS:
            cmd += ["-e", name]
    run = subprocess.run([sys.executable, "-c", PEAK_RSS, *cmd], capture_output=True, text=True,
                         env=tshark_env(), timeout=900)
    assert run.returncode == 0, run.stderr
    peak = int(run.stderr.rsplit("PEAK_RSS_KIB", 1)[1])
    return run.stdout, run.stderr, peak


@pytest.fixture(scope="module", params=sorted(KINDS))
def hostile(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile") / ("%s.pcap" % request.param)
    write_pcap(path, KINDS[request.param](PACKETS))
    plain = tshark_peak(path, plugin=False)
    plugin = tshark_peak(path, plugin=True)
    return request.param, plain, plugin


def test_no_lua_error_and_memory_within_twice_plain_tshark(hostile):
    kind, (_out, _err, plain_kib), (out, err, plugin_kib) = hostile
    assert "Lua Error" not in out + err
    assert len(out.splitlines()) == PACKETS
    assert plugin_kib <= 2 * plain_kib, (kind, plugin_kib, plain_kib)


def test_evictions_are_counted_and_shown(hostile):
    kind, _plain, (out, _err, _kib) = hostile
    shown = {}
    for line in out.splitlines():
        _n, _expert, tables, counts = line.split("\t")
        for table, count in zip(tables.split("|"), counts.split("|")):
            if table:
                shown[table] = max(shown.get(table, 0), int(count))
    if kind == "qps":
        # one stream per QP: all but the newest generation evicted
        assert shown["QP streams"] >= PACKETS - limit("streams")
        assert "messages in reassembly" in shown
    elif kind == "cm_reqs":
        assert shown["CM transactions"] >= PACKETS - limit("cm")
        assert shown["sessions and paths"] >= PACKETS - limit("domains")
    else:
        assert shown == {}   # one QP, one path: nothing to evict


def test_responses_without_request_are_marked_not_errors(tmp_path):
    path = write_pcap(tmp_path / "rsp.pcap", io_rsp_without_request(200))
    run = subprocess.run([TSHARK, "-n", "-2", "-Y", "rtrs.request_before_capture",
                          "-X", "lua_script:%s" % LUA, "-r", str(path), "-T", "fields",
                          "-e", "_ws.expert.severity", "-e", "rtrs.queue_depth_source"],
                         capture_output=True, text=True, env=tshark_env(), timeout=300)
    assert run.returncode == 0 and "Lua Error" not in run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == 200
    # the only expert items are notes (queue depth assumed) and chats (request before the capture)
    assert all(int(s, 0) <= 0x400000 for line in lines for s in line.split("\t")[0].split(","))
    assert {line.split("\t")[1] for line in lines} == {"assumed"}
