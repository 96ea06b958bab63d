"""A fabric shared with other RDMA protocols (docs/PROTOCOL.md#other-rdma-protocols):
NVMe-oF/RDMA, NFS/RDMA, iSER and SMB Direct sessions crafted with Scapy
(rtrs_scapy/craft/ulps.py), merged by time into the real basic_inval.pcap on the same
two addresses (one NVMe-oF connection even on RTRS's QP numbers, after RTRS's
teardown), with random RDMA traffic between the same hosts.  The RTRS figures, the
disconnects and the anomalies are those of the RTRS capture alone; the other
connections are listed as what tshark's own dissectors say they are; random RDMA
traffic is no RTRS; the Wireshark plugin leaves the other protocols' frames to
Wireshark's dissectors."""

import json
import subprocess

import pytest
from click.testing import CliRunner

from rtrs_scapy.analysis import analyze
from rtrs_scapy.analysis.other_rdma import classify
from rtrs_scapy.capture import open_capture
from rtrs_scapy.cli import main
from rtrs_scapy.craft import write_capture
from rtrs_scapy.craft.ulps import UlpCrafter
from rtrs_scapy.layers.cm import AF_IB_SERVICE_ID, service_id
from rtrs_scapy.report.text import render

from conftest import REPO, real_pcap
from test_plugin_vs_analyzer import analyzer_messages, plugin_messages, plugin_view
from tshark_util import TSHARK, tshark_env

LUA = REPO / "wireshark" / "rtrs.lua"
CLIENT, SERVER = "10.77.0.2", "10.77.0.1"      # basic_inval.pcap's RTRS client and server
#: the protocol names of the summary -> tshark's filter for its dissector
TSHARK_NAME = {"NVMe-oF/RDMA": "nvme-rdma", "NFS/RDMA": "rpcordma", "iSER": "iser",
               "SMB Direct": "smb_direct"}
BTH_AT = 14 + 20 + 8       # Ethernet, IPv4, UDP: the crafter's RoCEv2 frames
NVME_COMMANDS, NVME_BLOCK = 6, 4096
NOISE_QPNS = (0x40, 0x41, 0x42, 0x43)      # random RDMA traffic between the same hosts
DISCONNECT = (b"\0\x15", b"\0\x16")           # MAD attribute IDs of DREQ and DREP


def frames_of(pcap):
    with open_capture(pcap) as cap:
        return [(ts, bytes(buf[s:e])) for _, ts, buf, s, e, _ in cap]


def handshake_mad(frame):
    """A crafted frame to the GSI QP (a CM MAD) that is no DREQ or DREP."""
    mad = frame[1][BTH_AT + 12 + 8:]                     # BTH, DETH
    return frame[1][BTH_AT + 5:BTH_AT + 8] == b"\0\0\1" and mad[16:18] not in DISCONNECT


def remap(value, numbers, key=""):
    """``value`` with every frame number (keys ending in "frame") as the RTRS capture
    alone numbers it."""
    if isinstance(value, dict):
        return {k: remap(v, numbers, k) for k, v in value.items()}
    if isinstance(value, list):
        return [remap(v, numbers, key) for v in value]
    if key.endswith("frame") and isinstance(value, int):
        return numbers.get(value, ("crafted", value))
    return value


class Mix:
    """The RTRS capture, the crafted frames and their merge: frame numbers of both."""

    def __init__(self, tmp, rtrs, crafted, name):
        self.path = tmp / name
        merged = sorted([(ts, data, True) for ts, data in rtrs]
                        + [(ts, data, False) for ts, data in crafted], key=lambda f: f[0])
        write_capture(self.path, [(ts, data) for ts, data, _ in merged], linktype=1)
        self.numbers, self.crafted = {}, []
        for number, (_, _, real) in enumerate(merged, 1):
            if real:
                self.numbers[number] = len(self.numbers) + 1
            else:
                self.crafted.append(number)
        self.summary = analyze(self.path).summary


