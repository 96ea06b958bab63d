"""A path seen first without its handshake and then reconnecting is one path
(rtrs_scapy/analysis/linking.py, docs/PROTOCOL.md#captures-that-start-mid-session).

The errors capture holds the kernel's own case: session lab1 connects (recon_cnt 1,
frame 44), the client reconnects it through sysfs (recon_cnt 2, frame 254).  Cut
between the two, the capture shows lab1's IO first without a handshake; the whole
capture's records (whose counts equal the kernel's stats/rdma, tests/test_truth.py)
say what the one path did from the cut on.  Cut before frame 44, the inferred path
is session laberr's, and lab1's handshake (recon_cnt 1) starts a new path.

The cuts between the two (``LINKED_CUTS``, frames 55 … 253: after lab1's handshake and
info exchange, before the reconnect) are one per situation a cut there can start in
(tests/cut_points.py: the messages torn, the requests left waiting, failed or not, the
queue depths the rest can tell), at its last frame, so each has lab1's inferred part
begin differently: with an INFO response, a write request or READ data cut through, a
response (ok or failed) whose request is gone, heartbeats only before the reconnect
(frame 253: no IO left before it, so nothing to link).  Every 9th frame made 23 cuts in
12 of these 18 situations.
"""

import pytest

from conftest import PROJECT_PCAPS, real_pcap
from cut_points import cut_points
from ib_decode import write_cut
from rtrs_scapy.analysis import analyze
from rtrs_scapy.analysis.analyzer import Analyzer
from rtrs_scapy.analysis.linking import _refusal
from rtrs_scapy.analysis.model import Attempt
from rtrs_scapy.report.text import render
from test_cuts import frames_of, write_pcap

OPS = ("read", "write")
RECONNECT_FRAME = 254
LINKED_CUTS = (62, 63, 136, 137, 139, 175, 176, 178, 182, 218, 224, 225, 227, 229, 233, 234,
               236, 253)


@pytest.fixture(scope="module")
def errors():
    pcap = real_pcap("errors")
    frames, link_type = frames_of(pcap)
    return frames, link_type, analyze(pcap, keep_messages=True)


def cut(errors, tmp_path, first):
    frames, link_type, _ = errors
    write_pcap(tmp_path / "cut.pcap", frames[first - 1:], link_type)
    return analyze(tmp_path / "cut.pcap").summary


def lab1_of(summary):
    return [p for s in summary["sessions"] if s["sessname"] == "lab1" for p in s["paths"]]


def test_the_linked_cuts_are_one_per_situation():
    """LINKED_CUTS is the last frame of each situation of the cuts 55 … 253 (fixed here
    for the test ids; computed again here)."""
    cuts = cut_points(real_pcap("errors"), True, range(55, RECONNECT_FRAME))
    assert LINKED_CUTS == tuple(first for first, _situation in cuts)


@pytest.mark.parametrize("first", LINKED_CUTS)
def test_a_path_that_reconnects_is_one_path_with_its_past(errors, tmp_path, first):
    whole = errors[2]
    uuid = lab1_of(whole.summary)[0]["sess_uuid"]
    mine = [m for m in whole.messages if m["sess_uuid"] == uuid and m["frame"] >= first]
    summary = cut(errors, tmp_path, first)
    assert [s["sessname"] for s in summary["sessions"]] == ["lab1"]
    (path,) = lab1_of(summary)
    assert path["sess_uuid"] == uuid
    before = [m["frame"] - first + 1 for m in mine if m["frame"] < RECONNECT_FRAME
              and m["qpn"] != 1 and not m["msg"].startswith("hb_")]   # IO before the reconnect
    if before:
        assert path["link"]["merged"] is True
        assert path["link"]["inferred_first_frame"] <= before[0]
        assert before[-1] <= path["link"]["inferred_last_frame"] < RECONNECT_FRAME - first + 1
    else:     # heartbeats tell no direction: they go to the path between their addresses
        assert path["link"] is None
    heartbeats = [m for m in mine if m["msg"] == "hb_msg"]
    assert path["heartbeats"]["client_to_server"] + path["heartbeats"]["server_to_client"] \
        == len(heartbeats)
    for op in OPS:
        requests = [m for m in mine if m["msg"] == op]
        assert path["io"][op]["count"] == len(requests), op
        assert path["io"][op]["bytes"] == sum(m["fields"]["data_len"] + m["fields"]["usr_len"]
                                              for m in requests), op
    errnos = [m["fields"]["errno"] for m in mine if m["msg"] == "io_rsp" and m["fields"]["errno"]]
    assert sorted(e["errno"] for e in path["errors"]) == sorted(errnos)
    assert path["reconnects"] == 2          # recon_cnt 2 and 3, as the kernel counts them


