"""Failover, reconnects, rejects and disconnects as the kernel counts them and as
Wireshark's own InfiniBand dissector shows them.

* real captures (pcaps/real/): per path, successful and failed reconnects and
  failovers against the client's sysfs counters are in tests/test_truth.py, with the
  path's requests and bytes;
* real and crafted captures: every CM REJ tshark decodes is a reject with its
  sender and reason, every DREQ sender is an initiator of the path's disconnects,
  and the CM messages tshark sees again with the same comm IDs are exactly the
  ``cm_retransmissions``; the same on captures cut in the middle;
* crafted fixtures of the failure sequences: failover latency from the first
  send, failover delay apart, connections established without RTU, the REJ record
  of ``messages``.
"""

import functools
import gzip
import json
import struct
import subprocess
import tempfile

import numpy as np
import pytest
from scapy.utils import RawPcapReader

from rtrs_scapy.analysis import analyze
from rtrs_scapy.analysis.io import first_after_an_answer
from rtrs_scapy.craft import craft_scenario, write_capture
from rtrs_scapy.layers.cm import CMRtu, cm_attribute_ids, cm_rej_reasons

from conftest import PROJECT_PCAPS, REAL_ALL
from cut_points import cm_covering
from test_truth import kernel_paths
from ib_decode import bth_rows, cm_rows

CM_ATTR = {name: attr for attr, name in cm_attribute_ids.items()}
ROCEV2_CORPUS = sorted(
    p.name[:-len(".truth.json")] for p in PROJECT_PCAPS.glob("*.truth.json")
    if json.loads(p.read_text())["config"]["encap"].startswith("RoCEv2"))
REAL_NAMES = [name for name, _, _ in REAL_ALL]
REAL_PCAP = {name: pcap for name, pcap, _ in REAL_ALL}
REAL_TRUTH = {name: truth for name, _, truth in REAL_ALL}


@functools.lru_cache(maxsize=None)
def summary_of(pcap):
    return analyze(str(pcap), keep_messages=False).summary


def paths_of(summary):
    return [p for session in summary["sessions"] for p in session["paths"]]


# -- tshark's view of the CM exchange ------------------------------------------

@functools.lru_cache(maxsize=None)
def tshark_cm(pcap):
    """Every CM MAD: dicts of tshark_util.CM_FIELDS (the source address under "src")."""
    rows = []
    for row in cm_rows(pcap):
        row = dict(row)
        row["frame"] = int(row["frame.number"])
        row["src"] = row["ip.src"] or row["ipv6.src"]
        row["attr"] = int(row["infiniband.mad.attributeid"], 16)
        rows.append(row)
    return rows


def first_sends(rows, attr, *key_fields):
    """The MADs of one attribute sent for the first time: (frame, row) per key; the
    others (same sender, same comm IDs) are retransmissions."""
    seen = {}
    for row in rows:
        if row["attr"] == attr:
            seen.setdefault((row["src"],) + tuple(row[f] for f in key_fields), row)
    return list(seen.values())


def retransmissions(rows):
    """REQ, REP, REJ and DREQ sent again by the same side with the same comm IDs."""
    count = 0
    for name, fields in (("ConnectRequest", ("infiniband.cm.req",)),
                         ("ConnectReply", ("infiniband.cm.rep",)),
                         ("ConnectReject", ("infiniband.cm.rej.localcommid",
                                            "infiniband.cm.rej.remotecommid")),
                         ("DisconnectRequest", ("infiniband.cm.dreq.localcommid",))):
        attr = CM_ATTR[name]
        count += sum(1 for r in rows if r["attr"] == attr) - len(first_sends(rows, attr, *fields))
    return count


