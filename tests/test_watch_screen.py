"""The terminal view of ``watch`` under tmux (80×24): each session and path with
the interval's figures (the requests in flight those of a decode without the
analyzer, tests/ib_decode.py), the keys s, p, Enter, and q that quits."""

import os
import re
import shlex
import subprocess
import time
from datetime import datetime

import pytest

from conftest import real_pcap
from ib_decode import in_flight_at
from watch_util import RTRS_DISSECT, summary, watch_jsonl

EXIT_MARK = "WATCH-EXIT="
STATUS = re.compile(r"rtrs watch\s+\S+\s+(\d\d:\d\d:\d\d\.\d{3})Z")


class Tmux:
    """A detached tmux session on the test's own server (its socket in ``folder``): a test
    that ends its session ends its server, which another test's new session would
    otherwise race (``tmux new-session`` exited 1 once, under the full suite)."""

    def __init__(self, command, folder):
        self.name = "rtrs-watch-%d-%d" % (os.getpid(), time.monotonic_ns())
        self.socket = str(folder / "tmux")      # short: a socket path has 107 bytes
        shell = "%s; echo %s$?; sleep 120" % (command, EXIT_MARK)
        self._tmux("new-session", "-d", "-s", self.name, "-x", "80", "-y", "24", shell)

    def _tmux(self, *args, **options):
        return subprocess.run(["tmux", "-S", self.socket, *args], check=True, **options)

    def screen(self):
        return self._tmux("capture-pane", "-p", "-t", self.name, capture_output=True,
                          text=True).stdout

    def keys(self, *keys):
        self._tmux("send-keys", "-t", self.name, *keys)

    def wait_for(self, predicate, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.screen()
            if predicate(text):
                return text
            time.sleep(0.2)
        raise AssertionError("screen never matched:\n" + self.screen())

    def close(self):
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True)


@pytest.fixture
def tmux(tmp_path):
    sessions = []

    def start(command):
        sessions.append(Tmux(command, tmp_path))
        return sessions[-1]
    yield start
    for session in sessions:
        session.close()


def path_rows(text):
    """{client→server: cells} of the table rows on the screen."""
    rows = {}
    for line in text.splitlines():
        found = re.match(r"^ (\S+→\S+)\s+(\S+)\s+(\d+)/(\d+)\s+(\S+)\s+(\S+)\s+(\d+)/(\S+)", line)
        if found:
            rows[found.group(1)] = found.groups()[1:]
    return rows


def test_screen_shows_sessions_paths_and_interval_figures(tmux):
    capture = real_pcap("multipath")
    paths = {"%s→%s" % (p["client"], p["server"]): (s["sessname"], p)
             for s in summary(capture)["sessions"] for p in s["paths"]}
    by_time = {i["time"][11:23]: i for i in watch_jsonl(capture)}
    term = tmux("%s watch --replay --speed 2 %s" % (shlex.quote(RTRS_DISSECT),
                                                    shlex.quote(str(capture))))

    def busy(text):
        rows = path_rows(text)
        return set(rows) == set(paths) and any(int(r[1]) + int(r[2]) for r in rows.values())
    text = term.wait_for(busy)
    for session, _ in paths.values():
        assert re.search(r"^%s\s*$" % session, text, re.M)
    assert "SESSION / PATH" in text and "INFL/QD" in text
    shown = by_time[STATUS.search(text).group(1)]
    (wire,) = in_flight_at(capture, [datetime.fromisoformat(
        shown["time"].replace("Z", "+00:00")).timestamp()])
    for name, cells in path_rows(text).items():
        state, reads, writes, _mbs, _lat, inflight, queue_depth = cells
        interval = next(p for p in shown["paths"] if "%s→%s" % (p["client"], p["server"]) == name)
        assert (int(reads), int(writes)) == (interval["read"]["count"], interval["write"]["count"])
        assert queue_depth == str(paths[name][1]["queue_depth"])
        assert int(inflight) == wire[tuple(name.split("→"))]
        assert state in ("up", "closed")

    term.keys("s")
    term.wait_for(lambda t: "sort iops" in t)
    term.keys("p")
    paused = term.wait_for(lambda t: "PAUSED" in t)
    time.sleep(1.5)
    assert STATUS.search(term.screen()).group(1) == STATUS.search(paused).group(1)
    term.keys("p")
    term.wait_for(lambda t: "PAUSED" not in t)
    term.keys("Down", "Enter")
    details = term.wait_for(lambda t: "sess_uuid" in t)
    assert "queue depth 512 (handshake)" in details and "since the start" in details
    term.keys("Escape")
    term.wait_for(lambda t: "sess_uuid" not in t)
    term.keys("q")
    assert EXIT_MARK + "0" in term.wait_for(lambda t: EXIT_MARK in t)


def test_piped_capture_keeps_the_keyboard(tmux):
    """``cat FILE | watch -`` on a terminal: the capture comes on stdin, the keys
    from the terminal; the paths appear and q quits."""
    capture = real_pcap("basic_inval")
    term = tmux("cat %s | %s watch -" % (shlex.quote(str(capture)), shlex.quote(RTRS_DISSECT)))
    term.wait_for(lambda t: "10.77.0.2→10.77.0.1" in t and "lab1" in t)
    term.keys("q")
    assert EXIT_MARK + "0" in term.wait_for(lambda t: EXIT_MARK in t)
