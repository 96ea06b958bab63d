"""``rtrs-dissect messages`` and ``show`` on the real kernel captures: sessions told
apart, rejects and failed IO found, filters, the record format; expected values
from each capture's truth.json (kernel log, maps, counters, workload)."""

import json
import re
from collections import Counter
from datetime import datetime

import pytest
from scapy.utils import RawPcapReader

from conftest import PROJECT_PCAPS, real_pcap, real_truth
from cli_run import run

RECORD_KEYS = {"frame", "time", "time_iso", "time_rel", "session", "paths_uuid", "sess_uuid",
               "client", "server", "src", "dst", "dst_qpn", "cid", "msg", "fields", "rnbd",
               "paired_frame", "latency_us"}
ERRORS = real_pcap("errors")
ERRORS_TRUTH = real_truth("errors")
#: "I/O error, dev rnbd0, sector 14336 op 0x0:(READ) flags ..." (block/blk-core.c)
IO_ERROR = re.compile(r"I/O error, dev (\w+), sector (\d+) op 0x\w+:\((\w+)\)")


def records(*args):
    result = run("messages", *args, "--format", "json")
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def text_lines(*args):
    """The text lines of ``messages`` after its column header."""
    result = run("messages", *args)
    assert result.exit_code == 0, result.output
    header, *lines = result.stdout.splitlines()
    assert header.split()[:3] == ["frame", "time", "(UTC)"] and "dst_qpn" in header
    return lines


def mapped_devices(truth):
    """rnbdN -> (session, device_path) from the maps the test bed made."""
    out = {}
    for entry in truth["maps"]:
        opts = dict(item.split("=", 1) for item in entry["opts"].split())
        out[entry["dev"] or None] = (opts["sessname"], opts["device_path"])
    return out


def test_records_have_the_documented_shape(real_capture):
    pcap, _ = real_capture
    lines = records(pcap)
    first_ts = next(iter(RawPcapReader(str(pcap))))[1]
    first_ts = first_ts.sec + first_ts.usec / 1e6
    by_frame = {m["frame"]: m for m in lines}
    for m in lines:
        assert set(m) >= RECORD_KEYS and "latency" not in m and "qpn" not in m
        assert datetime.fromisoformat(m["time_iso"].replace("Z", "+00:00")).timestamp() == \
            pytest.approx(m["time"], abs=1e-6)
        assert m["time_rel"] == pytest.approx(m["time"] - first_ts, abs=1e-6)
        assert m["session"] is not None and m["sess_uuid"] and m["client"] and m["server"]
        if m["paired_frame"] is not None:
            other = by_frame[m["paired_frame"]]
            # epoch seconds as JSON floats keep ~0.2 µs; the latency itself is exact
            assert m["latency_us"] == pytest.approx(abs(other["time"] - m["time"]) * 1e6,
                                                    abs=0.5)
    kinds = {m["msg"] for m in lines}
    assert {"conn_req", "conn_rsp", "info_req", "info_rsp", "read", "write", "io_rsp",
            "hb_msg", "hb_ack", "disconnect"} <= kinds
    reads = records(pcap, "--msg", "read")
    assert reads == [m for m in lines if m["msg"] == "read"]
    assert len(text_lines(pcap)) == len(lines)


@pytest.mark.parametrize("name", ["basic_inval", "basic_noinval", "errors"])
def test_every_io_response_is_an_io_rsp(name):
    """The rkey refresh (always_invalidate=Y) is an attribute of the response, not its kind:
    one per IO_RSP / IO_RSP_W_INV immediate, RKEY_RSP of them carrying a refresh (counted
    by the test bed from the raw capture)."""
    counts = real_truth(name)["checks"]["pcap_rtrs_counts"]
    responses = records(real_pcap(name), "--msg", "io_rsp")
    assert len(responses) == counts["IO_RSP"] + counts["IO_RSP_W_INV"]
    assert sum(1 for m in responses if "rkey_rsp" in m["fields"]) == counts.get("RKEY_RSP", 0)


def test_cm_fields_are_values_not_python():
    """Magic and version as the test bed wrote them down ('0x1bbd', '0x0200 (2.0)')."""
    expected = ERRORS_TRUTH["protocol_expected"]
    conn_req = records(ERRORS, "--msg", "conn_req")[0]["fields"]
    conn_rsp = records(ERRORS, "--msg", "conn_rsp")[0]["fields"]
    assert conn_req["magic"] == expected["conn_req"]["magic"] == conn_rsp["magic"]
    assert "(%s)" % conn_req["version"] in expected["conn_req"]["version"]
    assert conn_rsp["version"] == conn_req["version"]
    assert set(conn_rsp["reserved"]) == {"0"}  # hex digits, not b'\x00…'