def check_against_tshark(pcap):
    """Rejects, disconnect initiators and CM retransmissions of the analyzer against
    tshark's CM fields of the same capture."""
    summary = summary_of(pcap)
    rows = tshark_cm(pcap)
    paths = paths_of(summary)
    address = {"client": 0, "server": 1}
    # every REJ: frame, sender and IBTA reason
    # a REJ of an attempt whose REQ is not in the capture (cut away: the REJ names the
    # REQ's comm ID as its local one when the client sends it, as its remote one when the
    # server does) and without RTRS data (a conn_rsp) cannot be told to be RTRS
    # (test_wireshark_diff.py: the same rule for the plugin); every other REJ is a reject
    requested = {r["infiniband.cm.req"] for r in rows if r["attr"] == CM_ATTR["ConnectRequest"]}
    rejs = [r for r in first_sends(rows, CM_ATTR["ConnectReject"],
                                   "infiniband.cm.rej.localcommid",
                                   "infiniband.cm.rej.remotecommid")
            if {r["infiniband.cm.rej.localcommid"], r["infiniband.cm.rej.remotecommid"]}
            & requested or r["infiniband.cm.rej.private"].startswith("bd1b")]
    want = sorted((r["frame"], r["src"], int(r["infiniband.cm.rej.reason"], 16)) for r in rejs)
    got = sorted((j["frame"], p["endpoints"][address[j["sender"]]], j["reason"])
                 for p in paths for j in p["rejects"])
    assert got == want
    for p in paths:
        for j in p["rejects"]:
            assert j["reason_name"] == cm_rej_reasons[j["reason"]]
    # one disconnect per teardown (the DREQs of a path between two connect attempts),
    # started by the first DREQ's sender; the other side's first DREQ is its answer
    # when that side had sent a DREP before it, else the disconnect is crossed
    # (docs/PROTOCOL.md#one-teardown-one-disconnect)
    dreqs = first_sends(rows, CM_ATTR["DisconnectRequest"], "infiniband.cm.dreq.localcommid")
    dreps = [r for r in rows if r["attr"] == CM_ATTR["DisconnectReply"]]
    reqs = [r["frame"] for r in first_sends(rows, CM_ATTR["ConnectRequest"], "infiniband.cm.req")]
    want, got = [], []
    pairs = {tuple(p["endpoints"]): p for p in paths}   # sessions may share the addresses
    for p in pairs.values():
        ends = set(p["endpoints"])
        side = {p["endpoints"][0]: "client", p["endpoints"][1]: "server"}
        mine = sorted((r for r in dreqs if r["src"] in ends), key=lambda r: r["frame"])
        teardowns = []
        for r in mine:
            since = max([f for f in reqs if f < r["frame"]], default=0)
            if not teardowns or teardowns[-1][0] != since:
                teardowns.append((since, [r]))
            else:
                teardowns[-1][1].append(r)
        for since, group in teardowns:
            first = group[0]
            other = next((r for r in group if r["src"] != first["src"]), None)
            crossed = other is not None and not any(
                d["src"] == other["src"] and first["frame"] < d["frame"] < other["frame"]
                for d in dreps)
            want.append((first["frame"], side[first["src"]], crossed))
    got = [(d["frame"], d["initiator"], d["crossed"]) for p in paths for d in p["disconnects"]]
    assert sorted(got) == sorted(want)
    assert summary["capture"]["cm_retransmissions"] == retransmissions(rows)
    return summary


# -- real captures (their kernel counters: test_truth.test_every_paths_kernel_counters) --

@pytest.mark.parametrize("name", REAL_NAMES)
def test_real_cm_exchange_equals_tshark(name):
    check_against_tshark(REAL_PCAP[name])


def test_real_errors_capture_story():
    """errors.pcap (Linux 6.1): the REJ reason 8 of session labrej (nothing listens on
    port 4321), the sysfs reconnect of lab1, the server's disconnect and the automatic
    reconnect ~30 s later (RNBD reconnect_delay_sec), and the unmap: the client's DREQ
    (frame 418) that the server answers with a DREP (419) and later a DREQ of its own
    (423) is one disconnect started by the client, not crossed."""
    summary = summary_of(REAL_PCAP["errors"])
    by_name = {s["sessname"]: s["paths"][0] for s in summary["sessions"]}
    (reject,) = by_name[None]["rejects"]
    assert (reject["sender"], reject["reason"], reject["reason_name"], reject["errno"]) == \
        ("server", 8, "Invalid Service ID", None)
    lab1 = by_name["lab1"]
    sysfs, server = [o for o in lab1["outages"]]
    assert (sysfs["cause"], server["cause"]) == ("client_disconnect", "server_disconnect")
    assert sysfs["duration_s"] < 2 and 30 < server["duration_s"] < 33
    assert [(d["frame"], d["initiator"], d["crossed"], d["answered_by"])
            for d in lab1["disconnects"]] == \
        [(248, "client", False, None), (318, "server", False, None),
         (418, "client", False, "server")]
    cm_kinds = ("connect", "outage", "reconnect", "reconnect_failed", "reject")
    assert [e["kind"] for e in lab1["events"] if e["kind"] in cm_kinds] == \
        ["connect", "outage", "reconnect", "outage", "reconnect"]


