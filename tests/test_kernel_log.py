"""``--kernel-log``: the real consoles of the errors capture (pcaps/real/PROVENANCE.md)
beside the capture: their lines in capture time next to the failed responses, the
clock offset, the client's device names; and --device by those names.

Expected values come from the logs themselves (read here with simple regexes): the
``I/O error`` lines, the test bed's ``@@MAP`` lines (which rnbdN maps which server
path) and ``@@STEP … wall=S up=U`` lines (the machine's wall clock beside its uptime)."""

import gzip
import json
import re
from datetime import datetime, timezone

import pytest

from conftest import REAL_PCAPS, real_pcap
from cli_run import run

ERRORS = real_pcap("errors")
CLIENT_LOG = REAL_PCAPS / "errors.client.log.gz"
SERVER_LOG = REAL_PCAPS / "errors.server.log.gz"
IO_ERROR = re.compile(r"^\[\s*(\d+\.\d+)\] "
                      r"(I/O error, dev (\w+), sector (\d+) op 0x\w+:\((\w+)\).*)$")
KERNEL_LINE = re.compile(r"^\[\s*(\d+\.\d+)\] (.*)$")
MAP = re.compile(r'^@@MAP rc=0 dev=(\w+) opts=".*sessname=(\w+).*device_path=(\S+?)[ "]')
WALL = re.compile(r"\bwall=(\d+)\b")
UP = re.compile(r"\bup=(\d+\.\d+)\b")


def log_lines(path):
    return gzip.decompress(path.read_bytes()).decode(errors="replace").splitlines()