@pytest.fixture(scope="module")
def mixes(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("other_rdma")
    rtrs = frames_of(real_pcap("basic_inval"))
    start = rtrs[0][0]
    ulps = UlpCrafter(seed=1, start=start + 1.0)
    ulps.nvme(CLIENT, SERVER, (0x14, 0x15), commands=NVME_COMMANDS, block=NVME_BLOCK)
    ulps.t = start + 3.0
    ulps.nfs(SERVER, CLIENT, (0x16, 0x17))
    ulps.t = start + 5.0
    ulps.iser(CLIENT, SERVER, (0x18, 0x19))
    ulps.t = start + 7.0
    ulps.smbd(CLIENT, SERVER, (0x1a, 0x1b))
    ulps.t = rtrs[-1][0] + 0.5       # after RTRS's teardown, on its QP numbers
    ulps.nvme(CLIENT, SERVER, (0x11, 0x11), commands=NVME_COMMANDS, block=NVME_BLOCK)
    noise = UlpCrafter(seed=5, start=start + 9.0)
    noise.random_rc(CLIENT, SERVER, 400, qpns=NOISE_QPNS[:2])
    noise.random_rc(SERVER, CLIENT, 400, qpns=NOISE_QPNS[2:],
                    opcodes=["RDMA_WRITE_ONLY_WITH_IMMEDIATE"])
    return {
        "alone": analyze(real_pcap("basic_inval")).summary,
        "mixed": Mix(tmp, rtrs, ulps.frames + noise.frames, "mixed.pcap"),
        # the other protocols' handshakes not in the capture, their traffic and DREQ/DREP
        # are (a QP number that comes back without a handshake stays its last
        # connection's: the one after RTRS's teardown is left out)
        "no_handshake": Mix(tmp, rtrs, [f for f in ulps.frames if not handshake_mad(f)
                                        and f[0] < rtrs[-1][0]], "no_handshake.pcap"),
    }


@pytest.mark.parametrize("mix", ["mixed", "no_handshake"])
def test_rtrs_figures_are_those_of_the_rtrs_capture_alone(mixes, mix):
    alone, mixed = mixes["alone"], mixes[mix]
    assert remap(mixed.summary["sessions"], mixed.numbers) == alone["sessions"]
    assert remap(mixed.summary["anomalies"], mixed.numbers) == alone["anomalies"]
    assert mixed.summary["anomaly_counts"] == alone["anomaly_counts"]
    assert mixed.summary["capture"]["rtrs_packets"] == alone["capture"]["rtrs_packets"]
    (path,) = [p for s in mixed.summary["sessions"] for p in s["paths"]]
    assert len(path["disconnects"]) == 1      # the NVMe-oF DREQs are none of RTRS's
    assert mixed.summary["capture"]["packets"] == len(mixed.numbers) + len(mixed.crafted)


def test_without_their_handshake_other_protocols_are_not_listed(mixes):
    assert mixes["no_handshake"].summary["other_rdma"] == []


def tshark_fields(pcap, *fields, lua=None):
    args = [TSHARK, "-r", str(pcap), "-T", "fields"] + [a for f in fields for a in ("-e", f)]
    if lua:
        args[1:1] = ["-X", "lua_script:%s" % lua]
    run = subprocess.run(args, capture_output=True, text=True, timeout=300, check=True,
                         env=tshark_env())
    return [line.split("\t") for line in run.stdout.splitlines()]


def test_other_connections_are_what_wireshark_says(mixes):
    """Each listed connection: tshark's dissector of that protocol decodes frames to
    its QPs and to no other listed connection's; its packets are the frames from its
    REQ to its DREP to its QPs or the CM's."""
    mixed = mixes["mixed"]
    listed = mixed.summary["other_rdma"]
    assert [(c["protocol"], c["port"]) for c in listed] == [
        ("NVMe-oF/RDMA", 4420), ("NFS/RDMA", 20049), ("iSER", 3260), ("SMB Direct", 5445),
        ("NVMe-oF/RDMA", 4420)]
    rows = tshark_fields(mixed.path, "frame.number", "ip.dst", "infiniband.bth.destqp",
                         "frame.protocols")
    for conn in listed:
        first, last = conn["connect_frames"][0], conn["disconnect_frames"][-1]
        qps = {(conn["server"], conn["server_qpn"]), (conn["client"], conn["client_qpn"])}
        mine = [r for r in rows if first <= int(r[0]) <= last
                and ((r[1], int(r[2], 16)) in qps or int(r[2], 16) == 1)]
        assert conn["packets"] == len(mine), conn
        named = [r for r in mine if TSHARK_NAME[conn["protocol"]] in r[3].split(":")]
        assert named, conn
        assert not [r for r in mine for other in set(TSHARK_NAME.values())
                    - {TSHARK_NAME[conn["protocol"]]} if other in r[3].split(":")], conn
        assert conn["disconnect_frames"] and not conn["rejected"]
    for conn in (listed[0], listed[4]):   # 64-byte capsules, 16-byte completions, the data
        assert conn["bytes"] == NVME_COMMANDS * (64 + 16 + NVME_BLOCK)
        assert conn["messages"] == NVME_COMMANDS * 2 + NVME_COMMANDS // 2


def test_the_text_lists_them_under_their_own_heading(mixes):
    text = render(mixes["mixed"].summary)
    heading = text.index("other RDMA protocols (5 connections, not RTRS)")
    assert heading > text.index("session lab1")
    lines = text[heading:].splitlines()[1:11]
    assert lines[0].split()[:5] == ["NVMe-oF/RDMA", CLIENT, "→", SERVER, "port"]
    assert "QPs 0x14 ↔ 0x15" in lines[0]
    assert lines[1].strip().startswith("59 packets, 24.5 KiB in 15 messages  connect frames")
    assert lines[8].split()[:5] == ["NVMe-oF/RDMA", CLIENT, "→", SERVER, "port"]
    assert "QPs 0x11 ↔ 0x11" in lines[8]


def messages(*args):
    result = CliRunner().invoke(main, ["messages", "--format", "json"] + [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.output.splitlines()]


def test_messages_lists_their_messages_with_other(mixes):
    """``messages --other``: a row per SEND and RDMA WRITE of the other connections (at
    its last packet), without RTRS fields; the RTRS rows are those without --other."""
    mixed = mixes["mixed"]
    rows = messages("--other", mixed.path)
    others = [r for r in rows if r["msg"] == "other"]
    assert [r for r in rows if r["msg"] != "other"] == messages(mixed.path)
    assert all(r["session"] is None and r["cid"] is None and r["paired_frame"] is None
               for r in others)
    listed = mixed.summary["other_rdma"]
    assert len(others) == sum(c["messages"] for c in listed)
    # tshark's own dissectors: every SEND ONLY (opcode 4) of their connections, and for
    # NVMe-oF the last packet of every RDMA WRITE (8 LAST, 10 ONLY) that its data is in
    crafted = set(mixed.crafted)
    ends = [r for r in tshark_fields(mixed.path, "frame.number", "frame.protocols",
                                     "infiniband.bth.opcode", "infiniband.bth.destqp")
            if int(r[0]) in crafted and int(r[3], 16) not in NOISE_QPNS]  # (rpcordma's at times)
    for name, tshark_name in TSHARK_NAME.items():
        for op, opcodes in (("SEND", (4,)), ("RDMA WRITE", (8, 10))):
            frames = sorted(r["frame"] for r in others if r["fields"]["protocol"] == name
                            and r["fields"]["op"] == op)
            named = [int(r[0]) for r in ends if tshark_name in r[1].split(":")
                     and int(r[2]) in opcodes]
            if op == "SEND" or name == "NVMe-oF/RDMA":
                assert frames == named and frames, (name, op)


@pytest.mark.parametrize("opcodes", [None, ["RDMA_WRITE_ONLY_WITH_IMMEDIATE"]],
                         ids=["every_opcode", "write_with_immediate"])
def test_random_rdma_traffic_is_no_rtrs(tmp_path, opcodes):
    noise = UlpCrafter(seed=7)
    noise.random_rc("10.9.0.1", "10.9.0.2", 450, opcodes=opcodes)
    noise.write(tmp_path / "random.pcap")
    summary = analyze(tmp_path / "random.pcap").summary
    assert summary["capture"]["packets"] == 450
    assert summary["sessions"] == [] and summary["anomalies"] == []
    assert summary["capture"]["rtrs_packets"] == 0


def test_classified_by_service_id_and_private_data():
    """The rule of docs/PROTOCOL.md#other-rdma-protocols on REQ private data laid out as
    the protocols define them."""
    nvme = bytes([0, 0, 1, 0, 128, 0, 127, 0]) + bytes(24)      # recfmt 0, qid 1, 128, 127
    assert classify(service_id(4420), nvme) == "NVMe-oF/RDMA"
    assert classify(service_id(4421), nvme) == "NVMe-oF/RDMA"   # nvmet listens anywhere
    assert classify(service_id(4420), bytes(32)) == "other"     # NVMe's port, not its data
    assert classify(service_id(9999), bytes.fromhex("f6ab0e1801000404")) == "NFS/RDMA"
    assert classify(service_id(3260), bytes(32)) == "iSER"
    assert classify(service_id(5445), bytes(32)) == "SMB Direct"
    srp = bytearray(64)                  # srp_login_req: opcode 0, req_buf_fmt at 24
    srp[24:26] = (0x0006).to_bytes(2, "big")
    assert classify(0x0002C90300ABCDEF, bytes(srp)) == "SRP"
    assert classify(AF_IB_SERVICE_ID | 1234, bytes(64)) == "other"


#: a Lua heuristic that takes no frame, on the lists where the plugin has its own: with
#: any Lua heuristic on the CM private-data list, tshark 4.0 names "iser" in
#: frame.protocols of the iSER CM REP (no iSER field); it is the baseline of that column
NULL_HEURISTIC = """
local p = Proto("nothing", "takes no frame")
local function none(tvb, pinfo, tree) return false end
p:register_heuristic("infiniband.mad.cm.private", none)
p:register_heuristic("infiniband.payload", none)
"""


def test_plugin_leaves_other_protocols_to_wireshark(mixes, tmp_path):
    """tshark's decode of the other protocols' frames with the RTRS plugin: the same
    fields as without it, and the same protocol layers as with a heuristic that takes
    nothing."""
    mixed = mixes["mixed"]
    fields = ("frame.number", "frame.protocols", "infiniband.bth.destqp", "_ws.col.Info",
              "nvme.cmd.opc", "nvme.cmd.cid", "nvme.cqe.cid", "nvme-rdma.cmd.qid",
              "nvme-rdma.cm.req.qid",
              "nvme-rdma.cm.rsp.crqsize", "iser.flags", "iser.ird", "iscsi.opcode",
              "rpcordma.xid", "rpc.xid", "nfs.procedure_v3", "smb_direct.version.max",
              "smb_direct.max_receive_size", "_ws.malformed", "_ws.lua.error")
    null = tmp_path / "nothing.lua"
    null.write_text(NULL_HEURISTIC)
    crafted = set(mixed.crafted)

    def decode(lua):
        return [r for r in tshark_fields(mixed.path, *fields, lua=lua) if int(r[0]) in crafted
                and int(r[2], 16) not in NOISE_QPNS]

    plugin, without, baseline = decode(LUA), decode(None), decode(null)
    assert plugin == baseline
    assert [r[:1] + r[2:] for r in plugin] == [r[:1] + r[2:] for r in without]
    assert len(plugin) == len(crafted) - 800
    decoded = {name: sum(1 for r in without if name in r[1].split(":"))
               for name in TSHARK_NAME.values()}
    assert all(decoded.values()), decoded


@pytest.mark.parametrize("first", [10, 100])
def test_the_plugin_proves_rtrs_without_a_handshake_as_the_analyzer_does(tmp_path, first):
    """docs/PROTOCOL.md#rtrs-without-a-handshake in both languages, on one capture:
    basic_inval.pcap from frame ``first`` on (its CM handshake is frames 1–9; frame 100
    is inside its IO) merged with random RDMA traffic between the same hosts (every
    opcode one way; WRITE WITH IMMEDIATE of random immediates, addresses and keys the
    other, with zero-length ones of response type among them): tshark with the plugin
    shows the requests, responses, links, errnos and RNBD messages the analyzer finds,
    all of them RTRS's frames."""
    rtrs = frames_of(real_pcap("basic_inval"))[first - 1:]
    noise = UlpCrafter(seed=5, start=rtrs[0][0] + 0.5)
    noise.random_rc(CLIENT, SERVER, 400, qpns=NOISE_QPNS[:2])
    noise.random_rc(SERVER, CLIENT, 400, qpns=NOISE_QPNS[2:],
                    opcodes=["RDMA_WRITE_ONLY_WITH_IMMEDIATE"])
    bare_responses = [f for f in noise.frames if len(f[1]) == BTH_AT + 12 + 16 + 4 + 4
                      and f[1][BTH_AT + 28] >> 4 in (1, 2)]     # BTH, RETH, ImmDt, ICRC
    assert bare_responses       # what a rule by the immediate's type alone would take
    mix = Mix(tmp_path, rtrs, noise.frames, "no_rtrs_handshake.pcap")
    shown, want = plugin_messages(plugin_view(mix.path)), analyzer_messages(mix.path)
    for what in ("requests", "responses", "links", "errnos", "rnbd", "rkeys"):
        assert shown[what] == want[what], what
    assert want["requests"] and set(want["requests"]) | set(want["responses"]) <= set(mix.numbers)
