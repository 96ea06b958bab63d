"""Throughput and memory of rtrs-dissect against tshark, Scapy and dpkt, in one run.

    .venv/bin/python benchmarks/run.py [--packets 3000000 10000000] [--repeat 3]

Builds captures of each ``--packets`` size (make_capture.py: copies of one capture,
each a session of its own): ``load``, the real load capture (4 KiB random IO, 4
in flight, PMTU 1024), and ``large``, a crafted one (``rtrs-dissect craft
sequential``: 124 KiB sequential writes then reads, 8 in flight, PMTU 4096;
crafted once).  Then
measures whole processes,
start-up included, with their peak RSS, the median of ``--repeat`` runs:

* ``rtrs-dissect summary --format json -q`` on the whole file, on both cores and
  pinned to one (``taskset``);
* the floor: reading the file (``cat``), and walking its records in Python
  (the pcap record loop alone, no decoding);
* tshark without plugin, ``-T fields`` of three InfiniBand fields (its fastest
  decode of what we decode), and tshark with the generated ``wireshark/rtrs.lua``,
  on the first ``--tshark-packets``;
* Scapy's ``PcapReader`` with full dissection and a dpkt record loop, on the first
  ``--sample`` packets (a full file would take hours for Scapy);
* every command on the first size, side by side (``--commands``): messages (text
  and JSON), export (all tables), report, iostat, watch (as fast as possible, and
  replayed at the highest speed), each against the summary's time and the floor
  (``cat``'s time over the command's: the share of the page cache's speed);
* the cold start: ``rtrs-dissect --version`` and a summary of a 1,558-frame capture;
* the stages in one process: records walked and decoded, the transport, the
  analysis.

The package's bytecode is compiled first, as ``pip install`` does for an
installed package (an editable install under ``PYTHONDONTWRITEBYTECODE`` would
compile every module at every start).

Rates are packets per second of wall-clock time; the ratio is rtrs-dissect's rate
over the tool's, both on the same workload in this run.  Not a test.
"""

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out"
SOURCES = {"load": REPO / "pcaps" / "real" / "load.pcap.gz", "large": OUT / "large.pcap"}
CRAFT_LARGE = ["craft", "sequential", "-p", "pmtu=4096", "-p", "ios=1600", "--no-truth"]
SMALL = REPO / "pcaps" / "real" / "basic_inval.pcap"
PYTHON = sys.executable
DISSECT = str(Path(PYTHON).with_name("rtrs-dissect"))
#: the command the per-command table runs (--dissect: another checkout's, for before/after)
DISSECT_COMMAND = [DISSECT]


def measure(argv, stdout=subprocess.DEVNULL):
    """(seconds, peak RSS in MiB, CPU seconds) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    stderr = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError("%s failed: %s" % (argv[0], stderr.strip()[-500:]))
    return elapsed, usage.ru_maxrss / 1024.0, usage.ru_utime + usage.ru_stime


def median_run(argv, repeat):
    """(median seconds, largest peak RSS) of ``repeat`` runs."""
    return median_cpu_run(argv, repeat)[:2]


def median_cpu_run(argv, repeat):
    """(median seconds, largest peak RSS, median CPU seconds) of ``repeat`` runs."""
    runs = [measure(argv) for _ in range(repeat)]
    return (statistics.median(t for t, _, _ in runs), max(rss for _, rss, _ in runs),
            statistics.median(cpu for _, _, cpu in runs))


def capture(name, packets):
    """The workload's file, built by child processes (this one stays small: a child's
    peak RSS counts the pages it was forked with)."""
    source, path = SOURCES[name], OUT / ("%s_%d.pcap" % (name, packets))
    if name == "large" and not source.exists():
        subprocess.run([DISSECT, *CRAFT_LARGE, "-o", str(source)], check=True)
    if not path.exists():
        subprocess.run([PYTHON, str(HERE / "make_capture.py"), str(source), str(path),
                        "--packets", str(packets)], check=True, stdout=subprocess.DEVNULL)
    return path


WALK = """
import sys
from rtrs_scapy.capture import open_capture
n = 0
with open_capture(sys.argv[1]) as cap:
    for _record in cap:
        n += 1
"""

SCAPY = """
import sys
from scapy.utils import PcapReader
import rtrs_scapy.layers
for n, pkt in enumerate(PcapReader(sys.argv[1]), 1):   # each one dissected to its last layer
    if n == int(sys.argv[2]):
        break
"""

DPKT = """
import sys
import dpkt
with open(sys.argv[1], "rb") as f:
    for n, (ts, buf) in enumerate(dpkt.pcap.Reader(f), 1):
        dpkt.ethernet.Ethernet(buf)
        if n == int(sys.argv[2]):
            break
"""

STAGES = """
import sys, time, json
from rtrs_scapy.analysis import Analyzer
from rtrs_scapy.capture import open_capture
from rtrs_scapy.engine import Engine

class Null:
    engine = None
    def frames_seen(self, chunk, packets): pass
    def messages_done(self, rows, arena): pass
    def events(self, rows): pass
    def cm_run(self, *args): pass

