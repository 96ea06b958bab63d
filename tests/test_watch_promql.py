"""Debian's ``prometheus`` server scrapes ``watch --prometheus`` during a replay; PromQL's
``increase()`` of the IO and error counters over the replay equals the summary."""

import json
import shutil
import signal
import subprocess
import threading
import time
import urllib.parse
import urllib.request

from conftest import real_pcap
from watch_util import RTRS_DISSECT, at_a_terminal, free_port, summary

PROMETHEUS = shutil.which("prometheus") or "prometheus"   # scripts/test.sh installs it
CONFIG = """global:
  scrape_interval: 100ms
  scrape_timeout: 90ms
scrape_configs:
  - job_name: rtrs
    static_configs:
      - targets: ['127.0.0.1:%d']
"""


def api(port, path, **params):
    url = "http://127.0.0.1:%d%s?%s" % (port, path, urllib.parse.urlencode(params))
    with urllib.request.urlopen(url, timeout=5) as reply:
        return json.loads(reply.read())


def query(port, expr, at=None):
    """An instant PromQL query: {labels (sorted items): value}."""
    params = {"query": expr} if at is None else {"query": expr, "time": "%.3f" % at}
    data = api(port, "/api/v1/query", **params)
    assert data["status"] == "success", data
    return {tuple(sorted((k, v) for k, v in r["metric"].items() if k not in ("job", "instance"))):
            float(r["value"][1]) for r in data["data"]["result"]}


def wait_for(check, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


def last_scrape(port):
    """The time of Prometheus's newest sample of the exporter (s)."""
    found = query(port, "timestamp(rtrs_watch_intervals_total)")
    return next(iter(found.values())) if found else None


def test_promql_increase_over_a_replay_equals_the_summary(tmp_path):
    capture = real_pcap("errors")
    exporter, web = free_port(), free_port()
    (tmp_path / "prometheus.yml").write_text(CONFIG % exporter)
    with open(tmp_path / "prometheus.log", "wb") as log:
        server = subprocess.Popen(
            [PROMETHEUS, "--config.file", str(tmp_path / "prometheus.yml"),
             "--storage.tsdb.path", str(tmp_path / "data"),
             "--web.listen-address", "127.0.0.1:%d" % web], stdout=log, stderr=log)
    watch = None
    try:
        wait_for(lambda: api(web, "/api/v1/status/buildinfo")["status"] == "success", 60,
                 "prometheus to answer")
        watch = subprocess.Popen(at_a_terminal([RTRS_DISSECT, "watch", "--replay", "--speed", "15",
                                                "--prometheus", "127.0.0.1:%d" % exporter,
                                                str(capture)]),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        ended = threading.Event()
        threading.Thread(target=lambda: [ended.set() for line in watch.stderr
                                         if "input ended" in line], daemon=True).start()
        wait_for(ended.is_set, 120, "the replay to end")
        # three scrapes after the end: the counters first seen by the last one are in
        # (a replay that ends before the first scrape has none before them)
        after = last_scrape(web) or 0
        for _ in range(3):
            after = wait_for(lambda: (last_scrape(web) or 0) > after and last_scrape(web),
                             30, "a scrape")
        # at the newest sample, over a window that starts before the replay
        requests = query(web, "increase(rtrs_requests_total[1h])", at=after)
        nbytes = query(web, "increase(rtrs_bytes_total[1h])", at=after)
        errors = query(web, "increase(rtrs_errors_total[1h])", at=after)
    finally:
        if watch is not None:
            watch.send_signal(signal.SIGINT)
            watch.wait(30)
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(30)

    want_requests, want_bytes, want_errors = {}, {}, {}
    for session in summary(capture)["sessions"]:
        for path in session["paths"]:
            labels = (("path", "%s->%s" % (path["client"], path["server"])),
                      ("session", session["label"]))
            for op in ("read", "write"):
                key = (("op", op),) + labels
                want_requests[key] = path["io"][op]["count"]
                want_bytes[key] = path["io"][op]["bytes"]
            for error in path["errors"]:
                key = (("errno", error["name"]),) + labels
                want_errors[key] = want_errors.get(key, 0) + 1
    assert len(want_requests) == 6 and sum(want_errors.values()) == 4
    assert requests == want_requests
    assert nbytes == want_bytes
    assert errors == want_errors
