"""Usage mistakes answered in one line before any work: an output name that looks like
an option (``wireshark export -o --help`` once wrote a 93 KB file named --help into
the repository), an output place that cannot be written, a misspelt command."""

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from conftest import real_pcap
from rtrs_scapy.cli import main

CAPTURE = str(real_pcap("basic_inval"))
#: every option that names a file or folder to write, with what the command needs besides
WRITERS = {
    "report": ["report", CAPTURE, "-o"],
    "plot": ["plot", "iops", CAPTURE, "-o"],
    "export": ["export", CAPTURE, "-o"],
    "craft": ["craft", "basic", "-o"],
    "wireshark export": ["wireshark", "export", "-o"],
}


def _run(args):
    return CliRunner().invoke(main, args, catch_exceptions=False)


@pytest.mark.parametrize("command", sorted(WRITERS))
@pytest.mark.parametrize("name", ["--help", "-q"])
def test_an_option_like_output_name_is_refused(command, name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = _run(WRITERS[command] + [name])
    assert result.exit_code == 2
    assert "%r looks like an option, not a file name (./%s if it is one)" % (name, name) \
        in result.output
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("command", sorted(WRITERS))
def test_an_output_in_a_missing_folder_is_refused_before_the_capture_is_read(
        command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "file" / "out.pcap"
    (tmp_path / "file").write_text("a file, not a folder")
    result = _run(WRITERS[command] + [str(target)])
    assert result.exit_code == 2
    assert "cannot write %s: no such folder %s" % (target, target.parent) in result.output
    assert "reading" not in result.output and "Traceback" not in result.output


def test_stdout_is_still_an_output():
    result = CliRunner().invoke(main, ["wireshark", "export", "-o", "-"])
    assert result.exit_code == 0 and result.output.startswith("-- rtrs.lua")


def test_a_write_that_fails_late_is_one_line(tmp_path):
    """A place that looks writable (root may write anywhere) but is not: /proc."""
    result = CliRunner().invoke(main, ["export", CAPTURE, "-q", "-o", "/proc/rtrs/tables"])
    assert result.exit_code == 1
    assert result.output.splitlines()[-1].startswith("Error: cannot write /proc/rtrs/tables: ")
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("typed, meant", [("sumary", "summary"), ("mesages", "messages"),
                                          ("exprt", "export"), ("wirshark", "wireshark")])
def test_a_misspelt_command_is_named(typed, meant, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, [typed, CAPTURE])
    assert result.exit_code == 2
    assert "Error: no such command or file: %s (did you mean %s?)" % (typed, meant) \
        in result.output


def test_a_file_named_like_a_command_is_still_a_capture(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sumary").write_bytes(open(CAPTURE, "rb").read())
    result = CliRunner().invoke(main, ["sumary", "-q"])
    assert result.exit_code == 0
    assert result.output.startswith("sumary: 1558 packets")


@pytest.mark.parametrize("args", [["export", CAPTURE, "-o", "tables"],
                                  ["export", "--tables", "ios", CAPTURE, "-o", "tables"],
                                  ["sql", "SELECT count(*) FROM ios", CAPTURE]])
def test_a_missing_extra_is_named_in_one_line(args, tmp_path):
    """A plain ``pip install .`` has no pyarrow or duckdb (the ``scale`` extra)."""
    code = ("import sys; sys.modules.update(pyarrow=None, duckdb=None, distributed=None); "
            "from rtrs_scapy.cli import main; sys.argv[0] = 'rtrs-dissect'; main()")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr == "Error: pyarrow is missing: pip install 'rtrs-scapy[scale]'\n"
    assert list(tmp_path.iterdir()) == []


def test_export_needs_no_duckdb(tmp_path):
    """``export`` writes Parquet with pyarrow alone: duckdb (17 MiB of a process) is
    the ``sql`` command's."""
    code = ("import sys; sys.modules.update(duckdb=None); "
            "from rtrs_scapy.cli import main; sys.argv[0] = 'rtrs-dissect'; main()")
    done = subprocess.run([sys.executable, "-c", code, "export", CAPTURE, "-o", "tables",
                           "-q"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "tables").iterdir()) == \
        ["events", "ios", "messages", "paths", "sessions"]


def test_sql_subtracts_times_as_written():
    """``response_time - time`` is an interval to the nanosecond (it was a Binder Error on
    TIMESTAMPTZ_NS): it equals each IO's latency_us."""
    result = CliRunner().invoke(main, [
        "sql", "SELECT count(*), count(*) FILTER (WHERE epoch_ns(response_time) - epoch_ns(time)"
        " = CAST(latency_us * 1000 AS BIGINT)), count(*) FILTER (WHERE response_time - time"
        " > INTERVAL 0 SECOND) FROM ios WHERE response_time IS NOT NULL", CAPTURE])
    assert result.exit_code == 0, result.output
    counts = result.output.splitlines()[-1].split()
    assert counts == ["58", "58", "58"]
