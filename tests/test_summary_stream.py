"""`rtrs-dissect summary` writes each session's summary as it is made
(analysis.Analysis.summary_parts, cli/summary.py): the bytes of the whole summary's
text and JSON, with the summaries of a capture's thousands of sessions never all
in memory at once."""

import io
import json

import pytest
from scapy.all import IP, UDP, Ether, wrpcap

from conftest import PROJECT_PCAPS, real_pcap
from rtrs_scapy.analysis import analyze
from rtrs_scapy.cli.summary import write_summary_json
from rtrs_scapy.report.text import render, render_parts

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


@pytest.mark.parametrize("capture", CAPTURES + ["no_rtrs"], ids=lambda c: str(c).split("/")[-1])
def test_the_streamed_summary_is_the_whole_summarys_bytes(capture, request):
    if capture == "no_rtrs":
        capture = request.getfixturevalue("no_rtrs")
    whole = analyze(capture, keep_messages=False).summary
    assert _streamed(capture) == json.dumps(whole, indent=1) + "\n"
    assert _streamed(capture, piece=1) == json.dumps(whole, indent=1) + "\n"
    text = "".join(render_parts(*analyze(capture, keep_messages=False).summary_parts()))
    assert text == render(whole)


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