def test_real_remove_path():
    """multipath.pcap: remove_path of the second path is a disconnect, no outage and no
    reconnect; the unmap closes the first path: one disconnect by the client, answered
    by the server's DREQs (1082/1083) after its DREP (1081)."""
    first, second = paths_of(summary_of(REAL_PCAP["multipath"]))
    assert [(d["initiator"], d["crossed"]) for d in second["disconnects"]] == [("client", False)]
    assert [(d["frame"], d["initiator"], d["crossed"], d["answered_by"], d["answer_frame"])
            for d in first["disconnects"]] == [(1080, "client", False, "server", 1082)]
    assert first["outages"] == second["outages"] == []


# -- captures cut in the middle: disconnects from CM messages alone -------------------

def _cut(src, dst, first):
    frames = [(meta.sec + meta.usec / 1e6, data)
              for i, (data, meta) in enumerate(RawPcapReader(str(src)), 1) if i >= first]
    write_capture(dst, frames)
    return dst


#: where errors and multipath are cut (tests/cut_points.py, ``cm_situations``): a cut
#: leaves each CM exchange whole, cuts through it (a REJ, a REP and RTU, an RTU, a DREP
#: left alone), or drops it; a DREQ left may have crossed one of the other side's that
#: is cut away.  These cuts together have every exchange cut through and every kind of
#: exchange left whole (connect, reject, disconnect with or without its answer, crossed
#: or not) that any cut of the capture has, each cut one that no other has (every 50th
#: and 200th frame made 12 cuts in 5 of the two captures' 30 CM situations).
CM_CUTS = {"errors": (2, 320, 331, 332, 418, 423, 424),
           "multipath": (28, 29, 30, 754, 1085, 1088)}


def test_the_cm_cuts_cover_the_cm_situations():
    """CM_CUTS, fixed for the test ids, computed again here."""
    assert {name: tuple(cm_covering(REAL_PCAP[name])) for name in CM_CUTS} == CM_CUTS


@pytest.mark.parametrize("name,first", [(name, cut) for name, cuts in CM_CUTS.items()
                                        for cut in cuts])
def test_cut_real_capture_cm_equals_tshark(tmp_path, name, first):
    check_against_tshark(_cut(REAL_PCAP[name], tmp_path / "cut.pcap", first))


def test_mid_session_server_dreqs(tmp_path):
    """server_hb_loss cut after the handshake: the server's DREQs (and the ones it sends
    again) belong to the path known from IO, started by the server; the CM
    retransmissions those tshark's CM fields show."""
    packets, truth = craft_scenario("server_hb_loss", seed=5, mid_session=True)
    assert truth["capture_start"] is not None
    summary = analyze_packets(packets)
    (path,) = paths_of(summary)
    assert path["sess_uuid"] is None
    assert [(d["initiator"], d["crossed"]) for d in path["disconnects"]] == \
        [(d["initiator"], d["crossed"]) for d in truth["paths"][0]["disconnects"]]
    pcap = tmp_path / "server_hb_loss.pcap"
    write_capture(pcap, packets)
    assert summary["capture"]["cm_retransmissions"] == retransmissions(tshark_cm(pcap)) > 0


# -- crafted fixtures -----------------------------------------------------------------

@pytest.mark.parametrize("name", ROCEV2_CORPUS)
def test_corpus_cm_exchange_equals_tshark(name):
    check_against_tshark(PROJECT_PCAPS / name)


def analyze_packets(packets):
    with tempfile.TemporaryDirectory() as tmp:
        path = tmp + "/x.pcap"
        write_capture(path, packets)
        return analyze(path, keep_messages=False).summary


def test_failover_latency_from_the_first_send():
    """failover_inflight: the requests re-sent on path 0 count there (failover_cnt); the
    latency of each runs from its first send on path 1, the failover delay is the time
    from the first send to the re-send, as the crafter's truth has them."""
    pcap = PROJECT_PCAPS / "failover_inflight.pcap"
    truth = json.loads((PROJECT_PCAPS / "failover_inflight.pcap.truth.json").read_text())
    result = analyze(str(pcap))
    first = {r["frame"]: r for r in result.messages}
    moved = [r for r in result.messages if "failover_from" in r["fields"]]
    assert len(moved) == truth["paths"][0]["kernel"]["failover_cnt"] == 4
    for rec in moved:
        original = first[rec["fields"]["failover_from"]]
        answer = first[rec["paired_frame"]]
        assert original["fields"]["buf_id"] == rec["fields"]["buf_id"]
        assert rec["latency"] == pytest.approx(answer["time"] - original["time"])
    unanswered = {io["buf_id"]: io for io in truth["ios"] if io["errno"] is None}
    delays = sorted(round((io["t"] - unanswered[io["buf_id"]]["t"]) * 1e6, 1)
                    for io in truth["ios"] if io["failover"])
    path0 = paths_of(result.summary)[0]
    assert path0["failover_delay_us"]["count"] == len(delays)
    # the truth has the first packet of each send, the analyzer the immediate's (last)
    assert path0["failover_delay_us"]["min"] == pytest.approx(delays[0], abs=50)
    assert path0["failover_delay_us"]["max"] == pytest.approx(delays[-1], abs=50)


