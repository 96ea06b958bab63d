"""Shared fixtures: the real kernel captures (../shared/pcaps, or $RTRS_SHARED_PCAPS)
and Scapy set to raise on dissector errors instead of hiding them as Raw."""

import functools
import json
import os
from pathlib import Path

import pytest
from hypothesis import settings
from scapy.config import conf
from scapy.layers.l2 import Ether
from scapy.utils import RawPcapReader

import rtrs_scapy  # noqa: F401  (binds every layer)

# Property tests explore the same examples on every run: CI stays reproducible.
settings.register_profile("rtrs", derandomize=True, deadline=None)
settings.load_profile("rtrs")

REPO = Path(__file__).resolve().parents[1]
SHARED_PCAPS = Path(os.environ.get("RTRS_SHARED_PCAPS", REPO.parent / "shared" / "pcaps"))
PROJECT_PCAPS = REPO / "pcaps"


def real_captures():
    """(name, pcap path, truth dict) of every real capture with a truth.json."""
    found = []
    for truth in sorted(SHARED_PCAPS.glob("*/truth.json")):
        data = json.loads(truth.read_text())
        found.append((truth.parent.name, truth.parent / data["pcap"], data))
    return found


REAL = real_captures()


@pytest.fixture(autouse=True)
def _debug_dissector():
    old = conf.debug_dissector
    conf.debug_dissector = True
    yield
    conf.debug_dissector = old


def pytest_collection_modifyitems(config, items):
    if not REAL:
        raise pytest.UsageError("no real captures under %s (set RTRS_SHARED_PCAPS)" % SHARED_PCAPS)


@pytest.fixture(params=[name for name, _, _ in REAL])
def real_capture(request):
    """(pcap path, truth) for each real capture."""
    for name, path, truth in REAL:
        if name == request.param:
            return path, truth
    raise LookupError(request.param)


@functools.lru_cache(maxsize=None)
def _raw_frames(capture):
    return [data for data, _ in RawPcapReader(str(SHARED_PCAPS / capture / (capture + ".pcap")))]


def real_frame(capture, number):
    """(wire bytes, Ether) of frame ``number`` (1-based, as tshark numbers it) of a
    real capture of ../shared/pcaps, e.g. ``real_frame("basic_inval", 22)``."""
    raw = _raw_frames(capture)[number - 1]
    return raw, Ether(raw)