def summary_json(*args):
    result = run("summary", ERRORS, "--format", "json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def messages_json(*args):
    result = run("messages", ERRORS, "--format", "json", *args)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.fixture(scope="module")
def merged():
    return summary_json("--kernel-log", CLIENT_LOG, "--kernel-log", SERVER_LOG)


def wall_minus_uptime(path):
    """The machine's boot time by its own wall clock (whole seconds: ±1 s)."""
    values = [int(WALL.search(line).group(1)) - float(UP.search(line).group(1))
              for line in log_lines(path)
              if line.startswith("@@") and WALL.search(line) and UP.search(line)]
    assert values
    return sum(values) / len(values)


def test_io_error_lines_sit_next_to_the_failed_responses(merged):
    summary, stderr = merged
    expected = [m.groups() for m in map(IO_ERROR.match, log_lines(CLIENT_LOG)) if m]
    assert len(expected) == 3
    events = [e for s in summary["sessions"] for p in s["paths"] for e in p["events"]]
    failed = [e for e in events if e["kind"] == "io_error"]
    for _, text, _, sector, op in expected:
        (line,) = [e for e in events if e["kind"] == "kernel_log" and e["text"] == text]
        answer = min((e for e in failed if e["sector"] == int(sector)
                      and e["op"] == op.lower()), key=lambda e: abs(e["time"] - line["time"]))
        assert abs(line["time"] - answer["time"]) < 0.002
    # the offset, printed with its uncertainty (stderr with --format json)
    client, server = summary["kernel_logs"]
    assert client["file"] == CLIENT_LOG.name and client["events_matched"] >= 3
    assert 0 < client["uncertainty_s"] < 0.002
    assert "kernel log %s: capture time = uptime +" % CLIENT_LOG.name in stderr
    assert "± " in stderr
    # the machines' own clocks agree within their whole seconds
    for entry, path in ((client, CLIENT_LOG), (server, SERVER_LOG)):
        assert abs(entry["offset_s"] - wall_minus_uptime(path)) < 2
    assert abs(client["offset_s"] - server["offset_s"]) > 0.1   # two machines, two boots


def test_device_names_are_learnt_from_the_io_error_lines(merged):
    summary, _ = merged
    mapped = {m.group(1): (m.group(2), m.group(3))
              for m in map(MAP.match, log_lines(CLIENT_LOG)) if m}
    failing = {m.group(3) for m in map(IO_ERROR.match, log_lines(CLIENT_LOG)) if m}
    assert failing == {"rnbd0", "rnbd1"}
    learnt = {}
    for session in summary["sessions"]:
        for device in session["rnbd"]["devices"].values():
            if device.get("client_name"):
                learnt[device["client_name"]] = (session["label"], device["name"])
    assert learnt == {name: mapped[name] for name in failing}
    assert summary["kernel_logs"][0]["device_names"] == {
        name: "%s@%s" % (path, session) for name, (session, path) in learnt.items()}


def test_summary_text_shows_offset_lines_and_names():
    result = run("summary", ERRORS, "--kernel-log", CLIENT_LOG)
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert re.search(r"kernel log errors\.client\.log\.gz: capture time = uptime "
                     r"\+\d+\.\d{6} s ± \d+ µs \(\d+ events\)", text)
    assert "device 0 /dev/loop0 (the client's rnbd0)" in text
    for _, line, _, _, _ in (m.groups() for m in map(IO_ERROR.match, log_lines(CLIENT_LOG))
                             if m):
        assert "kernel_log       errors.client.log.gz: " + line in text


def test_messages_holds_the_kernel_lines_as_records_in_time_order():
    wanted = [m.group(2) for m in map(KERNEL_LINE.match, log_lines(CLIENT_LOG))
              if m and re.search(r"rtrs|rnbd", m.group(2), re.I)]
    records = messages_json("--kernel-log", CLIENT_LOG)
    kernel = [r for r in records if r["msg"] == "kernel_log"]
    assert [r["text"] for r in kernel] == wanted
    assert all(r["frame"] is None and r["log"] == CLIENT_LOG.name for r in kernel)
    times = [r["time"] for r in records]
    assert times == sorted(times)
    assert messages_json("--kernel-log", CLIENT_LOG, "--msg", "kernel_log") == kernel


def test_device_by_the_clients_name():
    """rnbd0 is /dev/loop0 (@@MAP): learnt from the log, or given with --device-map."""
    by_path = messages_json("--device", "/dev/loop0")
    assert by_path and all(r["rnbd"] is None or r["rnbd"].get("device_id") in (0, None)
                           for r in by_path)
    learnt = messages_json("--device", "rnbd0", "--kernel-log", CLIENT_LOG)
    assert [r for r in learnt if r["msg"] != "kernel_log"] == by_path
    kernel = [r["text"] for r in learnt if r["msg"] == "kernel_log"]
    assert kernel and all("rnbd0" in t or "/dev/loop0" in t for t in kernel)
    assert messages_json("--device", "rnbd0", "--device-map", "rnbd0=/dev/loop0@lab1") \
        == by_path
    unknown = run("messages", ERRORS, "--device", "rnbd0")
    assert unknown.exit_code == 2 and unknown.stdout == ""
    assert "no device 'rnbd0'" in unknown.stderr and "0 /dev/loop0 in lab1" in unknown.stderr
    bad_map = run("messages", ERRORS, "--device-map", "rnbd0=/dev/nosuch")
    assert bad_map.exit_code == 2 and "/dev/nosuch" in bad_map.stderr


def _rewritten(path, tmp_path, name, stamp):
    """The log with each uptime stamp replaced by ``stamp(uptime)``."""
    out = []
    for line in log_lines(path):
        match = KERNEL_LINE.match(line)
        out.append(stamp(float(match.group(1))) + " " + match.group(2) if match else line)
    target = tmp_path / name
    target.write_text("\n".join(out) + "\n")
    return target


BOOT = datetime(2026, 11, 29, 15, 17, 6, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize("name,stamp,resolution", [
    ("dmesg-T.log", lambda up: datetime.fromtimestamp(BOOT + up, timezone.utc)
     .strftime("[%a %b %e %H:%M:%S %Y]"), 1.0),
    ("journal.log", lambda up: datetime.fromtimestamp(BOOT + up, timezone.utc)
     .strftime("%b %d %H:%M:%S.%f lab-client kernel:"), 1e-6),
    ("iso.log", lambda up: datetime.fromtimestamp(BOOT + up, timezone.utc)
     .strftime("%Y-%m-%dT%H:%M:%S,%f+00:00"), 1e-6),
])
def test_wall_clock_formats_give_the_same_offset(merged, tmp_path, name, stamp, resolution):
    uptime = merged[0]["kernel_logs"][0]
    summary, _ = summary_json("--kernel-log", _rewritten(CLIENT_LOG, tmp_path, name, stamp))
    (entry,) = summary["kernel_logs"]
    assert entry["clock"] == "wall" and entry["lines"] == uptime["lines"]
    assert abs(entry["offset_s"] + BOOT - uptime["offset_s"]) <= resolution + 1e-3
    assert entry["uncertainty_s"] >= resolution / 2
    assert entry["device_names"] == uptime["device_names"]


def test_a_log_without_shared_events_or_no_log_at_all(tmp_path):
    junk = tmp_path / "junk.log"
    junk.write_bytes(bytes(range(256)) * 64 + b"x" * (8 << 20) +
                     b"\n[ 1.0] rnbd: nothing the capture shows\n")
    summary, stderr = summary_json("--kernel-log", junk)
    (entry,) = summary["kernel_logs"]
    assert entry["lines"] == 1 and entry["offset_s"] is None
    assert "no event shared with the capture" in stderr
    missing = run("summary", ERRORS, "--kernel-log", tmp_path / "nosuch.log")
    assert missing.exit_code == 2 and "nosuch.log" in missing.stderr


def test_failed_open_names_its_device():
    """laberr's OPEN of /dev/does_not_exist (PROVENANCE.md) fails with ENOENT."""
    text = run("summary", ERRORS).stdout
    assert "OPEN /dev/does_not_exist failed: ENOENT" in text
    summary, _ = summary_json()
    (error,) = [e for s in summary["sessions"] for p in s["paths"] for e in p["errors"]
                if e.get("rnbd") == "open"]
    assert error["device"] == "/dev/does_not_exist" and error["name"] == "ENOENT"
    records = messages_json("--device", "/dev/does_not_exist")
    assert {r["msg"] for r in records} == {"read", "io_rsp"}
    assert [r["fields"]["errno_name"] for r in records if r["msg"] == "io_rsp"] == ["ENOENT"]


def test_report_shows_the_kernel_lines_and_the_client_names(tmp_path):
    out = tmp_path / "r.html"
    result = run("report", ERRORS, "-o", out, "-q", "--kernel-log", CLIENT_LOG)
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert "/dev/does_not_exist" in html
    assert "I/O error, dev rnbd0, sector 14336" in html
    assert "0 /dev/loop0 (rnbd0)" in html


def test_failover_consoles_meet_the_rejected_reconnects():
    """failover (PROVENANCE.md): two reconnect attempts end in a CM REJ sent by the
    client (its init_conns() failed lines), which the server logs as CM errors."""
    capture = real_pcap("failover")
    client, server = (REAL_PCAPS / ("failover.%s.log.gz" % h) for h in ("client", "server"))
    result = run("summary", capture, "--format", "json", "-q", "--kernel-log", client,
                 "--kernel-log", server)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    rejects = [e for s in summary["sessions"] for p in s["paths"] for e in p["events"]
               if e["kind"] == "reject"]
    assert len(rejects) == 2
    for entry, path in zip(summary["kernel_logs"], (client, server)):
        assert entry["events_matched"] == 2 and entry["uncertainty_s"] < 0.002
        assert abs(entry["offset_s"] - wall_minus_uptime(path)) < 2
    placed = [e for s in summary["sessions"] for p in s["paths"] for e in p["events"]
              if e["kind"] == "kernel_log" and re.search(r"init_conns|CM error", e["text"])]
    assert len(placed) == 4
    for line in placed:
        assert min(abs(line["time"] - r["time"]) for r in rejects) < 0.002
