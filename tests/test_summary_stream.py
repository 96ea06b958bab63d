"""`rtrs-dissect summary` writes each session's summary as it is made
(analysis.Analysis.summary_parts, cli/summary.py): the bytes of the whole summary's
text and JSON, with the summaries of a capture's thousands of sessions never all
in memory at once; `messages` keeps only each session's identity, and `export`
builds its tables without the whole summary."""

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq

import pytest
from scapy.all import IP, UDP, Ether, wrpcap

from conftest import PROJECT_PCAPS, REAL_ALL, real_pcap
from ib_decode import write_cut
from rtrs_scapy.analysis import analyze
from rtrs_scapy.analysis.naming import device_entries, session_identity, session_keys
from rtrs_scapy.cli.summary import write_summary_json
from rtrs_scapy.report.indented import IndentedJson
from rtrs_scapy.report.messages import MessageView
from rtrs_scapy.report.text import render, render_parts
from rtrs_scapy.tables.build import messages_tables
from rtrs_scapy.tables.export import export

# three sessions; one path cut mid-session; a failover between two paths
CAPTURES = [real_pcap("errors"), real_pcap("failover"),
            PROJECT_PCAPS / "multipath_failover.pcap"]


@pytest.fixture(scope="module")
def no_rtrs(tmp_path_factory):
    path = tmp_path_factory.mktemp("stream") / "udp.pcap"
    wrpcap(str(path), [Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(dport=53)])
    return path


def _streamed(capture, piece=1 << 16):
    out = io.StringIO()
    write_summary_json(*analyze(capture, keep_messages=False).summary_parts(), out, piece)
    return out.getvalue()


@pytest.fixture(scope="module")
def mid_session(tmp_path_factory):
    """The real errors capture from frame 200 on: its path first known from its IO,
    linked at the end to the handshake that follows."""
    return write_cut(real_pcap("errors"), 200, tmp_path_factory.mktemp("stream") / "cut.pcap")


@pytest.mark.parametrize("capture", CAPTURES + ["no_rtrs", "mid_session"],
                         ids=lambda c: str(c).split("/")[-1])
def test_the_streamed_summary_is_the_whole_summarys_bytes(capture, request):
    if capture in ("no_rtrs", "mid_session"):
        capture = request.getfixturevalue(capture)
    whole = analyze(capture, keep_messages=False).summary
    assert _streamed(capture) == json.dumps(whole, indent=1) + "\n"
    assert _streamed(capture, piece=1) == json.dumps(whole, indent=1) + "\n"
    text = "".join(render_parts(*analyze(capture, keep_messages=False).summary_parts()))
    assert text == render(whole)


TRICKY = [
    {}, [], (), 0, -1.5, "", None, True, [[]], [{}], {"a": []}, {"a": {}},
    {"n": float("nan"), "i": float("inf"), "-i": float("-inf"), "z": -0.0, "e": 1e16,
     "s": 1e-7, "big": 2 ** 70, "t": (1, 2), "u": "é\u2028\"q\\\n", "b": False},
    {1: "int", 2.5: "float", True: "bool", None: "none", "k:\"ey": {"deep": [1, [2, [3]]]}},
    [1, "x", [2, {"y": [3, {"z": {}}]}], (4, (5,)), {"w": ()}],
    {"rows": [[1, 2], [3, 4]], "mixed": [{"a": 1}, 2, [3], {}]},
]


@pytest.mark.parametrize("level", [0, 1, 3])
def test_the_indented_json_is_the_standard_librarys(level):
    """report/indented.py writes what ``json.dumps(indent=1)`` writes, byte for byte
    (with its lines after the first indented ``level`` more), for values of every kind:
    empty and nested containers, tuples, NaN and infinities, big integers, escapes,
    keys that are not strings; and every real capture's summary.  A value JSON cannot
    hold is refused as the standard library refuses it."""
    encoder = IndentedJson(indent=1)
    values = TRICKY + [analyze(path, keep_messages=False).summary for _, path, _ in REAL_ALL]
    for value in values:
        assert encoder.text(value, level) == \
            json.dumps(value, indent=1).replace("\n", "\n" + " " * level)
    for value in ({"a": object()}, [1, {"b": {1, 2}}], b"bytes"):
        with pytest.raises(TypeError, match="not JSON serializable"):
            encoder.text(value)


