"""The RNBD view of a session (analysis/rnbd_view.py) against the RNBD headers
decoded independently with the Scapy layers from every request's last packet,
and failed IOs against the kernel's own "I/O error … sector N" log lines; the end
sector of an IO, the block layer's rule, where the views use it."""

import re
from collections import Counter

import numpy as np
import pytest
from scapy.layers.l2 import Ether
from scapy.utils import RawPcapReader

import rtrs_scapy as R
from conftest import REAL_ALL, real_pcap, real_truth
from test_inputs import frames_of, write_pcap
from rtrs_scapy.analysis import analyze, iorows, split
from rtrs_scapy.analysis.rnbd_view import _Device
from rtrs_scapy.report.messages import _overlaps as overlaps
from rtrs_scapy.report.view import DeviceView
from rtrs_scapy.spec.constants import RNBD_OP_READ, rnbd_end_sector
from rtrs_scapy.layers.rtrs_request import split_read

SMALL = [name for name, _, truth in REAL_ALL if truth["pcap_stats"]["frames"] < 20000]
OPS = {0: "read", 1: "write", 2: "flush", 3: "discard", 4: "secure_erase", 5: "write_zeroes"}
OP_CODES = {name: code for code, name in OPS.items()}
CONTROL = {R.RNBD_MSG_SESS_INFO: "sess_info", R.RNBD_MSG_OPEN: "open",
           R.RNBD_MSG_CLOSE: "close"}


#: the BTH opcodes with an immediate (SEND and RDMA WRITE, LAST and ONLY)
IMM_OPCODES = {0x03, 0x05, 0x09, 0x0B}


def with_immediate(frame):
    """Whether a RoCEv2 frame (Ethernet, IPv4, UDP 4791: the real captures) has a BTH
    opcode with an immediate: only those frames go through the Scapy layers."""
    if len(frame) < 43 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
        return False
    udp = 14 + (frame[14] & 0xF) * 4
    return frame[udp + 2:udp + 4] == b"\x12\xb7" and frame[udp + 8] in IMM_OPCODES


def rnbd_headers(pcap):
    """(frame, RNBD message) of every request: a write ends with its user header and
    the 4-byte trailer (type 2, usr_len); a read is usr | rdma_read | descriptors."""
    found = []
    for number, (raw, _meta) in enumerate(RawPcapReader(str(pcap)), 1):
        if not with_immediate(raw):
            continue
        pkt = Ether(raw)
        if R.ImmDt not in pkt or pkt[R.ImmDt].imm >> 28 != R.RTRS_IO_REQ_IMM:
            continue
        payload = bytes(pkt[R.ImmDt].payload)
        if R.IBPad in pkt:
            payload = payload[:len(payload) - len(pkt[R.IBPad].pad)]
        kind, usr_len = int.from_bytes(payload[-4:-2], "little"), \
            int.from_bytes(payload[-2:], "little")
        if kind == R.RTRS_MSG_WRITE:
            usr = payload[-4 - usr_len:-4]
        else:
            usr = payload[:split_read(payload)[0]]
        found.append((number, R.RnbdMsgHdr(usr)))
    return found


@pytest.mark.parametrize("name", SMALL)
def test_rnbd_ops_and_control_equal_the_headers(name):
    headers = rnbd_headers(real_pcap(name))
    # every request on the wire (the recording's count of IO_REQ immediates)
    assert len(headers) == real_truth(name)["checks"]["pcap_io_req"]
    ops, sizes, control = Counter(), Counter(), Counter()
    for _, msg in headers:
        if isinstance(msg, R.RnbdMsgIo):
            op = OPS[msg.rw & R.RNBD_OP_MASK]
            ops[op] += 1
            sizes[op] += msg.bi_size
        else:
            control[CONTROL[msg.type]] += 1
    summary = analyze(real_pcap(name), keep_messages=False).summary
    got_ops, got_sizes, got_control = Counter(), Counter(), Counter()
    for session in summary["sessions"]:
        for op, stats in session["rnbd"]["ops"].items():
            got_ops[op] += stats["count"]
            got_sizes[op] += stats["bytes"]
        for kind, stats in session["rnbd"]["control"].items():
            got_control[kind] += stats["count"]
    assert got_ops == ops
    assert got_sizes == sizes
    assert +got_control == control
    for session in summary["sessions"]:      # per device, the ops add up to the session's
        by_device = Counter()
        for device in session["rnbd"]["devices"].values():
            for op, stats in device["ops"].items():
                by_device[op] += stats["count"]
        assert by_device == Counter({op: s["count"] for op, s in session["rnbd"]["ops"].items()})