def test_connection_established_by_traffic_without_rtu():
    """Without any RTU in the capture, the first RC packets on the QPs establish the
    connections: the reconnect of multipath_failover still counts."""
    packets, truth = craft_scenario("multipath_failover", seed=2)
    summary = analyze_packets([p for p in packets if CMRtu not in p])
    second = paths_of(summary)[1]
    assert second["reconnects"] == truth["paths"][1]["kernel"]["reconnects"]["successful"] == 1
    assert {c["state"] for c in second["connections"]} == {"disconnected"}


def test_reject_records_of_messages():
    """The conn_rej message records carry what the rejects say (``messages --errors``)."""
    result = analyze(str(PROJECT_PCAPS / "reconnect_third_try.pcap"))
    (path,) = paths_of(result.summary)
    records = [r for r in result.messages if r["msg"] == "conn_rej"]
    keys = ("frame", "sender", "reason", "reason_name", "errno", "name", "attempt_frame")
    assert [{k: r["fields"][k] if k != "frame" else r["frame"] for k in keys}
            for r in records] == [{k: j[k] for k in keys} for j in path["rejects"]]
    assert [(j["sender"], j["name"]) for j in path["rejects"]] == \
        [("client", "Timeout"), ("server", "ECONNRESET")]


def test_rej_reasons_are_the_kernel_enum():
    """cm_rej_reasons is numbered like enum ib_cm_rej_reason (include/rdma/ib_cm.h)."""
    kernel = {"IB_CM_REJ_NO_QP": 1, "IB_CM_REJ_TIMEOUT": 4, "IB_CM_REJ_INVALID_COMM_ID": 6,
              "IB_CM_REJ_INVALID_SERVICE_ID": 8, "IB_CM_REJ_STALE_CONN": 10,
              "IB_CM_REJ_PORT_CM_REDIRECT": 24, "IB_CM_REJ_PORT_REDIRECT": 25,
              "IB_CM_REJ_INVALID_MTU": 26, "IB_CM_REJ_CONSUMER_DEFINED": 28,
              "IB_CM_REJ_DUPLICATE_LOCAL_COMM_ID": 30, "IB_CM_REJ_INVALID_CLASS_VERSION": 31,
              "IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED": 35}
    assert sorted(cm_rej_reasons) == list(range(1, 34)) + [35]
    names = {code: cm_rej_reasons[code] for code in kernel.values()}
    assert names == {1: "No QP available", 4: "Timeout", 6: "Invalid Communication ID",
                     8: "Invalid Service ID", 10: "Stale Connection",
                     24: "Port and CM Redirection", 25: "Port Redirection",
                     26: "Invalid Path MTU", 28: "Consumer Reject",
                     30: "Duplicate Local Communication ID", 31: "Invalid Class Version",
                     35: "Vendor Option Not Supported"}


# -- the real failover capture (Linux 6.1.176) -----------------------------------------

def test_real_failover_one_disconnect_per_teardown():
    """failover.pcap: the unmap's client DREQ (187570), the server's DREP (187571) and
    then its own DREQs (187572, 187575) are one disconnect started by the client; path
    10.77.1.2 lost its client NIC, so its only disconnect on the wire is the server's
    (186660: the client's DREQs went out of the dead NIC); no heartbeat gap spans the
    outage and the disconnects."""
    paths = {p["client"]: p for p in paths_of(summary_of(REAL_PCAP["failover"]))}
    assert [(d["frame"], d["initiator"], d["crossed"], d["answered_by"], d["answer_frame"])
            for d in paths["10.77.0.2"]["disconnects"]] == \
        [(187570, "client", False, "server", 187572)]
    assert [(d["frame"], d["initiator"], d["crossed"])
            for d in paths["10.77.1.2"]["disconnects"]] == [(186660, "server", False)]
    for path in paths.values():
        assert not [e for e in path["events"] if e["kind"] == "heartbeat_gap"]