def run(consumer):
    start = time.perf_counter()
    with open_capture(sys.argv[1]) as cap:
        engine = Engine(consumer) if consumer is not None else None
        for chunk in cap.chunks():
            chunk.decoded()
            if engine is not None:
                engine.feed(chunk)
            cap.done(chunk)
        if engine is not None:
            engine.flush()
    if isinstance(consumer, Analyzer):
        consumer.close()
    return time.perf_counter() - start

run(Null())       # compile and warm the caches
walk = run(None)
transport = run(Null())
analysis = run(Analyzer())
print(json.dumps({"walk_decode": walk, "transport": transport - walk,
                  "analysis": analysis - transport}))
"""


def commands(path, scratch):
    """(name, argv) of every command measured side by side on one capture."""
    return [
        ("summary", ["summary", str(path), "--format", "json", "-q"]),
        ("messages", ["messages", str(path), "-q"]),
        ("messages --format json", ["messages", str(path), "--format", "json", "-q"]),
        ("export (all tables)", ["export", str(path), "-o", str(scratch / "tables"), "-q"]),
        ("report", ["report", str(path), "-o", str(scratch / "report.html"), "-q"]),
        ("iostat", ["iostat", str(path), "-q"]),
        ("watch --jsonl", ["watch", str(path), "--jsonl"]),
        ("watch --replay --speed 1e6 --jsonl",
         ["watch", str(path), "--replay", "--speed", "1000000", "--jsonl"]),
    ]


def command_table(path, packets, repeat):
    """Every command, whole processes, against the summary and the page-cache floor.

    The commands run in rounds, each once a round after ``cat``: a machine that slows
    down for a minute slows every command of that round alike.  "× summary" is the
    median of each round's ratio, the other columns the medians of the runs (the peak
    RSS the largest)."""
    scratch = OUT / "commands"
    named = commands(path, scratch)
    runs = {name: [] for name, _ in named}
    floors = []
    for _ in range(repeat):
        floors.append(measure(["cat", str(path)])[0])
        for name, argv in named:
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir(parents=True)
            runs[name].append(measure([*DISSECT_COMMAND, *argv]))
    shutil.rmtree(scratch, ignore_errors=True)
    floor = statistics.median(floors)
    summary = runs[named[0][0]]
    print("\n| command | packets | time | rate | CPU | peak RSS | × summary | share of the "
          "page-cache floor |")
    print("|---|---|---|---|---|---|---|---|")
    for name, _ in named:
        mine = runs[name]
        seconds = statistics.median(t for t, _, _ in mine)
        ratio = statistics.median(t / base for (t, _, _), (base, _, _) in zip(mine, summary))
        print("| %s | %s | %.2f s | %s pkt/s | %.2f s | %.0f MiB | %.2f | %.0f %% |" % (
            name, "{:,}".format(packets), seconds, "{:,.0f}".format(packets / seconds),
            statistics.median(cpu for _, _, cpu in mine), max(rss for _, rss, _ in mine),
            ratio, 100 * floor / seconds))
    print("| floor: cat | %s | %.2f s | %s pkt/s | | | | 100 %% |" % (
        "{:,}".format(packets), floor, "{:,.0f}".format(packets / floor)))
    sys.stdout.flush()


def read_afresh(path):
    """Drop the capture from the page cache and read it back once, as a first read does;
    returns the MiB of it the kernel then holds in 2 MiB pages.

    How the page cache holds a file (4 KiB pages or large folios) decides what mapping it
    costs the reader's thread in kernel time (docs/benchmarks.md, "The page cache's
    layout").  Which one a file gets depends on how it was read and how fragmented memory
    was then, so every workload is read afresh before it is timed, and the share in 2 MiB
    pages (``FileHugePages``, the whole machine's, before and after) is printed beside the
    figures."""
    if hasattr(os, "posix_fadvise"):        # else (macOS) read as it is
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    before = file_huge_pages_kib()
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)
    return max(0, file_huge_pages_kib() - before) / 1024


def file_huge_pages_kib():
    """The page cache's file data in 2 MiB pages, KiB (0 where the kernel does not say)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("FileHugePages:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def page_cache_note(path):
    """Read ``path`` afresh and say how the page cache holds it."""
    huge = read_afresh(path)
    print("%s read afresh into the page cache: %.0f of its %.0f MiB in 2 MiB pages"
          % (path.name, huge, path.stat().st_size / 2 ** 20))


def tshark_sample(path, packets):
    sample = OUT / ("%s_tshark_%d.pcap" % (path.stem, packets))
    if not sample.exists():
        subprocess.run(["editcap", "-r", str(path), str(sample), "1-%d" % packets],
                       check=True, stdout=subprocess.DEVNULL)
    return sample


def table_row(tool, packets, seconds, rss, base_rate):
    rate = packets / seconds
    ratio = "%.1f×" % (base_rate / rate) if base_rate and rate < base_rate else (
        "%.2f×" % (base_rate / rate) if base_rate else "1")
    print("| %s | %s | %.2f s | %s pkt/s | %.0f MiB | %s |" % (
        tool, "{:,}".format(packets), seconds, "{:,.0f}".format(rate), rss, ratio))
    sys.stdout.flush()


def workload(name, args):
    python, dissect = PYTHON, DISSECT
    if args.commands_only:
        packets = args.packets[0]
        print("\n%s, %s packets" % (name, "{:,}".format(packets)))
        page_cache_note(capture(name, packets))
        command_table(capture(name, packets), packets, args.repeat)
        return
    print("\n%s (%s)\n" % (name, ", ".join("%s packets: %.0f MiB" % (
        "{:,}".format(n), capture(name, n).stat().st_size / 2 ** 20) for n in args.packets)))
    for packets in args.packets:
        page_cache_note(capture(name, packets))
    print()
    print("| tool | packets | time | rate | peak RSS | rtrs-dissect is faster by |")
    print("|---|---|---|---|---|---|")
    for packets in args.packets:
        path = capture(name, packets)
        seconds, rss = median_run([dissect, "summary", str(path), "--format", "json", "-q"],
                                  args.repeat)
        base = packets / seconds
        table_row("rtrs-dissect summary (2 cores)", packets, seconds, rss, None)
        if shutil.which("taskset"):
            seconds, rss = median_run(["taskset", "-c", "0", dissect, "summary", str(path),
                                       "--format", "json", "-q"], args.repeat)
            table_row("rtrs-dissect summary (1 core)", packets, seconds, rss, base)
    packets = args.packets[0]          # the commands and the peers, against the first size
    path = capture(name, packets)
    if args.commands:
        command_table(path, packets, args.repeat)
    base = packets / median_run([dissect, "summary", str(path), "--format", "json", "-q"],
                                args.repeat)[0]
    seconds, rss = median_run(["cat", str(path)], args.repeat)
    table_row("floor: cat (the file from the page cache)", packets, seconds, rss, base)
    seconds, rss = median_run([python, "-c", WALK, str(path)], 1)
    table_row("the records iterated one by one in Python", packets, seconds, rss, base)
    if shutil.which("tshark"):
        sample = tshark_sample(path, args.tshark_packets)
        fields = ["tshark", "-n", "-r", str(sample), "-T", "fields", "-e", "infiniband.bth.opcode",
                  "-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn"]
        seconds, rss = median_run(fields, 1)
        table_row("tshark -T fields (IB opcode, QP, PSN)", args.tshark_packets, seconds, rss,
                  base)
        seconds, rss = median_run(["tshark", "-n", "-r", str(sample), "-X",
                                   "lua_script:%s" % (REPO / "wireshark" / "rtrs.lua")], 1)
        table_row("tshark + rtrs.lua", args.tshark_packets, seconds, rss, base)
    seconds, rss = median_run([python, "-c", SCAPY, str(path), str(args.sample)], 1)
    table_row("Scapy PcapReader, full dissection", args.sample, seconds, rss, base)
    if importlib.util.find_spec("dpkt") is None:
        print("| dpkt | not installed (`pip install -e '.[bench]'`) | | | | |")
    else:
        seconds, rss = median_run([python, "-c", DPKT, str(path), str(args.sample * 10)], 1)
        table_row("dpkt record loop + Ethernet", args.sample * 10, seconds, rss, base)
    stages = json.loads(subprocess.run([python, "-c", STAGES, str(path)], check=True,
                                       capture_output=True, text=True).stdout)
    print("\nper packet, in one process without the read-ahead thread: " + ", ".join(
        "%s %.0f ns" % (stage, seconds / packets * 1e9) for stage, seconds in stages.items()))


def compile_package():
    import compileall
    compileall.compile_dir(str(REPO / "rtrs_scapy"), quiet=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packets", type=int, nargs="+", default=[3_000_000, 10_000_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sample", type=int, default=20_000)
    parser.add_argument("--tshark-packets", type=int, default=300_000)
    parser.add_argument("--workloads", nargs="+", default=sorted(SOURCES), choices=SOURCES)
    parser.add_argument("--commands", action=argparse.BooleanOptionalAction, default=True,
                        help="every command side by side on the first size")
    parser.add_argument("--commands-only", action="store_true",
                        help="the commands' table alone (no summary rows, peers, stages)")
    parser.add_argument("--dissect", nargs="+", default=None, metavar="ARGV",
                        help="what runs rtrs-dissect in the commands' table, e.g. another "
                             "checkout's: env PYTHONPATH=DIR python -P -m rtrs_scapy.cli "
                             "(-P: without it, -m finds the package in the current folder "
                             "first)")
    args = parser.parse_args()
    if args.dissect:
        DISSECT_COMMAND[:] = args.dissect
    OUT.mkdir(exist_ok=True)
    compile_package()
    dissect = DISSECT
    print("cold start: `rtrs-dissect --version` %.2f s, `summary` of %s (1,558 frames) "
          "%.2f s" % (median_run([dissect, "--version"], args.repeat)[0], SMALL.name,
                      median_run([dissect, "summary", str(SMALL), "-q"], args.repeat)[0]))
    for name in args.workloads:
        workload(name, args)


if __name__ == "__main__":
    main()
