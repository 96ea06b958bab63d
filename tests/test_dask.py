"""Many files of one capture, mapped in parallel (rtrs_scapy/analysis/parallel.py) on a Dask
LocalCluster of 2 workers and on local processes, reduced in one: the exported
``ios`` table and the summary equal those of the unsplit capture (whose figures
the kernel's counters vouch for, tests/test_truth.py), also for the IOs whose
request and response lie in different files."""

import bisect
import json
import os

import duckdb
import pytest
from distributed import LocalCluster

from conftest import real_pcap
from test_inputs import frames_of, write_pcap
from rtrs_scapy.analysis import parallel
from rtrs_scapy.analysis import analyze
from cli_run import run

FIGURES = ("SELECT op, count(*), sum(bytes), count(latency_us) FROM "
           "read_parquet('%s/ios/*.parquet') GROUP BY op ORDER BY op")


def split(pcap, folder, count):
    """``count`` files of consecutive frames (a ring buffer); their frame counts."""
    frames = frames_of(pcap)
    cuts = [len(frames) * k // count for k in range(count + 1)]
    folder.mkdir()
    for k, (a, b) in enumerate(zip(cuts, cuts[1:])):
        write_pcap(folder / ("ring%02d.pcap" % k), frames[a:b])
    return [b - a for a, b in zip(cuts, cuts[1:])]


def without_capture_block(summary):
    return {k: v for k, v in summary.items() if k != "capture"}


def summary_figures(summary):
    paths = [p for s in summary["sessions"] for p in s["paths"]]
    return [(op, sum(p["io"][op]["count"] for p in paths), sum(p["io"][op]["bytes"] for p in paths),
             sum(p["latency_us"][op]["count"] for p in paths)) for op in ("read", "write")]


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as local:
        yield local


@pytest.fixture(scope="module")
def load_ring(tmp_path_factory):
    """The real load capture (135,237 frames) as a ring buffer of 24 files."""
    pcap = real_pcap("load")
    folder = tmp_path_factory.mktemp("load") / "ring"
    sizes = split(pcap, folder, 24)
    return pcap, folder, sizes, analyze(pcap, keep_messages=False).summary


def test_export_on_a_dask_cluster_equals_the_unsplit_capture(load_ring, cluster, tmp_path):
    pcap, folder, sizes, whole = load_ring
    files = sorted(folder.iterdir())
    assert len(files) >= 20
    result = run("export", *files, "-o", tmp_path / "split", "--dask", cluster.scheduler_address)
    assert result.exit_code == 0, result.output
    con = duckdb.connect()
    got = con.execute(FIGURES % (tmp_path / "split")).fetchall()
    assert got == summary_figures(whole)
    # the same rows as the export of the unsplit capture, frame for frame
    assert run("export", pcap, "-o", tmp_path / "whole", "--tables", "ios").exit_code == 0
    columns = "* EXCLUDE (capture)"
    query = "SELECT %s FROM read_parquet('%s/ios/*.parquet') ORDER BY frame"
    assert con.execute(query % (columns, tmp_path / "split")).fetchall() == \
        con.execute(query % (columns, tmp_path / "whole")).fetchall()
    # IOs whose request and response lie in different files
    ends = [sum(sizes[:k + 1]) for k in range(len(sizes))]
    pairs = con.execute("SELECT frame, response_frame FROM read_parquet('%s/ios/*.parquet') "
                        "WHERE response_frame IS NOT NULL" % (tmp_path / "split")).fetchall()
    crossing = [(a, b) for a, b in pairs
                if bisect.bisect_left(ends, a) != bisect.bisect_left(ends, b)]
    assert len(crossing) >= len(files) - 1


def test_summary_with_dask_local_equals_the_unsplit_capture(load_ring):
    pcap, folder, _, whole = load_ring
    files = sorted(folder.iterdir())
    result = run("summary", "--format", "json", "-q", "--dask", "local", "--jobs", "2", *files)
    assert result.exit_code == 0, result.output
    reduced = json.loads(result.stdout)
    assert without_capture_block(reduced) == without_capture_block(whole)
    assert reduced["capture"]["packets"] == whole["capture"]["packets"]
    assert reduced["capture"]["files"] == [str(f) for f in files]


def test_local_processes_map_a_directory(tmp_path):
    """The multipath capture (two paths, 20 files) on two local processes."""
    pcap = real_pcap("multipath")
    split(pcap, tmp_path / "ring", 20)
    whole = analyze(pcap, keep_messages=False).summary
    with parallel.local_runner(2) as runner:
        reduced = runner(str(tmp_path / "ring"), keep_messages=False)
        assert runner.mapped == 20
    assert without_capture_block(reduced.summary) == without_capture_block(whole)
    one_process = run("summary", "--format", "json", "-q", "--jobs", "1", tmp_path / "ring")
    assert without_capture_block(json.loads(one_process.stdout)) == without_capture_block(whole)


def test_by_default_one_job_per_core_the_process_may_use(tmp_path, monkeypatch):
    """Pinned to one core (``taskset -c 0``), the files are mapped one after the other in
    this process, as ``--jobs 1`` maps them."""
    pcap = real_pcap("multipath")
    split(pcap, tmp_path / "ring", 4)
    mapped_in, map_file = [], parallel._map_file

    def recorded(path):
        mapped_in.append(os.getpid())
        return map_file(path)
    monkeypatch.setattr(parallel, "_map_file", recorded)
    monkeypatch.setattr(parallel, "usable_cores", lambda: 1)
    with parallel.local_runner() as runner:
        reduced = runner(str(tmp_path / "ring"), keep_messages=False)
    assert mapped_in == [os.getpid()] * 4
    whole = analyze(pcap, keep_messages=False).summary
    assert without_capture_block(reduced.summary) == without_capture_block(whole)


def test_files_that_overlap_in_time_are_merged_in_one_process(tmp_path):
    """Two hosts' files (here: alternate frames of one capture) cannot be stitched
    file after file; they are merged frame by frame, with a word on stderr."""
    pcap = real_pcap("basic_inval")
    frames = frames_of(pcap)
    files = [write_pcap(tmp_path / "a.pcap", frames[0::2]),
             write_pcap(tmp_path / "b.pcap", frames[1::2])]
    warnings = []
    with parallel.local_runner(2) as runner:
        runner.warn = warnings.append
        merged = runner([str(f) for f in files], keep_messages=False)
        assert runner.mapped == 0
    assert warnings and "overlap in time" in warnings[0]
    whole = analyze(pcap, keep_messages=False).summary
    assert without_capture_block(merged.summary) == without_capture_block(whole)