def test_no_session_is_said_once(no_rtrs):
    text = "".join(render_parts(*analyze(no_rtrs, keep_messages=False).summary_parts()))
    assert text.count("no RTRS session found") == 1


def test_each_session_is_written_before_the_next_is_made():
    analysis = analyze(real_pcap("errors"), keep_messages=False)
    head, sessions = analysis.summary_parts()
    out = io.StringIO()
    labels, written_before = [], []

    def made_one_by_one():
        for session in sessions:
            written_before.append(out.getvalue())
            labels.append(session["label"])
            yield session

    write_summary_json(head, made_one_by_one(), out, piece=1)
    assert len(labels) == 3
    for k in range(1, len(labels)):
        assert json.dumps(labels[k - 1]) in written_before[k]
        assert json.dumps(labels[k]) not in written_before[k]
    assert json.loads(out.getvalue())["sessions"] == analysis.summary["sessions"]


def test_a_summary_asked_for_whole_is_streamed_from_what_was_made():
    analysis = analyze(real_pcap("errors"), keep_messages=False)
    whole = analysis.summary
    head, sessions = analysis.summary_parts()
    assert all(made is kept for made, kept in zip(sessions, whole["sessions"], strict=True))
    assert "".join(render_parts(head, iter(whole["sessions"]))) == render(whole)


@pytest.mark.parametrize("capture", [real_pcap("errors"), real_pcap("discard"),
                                     PROJECT_PCAPS / "reject_eexist.pcap",
                                     PROJECT_PCAPS / "multipath_failover.pcap"],
                         ids=lambda c: c.name)
def test_the_message_lines_read_only_the_sessions_identities(capture):
    """`messages` keeps of each session what naming.session_identity keeps: every line,
    JSON record, --session and --device answer is the one the whole summary gives."""
    result = analyze(capture)
    whole = MessageView(result.summary, result.messages)
    head, sessions = result.summary_parts()
    lean = MessageView(dict(head, sessions=[session_identity(s) for s in sessions]),
                       result.messages)
    records = list(result.messages)
    assert records
    assert [lean.line(r) for r in records] == [whole.line(r) for r in records]
    assert [lean.as_json(r) for r in records] == [whole.as_json(r) for r in records]
    names = {k for s in result.summary["sessions"] for k in session_keys(s)}
    assert names
    for name in names:
        assert [r.index for r in lean.find_sessions(name)] == \
            [r.index for r in whole.find_sessions(name)]
    devices = device_entries(result.summary["sessions"])
    assert devices
    for _, device_id, path, _ in devices:
        for wanted in (path, *([str(device_id)] if device_id is not None else [])):
            assert lean.find_device(wanted) == whole.find_device(wanted)
    with pytest.raises(LookupError) as lean_error:
        lean.find_device("no-such-device")
    with pytest.raises(LookupError) as whole_error:
        whole.find_device("no-such-device")
    assert str(lean_error.value) == str(whole_error.value)


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_export_builds_its_tables_without_the_whole_summary(capture, tmp_path):
    """The sessions, paths and events tables are the whole summary's, and the messages
    table the one the whole summary names, with the whole summary never made."""
    results = []

    def kept(*args, **kwargs):
        results.append(analyze(*args, **kwargs))
        return results[-1]
    export(str(capture), str(tmp_path), analyze=kept)
    result, = results
    assert result._summary is None

    def table(name):
        return pq.read_table(next((tmp_path / name).glob("*.parquet")))
    whole = result.summary
    sessions = table("sessions").to_pylist()
    assert [s["session"] for s in sessions] == [s["label"] for s in whole["sessions"]]
    paths = [p for s in whole["sessions"] for p in s["paths"]]
    assert [(p["sess_uuid"], p["write_latency_p99_us"], p["reads"])
            for p in table("paths").to_pylist()] == \
        [(p["sess_uuid"], p["latency_us"]["write"]["p99"], p["io"]["read"]["count"])
         for p in paths]
    assert sorted((e["frame"], e["kind"]) for e in table("events").to_pylist()) == \
        sorted((e.get("frame"), e["kind"]) for p in paths for e in p["events"])
    assert table("messages").equals(pa.concat_tables(messages_tables(result, str(capture))))
