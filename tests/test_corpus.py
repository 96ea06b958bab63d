"""Every crafted capture of pcaps/: the analyzer finds what the generator put in
(its <file>.truth.json): paths, IO counts and bytes per path, errors by errno,
rejects, reconnects successful and failed, failovers (and writes executed twice), lost
requests, disconnects,
outages, heartbeats, devices; anomalies only where the scenario is one (bad magic,
unsupported version)."""

import json
from collections import Counter

import pytest

from rtrs_scapy.analysis import analyze

from conftest import PROJECT_PCAPS

CRAFTED = sorted(str(p.relative_to(PROJECT_PCAPS))[:-len(".truth.json")]
                 for p in PROJECT_PCAPS.glob("*.truth.json"))
EXPECTED_ANOMALIES = {"bad_magic": ["bad_magic"], "bad_version": ["bad_version"]}


@pytest.fixture(params=CRAFTED)
def crafted(request):
    capture = PROJECT_PCAPS / request.param
    truth = json.loads((PROJECT_PCAPS / (request.param + ".truth.json")).read_text())
    return analyze(capture).summary, truth


def test_corpus_is_there():
    assert len(CRAFTED) >= 20


def paths_of(summary):
    return [path for session in summary["sessions"] for path in session["paths"]]


def test_paths_and_io_per_path(crafted):
    summary, truth = crafted
    found = {p["sess_uuid"]: p for p in paths_of(summary)}
    expected = truth["paths"]
    mid_session = truth["capture_start"] is not None
    assert len(found) == len(expected)
    for want in expected:
        got = found[None if mid_session else want["sess_uuid"]]
        assert (got["client"], got["server"]) == (want["client_addr"], want["server_addr"])
        stats = want["stats"]
        assert got["io"]["read"]["count"] == stats["reads"]
        assert got["io"]["read"]["bytes"] == stats["read_bytes"]
        assert got["io"]["write"]["count"] == stats["writes"]
        assert got["io"]["write"]["bytes"] == stats["write_bytes"]
        kernel = want["kernel"]
        assert got["reconnects"] == kernel["reconnects"]["successful"] == want["reconnects"]
        assert got["reconnect_attempts"] - got["reconnects"] == kernel["reconnects"]["failed"]
        assert got["failovers"] == kernel["failover_cnt"]
        assert got["lost_requests"] == want["lost_requests"]
        if want["connects"]:
            assert got["queue_depth"] == truth["config"]["queue_depth"]
            assert got["queue_depth_inferred"] is mid_session
            assert got["always_invalidate"] is truth["config"]["always_invalidate"]


def test_rejects_disconnects_outages_per_path(crafted):
    """Who rejected and why, who disconnected (crossed or not), the outages and the
    heartbeat losses of each path, as the generator made them."""
    summary, truth = crafted
    found = {p["sess_uuid"]: p for p in paths_of(summary)}
    mid_session = truth["capture_start"] is not None
    for want in truth["paths"]:
        got = found[None if mid_session else want["sess_uuid"]]
        assert [(r["sender"], r["reason"], r["reason_name"], r["errno"])
                for r in got["rejects"]] == \
            [(r["sender"], r["reason"], r["reason_name"], r["errno"]) for r in want["rejects"]]
        assert [(d["initiator"], d["crossed"], d["answered_by"]) for d in got["disconnects"]] == \
            [(d["initiator"], d["crossed"], d["answered_by"]) for d in want["disconnects"]]
        assert [(o["cause"], o["up_frame"] is not None) for o in got["outages"]] == \
            [(o["cause"], o["up"]) for o in want["outages"]]
        lost = [e for e in got["events"] if e["kind"] == "heartbeat_lost"]
        assert len(lost) == want["heartbeat_lost"]


def test_failovers_and_writes_executed_twice(crafted):
    """Each session's RNBD view: the IOs failed over (the kernel's failover_cnt of its
    paths) and the writes the server ran twice (answered into a dead link, re-sent)."""
    summary, truth = crafted
    failovers = {"failed_over": 0, "executed_twice": 0}
    for session in summary["sessions"]:
        for key in failovers:
            failovers[key] += session["rnbd"]["failovers"][key]
    assert failovers == {"failed_over": sum(p["kernel"]["failover_cnt"] for p in truth["paths"]),
                         "executed_twice": truth["executed_twice"]}


def test_errors_rejects_heartbeats_devices(crafted):
    summary, truth = crafted
    paths = paths_of(summary)
    errors = Counter(e["name"] for p in paths for e in p["errors"])
    assert dict(errors) == truth["errors"]
    rejects = sorted((r["errno"] or 0) for p in paths for r in p["rejects"])
    assert rejects == sorted(r["errno"] for r in truth["rejects"])
    hb = Counter()
    for p in paths:
        hb.update(p["heartbeats"])
    assert hb["client_to_server"] + hb["server_to_client"] == truth["heartbeats"]["hb_msg"]
    assert hb["acks_client_to_server"] + hb["acks_server_to_client"] == \
        truth["heartbeats"]["hb_ack"]
    devices = {}
    for p in paths:
        devices.update(p["devices"])
    if truth["capture_start"] is None:  # a mid-session capture misses the OPEN
        assert devices == truth["devices"]


def test_session_name_and_anomalies(crafted):
    summary, truth = crafted
    if any(p["connects"] for p in truth["paths"]) and truth["capture_start"] is None:
        assert [s["sessname"] for s in summary["sessions"]] == [truth["config"]["sessname"]]
    if truth["scenario"] == "server_disconnect":
        assert [d["initiator"] for p in paths_of(summary) for d in p["disconnects"]] == ["server"]
    kinds = [a["kind"] for a in summary["anomalies"]]
    assert kinds == EXPECTED_ANOMALIES.get(truth["scenario"], [])
