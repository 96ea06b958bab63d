"""Shared fixtures: the real kernel captures of pcaps/real/ (see PROVENANCE.md
there) and Scapy set to raise on dissector errors instead of hiding them as Raw."""

import functools
import gzip
import json
import re
from pathlib import Path

import pytest

import once_per_run
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
#: every real capture that pcaps/real/PROVENANCE.md describes (its table's rows): one
#: missing fails the run instead of shrinking the parameter lists built from REAL_ALL
REAL_NAMES = tuple(re.findall(r"(?m)^\| `(\w+)` \|", (REAL_PCAPS / "PROVENANCE.md").read_text()))


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


@pytest.fixture(scope="session", autouse=True)
def _once_per_run_folder(tmp_path_factory, worker_id):
    """tests/once_per_run.py keeps its results where every worker of this run finds
    them: the run's folder, which holds each worker's own."""
    base = tmp_path_factory.getbasetemp()
    once_per_run.folder = base if worker_id == "master" else base.parent
    yield
    once_per_run.folder = None


@pytest.fixture(autouse=True)
def _debug_dissector():
    old = conf.debug_dissector
    conf.debug_dissector = True
    yield
    conf.debug_dissector = old


#: pytest-xdist (setup.cfg: ``-n auto --dist loadgroup``) hands the tests out one by one to
#: the workers.  Tests that share work a worker does once (a module-scoped fixture, a
#: module's cache) stay together on one worker, in one block, so that the work is neither
#: done again on the other worker nor set up twice when the block is interleaved with other
#: modules: module -> "module" (all its tests together), "param" (its tests with the same
#: parameter id together: the work is per capture or per kind; a test without parameters
#: goes alone), or the name of a group of modules.
SHARED_WORK = {
    "test_compiled": "module",           # the wheel built and installed
    "test_capture_loss": "module",       # the uncut captures read and analysed once
    "test_corpus_referee": "param",      # tshark + the analyzer, per capture
    "test_craft": "param",               # a real capture and its crafted twin, per capture
    # the cut sweeps: where the captures are cut (tests/cut_points.py: tshark's fields of
    # each capture and the situations of its cuts) is worked out once per run
    # (tests/once_per_run.py), the whole captures' records and the cuts once per module
    "test_cut_outputs": "module",
    "test_cut_points": "module",
    "test_cuts": "module",
    "test_linking": "module",
    "test_lua_midsession": "module",
    "test_dask": "module",               # a Dask cluster; load.pcap.gz as a ring buffer
    "test_docs_pages": "module",         # each page's commands run once
    "test_failover": "module",           # summaries and tshark's CM rows, per capture
    "test_hostile": "param",             # two hostile captures analysed, per kind
    "test_import_graph": "module",       # every module parsed and scanned once
    "test_layout_agreement": "module",   # Scapy + the analyzer, per capture
    "test_lua_hostile": "param",         # tshark on two hostile captures, per kind
    "test_lua_qdepth": "module",         # the vectors run in lua5.2 once
    "test_mirrors": "module",            # the real captures' summaries, unwrapped
    "test_plugin_vs_analyzer": "param",  # tshark + the plugin and the analyzer, per capture
    "test_other_rdma": "module",         # the mixed captures, analysed and run through tshark
    "test_pyshark": "param",             # pyshark + the analyzer, per capture
    "test_report_browser": "module",     # one Chromium and the reports it loaded
    "test_report_series": "module",      # the report's view, per capture
    "test_robust": "module",             # the frame pool
    "test_snaplen": "module",            # the real captures whole and cut, analysed once
    "test_tables": "module",             # the exports, per capture
    "test_tshark_crafted": "module",     # the crafted frames and their pcaps
    "test_tshark_diff": "module",        # Scapy and tshark, per capture
    "test_wireshark_diff": "module",     # Scapy and tshark + the plugin, per capture
    # the summaries of the captures watch reads: watch_util.summary, once per run
    "test_watch_inputs": "module",
    "test_watch_jsonl": "module",
    "test_watch_memory": "module",
    "test_watch_prometheus": "module",
    "test_watch_screen": "module",
    "test_real_captures": "module",      # the Scapy decode, per capture
    "test_scapy_untouched": "module",    # a fresh Scapy in a subprocess
}


#: the groups (shared_work_scope) that take longest, longest first: a worker is handed
#: the first one still waiting before any other, so that no long group starts last and
#: leaves the other worker idle (longest processing time first), in the order of their
#: time in ``pytest --durations`` (docs/tests.md#how-it-is-kept-fast).
LONGEST_FIRST = (
    "tests/test_compiled.py",                         # a wheel built: the engine compiled
    "tests/test_docs_pages.py",
    "tests/test_plugin_vs_analyzer.py::[failover]",   # tshark + the plugin, 190k frames
    "tests/test_wireshark_diff.py",
    "tests/test_watch_jsonl.py",
    "tests/test_failover.py",
    "tests/test_plugin_vs_analyzer.py::[load]",
    "tests/test_cut_outputs.py",
    "tests/test_report_browser.py",
    "tests/test_tables.py",
    "tests/test_dask.py",
    "tests/test_plugin_vs_analyzer.py::[deep]",
    "tests/test_lua_midsession.py",
    "tests/test_cuts.py",
    "tests/test_lua_hostile.py::[cm_reqs]",
    "tests/test_hostile.py::[io_rsps]",
)


def shared_work_scope(nodeid):
    """The group of a test (see SHARED_WORK), None when it may go alone."""
    path, _, name = nodeid.partition("::")
    mode = SHARED_WORK.get(Path(path).stem)
    if mode == "module":
        return path
    if mode == "param":
        if name.endswith("]") and "[" in name:
            return path + "::" + name[name.index("["):]
        return None
    return mode


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` with the groups of SHARED_WORK (and any xdist_group mark).

    The groups are read off the node ids here, in the controller: xdist 3.8 passes
    xdist_group marks on by rewriting node ids, which pytest 9.2 no longer lets it do
    (pytest-dev/pytest-xdist#1386), so marks alone would be ignored."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class SharedWorkScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid):
            scope = super()._split_scope(nodeid)
            if scope == nodeid:     # no xdist_group mark
                scope = shared_work_scope(nodeid) or nodeid
            return scope

        def _assign_work_unit(self, node):
            """The longest group still waiting first (LONGEST_FIRST), then the others
            in xdist's order (the most tests first)."""
            longest = next((g for g in LONGEST_FIRST if g in self.workqueue), None)
            if longest is not None:
                self.workqueue.move_to_end(longest, last=False)
            super()._assign_work_unit(node)

    return SharedWorkScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    missing = sorted(set(REAL_NAMES) - {name for name, _, _ in REAL_ALL})
    if missing:
        raise pytest.UsageError("the real captures %s are missing from %s" % (missing, REAL_PCAPS))


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
