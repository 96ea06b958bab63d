"""The analysis does not depend on where the engine's batches of message rows end
(engine/__init__.py ``ROWS``: a batch goes at half of it): every real capture's
summary, message lines and iostat, read with batches of 256 rows, of the default, and
of 131,072 rows (each real capture in one batch between its handshakes), are the same
byte for byte, and so are its exported tables, but the ``ios`` table's order: its rows
go out as their fate becomes known (docs/export.md), the same rows.  The crafted
corpus's outputs (its hostile files' errors among them) are the same too, and so are
those of real captures cut mid-session, whose first IO waits for its queue depth rule."""

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from conftest import PROJECT_PCAPS, REAL_NAMES, real_pcap
from ib_decode import write_cut
from rtrs_scapy import analysis, engine
from rtrs_scapy.cli import main

COMMANDS = ("summary", "messages", "iostat")


def outputs(monkeypatch, rows, pcap):
    """(exit code, JSON output) of each command, with batches of ``rows`` // 2 rows."""
    monkeypatch.setattr(engine, "ROWS", rows)
    results = [CliRunner().invoke(main, [command, "--format", "json", str(pcap)])
               for command in COMMANDS]
    return [(result.exit_code, result.output) for result in results]


def exported(monkeypatch, rows, pcap, folder):
    """{table: its rows} of an export (``ios``: sorted), and the exit code."""
    monkeypatch.setattr(engine, "ROWS", rows)
    result = CliRunner().invoke(main, ["export", "-o", str(folder), str(pcap)])
    tables = {path.parent.name: pq.read_table(path).to_pylist()
              for path in folder.glob("*/*.parquet")}
    tables["ios"] = sorted(tables["ios"], key=repr)
    return result.exit_code, tables


@pytest.mark.parametrize("name", REAL_NAMES)
def test_the_outputs_are_the_same_whatever_rows_a_batch_holds(monkeypatch, name):
    pcap = real_pcap(name)
    made = outputs(monkeypatch, engine.ROWS, pcap)
    assert all(code == 0 for code, _ in made)
    assert outputs(monkeypatch, 1 << 9, pcap) == made
    assert outputs(monkeypatch, 1 << 18, pcap) == made


@pytest.mark.parametrize("pcap", sorted(PROJECT_PCAPS.glob("*.pcap")), ids=lambda p: p.stem)
def test_the_crafted_outputs_are_the_same_whatever_rows_a_batch_holds(monkeypatch, pcap):
    made = outputs(monkeypatch, engine.ROWS, pcap)
    assert outputs(monkeypatch, 1 << 9, pcap) == made
    assert outputs(monkeypatch, 1 << 18, pcap) == made


@pytest.mark.parametrize("name, first", [("failover", 69404), ("failover", 155690),
                                         ("load", 50000), ("multipath", 500)])
def test_a_cut_capture_s_outputs_are_the_same_whatever_rows_a_batch_holds(monkeypatch, tmp_path,
                                                                          name, first):
    pcap = write_cut(real_pcap(name), first, tmp_path / ("%s_cut.pcap" % name))
    made = outputs(monkeypatch, engine.ROWS, pcap)
    assert all(code == 0 for code, _ in made)
    assert outputs(monkeypatch, 1 << 9, pcap) == made
    assert outputs(monkeypatch, 1 << 18, pcap) == made


@pytest.mark.parametrize("name", REAL_NAMES)
def test_the_exported_tables_are_the_same_whatever_rows_a_batch_holds(monkeypatch, tmp_path,
                                                                      name):
    pcap = real_pcap(name)
    code, tables = exported(monkeypatch, engine.ROWS, pcap, tmp_path / "default")
    assert code == 0 and len(tables) > 1 and tables["ios"]
    assert exported(monkeypatch, 1 << 9, pcap, tmp_path / "small") == (code, tables)
    assert exported(monkeypatch, 1 << 18, pcap, tmp_path / "large") == (code, tables)


def _waiting_every_chunk(iterable, behind=None, idle=None):
    """engine/ahead.py's ``ahead`` as if no chunk were ever ready: its ``idle`` (the
    engine's batch handed early) before each."""
    for item in iterable:
        idle()
        yield item


@pytest.mark.parametrize("name", REAL_NAMES)
def test_batches_handed_while_waiting_for_a_chunk_change_nothing(monkeypatch, name):
    """The main thread hands its batch to the analysis early when the reader has no
    chunk ready (``Engine.flush_waiting``), which depends on the threads' pace: as if
    it never had one, with batches of 128 rows and more ending at chunks' ends, the
    outputs are the same (the late fields in records.LATE's order, not learnt order)."""
    pcap = real_pcap(name)
    made = outputs(monkeypatch, engine.ROWS, pcap)
    monkeypatch.setattr(analysis, "ahead", _waiting_every_chunk)
    assert outputs(monkeypatch, 1 << 9, pcap) == made


@pytest.mark.parametrize("name, first", [("failover", 69404), ("failover", 155690),
                                         ("load", 50000), ("multipath", 500)])
def test_batches_handed_while_waiting_change_nothing_on_a_cut_capture(monkeypatch, tmp_path,
                                                                      name, first):
    """The same, on real captures cut mid-session: no handshake, the first IO waiting
    for its queue depth rule (settling.py) while batches end at chunks' ends."""
    pcap = write_cut(real_pcap(name), first, tmp_path / ("%s_cut.pcap" % name))
    made = outputs(monkeypatch, engine.ROWS, pcap)
    monkeypatch.setattr(analysis, "ahead", _waiting_every_chunk)
    assert outputs(monkeypatch, 1 << 9, pcap) == made