def test_failed_io_sectors_equal_the_kernel_log():
    truth = real_truth("errors")
    logged = Counter()
    for line in truth["kernel_log"]["client"]:
        hit = re.search(r"I/O error, dev (\w+), sector (\d+) op 0x\d+:\((\w+)\)", line)
        if hit:
            logged[(int(hit.group(2)), hit.group(3).lower())] += 1
    summary = analyze(real_pcap("errors"), keep_messages=False).summary
    failed = Counter((e["sector"], e["rnbd_op"]) for s in summary["sessions"]
                     for p in s["paths"] for e in p["errors"] if e.get("rnbd") == "io")
    assert failed == logged and sum(logged.values()) == 3


def test_devices_sizes_and_modes_of_the_errors_capture():
    """lab1 maps a loop device read-write (shrunk from 16384 to 8192 sectors by the
    scenario, seen at the next OPEN) and a ram disk read-only (truth.json maps)."""
    truth = real_truth("errors")
    summary = analyze(real_pcap("errors"), keep_messages=False).summary
    lab1 = next(s for s in summary["sessions"] if s["sessname"] == "lab1")
    devices = {d["name"]: d for d in lab1["rnbd"]["devices"].values()}
    mapped = {m["opts"].split("device_path=")[1].split()[0]: m for m in truth["maps"]
              if "sessname=lab1" in m["opts"]}
    assert set(devices) == set(mapped)
    assert devices["/dev/loop0"]["nsectors"] == 16384
    assert [c["nsectors"] for c in devices["/dev/loop0"]["size_changes"]] == [8192]
    assert devices["/dev/ram1"]["access_mode"] == "ro"
    assert "access_mode=ro" in mapped["/dev/ram1"]["opts"]


# -- the end sector of an IO: one rule (spec.constants.rnbd_end_sector) ------------------

def bio_end_sector(sector, bi_size):
    """include/linux/bio.h, written out here: bi_sector + (bi_size >> 9); the server gives
    its bio the message's sector and bi_size unchanged (process_rdma(), rnbd-srv.c)."""
    return sector + (bi_size >> 9)


#: (sector, bi_size): whole sectors, the kernel's error sector, a sector's worth less and
#: more, nothing, the largest bi_size
END_VECTORS = [(0, 4096), (14336, 4096), (8, 512), (8, 511), (8, 513), (8, 0), (8, 1),
               (2 ** 40, 2 ** 32 - 1)]


def test_end_sector_is_the_block_layers():
    assert [rnbd_end_sector(s, n) for s, n in END_VECTORS] == \
        [bio_end_sector(s, n) for s, n in END_VECTORS] == \
        [8, 14344, 9, 8, 9, 8, 8, 2 ** 40 + 8388607]
    sectors = np.array([s for s, _ in END_VECTORS], dtype=np.uint64)
    sizes = np.array([n for _, n in END_VECTORS], dtype=np.uint32)
    assert rnbd_end_sector(sectors, sizes).tolist() == \
        [bio_end_sector(s, n) for s, n in END_VECTORS]


@pytest.mark.parametrize("sector,bi_size", END_VECTORS)
def test_the_sector_filter_the_access_pattern_and_the_device_extent_use_it(sector, bi_size):
    """messages --sector FROM-TO keeps an IO that covers one of FROM..TO; the RNBD view
    calls the next IO sequential when it starts at the end; the report's device reaches
    the end when the OPEN reply is not in the capture."""
    end = bio_end_sector(sector, bi_size)
    io = {"msg": "io", "rw": RNBD_OP_READ, "sector": sector, "bi_size": bi_size}
    for first in (sector - 1, sector, end - 1, end):
        for last in (first, first + 1):
            covered = any(sector <= s < end for s in range(first, last + 1))
            assert overlaps(io, (first, last)) is covered, (first, last)
    device = _Device()
    device.pattern(np.array([sector, end, end + 2], dtype=np.uint64),   # a sector skipped
                   np.array([bi_size, 512, 512], dtype=np.uint32))
    assert device.sequential == 1 and device.last_end == end + 3
    extent = DeviceView(None, 0, None, {}, {"sector": np.array([sector], dtype=np.uint64),
                                            "bi_size": np.array([bi_size], dtype=np.uint32)})
    assert extent.sectors == end


