"""The plugin's failover fields equal the analyzer's (docs/PROTOCOL.md#failover-from-the-wire).

failover.pcap up to the server's first go-back-N round on the dead path (frames 1 to
HEAD: the handshakes, the link loss, the eight copies and the retransmissions that
prove the four answers were not acknowledged), read by tshark in two passes
(``-2 -R``: the first pass analyses every frame, the second shows what the whole
capture told) with the generated plugin: ``rtrs.failover_of`` on each copy whose
original is on the wire, ``rtrs.response_not_delivered`` on that original and its
answer, ``rtrs.no_response`` on an original never answered, ``rtrs.failover_unseen``
(the failed path) on a copy whose original never reached the wire (the kernel's permit
order, one rule: docs/PROTOCOL.md#failover-from-the-wire), against the analyzer's
failovers of the same frames.
"""

import gzip
import struct
import subprocess

import pytest

from rtrs_scapy.analysis import analyze

from conftest import REPO, real_pcap
from tshark_util import TSHARK, TSHARK_OPTIONS, tshark_env

LUA = REPO / "wireshark" / "rtrs.lua"
#: the frame after the server's first retransmissions to the dead NIC (35081, 35083)
HEAD = 35100
FIELDS = ("rtrs.failover_of", "rtrs.response_not_delivered", "rtrs.no_response",
          "rtrs.failover_unseen")


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    """Frames 1 … HEAD of failover.pcap.gz as a pcap."""
    out = tmp_path_factory.mktemp("failover") / "head.pcap"
    with gzip.open(real_pcap("failover")) as f, open(out, "wb") as dst:
        dst.write(f.read(24))
        for _ in range(HEAD):
            record = f.read(16)
            dst.write(record + f.read(struct.unpack("<I", record[8:12])[0]))
    return out


def _plugin(capture):
    """{frame: (failover_of, response_not_delivered, no_response, failover_unseen)} where
    any is shown."""
    cmd = [TSHARK, "-n", "-2", "-R", "infiniband.bth", "-X", "lua_script:%s" % LUA,
           *TSHARK_OPTIONS, "-r", str(capture), "-T", "fields", "-e", "frame.number",
           "-e", "_ws.lua.error"]
    for field in FIELDS:
        cmd += ["-e", field]
    cmd += ["-Y", " || ".join(FIELDS + ("_ws.lua.error",))]
    done = subprocess.run(cmd, capture_output=True, text=True, env=tshark_env())
    assert done.returncode == 0, done.stderr
    shown = {}
    for line in done.stdout.splitlines():
        frame, error, *values = line.split("\t")
        assert not error, "Lua error in frame %s: %s" % (frame, error)
        shown[int(frame)] = tuple(int(v) if v else None for v in values[:-1]) \
            + (values[-1] or None,)
    return shown


def _analyzer(capture):
    """The same four per frame, from the analyzer's failovers."""
    summary = analyze(str(capture), keep_messages=False).summary
    want = {}
    for session in summary["sessions"]:
        for path in session["paths"]:
            for f in path["failover_list"]:
                original, copy = f["original_frame"], f["frame"]
                if original is None:          # not on the wire: the failed path
                    want[copy] = (None, None, None, f["original_path"])
                    continue
                want[copy] = (original, None, None, None)
                if f["kind"] == "no_response":
                    want[original] = (None, None, copy, None)
                else:
                    want[original] = want[f["response_frame"]] = (None, copy, None, None)
    return want


def test_plugin_failovers_equal_the_analyzer(head):
    want = _analyzer(head)
    assert sorted(k for k, v in want.items() if v[0]) == [22338, 22359, 22391, 22393]
    assert sorted(k for k, v in want.items() if v[3]) == [22330, 22383, 22384, 22392]
    assert _plugin(head) == want