@pytest.mark.parametrize("name", ["reject_enomem", "reject_enxio", "reject_eexist"])
def test_rejects_by_name(name):
    """A REJ carrying a conn_rsp: its errno and IBTA reason by name, its magic and version
    as text (the crafter's truth says which)."""
    (truth_reject,) = json.loads((PROJECT_PCAPS / (name + ".pcap.truth.json")).read_text())[
        "rejects"]
    (reject,) = records(PROJECT_PCAPS / (name + ".pcap"), "--errors", "--msg", "conn_rej")
    fields = reject["fields"]
    assert (fields["errno"], fields["errno_name"], fields["reason"]) == (
        truth_reject["errno"], truth_reject["errno_name"], truth_reject["reason"])
    assert fields["reason_name"] == "Consumer Reject"  # IBTA reason 28
    assert (fields["magic"], fields["version"]) == ("0x1bbd", "2.0")
    (line,) = text_lines(PROJECT_PCAPS / (name + ".pcap"), "--errors", "--msg", "conn_rej")
    assert "reason 28 Consumer Reject  errno %d %s" % (
        truth_reject["errno"], truth_reject["errno_name"]) in line


def test_session_selects_exactly_that_session():
    """Three sessions between the same two hosts (labrej, laberr, lab1)."""
    everything = records(ERRORS)
    devices = mapped_devices(ERRORS_TRUTH)
    by_session = {}
    for name in ("laberr", "lab1"):
        selected = records(ERRORS, "--session", name)
        assert selected and {m["session"] for m in selected} == {name}
        opened = {m["rnbd"]["dev_name"] for m in selected if m["rnbd"]
                  and m["rnbd"]["msg"] == "open"}
        assert opened == {path for sess, path in devices.values() if sess == name}
        (sess_uuid,) = {m["sess_uuid"] for m in selected}
        assert records(ERRORS, "--session", sess_uuid) == selected
        assert records(ERRORS, "--session", selected[0]["paths_uuid"]) == selected
        by_session[name] = selected
    rejected = [m for m in everything if m["session"] not in by_session]
    assert {m["msg"] for m in rejected} == {"conn_req", "conn_rej"}
    assert len(everything) == len(rejected) + sum(map(len, by_session.values()))
    # unnamed (labrej's REJ carries no name): one label, the one --session accepts
    (label,) = {m["session"] for m in rejected}
    assert label == rejected[0]["paths_uuid"][:8]
    assert records(ERRORS, "--session", label) == rejected
    assert records(ERRORS, "--session", rejected[0]["sess_uuid"][:6]) == rejected


def test_unknown_session_is_a_usage_error_listing_the_sessions():
    result = run("messages", ERRORS, "--session", "lab")
    assert result.exit_code == 2 and result.stdout == ""
    assert "more than one session 'lab'" in result.stderr
    assert "laberr: paths_uuid" in result.stderr and "lab1: paths_uuid" in result.stderr
    result = run("messages", ERRORS, "--session", "nosuch")
    assert result.exit_code == 2 and result.stdout == ""
    assert "no session 'nosuch'" in result.stderr
    for m in records(ERRORS, "--msg", "conn_req"):
        assert m["sess_uuid"] in result.stderr
    assert "laberr: paths_uuid" in result.stderr and "lab1: paths_uuid" in result.stderr


def test_errors_include_rejects_and_failed_io():
    checks = ERRORS_TRUTH["checks"]
    failed = records(ERRORS, "--errors")
    rejects = [m for m in failed if m["msg"] == "conn_rej"]
    assert len(rejects) == checks["pcap_rtrs_counts"]["cm_reject_reason_8"]
    assert {(m["fields"]["reason"], m["fields"]["reason_name"]) for m in rejects} == \
        {(8, "Invalid Service ID")}
    errnos = Counter(str(m["fields"]["errno"]) for m in failed if m["msg"] == "io_rsp")
    assert errnos == Counter(checks["pcap_io_rsp_errnos"])
    assert all(m["fields"]["errno_name"].startswith("E") for m in failed if m["msg"] == "io_rsp")
    # each failed request is there too, paired with its failed response
    by_frame = {m["frame"]: m for m in failed}
    for m in failed:
        if m["msg"] in ("read", "write"):
            assert by_frame[m["paired_frame"]]["fields"]["errno"] < 0


