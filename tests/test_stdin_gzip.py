"""gzip on standard input: a pipe has no position to ask for (``Illegal seek`` was a
traceback for every command); the result equals the file's."""

import json
import subprocess
import sys

import pytest

from conftest import PROJECT_PCAPS

GZ = PROJECT_PCAPS / "basic_inval.pcap.gz"
CLI = [sys.executable, "-m", "rtrs_scapy.cli"]


def _piped(args, tmp_path):
    with open(GZ, "rb") as stdin:
        return subprocess.run(CLI + args, stdin=stdin, capture_output=True, text=True,
                              cwd=tmp_path)


def _from_file(args, tmp_path):
    return subprocess.run(CLI + args, capture_output=True, text=True, cwd=tmp_path)


def test_summary_of_gzip_on_stdin_equals_the_file(tmp_path):
    piped = _piped(["--format", "json", "-"], tmp_path)
    assert piped.returncode == 0 and piped.stderr == ""
    whole = json.loads(_from_file(["--format", "json", str(GZ)], tmp_path).stdout)
    got = json.loads(piped.stdout)
    for summary in (got, whole):
        summary["capture"].pop("path")
        summary["capture"].pop("files", None)
    assert got == whole


@pytest.mark.parametrize("args", [["messages", "-"], ["messages", "--format", "json", "-"],
                                  ["watch", "--jsonl", "-"]])
def test_other_commands_read_gzip_on_stdin(args, tmp_path):
    piped = _piped(args, tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert "Traceback" not in piped.stderr and piped.stdout


def test_export_of_stdin_names_its_files_stdin(tmp_path):
    piped = _piped(["export", "-q", "-o", "tables", "-"], tmp_path)
    assert piped.returncode == 0, piped.stderr
    files = sorted(p.name for p in (tmp_path / "tables").rglob("*.parquet"))
    assert files and all(name.startswith("stdin-") for name in files)


def test_report_of_gzip_on_stdin(tmp_path):
    piped = _piped(["report", "-q", "-o", "r.html", "-"], tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert (tmp_path / "r.html").stat().st_size > 0
