"""No Python in the output: neither the text nor the JSON of summary and messages,
on every real capture and every crafted one, holds a Python representation
(None, True/False, b'…', {'…': …}) or a plural for one ("1 errors")."""

import json
import re

import pytest
from click.testing import CliRunner

from conftest import PROJECT_PCAPS, REAL_ALL
from rtrs_scapy.cli import main

CAPTURES = [path for _, path, _ in REAL_ALL] + sorted(PROJECT_PCAPS.glob("*.pcap"))
PYTHON = re.compile(r"\bNone\b|\bTrue\b|\bFalse\b|\bb'|\bb\"|\{'|'\}|\b1 (errors|requests|"
                    r"packets|paths|attempts)\b|\bnan\b|\binf\b")


def output(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.stdout


def strings(value):
    """Every string inside a JSON value (keys included)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def python_in(text):
    return sorted({m.group(0) for m in PYTHON.finditer(text)})


@pytest.mark.parametrize("pcap", CAPTURES, ids=[p.name for p in CAPTURES])
def test_no_python_reprs(pcap):
    assert python_in(output("summary", pcap)) == []
    assert python_in(output("messages", pcap)) == []
    summary = json.loads(output("summary", pcap, "--format", "json"))
    assert [s for s in strings(summary) if python_in(s)] == []
    for line in output("messages", pcap, "--format", "json").splitlines():
        assert [s for s in strings(json.loads(line)) if python_in(s)] == [], line
