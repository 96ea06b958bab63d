"""The text summary of the keys every analyzer fills in (the summary JSON contract):
failed requests in the kernel's words and in time order, the RNBD view per device
and op, the timeline, CM events, queue-depth sources.  The summaries are built
here; their values are those of pcaps/real/errors (kernel log, maps, truth)."""

import copy
import re

import pytest

from rtrs_scapy.report.text import render

T0 = 1795965430.162427  # errors.pcap, first frame
LATENCY = {"count": 0, "min": None, "p50": None, "p90": None, "p99": None, "max": None}
PYTHON = re.compile(r"\bNone\b|\bTrue\b|\bFalse\b|\bb'|\{'|\b1 errors\b")


def path(**extra):
    base = {
        "sess_uuid": "70a5e854-10d5-41f8-9cb1-ee5e842b3fea", "client": "10.77.0.2",
        "server": "10.77.0.1", "endpoints": ["10.77.0.2", "10.77.0.1"], "port": 1234,
        "protocol_version": "2.0", "queue_depth": 512, "queue_depth_inferred": False,
        "max_io_size": 126976, "max_hdr_size": 4096, "always_invalidate": True,
        "pathname": "lab1", "cid_num": 3, "chunks": 512,
        "connections": [{"cid": 0, "client_qpn": 0x15, "server_qpn": 0x14, "recon_cnt": 1,
                         "state": "disconnected", "frame": 44}],
        "io": {"read": {"count": 24, "bytes": 64056, "errors": 2},
               "write": {"count": 7, "bytes": 20656, "errors": 1}},
        "latency_us": {"read": dict(LATENCY), "write": dict(LATENCY)},
        "heartbeats": {"client_to_server": 3, "server_to_client": 3,
                       "acks_client_to_server": 3, "acks_server_to_client": 3},
        "rkey_refreshes": 31, "reconnects": 2, "reconnect_attempts": 2, "failovers": 0,
        "aborted_requests": 0, "rejects": [], "errors": [], "disconnects": [],
        "transport": {"acks": 126, "naks": 0, "rnr_naks": 0, "retransmissions": 0, "cnps": 0},
        "devices": {},
    }
    base.update(extra)
    return base


def summary(paths, rnbd=None, sessname="lab1", paths_uuid="ca5a2a57-f77d-4690-a85a-7d5064539dd2",
            **capture):
    session = {"sessname": sessname, "paths_uuid": paths_uuid, "paths": paths}
    if rnbd is not None:
        session["rnbd"] = rnbd
    cap = {"path": "errors.pcap", "format": "pcap", "link_type": "ethernet", "truncated": False,
           "packets": 424, "ib_packets": 424, "rtrs_packets": 424, "first_ts": T0,
           "last_ts": T0 + 58.429488, "malformed": 0, "cm_retransmissions": 0,
           "unmatched_responses": 0, "partial_messages": 0, "cnps": 0}
    cap.update(capture)
    return {"capture": cap, "sessions": [session], "anomalies": []}


def text(data):
    out = render(data)
    assert PYTHON.findall(out) == []
    return out


