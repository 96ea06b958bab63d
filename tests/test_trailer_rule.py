"""The request trailer rule (docs/PROTOCOL.md#request-trailers) at its edges, one vector
for the analyzer and for tshark with the plugin: tests/vectors/trailers.json patches real
frames of basic_inval.pcap (a WRITE whose user header began before the capture, a READ
whose user header is longer than the tail the analyzer keeps) and says by hand what the
rule makes of them.  Both implementations must read each the way the vector says."""

import json
import struct
import subprocess

import pytest
from scapy.utils import RawPcapReader

from conftest import REPO, real_pcap
from test_cuts import write_pcap
from tshark_util import TSHARK, TSHARK_OPTIONS, tshark_env
from rtrs_scapy.analysis import analyze

VECTORS = json.loads((REPO / "tests" / "vectors" / "trailers.json").read_text())["cases"]
LUA = REPO / "wireshark" / "rtrs.lua"
ETH_IP_UDP = 14 + 20 + 8
BTH, RETH, IMMDT, ICRC = 12, 16, 4, 4
MEM_BITS = 19          # basic_inval's queue depth 512 (its truth.json, conn_rsp)


def _ip_checksum(header):
    total = sum(struct.unpack("!10H", header))
    total = (total & 0xFFFF) + (total >> 16)
    return (~((total & 0xFFFF) + (total >> 16))) & 0xFFFF


def _write_usr_len(data, value):
    """An RDMA WRITE LAST WITH IMMEDIATE: the u16 usr_len that ends its payload."""
    assert data[ETH_IP_UDP] == 0x09
    pad = (data[ETH_IP_UDP + 1] >> 4) & 3
    end = len(data) - ICRC - pad
    return data[:end - 2] + struct.pack("<H", value) + data[end:]


def _read_user_header(data, length):
    """An RDMA WRITE ONLY WITH IMMEDIATE READ request with its user header grown to
    ``length`` bytes (zeros behind the RNBD header): trailer, RETH length, immediate
    offset, IP and UDP lengths follow."""
    assert data[ETH_IP_UDP] == 0x0B
    start = ETH_IP_UDP + BTH + RETH + IMMDT
    payload = data[start:len(data) - ICRC]
    kind, usr_len, flags, sg_cnt = struct.unpack_from("<HHHH", payload, len(payload) - 24)
    assert (kind, sg_cnt) == (3, 1)
    grown = payload[:usr_len] + bytes(length - usr_len) + struct.pack(
        "<HHHH", kind, length, flags, sg_cnt) + payload[-16:]
    frame = bytearray(data[:start] + grown + data[-ICRC:])
    extra = length - usr_len
    imm_at = ETH_IP_UDP + BTH + RETH
    imm = struct.unpack_from(">I", frame, imm_at)[0]
    struct.pack_into(">I", frame, imm_at, imm + extra)      # the offset: data_len + usr_len
    struct.pack_into(">I", frame, ETH_IP_UDP + BTH + 12, len(grown))
    struct.pack_into(">H", frame, 16, struct.unpack_from(">H", frame, 16)[0] + extra)
    struct.pack_into(">H", frame, 24, 0)
    struct.pack_into(">H", frame, 24, _ip_checksum(bytes(frame[14:34])))
    struct.pack_into(">HH", frame, 38, struct.unpack_from(">H", frame, 38)[0] + extra, 0)
    return bytes(frame)


PATCHES = {"write_trailer_usr_len": _write_usr_len, "read_user_header_len": _read_user_header}


def build(case, path):
    patch = dict(case["patch"])
    frame = patch.pop("frame")
    (name, value), = patch.items()
    frames = []
    for number, (data, meta) in enumerate(RawPcapReader(str(real_pcap("basic_inval"))), 1):
        if number < case["first_frame"]:
            continue
        if number == frame:
            data = PATCHES[name](data, value)
        frames.append((meta.sec + meta.usec / 1e6, data))
    write_pcap(path, frames, 1)
    return path


@pytest.fixture(scope="module", params=VECTORS, ids=[c["name"] for c in VECTORS])
def case(request, tmp_path_factory):
    vector = request.param
    return vector, build(vector, tmp_path_factory.mktemp("trailer") / "case.pcap")


def test_analyzer_follows_the_rule(case):
    vector, path = case
    expect = vector["expect"]
    analysis = analyze(path)
    frame = expect["frame"] - vector["first_frame"] + 1
    record = next(m for m in analysis.messages if m["frame"] == frame)
    assert record["msg"] == expect["op"]
    assert record["fields"]["usr_len"] == expect["usr_len"]
    assert bool(record["fields"].get("partial")) == expect["partial"]
    if "rnbd_decoded" in expect:
        assert bool(record["rnbd"]) == expect["rnbd_decoded"]
    assert analysis.summary["anomaly_counts"].get("bad_trailer", 0) == expect["bad_trailer"]


def test_plugin_follows_the_rule(case):
    vector, path = case
    expect = vector["expect"]
    assert TSHARK, "tshark is required (scripts/test.sh installs it)"
    trailer = "rtrs.rdma_%s.usr_len" % expect["op"]
    run = subprocess.run(
        [TSHARK, "-X", "lua_script:%s" % LUA, *TSHARK_OPTIONS, "-2", "-r", str(path),
         "-T", "fields", "-E", "separator=/t", "-e", "frame.number", "-e", trailer,
         "-e", "rtrs.partial", "-e", "rnbd", "-e", "rtrs.expert.no_trailer"],
        capture_output=True, text=True, env=tshark_env(), timeout=300)
    assert run.returncode == 0, run.stderr
    rows = {int(r[0]): r for r in (line.split("\t") for line in run.stdout.splitlines())}
    row = rows[expect["frame"] - vector["first_frame"] + 1]
    assert row[1] == str(expect["usr_len"])
    assert (row[2] in ("1", "True")) == expect["partial"]
    if "rnbd_decoded" in expect:
        assert bool(row[3]) == expect["rnbd_decoded"]
    assert sum(1 for r in rows.values() if r[4]) == expect["bad_trailer"]
