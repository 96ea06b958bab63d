"""A capture of more QP streams than the transport's bounded table holds
(engine/transport.py evicts the least recently used quarter): what the evicted
streams counted (packets, ACKs, retransmissions, the capture's loss) still counts
for their paths.  The reference is the same capture read with a table that never
fills, and the capture itself: every one of its packets is RTRS's or the CM's."""

import functools
import pickle

import pytest

from conftest import real_pcap
from ib_decode import bth_rows
from rtrs_scapy.analysis import analyze, parts
from rtrs_scapy.analysis.parts import map_file, reduce_parts
from rtrs_scapy.capture import open_capture
from rtrs_scapy.craft.repeat import repeat_capture, session_uuids
from rtrs_scapy.engine import Engine
from rtrs_scapy.engine import transport as T
from rtrs_scapy.watch import watcher
from rtrs_scapy.watch.pacing import capture_intervals
from rtrs_scapy.watch.watcher import Watcher
from test_inputs import frames_of, write_pcap
from test_parts import split

COPIES = 12            # sessions of 3 connections: 72 streams
STREAMS = 24           # the table: 4 sessions' worth, evicting 6 streams at a time
RC_WRITE_ONLY_WITH_IMM = 0x0B   # the RC SEND and RDMA WRITE opcodes are 0x00 to here


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    """Copies of the real basic_inval capture, each a session of its own."""
    source = real_pcap("basic_inval")
    path = tmp_path_factory.mktemp("evicted") / "sessions.pcap"
    repeat_capture(source, path, len(frames_of(source)) * COPIES, session_uuids(source))
    return path


def without_limits(summary):
    capture = dict(summary["capture"])
    limits = capture.pop("limits")
    return dict(summary, capture=capture), limits


def test_evicted_streams_count_for_their_paths(sessions):
    whole, whole_limits = without_limits(analyze(sessions, keep_messages=False).summary)
    bounded, bounded_limits = without_limits(
        analyze(sessions, keep_messages=False, limits={"streams": STREAMS}).summary)
    assert not whole_limits["reached"]
    assert bounded_limits["evicted"]["streams"] >= 2 * COPIES * 3 - STREAMS
    assert "messages" not in bounded_limits["evicted"]   # only finished sessions went
    assert bounded == whole
    assert bounded["capture"]["rtrs_packets"] == bounded["capture"]["packets"] \
        == len(frames_of(sessions))
    paths = [path for session in bounded["sessions"] for path in session["paths"]]
    assert len(paths) == COPIES
    assert len({path["transport"]["acks"] for path in paths}) == 1
    assert paths[0]["transport"]["acks"] > 0


def test_a_capture_cut_mid_session_loses_nothing_to_evictions(sessions, tmp_path):
    """The capture cut at frame 100, under IO: the first session has no handshake, its
    streams are tied to its path by their content (and evicted with the others): the
    summary of an unbounded table, every packet RTRS's."""
    cut = write_pcap(tmp_path / "mid.pcap", frames_of(sessions)[100:])
    whole, _ = without_limits(analyze(cut, keep_messages=False).summary)
    bounded, limits = without_limits(
        analyze(cut, keep_messages=False, limits={"streams": STREAMS}).summary)
    assert limits["evicted"]["streams"]
    assert whole["sessions"][0]["paths"][0]["queue_depth_source"] == "inferred"
    assert bounded == whole
    assert bounded["capture"]["rtrs_packets"] == bounded["capture"]["packets"]
    assert bounded["sessions"][0]["paths"][0]["transport"]["acks"] > 0


def test_a_file_that_evicts_reduces_to_the_whole(sessions, tmp_path, monkeypatch):
    """Files mapped with a table that fills (parts.py): the streams each file evicted
    count in the reduce as in one pass."""
    whole = analyze(sessions, keep_messages=False).summary
    files = split(sessions, tmp_path, 2)
    monkeypatch.setattr(parts, "Engine", functools.partial(Engine, max_streams=STREAMS))
    mapped = [pickle.loads(pickle.dumps(map_file(f))) for f in files]
    assert all(part.evicted for part in mapped)
    reduced = reduce_parts(mapped, keep_messages=False).summary
    assert reduced["sessions"] == whole["sessions"]
    assert reduced["capture"]["rtrs_packets"] == whole["capture"]["packets"]


def test_a_lost_packet_on_an_evicted_stream_is_the_captures_loss(sessions, tmp_path):
    """A data packet dropped from the first session (its stream evicted long before
    the end; the packet found by tshark's BTH fields): the gap is counted for the
    capture and for the path."""
    frames = frames_of(sessions)
    summary = analyze(sessions, keep_messages=False).summary
    first = summary["sessions"][0]["paths"][0]["connections"][0]
    second_starts = summary["sessions"][1]["paths"][0]["connect_attempts"][0]["frame"]
    gone = next(row.frame for row in bth_rows(sessions)
                if 100 < row.frame < second_starts and row.destqp == first["server_qpn"]
                and row.opcode is not None and row.opcode <= RC_WRITE_ONLY_WITH_IMM) - 1
    cut = write_pcap(tmp_path / "cut.pcap", frames[:gone] + frames[gone + 1:])
    for limits in (None, {"streams": STREAMS}):
        summary = analyze(cut, keep_messages=False, limits=limits).summary
        assert summary["capture"]["limits"]["reached"] == bool(limits)
        assert summary["capture"]["capture_lost_packets"] == 1
        assert summary["sessions"][0]["paths"][0]["transport"]["capture_lost_packets"] == 1


