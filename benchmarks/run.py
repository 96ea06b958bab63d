"""Throughput and memory of rtrs-dissect against Scapy and tshark, in one run.

    .venv/bin/python benchmarks/run.py [--sizes 1000000 4000000] [--sample 20000]

Builds captures of the given sizes from a real one (make_capture.py: repeated
with shifted timestamps and addresses), then measures whole processes
(start-up included) with their peak RSS:

* ``rtrs-dissect summary --format json -q`` on every size;
* Scapy's ``PcapReader`` with full dissection on the first ``--sample`` packets
  (it runs at a few thousand packets/s: a full file would take hours);
* ``tshark -r`` with the generated Lua plugin (``wireshark/rtrs.lua``) when it
  exists, and plain tshark, on the first ``--tshark-packets`` packets.

Rates are packets per second of wall-clock time; ratios are against the
rtrs-dissect rate of the smallest size.  Not a test: nothing is asserted.
"""

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out"
DEFAULT_INPUT = REPO.parent / "shared" / "pcaps" / "basic_inval" / "basic_inval.pcap"

sys.path.insert(0, str(HERE))
from make_capture import build  # noqa: E402


def measure(argv, stdout=subprocess.DEVNULL):
    """(seconds, peak RSS in MiB) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    stderr = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError("%s failed: %s" % (argv[0], stderr.strip()[-500:]))
    return elapsed, usage.ru_maxrss / 1024.0


def capture(size, source):
    path = OUT / ("bench_%d.pcap" % size)
    if not path.exists():
        build(source, path, size)
    return path


SCAPY_SNIPPET = """
import sys
from scapy.utils import PcapReader
import rtrs_scapy
n = 0
for pkt in PcapReader(sys.argv[1]):
    n += 1
    if n == int(sys.argv[2]):
        break
"""


def row(name, packets, seconds, rss, base):
    rate = packets / seconds
    ratio = "%.2fx" % (rate / base) if base else "-"
    print("%-44s %10d %8.2f s %12.0f pkt/s %8.1f MiB  %s" % (name, packets, seconds, rate,
                                                              rss, ratio))
    return rate


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", default=str(DEFAULT_INPUT))
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 4_000_000])
    parser.add_argument("--sample", type=int, default=20_000)
    parser.add_argument("--tshark-packets", type=int, default=200_000)
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    python = sys.executable
    dissect = str(Path(python).with_name("rtrs-dissect"))

    print("%-44s %10s %10s %18s %12s  %s" % ("tool", "packets", "time", "rate", "peak RSS",
                                             "vs rtrs-dissect"))
    base = None
    for size in args.sizes:
        path = capture(size, args.input)
        seconds, rss = measure([dissect, "summary", str(path), "--format", "json", "-q"])
        rate = row("rtrs-dissect summary --format json", size, seconds, rss, base)
        base = base or rate

    small = capture(min(args.sizes), args.input)
    seconds, rss = measure([python, "-c", SCAPY_SNIPPET, str(small), str(args.sample)])
    row("scapy PcapReader + dissection (sample)", args.sample, seconds, rss, base)

    tshark = shutil.which("tshark")
    if tshark:
        sample = OUT / ("bench_tshark_%d.pcap" % args.tshark_packets)
        if not sample.exists():
            build(args.input, sample, args.tshark_packets)
        plugin = REPO / "wireshark" / "rtrs.lua"
        if plugin.exists():
            seconds, rss = measure([tshark, "-n", "-X", "lua_script:%s" % plugin, "-r",
                                    str(sample)])
            row("tshark + rtrs.lua (sample)", args.tshark_packets, seconds, rss, base)
        seconds, rss = measure([tshark, "-n", "-r", str(sample)])
        row("tshark, no plugin (sample)", args.tshark_packets, seconds, rss, base)
    else:
        print("tshark not installed: skipped")


if __name__ == "__main__":
    main()
