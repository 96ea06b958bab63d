"""The analysis does not depend on where the engine's batches of message rows end
(engine/__init__.py ``ROWS``: a batch goes at half of it): every real capture's
summary, message lines and iostat, read with batches of 256 rows, of the default, and
of 131,072 rows (each real capture in one batch between its handshakes), are the same
byte for byte."""

import pytest
from click.testing import CliRunner

from conftest import REAL_NAMES, real_pcap
from rtrs_scapy import engine
from rtrs_scapy.cli import main

COMMANDS = (("--format", "json"), ("messages", "--format", "json"), ("iostat", "--format", "json"))


def outputs(monkeypatch, rows, pcap):
    monkeypatch.setattr(engine, "ROWS", rows)
    made = []
    for command in COMMANDS:
        args = [*command[:1], str(pcap), *command[1:]] if command[0] != "--format" \
            else [str(pcap), *command]
        result = CliRunner().invoke(main, args)
        made.append((result.exit_code, result.output))
    return made


@pytest.mark.parametrize("name", REAL_NAMES)
def test_the_outputs_are_the_same_whatever_rows_a_batch_holds(monkeypatch, name):
    pcap = real_pcap(name)
    made = outputs(monkeypatch, engine.ROWS, pcap)
    assert all(code == 0 for code, _ in made)
    assert outputs(monkeypatch, 1 << 9, pcap) == made
    assert outputs(monkeypatch, 1 << 18, pcap) == made
