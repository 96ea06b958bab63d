"""``watch --prometheus``: scraped over HTTP on 127.0.0.1 during a replay; at the
end its counters equal the summary of the capture; its requests in flight at the end of
a capture cut mid-IO those of a decode without the analyzer (tests/ib_decode.py)."""

import signal
import subprocess
import threading
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from conftest import real_pcap
from ib_decode import ib_frames, in_flight_at, pcap_records
from watch_util import RTRS_DISSECT, at_a_terminal, free_port, summary

SCRAPE_EVERY = 0.3


def scrape(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as reply:
        text = reply.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("rtrs_"):
                samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def total(samples, name, **match):
    return sum(v for (n, labels), v in samples.items() if n == name
               and all(dict(labels).get(k) == want for k, want in match.items()))


def expected(summary_json):
    """(session label, path label) -> the summary's figures of that path: the session
    as the summary names it (its one name, docs/cli.md#sessions-and-devices)."""
    out = {}
    for session in summary_json["sessions"]:
        label = session["label"]
        for path in session["paths"]:
            out[(label, "%s->%s" % (path["client"], path["server"]))] = path
    return out


def exporter_scrapes(*args):
    """(scrapes while the input lasted, the scrape after it ended) of ``rtrs-dissect
    watch --prometheus 127.0.0.1:PORT ARGS``, stopped by SIGINT then."""
    port = free_port()
    proc = subprocess.Popen(at_a_terminal([RTRS_DISSECT, "watch", "--prometheus",
                                           "127.0.0.1:%d" % port, *map(str, args)]),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ended = threading.Event()

    def read_stderr():
        for line in proc.stderr:
            if "input ended" in line:
                ended.set()
    threading.Thread(target=read_stderr, daemon=True).start()
    threading.Thread(target=proc.stdout.read, daemon=True).start()
    during = []
    try:
        deadline = time.monotonic() + 120
        while not ended.is_set() and time.monotonic() < deadline:
            time.sleep(SCRAPE_EVERY)
            try:
                during.append(scrape(port))
            except OSError:       # not listening yet
                continue
        assert ended.is_set(), "the input did not end"
        final = scrape(port)
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(30)
    assert code == 0
    return during, final


def test_exporter_scraped_during_a_replay_equals_the_summary():
    capture = real_pcap("errors")
    during, final = exporter_scrapes("--replay", "--speed", "15", capture)
    # counters grew during the replay, never went back
    series = [total(s, "rtrs_requests_total") for s in during] + [
        total(final, "rtrs_requests_total")]
    assert len(set(series)) > 2 and series == sorted(series)

    paths = expected(summary(capture))
    assert len(paths) == 3
    assert {session for session, _ in paths} == \
        {dict(labels)["session"] for _, labels in final if "session" in dict(labels)}
    for (session, path), want in paths.items():
        for op in ("read", "write"):
            labels = dict(session=session, path=path, op=op)
            assert total(final, "rtrs_requests_total", **labels) == want["io"][op]["count"]
            assert total(final, "rtrs_bytes_total", **labels) == want["io"][op]["bytes"]
            assert total(final, "rtrs_request_latency_seconds_count", **labels) == \
                want["latency_us"][op]["count"]
        assert total(final, "rtrs_reconnects_total", session=session, path=path) == \
            want["reconnects"]
        for name in {e["name"] for e in want["errors"]}:
            assert total(final, "rtrs_errors_total", session=session, path=path,
                         errno=name) == sum(1 for e in want["errors"] if e["name"] == name)
        assert total(final, "rtrs_errors_total", session=session, path=path) == \
            len(want["errors"])
        assert total(final, "rtrs_queue_depth", session=session, path=path) == \
            (want["queue_depth"] or 0)
    # RNBD: per device and operation, the summary's RNBD view
    want_rnbd = {}
    for session in summary(capture)["sessions"]:
        for device in session["rnbd"]["devices"].values():
            for op, stats in device["ops"].items():
                want_rnbd[(session["label"], device["name"], op)] = (
                    stats["count"], stats["bytes"], stats["errors"])
    assert len(want_rnbd) == 3
    got_rnbd = {}
    for (name, labels), value in final.items():
        if name.startswith("rtrs_rnbd_"):
            labels = dict(labels)
            got_rnbd.setdefault((labels["session"], labels["device"], labels["op"]),
                                {})[name] = value
    assert {key: (v["rtrs_rnbd_requests_total"], v["rtrs_rnbd_bytes_total"],
                  v["rtrs_rnbd_errors_total"]) for key, v in got_rnbd.items()} == want_rnbd


def test_retransmissions_counter_of_failover_equals_the_summary():
    """failover.pcap read as fast as possible: ``rtrs_retransmissions_total`` per path is
    the summary's ``transport.retransmissions`` (47 on the dead path, 0 on the other), from
    the second scrape on (the first shows every new series at 0, docs/watch.md)."""
    capture = real_pcap("failover")
    port = free_port()
    proc = subprocess.Popen(at_a_terminal([RTRS_DISSECT, "watch", "--prometheus",
                                           "127.0.0.1:%d" % port, str(capture)]), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    threading.Thread(target=proc.stdout.read, daemon=True).start()   # the JSON lines
    try:
        for line in proc.stderr:
            if "input ended" in line:
                break
        first = scrape(port)
        final = scrape(port)
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(30)
    assert code == 0
    assert total(first, "rtrs_retransmissions_total") == 0
    paths = expected(summary(capture))
    assert sorted(p["transport"]["retransmissions"] for p in paths.values()) == [0, 47]
    for (session, path), want in paths.items():
        assert total(final, "rtrs_retransmissions_total", session=session, path=path) == \
            want["transport"]["retransmissions"]


def test_requests_in_flight_at_the_end_are_the_wires(tmp_path):
    """The first 20,000 frames of load.pcap.gz end with two requests sent and not yet
    answered: the exporter's ``rtrs_inflight_requests`` after the input ended is the
    count of a decode without the analyzer (tests/ib_decode.py)."""
    data, offsets = pcap_records(real_pcap("load"))
    head = tmp_path / "load_20000.pcap"
    head.write_bytes(data[:offsets[20_000]])
    _during, final = exporter_scrapes(head)
    (wire,) = in_flight_at(head, [ib_frames(head)[-1].time])
    assert {path: total(final, "rtrs_inflight_requests", path="%s->%s" % path)
            for path in wire} == dict(wire)
    assert sum(wire.values()) == 2
