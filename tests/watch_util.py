"""What the watch tests share: running ``rtrs-dissect``, reading its JSON lines,
totals of a summary."""

import gzip
import json
import socket
import struct
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from once_per_run import once_per_run
from rtrs_scapy.cli import main

RTRS_DISSECT = str(Path(sys.executable).with_name("rtrs-dissect"))

#: runs its arguments with SIGINT delivered and acted on, as a command started at a
#: terminal has it: a test process may have inherited SIGINT ignored or blocked (both are
#: kept across exec), and a child that ignores Ctrl-C would never end on it
_TERMINAL_SIGINT = ("import os, signal, sys; "
                    "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); "
                    "signal.signal(signal.SIGINT, signal.SIG_DFL); "
                    "os.execv(sys.argv[1], sys.argv[1:])")


def at_a_terminal(argv):
    """``argv`` started with SIGINT as at a terminal (Ctrl-C ends it)."""
    return [sys.executable, "-c", _TERMINAL_SIGINT] + list(argv)
OPS = ("read", "write")


def watch_jsonl(*args, stdin=None, timeout=600):
    """``rtrs-dissect watch --jsonl ARGS`` → the interval objects."""
    done = subprocess.run([RTRS_DISSECT, "watch", "--jsonl", *map(str, args)], input=stdin,
                          capture_output=True, timeout=timeout)
    assert done.returncode == 0, done.stderr.decode()
    return [json.loads(line) for line in done.stdout.decode().splitlines()]


def watch_jsonl_in_process(*args):
    """The same intervals from the same command run in this process (click's runner):
    for a sweep of many captures, without a Python start and the engine's load per
    capture (test_cut_outputs.py); the command's own process, pipes and signals are
    the other watch tests'."""
    done = CliRunner().invoke(main, ["watch", "--jsonl", *map(str, args)])
    assert done.exit_code == 0, (done.output, done.exception)
    return [json.loads(line) for line in done.stdout.splitlines()]


def summary(path):
    """``rtrs-dissect summary --format json`` of ``path``: run once per file (as it is
    now: path, size, time) in a test run (tests/once_per_run.py: the watch modules may go
    to either worker), a fresh copy for each caller."""
    stat = Path(path).stat()
    return json.loads(_summary_text(str(path), stat.st_size, stat.st_mtime_ns))


@once_per_run
def _summary_text(path, _size, _mtime_ns):
    done = subprocess.run([RTRS_DISSECT, "summary", "--format", "json", "-q", path],
                          capture_output=True, check=True, timeout=600)
    return done.stdout


def path_key(path):
    return (path["sess_uuid"], path["client"], path["server"])


def interval_totals(intervals):
    """Per path: read/write count and bytes, errors by name and reconnects, summed."""
    totals = {}
    for interval in intervals:
        for path in interval["paths"]:
            t = totals.setdefault(path_key(path), {"read": [0, 0], "write": [0, 0],
                                                   "errors": {}, "reconnects": 0})
            for op in OPS:
                t[op][0] += path[op]["count"]
                t[op][1] += path[op]["bytes"]
            for name, n in path["errors"].items():
                t["errors"][name] = t["errors"].get(name, 0) + n
            t["reconnects"] += path["reconnects"]
    return totals


def summary_totals(summary_json):
    totals = {}
    for session in summary_json["sessions"]:
        for path in session["paths"]:
            errors = {}
            for error in path["errors"]:
                errors[error["name"]] = errors.get(error["name"], 0) + 1
            totals[path_key(path)] = {
                "read": [path["io"]["read"]["count"], path["io"]["read"]["bytes"]],
                "write": [path["io"]["write"]["count"], path["io"]["write"]["bytes"]],
                "errors": errors, "reconnects": path["reconnects"]}
    return totals


def record_stamps(path):
    """Every record's timestamp (s) of a little-endian microsecond pcap, read from
    the record headers."""
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    assert data[:4] == b"\xd4\xc3\xb2\xa1", "a little-endian microsecond pcap"
    stamps, pos = [], 24
    while pos < len(data):
        sec, usec, incl, _ = struct.unpack_from("<IIII", data, pos)
        stamps.append(sec + usec / 1e6)
        pos += 16 + incl
    return stamps


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
