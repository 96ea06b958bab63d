"""rtrs-dissect through click's CliRunner: products on stdout, one clear line on
stderr for bad input, documented exit codes (0 read, 1 unreadable, 2 usage), the
command-line conventions, and the shell."""

import gzip
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from ib_decode import decode, pcap_records
from cli_run import run

SUMMARY_KEYS = {"capture", "sessions", "anomalies"}
CAPTURE_KEYS = {"path", "packets", "rtrs_packets", "first_ts", "last_ts", "link_type",
                "malformed"}
PATH_KEYS = {"sess_uuid", "client", "server", "port", "protocol_version", "queue_depth",
             "queue_depth_inferred", "max_io_size", "max_hdr_size", "always_invalidate",
             "connections", "io", "latency_us", "heartbeats", "rkey_refreshes", "reconnects",
             "rejects", "errors", "disconnects"}


def test_default_command_is_the_text_summary(real_capture):
    pcap, truth = real_capture
    result = run(pcap)
    assert result.exit_code == 0
    assert "session %s" % truth["config"]["session"] in result.stdout
    assert "queue_depth 512" in result.stdout and "no anomalies" in result.stdout
    assert result.stderr == ""


def test_summary_options_before_the_file(real_capture):
    pcap, _ = real_capture
    data = json.loads(run("--format", "json", pcap).stdout)
    assert data == json.loads(run("summary", pcap, "--format", "json").stdout)
    assert run("-q", pcap).stdout == run("summary", "-q", pcap).stdout


def test_top_level_help_says_a_file_is_enough():
    for flag in ("--help", "-h"):
        result = run(flag)
        assert result.exit_code == 0
        assert "rtrs-dissect FILE" in result.stdout.replace("\n  ", " ")
        assert "[--format json] [-q] [--queue-depth N] FILE" in result.stdout


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
    _, offsets = pcap_records(pcap)       # the records the cut left whole, read apart
    ends = [at + 16 + struct.unpack_from("<I", data, at + 8)[0] for at in offsets]
    whole = [end for end in ends if end <= len(data) // 2 + 7]
    (tmp_path / "whole.pcap").write_bytes(data[:whole[-1]])
    wire = decode(tmp_path / "whole.pcap", 1)
    assert summary["capture"]["packets"] == len(whole)
    (path,) = summary["sessions"][0]["paths"]
    assert path["io"]["write"]["count"] == len(wire.writes) > 0


def test_usage_errors_exit_2(tmp_path):
    assert run("summary").exit_code == 2
    assert run("summary", "x.pcap", "--format", "xml").exit_code == 2
    out = tmp_path / "x.pcap"
    for args in (("craft", "nosuch", "-o", out), ("craft", "basic", "-p", "pmtu=333", "-o", out),
                 ("craft", "basic", "-p", "nosuch=1", "-o", out), ("craft", "basic"),
                 ("craft", "basic", "--erf", "-p", "encap=rocev2", "-o", out),
                 ("messages", "x.pcap", "--sector", "9-3")):
        result = run(*args)
        assert result.exit_code == 2, args
        assert "Usage:" in result.stderr and result.stdout == ""
    assert not out.exists()


def test_craft_list_is_all_on_stdout():
    result = run("craft", "--list")
    assert result.exit_code == 0 and result.stderr == ""
    assert "multipath_failover" in result.stdout and "common parameters:" in result.stdout
    assert "None" not in result.stdout


def test_craft_erf_alone_writes_native_ib_in_erf(tmp_path):
    out = tmp_path / "ib.pcap"
    assert run("craft", "basic", "--erf", "-o", out).exit_code == 0
    summary = json.loads(run("--format", "json", out).stdout)
    assert summary["capture"]["link_type"] == "erf"
    assert summary["sessions"][0]["sessname"] == "lab1"


def test_shell_starts_with_the_layers_loaded(tmp_path):
    """``printf 'exit()\\n' | rtrs-dissect shell`` as a user types it."""
    script = Path(sys.executable).with_name("rtrs-dissect")
    env = dict(os.environ, HOME=str(tmp_path))  # Scapy keeps its history file there
    done = subprocess.run([str(script), "shell"], input="print('magic', hex(RtrsMsgConnReq()"
                          ".magic), RnbdMsgIo.__name__)\nexit()\n", capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "magic 0x1bbd RnbdMsgIo" in done.stdout
    assert "Too many parameters" not in done.stderr


def test_the_command_line_starts_no_blas_threads():
    """numpy's OpenBLAS would start a spinning thread per core; nothing multiplies
    matrices, so the command line asks for none (the interpreter alone is one thread)."""
    env = {"PATH": os.environ["PATH"]}     # none of the variables that set threads (Dask's)
    count = "import os, sys; %s; import numpy; print(len(os.listdir('/proc/self/task')))"
    plain, ours = (int(subprocess.run([sys.executable, "-c", count % first], env=env,
                                      check=True, capture_output=True, text=True).stdout)
                   for first in ("pass", "import rtrs_scapy.cli"))
    assert ours == 1 and plain >= min(2, os.cpu_count())