def answered_io_of_sessions(capture):
    """The IO rows of ``capture``, the mask of the answered RNBD IO ones (the copy of a
    failed-over IO, not its original), and each summary session with that mask for
    its own paths."""
    batches = []
    result = analyze(capture, keep_messages=False, io_sink=batches.append)
    rows = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
    answered = (rows["outcome"] == iorows.ANSWERED) & (rows["failed_over"] == 0) \
        & (rows["rnbd_type"] == R.RNBD_MSG_IO)
    labels = {s.label: s for s in result.analyzer.sessions.values()}
    return rows, answered, [
        (session, answered & np.isin(rows["path"],
                                     [p.id for p in labels[session["label"]].paths]))
        for session in result.summary["sessions"]]


def assert_device_timings_are_the_io_rows(capture):
    """A device op's latencies and split parts are those of its answered IO rows, the
    parts the capture cannot tell left out (kept side by side in one array); how many
    parts were left out."""
    rows, answered, sessions = answered_io_of_sessions(capture)
    parts = split.parts_ns(rows)
    checked = 0
    for session, mine in sessions:
        for device_id, device in session["rnbd"]["devices"].items():
            for op, stats in device["ops"].items():
                ours = mine & (rows["device_id"] == int(device_id)) \
                    & (rows["rnbd_op"] == OP_CODES[op])
                assert stats["latency_us"]["count"] == np.count_nonzero(ours)
                if np.any(ours):
                    assert stats["latency_us"]["max"] == round(
                        rows["latency_ns"][ours].max() / 1e3, 1)
                for part, values in parts.items():
                    known = values[ours & (values >= 0)]
                    assert stats["split_us"][part]["count"] == len(known)
                    if len(known):
                        assert stats["split_us"][part]["min"] == round(known.min() / 1e3, 1)
                checked += 1
    assert checked
    return sum(int(np.count_nonzero(answered & (values < 0))) for values in parts.values())


def nearest_rank(values, pct):
    """The nearest-rank percentile, in µs as the summary rounds it."""
    ordered = np.sort(values)
    return round(ordered[max(1, -(-pct * len(ordered) // 100)) - 1] / 1e3, 1)


@pytest.mark.parametrize("name", SMALL)
def test_session_timings_are_its_devices_io_rows_together(name):
    """A session's op figures are its answered IO rows of that op, whatever device:
    one device's own figures, or several devices' joined (errors and discard have
    two)."""
    rows, _, sessions = answered_io_of_sessions(real_pcap(name))
    checked = 0
    for session, mine in sessions:
        for op, stats in session["rnbd"]["ops"].items():
            ours = rows["latency_ns"][mine & (rows["rnbd_op"] == OP_CODES[op])]
            latency = stats["latency_us"]
            assert latency["count"] == len(ours)
            if len(ours):
                assert (latency["min"], latency["max"]) == (round(ours.min() / 1e3, 1),
                                                            round(ours.max() / 1e3, 1))
                assert (latency["p50"], latency["p90"], latency["p99"]) == tuple(
                    nearest_rank(ours, pct) for pct in (50, 90, 99))
            checked += len(session["rnbd"]["devices"]) > 1
    assert checked or name not in ("errors", "discard")


@pytest.mark.parametrize("name", SMALL)
def test_device_timings_are_the_io_rows(name):
    assert_device_timings_are_the_io_rows(real_pcap(name))


def test_device_timings_leave_out_the_parts_a_cut_capture_cannot_tell(tmp_path):
    """basic_inval from frame 75: a write whose first packets precede the capture is
    answered, its request and wire time unknown."""
    cut = write_pcap(tmp_path / "cut.pcap", frames_of(real_pcap("basic_inval"))[74:])
    assert assert_device_timings_are_the_io_rows(cut) == 2
