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
#: (the lookahead: the first character of every match, so that the search passes over
#: the other positions of a long output at once)
PYTHON = re.compile(r"(?=[NTFb{'1ni])(?:\bNone\b|\bTrue\b|\bFalse\b|\bb'|\bb\"|\{'|'\}|"
                    r"\b1 (errors|requests|packets|paths|attempts)\b|\bnan\b|\binf\b)")


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


def python_in_strings(value):
    """python_in of every string inside a JSON value, searched at once: no pattern
    matches across the newline that joins them, and a newline is no word character
    (the same word boundaries as each string alone)."""
    return python_in("\n".join(strings(value)))


@pytest.mark.parametrize("pcap", CAPTURES, ids=[p.name for p in CAPTURES])
def test_no_python_reprs(pcap):
    assert python_in(output("summary", pcap)) == []
    assert python_in(output("messages", pcap)) == []
    summary = json.loads(output("summary", pcap, "--format", "json"))
    assert python_in_strings(summary) == []
    for line in output("messages", pcap, "--format", "json").splitlines():
        assert python_in_strings(json.loads(line)) == [], line
