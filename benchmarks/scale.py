"""Many files of one capture: one process against the map/reduce on local
processes and on a Dask LocalCluster with 1 and 2 workers (benchmarks only).

    .venv/bin/python benchmarks/scale.py [--packets 1000000] [--files 24]

Builds a capture from the real load capture (make_capture.py: repeated with
shifted timestamps and addresses), cuts it into ``--files`` files of
consecutive frames (a ring buffer), and measures whole processes (start-up,
cluster start-up included) with their peak RSS:

* ``summary`` of the one big file (one pass) and of the files (``--jobs 1``:
  mapped one after the other in the process; ``--jobs 2``: on 2 processes;
  ``--dask local --jobs 1|2``: on a LocalCluster of 1|2 workers), reduced in
  the parent;
* ``export`` of the files, the same ways;
* the phases in one process: every file's map one after the other, the reduce,
  the size of the parts (what travels from the workers to the reduce).

Every summary is checked equal to the one-pass summary.  Not a test.
"""

import argparse
import json
import pickle
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))
from make_capture import build  # noqa: E402
from run import measure  # noqa: E402
from rtrs_scapy.capture import open_capture  # noqa: E402
from rtrs_scapy.craft.capture_files import pcap_header, pcap_record  # noqa: E402

DISSECT = str(REPO / ".venv" / "bin" / "rtrs-dissect")


def ring(source, folder, files, packets):
    """``source`` cut into ``files`` pcap files of consecutive frames."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    cuts = [packets * k // files for k in range(1, files + 1)]
    with open_capture(source) as cap:
        out, index, written = None, 0, 0
        for _no, ts, buf, s, e, link_type in cap:
            if out is None:
                out = open(folder / ("ring%03d.pcap" % index), "wb")
                out.write(pcap_header(link_type))
            sec = int(ts)
            out.write(pcap_record(sec, int(round((ts - sec) * 1e6)), bytes(buf[s:e])))
            written += 1
            if written == cuts[index]:
                out.close()
                out, index = None, index + 1
    return sorted(folder.iterdir())


def phases(files):
    """Seconds of the maps one after the other and of the reduce; bytes of the parts."""
    from rtrs_scapy.analysis.parts import map_file, reduce_parts
    start = time.perf_counter()
    parts = [map_file(str(f)) for f in files]
    mapped = time.perf_counter()
    size = sum(len(pickle.dumps(p, protocol=pickle.HIGHEST_PROTOCOL)) for p in parts)
    reduced_at = time.perf_counter()
    reduce_parts(parts, keep_messages=False)
    return mapped - start, time.perf_counter() - reduced_at, size


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packets", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=24)
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    big = OUT / ("scale_%d.pcap" % args.packets)
    if not big.exists():
        build(REPO / "pcaps" / "real" / "load.pcap.gz", big, args.packets)
    files = ring(big, OUT / ("scale_%d_ring" % args.packets), args.files, args.packets)
    print("%s: %d packets, %.0f MiB, cut into %d files" % (
        big.name, args.packets, big.stat().st_size / 2**20, len(files)))
    summaries = {}
    runs = [("one file, one pass", [str(big)]),
            ("files, --jobs 1 (maps in this process)", ["--jobs", "1"] + [str(f) for f in files]),
            ("files, --jobs 2 (2 processes)", ["--jobs", "2"] + [str(f) for f in files]),
            ("files, --dask local --jobs 1", ["--dask", "local", "--jobs", "1"]
             + [str(f) for f in files]),
            ("files, --dask local --jobs 2", ["--dask", "local", "--jobs", "2"]
             + [str(f) for f in files])]
    print("\n| command | run | time | peak RSS |\n|---|---|---|---|")
    for label, argv in runs:
        with tempfile.NamedTemporaryFile("w+", suffix=".json") as out:
            seconds, rss = measure([DISSECT, "summary", "--format", "json", "-q"] + argv,
                                   stdout=out)
            out.seek(0)
            summaries[label] = json.load(out)
        print("| summary | %s | %.1f s | %.0f MiB |" % (label, seconds, rss))
    for label, argv in runs[1:]:
        with tempfile.TemporaryDirectory() as folder:
            seconds, rss = measure([DISSECT, "export", "-o", folder, "--tables", "ios,paths"]
                                   + argv)
        print("| export ios,paths | %s | %.1f s | %.0f MiB |" % (label, seconds, rss))
    first = summaries["one file, one pass"]["sessions"]
    same = all(s["sessions"] == first for s in summaries.values())
    print("\nevery summary equal to the one-pass summary: %s" % same)
    mapped, reduced, size = phases(files)
    print("phases in one process: maps %.1f s (%.2f s per file), reduce %.1f s, parts %.0f MiB "
          "(%.0f%% of the files)" % (mapped, mapped / len(files), reduced, size / 2**20,
                                     100.0 * size / sum(f.stat().st_size for f in files)))


if __name__ == "__main__":
    main()