def test_real_failover_outage_starts_at_the_stall():
    """failover.pcap, path 10.77.1.2: the client's NIC went down after its last frame on
    the wire; the server's next transmission is never acknowledged and tshark shows it
    again (same destination, QP and PSN): the stall, and the start of the outage, ~30 s
    before the kernel's heartbeat verdict (frame 22753, +35.329 s)."""
    rc = [(row.frame, row.src, row.destqp, row.psn) for row in bth_rows(REAL_PCAP["failover"])
          if row.opcode is not None and row.opcode < 100 and "10.77.1.2" in (row.src, row.dst)]
    last_client = max(f for f, src, _, _ in rc if src == "10.77.1.2")
    seen, again = {}, set()
    for frame, src, qp, psn in rc:
        if (src, qp, psn) in seen:
            again.add(seen[(src, qp, psn)])
        seen.setdefault((src, qp, psn), frame)
    want = min(f for f in again if f > last_client)
    path = {p["client"]: p for p in paths_of(summary_of(REAL_PCAP["failover"]))}["10.77.1.2"]
    (stall,) = path["stalls"]
    assert (stall["frame"], stall["sender"]) == (want, "server") == (22153, "server")
    assert stall["retransmissions"] == path["transport"]["retransmissions"]
    (outage,) = path["outages"]
    assert (outage["down_frame"], outage["verdict_frame"], outage["cause"]) == \
        (22153, 22753, "heartbeat_lost")
    assert 29 < outage["verdict_time"] - outage["down_time"] < 31
    kinds = [e["kind"] for e in path["events"]]
    assert kinds.index("stall") < kinds.index("heartbeat_lost") < kinds.index("disconnect")