def test_failed_io_requests_are_the_kernels_io_errors():
    """Device, sector and op of each failed RNBD IO equal the client kernel's
    'I/O error, dev rnbdN, sector S op (OP)' lines; the failed OPEN names its device."""
    devices = mapped_devices(ERRORS_TRUTH)
    logged = Counter()
    for line in ERRORS_TRUTH["kernel_log"]["client"]:
        found = IO_ERROR.search(line)
        if found:
            logged[(devices[found.group(1)][1], int(found.group(2)), found.group(3))] += 1
    assert logged
    seen = Counter()
    for line in text_lines(ERRORS, "--errors", "--msg", "read", "--msg", "write"):
        io = re.search(r"RNBD (\w+)\S* dev \d+ \((\S+)\) sector (\d+)", line)
        if io:
            seen[(io.group(2), int(io.group(3)), io.group(1))] += 1
    assert seen == logged
    failed_reads = records(ERRORS, "--msg", "read", "--errors", "--op", "read")
    assert len(failed_reads) == sum(n for (_, _, op), n in logged.items() if op == "READ")
    opens = text_lines(ERRORS, "--errors", "--op", "open", "--msg", "read")
    missing = [path for sess, path in devices.values() if sess == "laberr"]
    assert len(opens) == 1 and "RNBD OPEN %s rw" % missing[0] in opens[0]
    assert opens[0].endswith("ENOENT")


def test_device_op_and_sector_filters_against_the_workload():
    """Writes of the first 64 sectors: the workload's RTRS requests that touch them."""
    truth = real_truth("basic_inval")
    pcap = real_pcap("basic_inval")
    (device,) = [path for _, path in mapped_devices(truth).values()]
    expected = sum(1 for io in truth["ios"] if io["op"] == "write"
                   for req in io.get("rtrs_requests_expected", ())
                   if req["off"] // 512 <= 63)
    selected = records(pcap, "--device", device, "--op", "write", "--sector", "0-63")
    requests = [m for m in selected if m["msg"] == "write"]
    assert len(requests) == expected > 0
    assert all(m["rnbd"]["op"] == "write" and m["rnbd"]["sector"] <= 63 for m in requests)
    assert {m["frame"] for m in selected if m["msg"] == "io_rsp"} == \
        {m["paired_frame"] for m in requests}
    assert records(pcap, "--device", "0", "--op", "write", "--sector", "0-63") == selected
    unknown = run("messages", pcap, "--device", "/dev/nosuch")
    assert unknown.exit_code == 2 and unknown.stdout == ""
    assert "no device '/dev/nosuch'" in unknown.stderr and "/dev/ram0" in unknown.stderr
    flushes = records(real_pcap("discard"), "--op", "flush", "--msg", "read")
    assert flushes and all(m["rnbd"]["sector"] is None for m in flushes)
    assert not any("18446744073709551615" in line
                   for line in text_lines(real_pcap("discard"), "--op", "flush"))


def test_min_latency_keeps_exactly_the_slower_ones(real_capture):
    pcap, _ = real_capture
    paired = [m for m in records(pcap) if m["latency_us"] is not None]
    threshold = sorted(m["latency_us"] for m in paired)[len(paired) // 2]
    slow = records(pcap, "--min-latency", threshold)
    assert slow == [m for m in paired if m["latency_us"] >= threshold]


def test_show_uses_the_session_of_the_frame():
    """A failed read of lab1 in a capture whose first session (labrej, same hosts)
    never got a queue depth."""
    (failed_read,) = [m for m in records(ERRORS, "--errors", "--msg", "read", "--session",
                                         "lab1") if m["rnbd"]["sector"] == 14336]
    result = run("show", ERRORS, "--frame", failed_read["frame"])
    assert result.exit_code == 0
    state = result.stdout.split("###[ RTRS session state ]###")[1]
    assert "session lab1: paths_uuid %s" % failed_read["paths_uuid"] in state
    assert "queue_depth %d (handshake)" % ERRORS_TRUTH["config"]["server_module_params"][
        "sess_queue_depth"] in state
    assert "sector 14336" in state and "EIO" in state
    assert "None" not in state


def test_show_reads_only_up_to_its_frame(monkeypatch):
    """135,237 frames: show of an early request stops reading soon after it, and says
    what a reading of the whole capture says."""
    import rtrs_scapy.analysis as analysis
    pcap, truth = real_pcap("load"), real_truth("load")
    (request,) = [m for m in records(pcap, "--msg", "write") if m["frame"] < 2000][:1]
    full = analysis.analyze
    read = []

    def counting(*args, **kwargs):
        result = full(*args, **kwargs)
        read.append(result.summary["capture"]["packets"])
        return result

    monkeypatch.setattr(analysis, "analyze", counting)
    early = run("show", pcap, "--frame", request["frame"])
    assert early.exit_code == 0 and "answered in frame %d" % request["paired_frame"] in \
        early.stdout
    assert len(read) == 1 and read[0] < truth["pcap_stats"]["frames"] // 4
    monkeypatch.setattr(analysis, "analyze", lambda *a, until_frame=None, **k: full(*a, **k))
    assert run("show", pcap, "--frame", request["frame"]).stdout == early.stdout