def block(out, title):
    """The indented lines under a title line."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(title))
    indent = len(lines[start]) - len(lines[start].lstrip())
    body = []
    for line in lines[start + 1:]:
        if len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line.strip())
    return body


ERRORS = [  # as the kernel logged them: rnbd0 = /dev/loop0 (maps), sector 14336
    {"time": T0 + 4.741873, "frame": 227, "request_frame": 225, "op": "write", "errno": -5,
     "name": "EIO", "rnbd": "io", "cid": 1, "device_id": 0, "device": "/dev/loop0",
     "rnbd_op": "write", "sector": 14336, "bi_size": 4096},
    {"time": T0 + 4.738854, "frame": 218, "request_frame": 215, "op": "read", "errno": -5,
     "name": "EIO", "rnbd": "io", "cid": 2, "device_id": 0, "device": "/dev/loop0",
     "rnbd_op": "read", "sector": 14336, "bi_size": 4096},
    {"time": T0 + 45.391275, "frame": 391, "request_frame": 388, "op": "read", "errno": -107,
     "name": "ENOTCONN", "rnbd": "io", "cid": 2, "device_id": 1, "device": "/dev/ram1",
     "rnbd_op": "read", "sector": 0, "bi_size": 4096},
    {"time": T0 + 2.310715, "frame": 35, "request_frame": 32, "op": "read", "errno": -2,
     "name": "ENOENT", "rnbd": "open", "cid": 0, "device": "/dev/does_not_exist"},
    {"time": T0 + 50.0, "frame": 400, "request_frame": 399, "op": "read", "errno": -5,
     "name": "EIO", "rnbd": "io", "cid": 0, "device_id": 0, "device": "/dev/loop0",
     "rnbd_op": "flush", "sector": 2 ** 64 - 1, "bi_size": 0},
]


def test_failed_requests_in_the_kernels_words_by_time():
    out = text(summary([path(errors=ERRORS)]))
    assert block(out, "failed requests (5, by time):") == [
        "frame 35 (+2.311 s), request frame 32, cid 0: OPEN /dev/does_not_exist failed: ENOENT",
        "frame 218 (+4.739 s), request frame 215, cid 2: I/O error, dev /dev/loop0, "
        "sector 14336, op READ, 4096 bytes: EIO",
        "frame 227 (+4.742 s), request frame 225, cid 1: I/O error, dev /dev/loop0, "
        "sector 14336, op WRITE, 4096 bytes: EIO",
        "frame 391 (+45.391 s), request frame 388, cid 2: I/O error, dev /dev/ram1, "
        "sector 0, op READ, 4096 bytes: ENOTCONN",
        "frame 400 (+50.000 s), request frame 399, cid 0: I/O error, dev /dev/loop0, "
        "op FLUSH: EIO",
    ]


def test_failed_requests_with_what_older_summaries_carry():
    """frame, op, errno, name, request_frame, rnbd only (no time, no device)."""
    older = [{"frame": 218, "op": "read", "errno": -5, "name": "EIO", "request_frame": 215,
              "rnbd": "io"},
             {"frame": 35, "op": "read", "errno": -2, "name": "ENOENT", "request_frame": 32,
              "rnbd": "open"}]
    out = text(summary([path(errors=older)]))
    assert block(out, "failed requests (2, by time):") == [
        "frame 35, request frame 32: OPEN failed: ENOENT",
        "frame 218, request frame 215: RNBD io read request failed: EIO"]


def test_cm_events_counters_and_outages():
    p = path(
        reconnects=2, reconnect_attempts=3, failovers=1, aborted_requests=2, lost_requests=1,
        partial_requests=3, responses_without_request=4,
        transport={"acks": 9, "naks": 1, "rnr_naks": 2, "retransmissions": 43, "cnps": 0},
        rejects=[{"frame": 2, "time": T0 + 0.012728, "sender": "server", "reason": 8,
                  "reason_name": "Invalid Service ID", "errno": None,
                  "name": "Invalid Service ID", "attempt_frame": 1},
                 {"frame": 86, "time": T0 + 1.5, "sender": "server", "reason": 28,
                  "reason_name": "Consumer Reject", "errno": -104, "name": "ECONNRESET",
                  "attempt_frame": 85}],
        disconnects=[{"frame": 248, "time": T0 + 11.0, "initiator": "client", "crossed": False},
                     {"frame": 318, "time": T0 + 13.5, "initiator": "server", "crossed": True,
                      "answer_frame": 320},
                     {"frame": 418, "time": T0 + 20.0, "initiator": "client", "crossed": False,
                      "answered_by": "server", "answer_frame": 423}],
        outages=[{"down_frame": 318, "down_time": T0 + 13.5, "up_frame": 330,
                  "up_time": T0 + 43.59, "duration_s": 30.09},
                 {"down_frame": 418, "down_time": T0 + 56.0, "up_frame": None, "up_time": None,
                  "duration_s": None}],
        heartbeat={"last_frame": 410, "last_time": T0 + 55.0, "timeout_time": T0 + 80.0})
    out = text(summary([p], cm_retransmissions=1, unmatched_responses=2))
    assert "  CM retransmissions 1  responses without a request (no handshake) 2" in out
    assert "    rkey refreshes 31  reconnects 2 of 3 attempts (1 failed)  failovers 1  " \
           "aborted requests 2  lost requests 1  requests begun before the capture 3  " \
           "responses to requests before the capture 4" in out
    assert "    transport: retransmissions 43  NAKs 1  RNR NAKs 2" in out
    assert "REJECT frame 2 (+0.013 s) by the server: Invalid Service ID (reason 8)" in out
    assert "REJECT frame 86 (+1.500 s) by the server: Consumer Reject (reason 28), " \
           "errno -104 ECONNRESET" in out
    assert "disconnect frame 248 (+11.000 s), started by the client\n" in out
    assert "disconnect frame 418 (+20.000 s), started by the client (the server answered " \
        "with DREQs of its own, frame 423)" in out
    assert "disconnect frame 318 (+13.500 s), started by the server (crossed: the client " \
        "sent DREQs before it saw the server's, frame 320)" \
        in out
    assert "outage from frame 318 (+13.500 s) to frame 330 (+43.590 s): 30.090 s" in out
    assert "outage from frame 418 (+56.000 s), not up again in the capture" in out
    assert "last frame 410 (+55.000 s), the kernel's timeout at +80.000 s" in out


@pytest.mark.parametrize("source, words", [
    ("handshake", "queue_depth 512  max_io_size"),
    ("inferred", "queue_depth 512 (inferred from the traffic)"),
    ("assumed", "queue_depth 512 (assumed: the kernel default, the capture cannot tell)"),
    ("forced", "queue_depth 512 (given with --queue-depth)"),
])
def test_queue_depth_source(source, words):
    assert words in text(summary([path(queue_depth_source=source)]))


def test_handshake_not_captured_is_said_once_with_what_is_known():
    p = path(sess_uuid=None, port=None, protocol_version=None, queue_depth_inferred=True,
             queue_depth_source="inferred", max_io_size=None, max_hdr_size=None,
             pathname=None, cid_num=None, chunks=None, connections=[])
    out = text(summary([p], sessname=None, paths_uuid=None))
    assert out.count("handshake not captured") == 1
    assert "session 10.77.0.2→10.77.0.1 (name not in the capture)  (1 path)" in out
    assert "  path 10.77.0.2 → 10.77.0.1\n" in out
    assert "handshake not captured: queue_depth 512 (inferred from the traffic), " \
           "always_invalidate Y (seen in the responses)" in out


def test_rejected_path_says_what_it_asked_for():
    p = path(queue_depth=None, max_io_size=None, max_hdr_size=None, always_invalidate=None,
             connections=[{"cid": 0, "client_qpn": 0x11, "server_qpn": None, "recon_cnt": 1,
                           "state": "rejected", "frame": 1}],
             io={"read": {"count": 0, "bytes": 0, "errors": 0},
                 "write": {"count": 0, "bytes": 0, "errors": 0}},
             heartbeats=dict.fromkeys(path()["heartbeats"], 0))
    out = text(summary([p], sessname=None))
    assert "handshake: protocol 2.0 requested, no conn_rsp accepted it" in out
    assert "recon_cnt 1: cid 0 0x11↔none (rejected)" in out
    assert "no IO requests" in out and "heartbeats" not in out


EVENTS = [
    {"time": T0 + 4.378077, "frame": 44, "kind": "connect", "cid": 0, "recon_cnt": 1},
    {"time": T0 + 4.472574, "frame": 81, "kind": "first_io"},
    {"time": T0 + 4.738854, "frame": 218, "kind": "io_error", "errno": -5, "name": "EIO",
     "sector": 14336, "device": "/dev/loop0"},
    {"time": T0 + 13.5, "frame": 318, "kind": "disconnect", "initiator": "server",
     "crossed": False},
    {"time": T0 + 43.59, "frame": 330, "kind": "reconnect", "outage_s": 30.09},
    {"time": T0 + 44.0, "frame": 331, "kind": "failover", "requests": 1,
     "from": {"path": "10.77.1.2", "cid": 1}},
    {"time": T0 + 45.0, "frame": 340, "kind": "reject", "sender": "server", "reason": 8,
     "reason_name": "Invalid Service ID", "errno": None, "name": "Invalid Service ID"},
    {"time": T0 + 56.0, "frame": None, "kind": "heartbeat_lost", "last_time": T0 + 55.0},
]


def test_timeline_in_time_order_with_its_attributes():
    out = text(summary([path(events=EVENTS)]))
    assert [re.split(r"\s{2,}", line) for line in block(out, "timeline:")] == [
        ["+4.378 s", "frame 44", "connect", "cid 0", "recon_cnt 1"],
        ["+4.473 s", "frame 81", "first_io"],
        ["+4.739 s", "frame 218", "io_error", "errno -5 EIO", "sector 14336",
         "device /dev/loop0"],
        ["+13.500 s", "frame 318", "disconnect", "initiator server", "crossed no"],
        ["+43.590 s", "frame 330", "reconnect", "outage 30.090 s"],
        ["+44.000 s", "frame 331", "failover", "requests 1", "from path 10.77.1.2, cid 1"],
        ["+45.000 s", "frame 340", "reject", "sender server", "reason 8 Invalid Service ID"],
        ["+56.000 s", "heartbeat_lost", "last_time +55.000 s"],
    ]


def test_long_timelines_are_cut_with_a_pointer_to_the_json():
    many = [dict(EVENTS[1], frame=100 + i, time=T0 + i) for i in range(45)]
    lines = block(text(summary([path(events=many)])), "timeline:")
    assert len(lines) == 41 and lines[-1] == "… 5 more events (see --format json)"


def ops(**counts):
    """RNBD op stats: name -> (count, bytes, errors, sizes)."""
    out = {}
    for name, (count, volume, errors, sizes) in counts.items():
        latency = {"count": count, "min": 376.0, "p50": 1260.0, "p90": 2038.0, "p99": 3550.1,
                   "max": 3550.1} if count else dict(LATENCY)
        out[name] = {"count": count, "bytes": volume, "errors": errors, "latency_us": latency,
                     "sizes": {str(k): v for k, v in sizes.items()}}
    return out


RNBD = {
    "ops": ops(read=(16, 65536, 2, {4096: 16}), write=(5, 20480, 1, {4096: 5})),
    "control": {"sess_info": {"count": 1, "errors": 0}, "open": {"count": 6, "errors": 0},
                "close": {"count": 2, "errors": 0}},
    "devices": {
        "1": {"name": "/dev/ram1", "access_mode": "ro", "nsectors": 131072,
              "opened_frame": 156, "closed_frame": None, "ops": ops(read=(5, 20480, 1, {4096: 5})),
              "sequential_share": 0.2, "aligned_share": 1.0},
        "0": {"name": "/dev/loop0", "access_mode": 1, "nsectors": 16384,
              "size_changes": [{"frame": 286, "time": T0 + 11.94, "nsectors": 8192}],
              "opened_frame": 77, "closed_frame": 410,
              "ops": ops(read=(11, 45056, 1, {4096: 11}), write=(5, 20480, 1, {4096: 5})),
              "sequential_share": 0.25, "aligned_share": 1.0},
    },
}


def test_rnbd_view_per_device_and_op():
    out = text(summary([path(devices={"0": "/dev/loop0", "1": "/dev/ram1"})],
                       rnbd=copy.deepcopy(RNBD)))
    assert block(out, "RNBD devices:") == [
        "device 0 /dev/loop0: rw, 16384 sectors (8.0 MiB), 8192 sectors from frame 286, "
        "opened frame 77, closed frame 410, sequential 25 %, aligned 100 %",
        "device 1 /dev/ram1: ro, 131072 sectors (64.0 MiB), opened frame 156, sequential 20 %, "
        "aligned 100 %"]
    table = block(out, "RNBD IO (data only; control messages below):")
    assert table[0].split() == ["device", "op", "count", "bytes", "errors", "min", "µs", "p50",
                                "p90", "p99", "max", "sizes"]
    rows = [re.split(r"\s{2,}", row) for row in table[1:]]
    assert [row[:-6] for row in rows] == [  # before min … max and sizes
        ["0 /dev/loop0", "read", "11", "44.0 KiB", "1"],
        ["write", "5", "20.0 KiB", "1"],
        ["1 /dev/ram1", "read", "5", "20.0 KiB", "1"],
        ["all devices", "read", "16", "64.0 KiB", "2"],
        ["write", "5", "20.0 KiB", "1"]]
    assert table[1].endswith("376.0   1260.0   2038.0   3550.1   3550.1  4.0 KiB ×11")
    assert "  RNBD control: sess_info 1, open 6, close 2" in out
    assert "  read/write mix: 76 % reads by count, 76 % by bytes" in out
    assert "RNBD devices: 0 /dev/loop0" not in out  # the path-level list gives way


def test_rnbd_control_failures_and_size_histogram_order():
    rnbd = copy.deepcopy(RNBD)
    rnbd["control"]["open"] = {"count": 3, "errors": 1}
    rnbd["ops"] = ops(write=(9, 8 * 4096 + 131072, 0, {4096: 8, 131072: 1}),
                      discard=(2, 2 << 20, 0, {1 << 20: 2}))
    rnbd["devices"] = {}
    out = text(summary([path()], rnbd=rnbd))
    assert "RNBD control: sess_info 1, open 3 (1 failed), close 2" in out
    rows = block(out, "RNBD IO (data only; control messages below):")[1:]
    assert rows[0].split()[:2] == ["write", "9"] and rows[0].endswith("4.0 KiB ×8, 128.0 KiB ×1")
    assert rows[1].split()[:2] == ["discard", "2"] and rows[1].endswith("1.0 MiB ×2")
    assert "read/write mix: 0 % reads by count, 0 % by bytes" in out


def test_anomaly_counts_and_limits():
    data = summary([path()], limits={"sizes": {"requests": 65536, "cm": 4096},
                                     "evicted": {"requests": 3, "messages": 2},
                                     "refused": {"cm": 1}, "reached": True})
    data["anomalies"] = [{"frame": 5, "kind": "psn_gap", "detail": "QP 0x11: PSN 7 where 6 "
                                                                   "was expected"}]
    data["anomaly_counts"] = {"psn_gap": 1, "unmatched_response": 120}
    out = text(data)
    assert "limits reached, evicted: messages 2, requests 3 (table of 65536)" in out
    assert "limits reached, refused: cm 1 (table of 4096)" in out
    assert "anomalies (121): psn_gap 1, unmatched_response 120" in out
    assert "  frame 5: psn_gap: QP 0x11: PSN 7 where 6 was expected" in out
