"""The plugin's queue depth rule (its rule file rtrs_scapy/wireshark/lua/qdepth.lua,
with the QD constants of the shipped wireshark/rtrs.lua) run under plain lua5.2 on every vector of tests/vectors/qdepth.json: mem_bits, queue depth,
source and pairs equal the vector's truth, the event that decided equals the
Python rule's (rtrs_scapy/analysis/qdepth.py), so the two cannot drift."""

import json
import re
import shutil
import subprocess

import pytest

from rtrs_scapy.analysis.qdepth import infer
from rtrs_scapy.wireshark.generate import rule_path

from conftest import REPO

LUA = REPO / "wireshark" / "rtrs.lua"
VECTORS = json.loads((REPO / "tests" / "vectors" / "qdepth.json").read_text())
LUA52 = shutil.which("lua5.2")

HARNESS = """
local function run(name, events)
  local r = QDEPTH.new()
  for i, e in ipairs(events) do e.index = i - 1 end
  for _, e in ipairs(events) do
    if r.mem_bits then break end
    if e.msg_id == nil then QDEPTH.request(r, e.payload, e.offset) else QDEPTH.response(r, e.msg_id) end
  end
  QDEPTH.finish(r)
  local pairs_ = {}
  QDEPTH.pair(events, r.mem_bits, {}, function(q, e)
    pairs_[#pairs_ + 1] = q.index .. " " .. e.index
  end)
  print(string.format("%s %d %d %s %d", name, r.mem_bits, QDEPTH.queue_depth_of(r.mem_bits),
                      r.source, r.decided_at))
  print(table.concat(pairs_, ","))
end
"""


def rule_chunk():
    """The QD constants of the shipped plugin and the rule file, as one Lua chunk."""
    text = LUA.read_text(encoding="utf-8")
    constants = re.search(r"(?ms)^local QD = \{\n.*?^\}\n", text).group(0)
    with open(rule_path("qdepth"), encoding="utf-8") as fh:
        return constants + fh.read()


def lua_events(events):
    items = []
    for event in events:
        if event[0] == "req":
            offset = "nil" if event[2] is None else str(event[2])
            items.append("{payload=%d,offset=%s}" % (event[1], offset))
        else:
            items.append("{msg_id=%d}" % event[1])
    return "{" + ",".join(items) + "}"


@pytest.fixture(scope="module")
def lua_results(tmp_path_factory):
    assert LUA52, "lua5.2 is required (scripts/test.sh installs it)"
    script = tmp_path_factory.mktemp("qdepth") / "vectors.lua"
    calls = "".join('run("%s", %s)\n' % (v["name"], lua_events(v["events"])) for v in VECTORS)
    script.write_text(rule_chunk() + HARNESS + calls, encoding="utf-8")
    run = subprocess.run([LUA52, str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.split("\n")
    results = {}
    for head, pairs in zip(lines[0::2], lines[1::2]):
        name, bits, depth, source, decided_at = head.split()
        pairs = [[int(x) for x in p.split()] for p in pairs.split(",") if p]
        results[name] = (int(bits), int(depth), source, int(decided_at), pairs)
    return results


def test_the_rule_block_needs_no_wireshark_api():
    code = re.sub(r"--[^\n]*", "", rule_chunk())
    for name in ("Field", "Proto", "ByteArray", "bit.", "pinfo", "tvb", "S.", "C."):
        assert name not in code, name


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_vector(vector, lua_results):
    bits, depth, source, decided_at, pairs = lua_results[vector["name"]]
    want = vector["expect"]
    assert (bits, depth, source, pairs) == (
        want["mem_bits"], want["queue_depth"], want["source"], want["pairs"])
    assert decided_at == infer(vector["events"]).decided_at
