"""``rtrs-dissect export`` and ``rtrs-dissect sql`` from the command line:
files written, queries over a folder and over captures, formats, errors."""

import csv
import io
import json
from collections import Counter


from conftest import real_pcap, real_truth
from rtrs_scapy.spec.constants import errno_name
from cli_run import run

ERRORS = real_pcap("errors")


def test_export_writes_a_folder_per_table(tmp_path):
    result = run("export", ERRORS, "-o", tmp_path)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["ios", "messages", "sessions", "paths",
                                                   "events"]
    counts = real_truth("errors")["checks"]["pcap_rtrs_counts"]
    assert lines[0].split()[1] == str(counts["IO_REQ"])
    for line in lines:
        table, path = line.split()[0], line.split()[-1]
        assert path.startswith(str(tmp_path / table) + "/") and path.endswith(".parquet")


def test_export_of_some_tables(tmp_path):
    result = run("export", ERRORS, "-o", tmp_path, "--tables", "paths,ios")
    assert result.exit_code == 0, result.output
    assert [line.split()[0] for line in result.stdout.splitlines()] == ["ios", "paths"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ios", "paths"]
    bad = run("export", ERRORS, "-o", tmp_path, "--tables", "ios,packets")
    assert bad.exit_code == 2 and "packets" in bad.stderr


def test_sql_over_a_folder_and_over_the_capture_agree(tmp_path):
    query = ("SELECT frame, session, device, rnbd_op, sector, errno_name FROM ios "
             "WHERE errno < 0 ORDER BY frame")
    assert run("export", ERRORS, "-o", tmp_path).exit_code == 0
    from_folder = run("sql", query, tmp_path)
    from_capture = run("sql", query, ERRORS)
    assert from_folder.exit_code == from_capture.exit_code == 0
    assert from_folder.stdout == from_capture.stdout
    lines = from_folder.stdout.splitlines()
    assert lines[0].split() == ["frame", "session", "device", "rnbd_op", "sector", "errno_name"]
    # the errnos the test bed counted in the capture's responses
    errnos = real_truth("errors")["checks"]["pcap_io_rsp_errnos"]
    assert Counter(line.split()[-1] for line in lines[1:]) == \
        {errno_name(int(e)): n for e, n in errnos.items()}
    # the kernel's 'I/O error, dev rnbd0, sector 14336 op 0x0:(READ)', rnbd0 = /dev/loop0
    assert lines[2].split()[1:] == ["lab1", "/dev/loop0", "read", "14336", "EIO"]


def test_sql_formats(tmp_path):
    query = "SELECT op, count(*) AS n, min(time) AS first FROM ios GROUP BY op ORDER BY op"
    rows = list(csv.DictReader(io.StringIO(run("sql", query, ERRORS, "--format",
                                               "csv").stdout)))
    assert [(r["op"], r["n"]) for r in rows] == [("read", "26"), ("write", "7")]
    assert rows[0]["first"] == "2026-11-29T15:17:12.465412Z"
    objects = [json.loads(line) for line in
               run("sql", query, ERRORS, "--format", "json").stdout.splitlines()]
    assert objects[0] == {"op": "read", "n": 26, "first": "2026-11-29T15:17:12.465412Z"}


def test_sql_errors_are_usage_errors():
    result = run("sql", "SELECT nosuch FROM ios", ERRORS)
    assert result.exit_code == 2 and "nosuch" in result.stderr
    missing = run("sql", "SELECT 1", "/nonexistent.pcap")
    assert missing.exit_code == 1 and missing.stderr.count("\n") == 1