def test_real_failovers_are_the_slow_ios_of_the_workload():
    """failover.pcap: the eight failovers on path 10.77.0.2 are the eight IOs the
    workload saw wait 0.36-0.44 s (truth.json ios[], by sector and size): four re-send a
    request answered on 10.77.1.2 whose answer the client never acknowledged (same buf_id
    and RNBD header), four fit the kernel's failover order of permits (their originals
    never reached the wire).  The RNBD view counts each block IO once."""
    truth = REAL_TRUTH["failover"]
    waits = sorted(truth["ios"], key=lambda io: io["t1"] - io["t0"])
    slow = waits[-8:]
    assert waits[-9]["t1"] - waits[-9]["t0"] < 0.1 < slow[0]["t1"] - slow[0]["t0"]
    want = sorted((io["off"] // 512, io["size"], io["op"]) for io in slow)
    summary = summary_of(REAL_PCAP["failover"])
    paths = {p["client"]: p for p in paths_of(summary)}
    taker = paths["10.77.0.2"]
    got = sorted((f["sector"], f["bi_size"], f["op"]) for f in taker["failover_list"])
    assert got == want
    assert taker["failovers"] == len(taker["failover_list"]) == 8
    assert taker["failovers_unseen"] == 4
    seen = {f["original_frame"]: f for f in taker["failover_list"] if f["original_frame"]}
    assert sorted(seen) == [22117, 22118, 22119, 22120]
    assert seen[22117]["frame"] == 22338 and seen[22117]["response_frame"] == 22154
    for f in seen.values():
        assert f["kind"] == "response_not_delivered" and f["original_path"] == "10.77.1.2"
        assert 0.36e6 < f["wait_us"] < 0.44e6 and f["delay_us"] <= f["wait_us"]
        assert "executed_twice" not in f          # reads
    assert paths["10.77.1.2"]["failovers"] == 0
    reads = sum(1 for io in truth["ios"] if io["op"] == "read")
    writes = sum(1 for io in truth["ios"] if io["op"] == "write")
    rnbd = summary["sessions"][0]["rnbd"]["ops"]
    assert rnbd["write"]["count"] == writes
    # the kernel's partition scan at map time (frames 59, 70, 81: 4 KiB reads of sectors
    # 0, 8 and 24) is not in the workload's log
    assert rnbd["read"]["count"] - reads == 3
    assert rnbd["read"]["count"] + rnbd["write"]["count"] == \
        sum(p["io"][op]["count"] for p in paths.values() for op in ("read", "write")) \
        - 4 - sum(summary["sessions"][0]["rnbd"]["control"][k]["count"]
                  for k in ("sess_info", "open", "close"))


def test_real_failovers_in_messages_rows_and_text():
    """The same eight failovers in the message records (and their text), the IO rows
    (failover_of, failed_over, delivered) and the text summary."""
    from rtrs_scapy.analysis import iorows
    from rtrs_scapy.report.messages import MessageView
    from rtrs_scapy.report.text import render
    batches = []
    result = analyze(str(REAL_PCAP["failover"]), io_sink=batches.append)
    rows = iorows.concat(batches)
    taker = {p["client"]: p for p in paths_of(result.summary)}["10.77.0.2"]
    records = taker["failover_list"]
    text = MessageView(result.summary, result.messages)
    by_frame = {r["frame"]: r for r in result.messages}
    for f in records:
        line = text.details(by_frame[f["frame"]])
        if f["original_frame"] is None:
            assert "failed over from 10.77.1.2 (original not on the wire)" in line
            continue
        assert "failed over from frame %d" % f["original_frame"] in line
        assert "response not delivered: re-sent in frame %d" % f["frame"] in \
            text.details(by_frame[f["original_frame"]])
        assert "not delivered" in text.details(by_frame[f["response_frame"]])
    index = {int(fr): k for k, fr in enumerate(rows["frame"].tolist())}
    for f in records:
        copy = index[f["frame"]]
        assert rows["failover_of"][copy] == (f["original_frame"] or -1)
        if f["original_frame"] is not None:
            original = index[f["original_frame"]]
            assert (rows["failed_over"][original], rows["delivered"][original]) == (1, 0)
            assert rows["outcome"][original] == iorows.ANSWERED
            assert rows["latency_ns"][copy] / 1e3 == pytest.approx(f["wait_us"])
    summary = render(result.summary)
    assert "failovers 8, 4 with the original not on the wire" in summary
    assert "failovers taken over (8):" in summary
    assert "frame 22338 (+5.276 s) buf_id 1 READ sector 55080, 4096 bytes: failed over from " \
        "frame 22117 on 10.77.1.2 (response frame 22154 not delivered)" in summary
    assert "stall from frame 22153 (+4.873 s)" in summary


def _frames(src, wanted):
    """{frame number: Scapy packet} of a (gzip) little-endian classic pcap."""
    from scapy.layers.l2 import Ether
    found = {}
    with (gzip.open(src) if str(src).endswith(".gz") else open(src, "rb")) as f:
        assert struct.unpack("<I", f.read(24)[:4])[0] == 0xa1b2c3d4
        for frame in range(1, max(wanted) + 1):
            data = f.read(struct.unpack("<I", f.read(16)[8:12])[0])
            if frame in wanted:
                found[frame] = Ether(data)
    return found


def test_real_failover_executed_twice_from_the_frames():
    """The RNBD view's writes executed twice on the server: the originals of the proven
    failovers that are write requests and whose response is on the wire, as Scapy decodes
    those frames (failover.pcap: four reads, none)."""
    from rtrs_scapy.layers.ib import ImmDt
    from rtrs_scapy.layers.rtrs_request import RtrsReadRequest, RtrsWriteRequest
    from rtrs_scapy.report.text import render
    summary = summary_of(REAL_PCAP["failover"])
    taker = {p["client"]: p for p in paths_of(summary)}["10.77.0.2"]
    proven = [f for f in taker["failover_list"] if f["original_frame"] is not None]
    assert len(proven) == 4
    frames = _frames(REAL_PCAP["failover"], {f["original_frame"] for f in proven}
                     | {f["response_frame"] for f in proven})
    twice = 0
    for f in proven:
        original, response = frames[f["original_frame"]], frames[f["response_frame"]]
        assert original.haslayer(RtrsReadRequest) or original.haslayer(RtrsWriteRequest)
        assert response[ImmDt].decoded().msg_id == f["buf_id"]
        twice += original.haslayer(RtrsWriteRequest)
    assert summary["sessions"][0]["rnbd"]["failovers"] == {
        "failed_over": 8, "original_not_on_wire": 4, "executed_twice": twice}
    assert "RNBD IO failed over: 8 (4 with the original not on the wire), each counted " \
        "once; executed twice on the server: %d writes" % twice in render(summary)


# -- failover.pcap cut before the failover: no handshake, the same story ---------------

#: frames where failover.pcap is cut: the queue depth rule of path 10.77.1.2 decides in
#: the capture (1000) or only at its end (22000: 117 frames before the first original)
FAILOVER_CUTS = (1000, 22000)


def _cut_pcap(src, dst, first):
    """Frames ``first`` … of a (gzip) little-endian classic pcap, written as a pcap."""
    with (gzip.open(src) if str(src).endswith(".gz") else open(src, "rb")) as f, \
            open(dst, "wb") as out:
        out.write(f.read(24))
        frame = 0
        while True:
            head = f.read(16)
            if len(head) < 16:
                return dst
            frame += 1
            data = f.read(struct.unpack("<I", head[8:12])[0])
            if frame >= first:
                out.write(head + data)


@pytest.mark.parametrize("first", FAILOVER_CUTS)
def test_real_failover_cut_before_the_failover(tmp_path, first):
    """failover.pcap cut after the handshakes: the two paths are linked into one session
    by the failovers (and path 10.77.1.2 by its failed reconnects), the streams paired by
    their ACKs; path 10.77.0.2 has the kernel's failover_cnt, the same failovers as the
    whole capture (frames shifted by the cut), path 10.77.1.2 the same stall (with its
    retransmissions) and outage start, both the same disconnects."""
    shift = first - 1
    whole = {p["client"]: p for p in paths_of(summary_of(REAL_PCAP["failover"]))}
    summary = analyze(str(_cut_pcap(REAL_PCAP["failover"], tmp_path / "cut.pcap", first)),
                      keep_messages=False).summary
    assert len(summary["sessions"]) == 1
    paths = {p["client"]: p for p in paths_of(summary)}
    (kernel,) = [stats["rdma"]["failover_cnt"] for (_, client, _), stats
                 in kernel_paths(REAL_TRUTH["failover"]).items() if client == "10.77.0.2"]

    def at(frame):
        return None if frame is None else frame + shift

    def failovers(path, moved=at):
        return [(moved(f["frame"]), moved(f["original_frame"]), moved(f["response_frame"]),
                 f["kind"], f["buf_id"], f["sector"], f["bi_size"], f["op"])
                for f in path["failover_list"]]
    assert paths["10.77.0.2"]["failovers"] == kernel == 8
    assert failovers(paths["10.77.0.2"]) == failovers(whole["10.77.0.2"], lambda f: f)
    assert paths["10.77.1.2"]["failovers"] == 0
    (stall,) = paths["10.77.1.2"]["stalls"]
    (want,) = whole["10.77.1.2"]["stalls"]
    assert (at(stall["frame"]), stall["sender"], stall["psn"], at(stall["acked_frame"])) == \
        (want["frame"], want["sender"], want["psn"], want["acked_frame"]) == \
        (22153, "server", 12725535, 22151)
    # the heartbeat stream, never acknowledged so never paired, counts on its path too
    assert stall["retransmissions"] == want["retransmissions"] == \
        paths["10.77.1.2"]["transport"]["retransmissions"] == \
        whole["10.77.1.2"]["transport"]["retransmissions"]
    (outage,) = paths["10.77.1.2"]["outages"]
    assert at(outage["down_frame"]) == 22153
    for client, path in paths.items():
        assert [(at(d["frame"]), d["initiator"], d["crossed"], d["answered_by"],
                 at(d["answer_frame"])) for d in path["disconnects"]] == \
            [(d["frame"], d["initiator"], d["crossed"], d["answered_by"], d["answer_frame"])
             for d in whole[client]["disconnects"]]
    assert summary["sessions"][0]["rnbd"]["failovers"] == {
        "failed_over": 8, "original_not_on_wire": 4, "executed_twice": 0}


# -- failover.pcap header-only or cut mid-session: the same IO rows --------------------

#: what the headers prove of an IO row (the RNBD header, the READ data's rkey and the
#: cid are in the cut payloads or handshakes); frames are shifted by a cut's start
ROW_PROOF = ("time_ns", "op", "buf_id", "bytes", "outcome", "response_ns", "latency_ns",
             "errno", "failed_over", "delivered", "response_first_ns")
ROW_FRAMES = ("frame", "response_frame", "failover_from", "failover_of")
#: (snaplen, first frame): cut by editcap to 128 and 256 bytes (the handshake lost), and
#: from frame 22000 on (117 frames before the first original: path 10.77.1.2's queue
#: depth rule decides only at the end of the capture), also at 128 bytes
ROW_CUTS = ((128, 1), (256, 1), (0, 22000), (128, 22000))


def _rows(pcap):
    """The IO rows of a capture by frame, and its summary."""
    from rtrs_scapy.analysis import iorows
    batches = []
    result = analyze(str(pcap), keep_messages=False, io_sink=batches.append)
    rows = iorows.concat(batches)
    return {int(f): k for k, f in enumerate(rows["frame"].tolist())}, rows, result.summary


@pytest.fixture(scope="module")
def uncut_rows():
    return _rows(REAL_PCAP["failover"])


@pytest.mark.parametrize("snaplen,first", ROW_CUTS, ids=["s%d-f%d" % c for c in ROW_CUTS])
def test_real_failover_cut_rows_equal_the_uncut(uncut_rows, tmp_path, snaplen, first):
    """The failed-over IOs' rows of a cut capture are those of the whole capture: each
    copy's latency from its original's first send (the ~0.41 s the workload saw, not the
    copy's own 1-42 ms) and ``failover_of`` its original, the original ``failed_over`` and
    not delivered; so is every other row whose request is whole in the cut.  Referees:
    the uncut capture, the kernel's failover_cnt and the workload's log (truth.json)."""
    src = REAL_PCAP["failover"]
    if first > 1:
        src = _cut_pcap(src, tmp_path / "mid.pcap", first)
    if snaplen:
        src = subprocess.run(["editcap", "-F", "pcap", "-s", str(snaplen), str(src),
                              str(tmp_path / "cut.pcap")], check=True) and tmp_path / "cut.pcap"
    index, rows, summary = _rows(src)
    whole_index, whole, whole_summary = uncut_rows
    shift = first - 1
    assert summary["capture"]["cut_records"] > 0 if snaplen else True
    taker = {p["client"]: p for p in paths_of(summary)}["10.77.0.2"]
    (kernel,) = [stats["rdma"]["failover_cnt"] for (_, client, _), stats
                 in kernel_paths(REAL_TRUTH["failover"]).items() if client == "10.77.0.2"]
    copies = [f for f in taker["failover_list"] if f["original_frame"] is not None]
    assert taker["failovers"] == kernel == 8 and len(copies) == 4
    waits = sorted(REAL_TRUTH["failover"]["ios"], key=lambda io: io["t1"] - io["t0"])
    slow = {(io["off"] // 512, io["size"]): io["t1"] - io["t0"] for io in waits[-8:]}
    whole_copies = {f["frame"]: f for p in paths_of(whole_summary) for f in p["failover_list"]}
    for f in copies:
        copy, original = index[f["frame"]], index[f["original_frame"]]
        want = whole_copies[f["frame"] + shift]
        assert rows["failover_of"][copy] + shift == want["original_frame"]
        assert (rows["failed_over"][original], rows["delivered"][original]) == (1, 0)
        assert rows["latency_ns"][copy] / 1e3 == pytest.approx(want["wait_us"])
        # the wire's wait lies within what the workload measured around it
        assert 0.36 < rows["latency_ns"][copy] / 1e9 <= slow[want["sector"], want["bi_size"]]
    whole_at = [whole_index[f + shift] for f in rows["frame"][rows["partial"] == 0].tolist()]
    mine = rows["partial"] == 0
    for column in ROW_PROOF:
        assert rows[column][mine].tolist() == whole[column][whole_at].tolist(), column
    for column in ROW_FRAMES:
        moved = [f + shift if f >= 0 else f for f in rows[column][mine].tolist()]
        assert moved == whole[column][whole_at].tolist(), column


def test_real_failover_rows_wait_within_a_bound(tmp_path, monkeypatch):
    """What waits for an undecided queue depth is bounded (settling.HOLD): beyond it the
    decided paths settle (their rows go out before the end of the capture), and the
    summary still finds the failovers at the end."""
    from rtrs_scapy.analysis import analyzer, settling
    monkeypatch.setattr(settling, "HOLD", 256)
    held, closing, before_end = [], [], []
    add, close = settling.SettleQueue.add, analyzer.Analyzer.close

    def watched(queue, batch):
        add(queue, batch)
        held.append(queue.held)

    def closed(an):
        closing.append(True)
        return close(an)
    monkeypatch.setattr(settling.SettleQueue, "add", watched)
    monkeypatch.setattr(analyzer.Analyzer, "close", closed)
    summary = analyze(str(_cut_pcap(REAL_PCAP["failover"], tmp_path / "mid.pcap", 22000)),
                      keep_messages=False,
                      io_sink=lambda rows: before_end.append(len(rows["frame"]) * (not closing))
                      ).summary
    assert max(held) <= 256 and sum(before_end) > 5000
    taker = {p["client"]: p for p in paths_of(summary)}["10.77.0.2"]
    assert taker["failovers"] == 8 and taker["failovers_unseen"] == 4


def test_only_the_first_request_after_a_waiting_answer_may_re_send_it():
    """Of the requests with an unacknowledged answer's key (session << 32 | buf_id),
    the first in frame order after the answer is the one that may re-send it: one
    before is earlier IO, one after found the answer taken (a busy permit is reused
    by request after request); two answers of a key, each its own first request."""
    a, b = (7 << 32) | 3, (7 << 32) | 4
    keys = np.array([a, a, a, a, b, a, a], dtype=np.int64)
    frames = np.array([10, 30, 30, 40, 50, 70, 80], dtype=np.int64)
    picked = first_after_an_answer(keys, frames, np.array([a, a], dtype=np.int64),
                                   np.array([20, 60], dtype=np.int64))
    assert picked.tolist() == [False, True, False, False, False, True, False]
    none = first_after_an_answer(keys, frames, np.zeros(0, dtype=np.int64),
                                 np.zeros(0, dtype=np.int64))
    assert not none.any()