@pytest.mark.parametrize("first", (10, 20, 30))
def test_a_new_session_on_the_same_addresses_is_not_the_past(errors, tmp_path, first):
    summary = cut(errors, tmp_path, first)
    inferred = [p for s in summary["sessions"] for p in s["paths"] if p["sess_uuid"] is None]
    assert len(inferred) == 1 and inferred[0]["link"]["merged"] is False
    assert "recon_cnt 1" in inferred[0]["link"]["reason"]
    assert lab1_of(summary)[0]["io"] == lab1_of(errors[2].summary)[0]["io"]


def test_the_text_says_what_was_merged(errors, tmp_path):
    text = render(cut(errors, tmp_path, 100))
    assert "before its handshake: IO and heartbeats from frame" in text
    assert "session (name not in the capture)" not in text


class TestTheRule:
    """The branches the errors capture does not reach, on the analyzer's model."""

    A, B = b"\x0a\x4d\x00\x02", b"\x0a\x4d\x00\x01"

    def paths(self, recon_cnt=2, inferred_last=1.0, devices=((0, "/dev/a"), (0, "/dev/a"))):
        an = Analyzer()
        inferred = an.inferred_path(self.A, self.B)
        inferred.heartbeat_seen["client"] = (10, inferred_last)
        path = an.path_for("uuid", "puuid", self.A, self.B)
        path.attempts.append(Attempt(path, recon_cnt, frame=20, time=2.0, reconnect=True))
        for p, (device_id, name) in zip((inferred, path), devices):
            an.rnbd_view.of(p.session).device(device_id)
            p.devices[device_id] = name
        return an, inferred, path

    def test_a_quiet_inferred_path_whose_devices_carry_on_is_linked(self):
        an, inferred, path = self.paths()
        assert _refusal(an, inferred, [path]) is None

    def test_traffic_after_the_reconnect_keeps_them_apart(self):
        an, inferred, path = self.paths(inferred_last=3.0)
        assert "traffic after the reconnect (frame 10)" in _refusal(an, inferred, [path])

    def test_other_devices_keep_them_apart(self):
        an, inferred, path = self.paths(devices=((0, None), (1, None)))
        assert "no RNBD device id in common" in _refusal(an, inferred, [path])
        an, inferred, path = self.paths(devices=((0, "/dev/a"), (0, "/dev/b")))
        assert "device 0 is /dev/a before and /dev/b after" in _refusal(an, inferred, [path])

    def test_two_candidates_keep_them_apart(self):
        an, inferred, path = self.paths()
        assert "2 handshake paths" in _refusal(an, inferred, [path, path])


def _without_handshake(an):
    return sum(s.paths_uuid is None for s in an.sessions.values())


@pytest.mark.parametrize("capture, first, last", [
    ("errors_from_100", 1, 0),          # linked to its handshake at the end
    ("failover_from_22000", 2, 0),      # two paths of one session, linked by a failover
    ("mid_session", 1, 1),
    ("failover_undelivered", 0, 0)])
def test_the_sessions_without_a_handshake_are_counted_as_they_come_and_go(
        capture, first, last, errors, tmp_path, monkeypatch):
    """Two sessions are looked at as one only while one has no handshake (linking.py):
    the registry counts those sessions rather than looking at thousands of sessions for
    each batch of requests.  Its count is the sessions' after every batch and at the end."""
    if capture == "errors_from_100":
        frames, link_type, _ = errors
        path = tmp_path / "cut.pcap"
        write_pcap(path, frames[99:], link_type)
    elif capture == "failover_from_22000":
        path = tmp_path / "cut.pcap"
        write_cut(real_pcap("failover"), 22000, path)
    else:
        path = PROJECT_PCAPS / (capture + ".pcap")
    counts = []
    done = Analyzer.messages_done

    def counted(self, *args, **kwargs):
        out = done(self, *args, **kwargs)
        counts.append((self.registry.inferred, _without_handshake(self)))
        return out
    monkeypatch.setattr(Analyzer, "messages_done", counted)
    result = analyze(path)
    counts.append((result.analyzer.registry.inferred, _without_handshake(result.analyzer)))
    assert all(kept == counted for kept, counted in counts), counts
    assert (counts[0][0], counts[-1][0]) == (first, last)
