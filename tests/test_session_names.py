"""One name per session: its name when the capture has it, else the first 8 hex digits
of its paths_uuid; the same in summary, messages, report, watch and the tables, and
accepted by every --session (with the uuids and a unique prefix of any of them).

The errors capture (PROVENANCE.md): labrej's connection is rejected before its name
reaches the wire, laberr and lab1 are named; its CM REQ carries the paths_uuid."""

import json
import re

import pytest

from conftest import real_pcap
from cli_run import run
from watch_util import watch_jsonl

ERRORS = real_pcap("errors")


@pytest.fixture(scope="module")
def sessions():
    """label -> (paths_uuid, sess_uuids), the labels expected from the CM REQs that
    the messages show: the name, else the paths_uuid's first 8 digits."""
    result = run("messages", ERRORS, "--format", "json", "--msg", "conn_req")
    requests = [json.loads(line) for line in result.stdout.splitlines()]
    summary = json.loads(run("summary", ERRORS, "--format", "json").stdout)
    out = {}
    for session in summary["sessions"]:
        paths_uuid = session["paths_uuid"]
        mine = [r for r in requests if r["paths_uuid"] == paths_uuid]
        assert mine
        expected = session["sessname"] or paths_uuid[:8]
        assert session["label"] == expected
        out[expected] = (paths_uuid, sorted({r["sess_uuid"] for r in mine}))
    assert len(out) == 3 and {"laberr", "lab1"} < set(out)
    return out


def unnamed(sessions):
    (label,) = [k for k in sessions if k not in ("laberr", "lab1")]
    return label


def test_summary_text_and_tables_use_the_label(sessions):
    text = run("summary", ERRORS).stdout
    assert re.findall(r"^session (\S+)", text, re.M) == list(sessions)
    assert "session %s (name not in the capture)" % unnamed(sessions) in text
    result = run("sql", "SELECT session, paths_uuid FROM sessions", ERRORS, "--format", "json")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert {r["session"]: r["paths_uuid"] for r in rows} == \
        {k: v[0] for k, v in sessions.items()}


def test_messages_report_and_watch_use_the_label(sessions, tmp_path):
    records = [json.loads(line) for line in
               run("messages", ERRORS, "--format", "json").stdout.splitlines()]
    assert {r["session"] for r in records} == set(sessions)
    lines = run("messages", ERRORS).stdout.splitlines()[1:]
    assert {line.split()[3] for line in lines} == set(sessions)
    out = tmp_path / "r.html"
    assert run("report", ERRORS, "-o", out, "-q").exit_code == 0
    html = out.read_text()
    for label in sessions:
        assert re.search(r"session (<[^>]+>)*%s" % re.escape(label), html)
    seen = {p["session"] for interval in watch_jsonl(ERRORS) for p in interval["paths"]}
    assert seen == set(sessions)


def test_every_session_option_accepts_label_uuid_and_unique_prefix(sessions, tmp_path):
    label = unnamed(sessions)
    paths_uuid, sess_uuids = sessions[label]
    by_label = run("messages", ERRORS, "--format", "json", "--session", label)
    assert by_label.exit_code == 0 and by_label.stdout
    for wanted in (paths_uuid, sess_uuids[0], sess_uuids[0][:5], label[:4]):
        assert run("messages", ERRORS, "--format", "json", "--session", wanted).stdout == \
            by_label.stdout
    ambiguous = run("messages", ERRORS, "--session", "lab")
    assert ambiguous.exit_code == 2 and "more than one session 'lab'" in ambiguous.stderr
    plotted = run("plot", "ladder", ERRORS, "--session", label, "-o", tmp_path / "l.png", "-q")
    assert plotted.exit_code == 0, plotted.output
    wrong = run("plot", "ladder", ERRORS, "--session", "nosuch", "-o", tmp_path / "x.png")
    assert wrong.exit_code == 2
    assert "no session 'nosuch'" in wrong.output and label in wrong.output


def test_a_name_shared_by_sessions_gets_each_ones_paths_uuid_digits():
    """Names told apart by their paths_uuid's first digits: only the shared ones, and
    only where there is a paths_uuid (a capture of thousands of sessions counts each
    name once)."""
    from rtrs_scapy.analysis.naming import unique_labels
    labels = ["lab1", "lab2", "lab1", "lab3", "lab1"]
    uuids = ["0a1b2c3d-1", "1111aaaa-2", "9f8e7d6c-3", "2222bbbb-4", None]
    assert unique_labels(labels, uuids) == ["lab1 0a1b2c3d", "lab2", "lab1 9f8e7d6c", "lab3",
                                            "lab1"]
    many = ["s%d" % (i % 3000) for i in range(6000)]
    assert unique_labels(many, ["%08x" % i for i in range(6000)]) == \
        ["s%d %08x" % (i % 3000, i) for i in range(6000)]