@pytest.fixture(scope="module")
def failovers(tmp_path_factory):
    """Two copies of the real failover capture (a dead link: a stall, retransmissions)."""
    source = real_pcap("failover")
    path = tmp_path_factory.mktemp("evicted") / "failovers.pcap"
    repeat_capture(source, path, 2 * len(frames_of(source)), session_uuids(source))
    return path


def test_a_stall_on_an_evicted_stream_is_kept(failovers):
    """Through a table of 12 streams the first copy's streams are evicted during the
    second, their stall and retransmissions counted as in an unbounded table."""
    path = failovers
    whole, _ = without_limits(analyze(path, keep_messages=False).summary)
    bounded, limits = without_limits(
        analyze(path, keep_messages=False, limits={"streams": 12}).summary)
    assert limits["evicted"]["streams"]
    assert bounded == whole
    stalled = [p for session in bounded["sessions"] for p in session["paths"] if p["stalls"]]
    assert len(stalled) == 2 and all(p["transport"]["retransmissions"] for p in stalled)


def test_watch_counts_an_evicted_streams_retransmissions(failovers, monkeypatch):
    """``watch`` through a table of 12 streams: every interval's line is the one of an
    unbounded table (a path's retransmissions so far are its live streams' and its
    evicted ones'; before, an eviction made an interval's count negative)."""
    def lines():
        watching = Watcher()
        with open_capture(failovers) as capture:
            return ([interval.json() for interval in capture_intervals(capture, watching, 1.0)],
                    int(watching.engine.streams.counters[T.G_EVICTIONS]))

    whole, none = lines()
    monkeypatch.setattr(watcher, "Engine", functools.partial(Engine, max_streams=12))
    bounded, evicted = lines()
    assert none == 0 and evicted > 0
    assert bounded == whole
    shown = [path["retransmissions"] for line in whole for path in line["paths"]]
    assert min(shown) == 0 and sum(shown) > 0


def test_closed_streams_are_recycled_before_the_table_grows(sessions, monkeypatch):
    """A room of 8 slots: each session's 6 streams are closed by its DREQs and silent
    before the next session needs slots; they are recycled, the room never grows,
    nothing counts against the bound, and the summary is a large table's."""
    whole, _ = without_limits(analyze(sessions, keep_messages=False).summary)
    monkeypatch.setattr(T, "FIRST_ROOM", 8)
    result = analyze(sessions, keep_messages=False)
    counters = result.analyzer.engine.streams.counters
    streams = COPIES * 3 * 2          # 3 connections of 2 QPs a session
    assert counters[T.G_ROOM] == 8
    assert counters[T.G_RECYCLED] == streams - 8
    assert counters[T.G_EVICTIONS] == 0
    summary, limits = without_limits(result.summary)
    assert "streams" not in limits["evicted"]
    assert summary == whole


def test_live_streams_make_the_room_grow(monkeypatch):
    """One session's 6 streams alive at once in a room of 2: the room doubles to 8,
    none is evicted, the summary is a large table's."""
    capture = real_pcap("basic_inval")
    whole, _ = without_limits(analyze(capture, keep_messages=False).summary)
    monkeypatch.setattr(T, "FIRST_ROOM", 2)
    result = analyze(capture, keep_messages=False)
    counters = result.analyzer.engine.streams.counters
    assert counters[T.G_ROOM] == 8
    assert counters[T.G_RECYCLED] == counters[T.G_EVICTIONS] == 0
    assert without_limits(result.summary)[0] == whole


def test_a_cut_capture_recycles_only_the_streams_the_cm_closed(sessions, tmp_path,
                                                                  monkeypatch):
    """The capture cut at frame 100: the first session's 6 streams have no handshake,
    so no DREQ closes them for the analysis: they stay, the room grows once to hold
    them beside the next session's, and only the other sessions' streams are recycled;
    the summary is a large table's."""
    cut = write_pcap(tmp_path / "mid.pcap", frames_of(sessions)[100:])
    whole, _ = without_limits(analyze(cut, keep_messages=False).summary)
    monkeypatch.setattr(T, "FIRST_ROOM", 8)
    result = analyze(cut, keep_messages=False)
    counters = result.analyzer.engine.streams.counters
    assert counters[T.G_ROOM] == 16
    # the other sessions' streams, but those in the room's 16 - 6 other slots at the end
    assert counters[T.G_RECYCLED] == (COPIES - 1) * 3 * 2 - (16 - 6)
    assert counters[T.G_EVICTIONS] == 0
    assert without_limits(result.summary)[0] == whole


def test_the_real_failover_keeps_its_streams_through_a_small_room(monkeypatch):
    """The real failover capture (a dead link, its teardown, reconnect attempts) in a
    room of 2 slots: the room grows, no stream goes, the summary is a large table's."""
    capture = real_pcap("failover")
    whole, _ = without_limits(analyze(capture, keep_messages=False).summary)
    monkeypatch.setattr(T, "FIRST_ROOM", 2)
    result = analyze(capture, keep_messages=False)
    counters = result.analyzer.engine.streams.counters
    assert counters[T.G_ROOM] > 2
    assert counters[T.G_EVICTIONS] == 0
    assert without_limits(result.summary)[0] == whole


def test_the_cm_keeps_one_tuple_per_address(sessions):
    """12 sessions of 3 connections, each connection known to the CM by its two ends'
    comm ids: 72 keys, over the 24 addresses of the copies (a client and a server
    each), and the keys share one tuple per address rather than holding a copy each
    (thousands of short sessions kept about 500 bytes a session of copies)."""
    keys = list(analyze(sessions, keep_messages=False).analyzer.cm.by_comm_id)
    addresses = [address for address, _comm_id in keys]
    assert len(keys) == COPIES * 3 * 2
    assert len(set(addresses)) == COPIES * 2
    assert len({id(address) for address in addresses}) == COPIES * 2
