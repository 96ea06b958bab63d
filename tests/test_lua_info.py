"""No impossible numbers in the plugin's Info column: a FLUSH names no sector (the
kernel sends blk_rq_pos() of a flush, (u64)-1: docs/PROTOCOL.md#rnbd), on the real
discard capture whose fsync sent FLUSH requests."""

import re
import subprocess

from conftest import REPO, real_pcap
from tshark_util import TSHARK, tshark_env

LUA = REPO / "wireshark" / "rtrs.lua"


def _info_column(capture):
    done = subprocess.run([TSHARK, "-n", "-X", "lua_script:%s" % LUA, "-r", str(capture),
                           "-T", "fields", "-e", "frame.number", "-e", "_ws.col.Info"],
                          capture_output=True, text=True, env=tshark_env(), check=True)
    return dict(line.split("\t", 1) for line in done.stdout.splitlines())


def test_a_flush_names_no_sector_and_no_number_is_impossible():
    info = _info_column(real_pcap("discard"))
    flushes = [text for text in info.values() if "RNBD FLUSH" in text]
    assert flushes, "the discard capture's fsync sends FLUSH requests"
    assert all(re.search(r"RNBD FLUSH dev \d+ len 0\b", text) for text in flushes)
    assert not any("sector" in text for text in flushes)
    numbers = (int(n) for text in info.values() for n in re.findall(r"\b\d{10,}\b", text))
    assert all(n < 2 ** 63 for n in numbers)
