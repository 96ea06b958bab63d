"""rtrs-dissect through click's CliRunner: products on stdout, one clear line on
stderr for bad input, documented exit codes (0 read, 1 unreadable, 2 usage)."""

import gzip
import json
import struct

import pytest
from click.testing import CliRunner

from rtrs_scapy.cli import main

SUMMARY_KEYS = {"capture", "sessions", "anomalies"}
CAPTURE_KEYS = {"path", "packets", "rtrs_packets", "first_ts", "last_ts", "link_type",
                "malformed"}
PATH_KEYS = {"sess_uuid", "client", "server", "port", "protocol_version", "queue_depth",
             "queue_depth_inferred", "max_io_size", "max_hdr_size", "always_invalidate",
             "connections", "io", "latency_us", "heartbeats", "rkey_refreshes", "reconnects",
             "rejects", "errors", "disconnects"}


def run(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        result.exception
    return result


def test_default_command_is_the_text_summary(real_capture):
    pcap, truth = real_capture
    result = run(pcap)
    assert result.exit_code == 0
    assert "session %s" % truth["config"]["session"] in result.stdout
    assert "queue_depth 512" in result.stdout and "no anomalies" in result.stdout
    assert result.stderr == ""


def test_json_summary_has_the_documented_shape(real_capture):
    pcap, truth = real_capture
    result = run("summary", pcap, "--format", "json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert set(data) >= SUMMARY_KEYS
    assert set(data["capture"]) >= CAPTURE_KEYS
    (session,) = data["sessions"]
    assert set(session) >= {"sessname", "paths_uuid", "paths"}
    (path,) = session["paths"]
    assert set(path) >= PATH_KEYS
    assert set(path["io"]["read"]) == {"count", "bytes", "errors"}
    assert set(path["latency_us"]["write"]) == {"count", "min", "p50", "p90", "p99", "max"}
    assert set(path["heartbeats"]) == {"client_to_server", "server_to_client",
                                       "acks_client_to_server", "acks_server_to_client"}
    assert set(path["connections"][0]) >= {"cid", "client_qpn", "server_qpn", "recon_cnt"}
    assert set(path["disconnects"][0]) >= {"frame", "time", "initiator", "crossed"}
    assert data["capture"]["packets"] == truth["pcap_stats"]["frames"]


def test_messages_json_lines_and_filters(real_capture):
    pcap, truth = real_capture
    result = run("messages", pcap, "--format", "json")
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert all({"frame", "time", "src", "dst", "qpn", "msg", "fields", "rnbd"} <= set(m)
               for m in lines)
    kinds = {m["msg"] for m in lines}
    assert {"conn_req", "conn_rsp", "info_req", "info_rsp", "read", "write", "hb_msg",
            "hb_ack", "disconnect"} <= kinds
    reads = run("messages", pcap, "--format", "json", "--msg", "read").stdout.splitlines()
    assert len(reads) == sum(1 for m in lines if m["msg"] == "read")
    session = run("messages", pcap, "--session", truth["config"]["session"]).stdout
    assert len(session.splitlines()) == len(lines)
    assert run("messages", pcap, "--session", "nosuchsession").stdout == ""
    assert run("messages", pcap, "--errors").stdout == ""  # no failed IO in these captures


def test_show_adds_the_session_state(real_capture):
    pcap, _ = real_capture
    messages = [json.loads(line) for line in
                run("messages", pcap, "--format", "json", "--msg", "write").stdout.splitlines()]
    frame = messages[1]["frame"]
    result = run("show", pcap, "--frame", frame)
    assert result.exit_code == 0
    assert "###[ ImmDt ]###" in result.stdout and "IO_REQ buf_id" in result.stdout
    assert "answered in frame %d" % messages[1]["paired_frame"] in result.stdout
    missing = run("show", pcap, "--frame", 10 ** 6)
    assert missing.exit_code == 1 and "has no frame" in missing.stderr


@pytest.mark.parametrize("content, message", [
    (None, "No such file"),
    (b"", "empty"),
    (b"this is not a capture file at all, just text\n" * 4, "not a pcap or pcapng capture"),
])
def test_unreadable_input_is_one_line_and_exit_1(tmp_path, content, message):
    target = tmp_path / "input.pcap"
    if content is not None:
        target.write_bytes(content)
    result = run(target)
    assert result.exit_code == 1
    assert message.lower() in result.stderr.lower()
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_unknown_link_type(tmp_path):
    target = tmp_path / "weird.pcap"
    target.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 4242)
                       + struct.pack("<IIII", 0, 0, 4, 4) + b"abcd")
    result = run(target)
    assert result.exit_code == 1
    assert "link type unknown(4242) is not supported" in result.stderr


def test_truncated_capture_gives_partial_summary_and_warning(real_capture, tmp_path):
    pcap, _ = real_capture
    data = pcap.read_bytes()
    target = tmp_path / "cut.pcap.gz"
    target.write_bytes(gzip.compress(data[: len(data) // 2 + 7]))
    result = run("summary", target, "--format", "json")
    assert result.exit_code == 0
    assert "truncated" in result.stderr and "Traceback" not in result.stderr
    summary = json.loads(result.stdout)
    assert summary["capture"]["truncated"] is True
    assert 0 < summary["capture"]["packets"] < 1558
    (path,) = summary["sessions"][0]["paths"]
    assert path["io"]["write"]["count"] > 0


def test_usage_error_exit_2():
    assert run("summary").exit_code == 2
    assert run("summary", "x.pcap", "--format", "xml").exit_code == 2
