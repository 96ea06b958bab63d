"""Shared fixtures: the real kernel captures of pcaps/real/ (see PROVENANCE.md
there) and Scapy set to raise on dissector errors instead of hiding them as Raw."""

import functools
import gzip
import json
from pathlib import Path

import pytest

from installed import missing

_absent = missing()
if _absent:
    pytest.exit("not installed: %s (setup.cfg asks for them): run scripts/test.sh, or "
                "pip install -e '.[test]'" % ", ".join(_absent),
                returncode=pytest.ExitCode.USAGE_ERROR)

from hypothesis import settings  # noqa: E402
from scapy.config import conf  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.utils import RawPcapReader  # noqa: E402

import rtrs_scapy.layers  # noqa: F401,E402  (binds every layer)

# no_skips: a skipped test fails the session; pytester: to test that plugin
pytest_plugins = ["no_skips", "pytester"]

# Property tests explore the same examples on every run: CI stays reproducible.
settings.register_profile("rtrs", derandomize=True, deadline=None)
settings.load_profile("rtrs")

REPO = Path(__file__).resolve().parents[1]
PROJECT_PCAPS = REPO / "pcaps"
REAL_PCAPS = PROJECT_PCAPS / "real"
#: the captures of one path and plain IO that the generic tests run on
BASIC = ("basic_inval", "basic_noinval")


def _read_text(path):
    return gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" \
        else path.read_text()


def real_truth(name):
    """The truth.json of real capture ``name`` (gzip-compressed for the large ones)."""
    for path in (REAL_PCAPS / (name + ".truth.json"), REAL_PCAPS / (name + ".truth.json.gz")):
        if path.exists():
            return json.loads(_read_text(path))
    raise LookupError(name)


def real_pcap(name):
    """The capture file of real capture ``name`` (``.pcap`` or ``.pcap.gz``)."""
    for path in (REAL_PCAPS / (name + ".pcap"), REAL_PCAPS / (name + ".pcap.gz")):
        if path.exists():
            return path
    raise LookupError(name)


def real_captures(names=None):
    """(name, pcap path, truth dict) of the real captures (all, or ``names``)."""
    found = sorted(p.name.split(".")[0] for p in REAL_PCAPS.glob("*.truth.json*"))
    return [(name, real_pcap(name), real_truth(name)) for name in found
            if names is None or name in names]


REAL_ALL = real_captures()
REAL = [entry for entry in REAL_ALL if entry[0] in BASIC]


@pytest.fixture(autouse=True)
def _debug_dissector():
    old = conf.debug_dissector
    conf.debug_dissector = True
    yield
    conf.debug_dissector = old


def pytest_collection_modifyitems(config, items):
    if len(REAL) != len(BASIC):
        raise pytest.UsageError("the real captures %s are missing from %s" % (BASIC, REAL_PCAPS))


@pytest.fixture(params=[name for name, _, _ in REAL])
def real_capture(request):
    """(pcap path, truth) for each real capture."""
    for name, path, truth in REAL:
        if name == request.param:
            return path, truth
    raise LookupError(request.param)


@functools.lru_cache(maxsize=None)
def _raw_frames(capture):
    return [data for data, _ in RawPcapReader(str(real_pcap(capture)))]


def real_frame(capture, number):
    """(wire bytes, Ether) of frame ``number`` (1-based, as tshark numbers it) of a
    real capture of pcaps/real/, e.g. ``real_frame("basic_inval", 22)``."""
    raw = _raw_frames(capture)[number - 1]
    return raw, Ether(raw)
