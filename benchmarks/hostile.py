"""rtrs-dissect on hostile captures against a benign one of as many packets.

    .venv/bin/python benchmarks/hostile.py [--packets 1000000] [--repeat 3]

The hostile kinds of rtrs_scapy/craft/hostile.py (a new QP per packet, a CM REQ
of a new session per packet, responses without requests) and two benign
references: the real load capture repeated (4 KiB IO, few packets per IO
handled one by one) and the real basic_inval capture repeated (a handshake every
1,558 packets).  Whole processes, ``summary --format json -q``, median time and
peak RSS; each row says what reaching the limits cost (``capture.limits``).
Not a test.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from run import DISSECT, OUT, PYTHON, compile_package, median_run  # noqa: E402

BENIGN = {"benign: load repeated": REPO / "pcaps" / "real" / "load.pcap.gz",
          "benign: basic_inval repeated": REPO / "pcaps" / "real" / "basic_inval.pcap"}
HOSTILE = ("qps", "cm_reqs", "io_rsps")


def build(name, source, packets):
    path = OUT / ("hostile_%s_%d.pcap" % (name, packets))
    if not path.exists():
        if source is None:
            argv = [PYTHON, str(REPO / "scripts" / "hostile.py"), name, "-n", str(packets),
                    "-o", str(path)]
        else:
            argv = [PYTHON, str(HERE / "make_capture.py"), str(source), str(path),
                    "--packets", str(packets)]
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return path


def run(path, repeat):
    argv = [DISSECT, "summary", str(path), "--format", "json", "-q"]
    seconds, rss = median_run(argv, repeat)
    summary = json.loads(subprocess.run(argv, check=True, capture_output=True).stdout)
    return seconds, rss, summary


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packets", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    compile_package()
    print("| capture | packets | time | µs per packet | vs load | vs basic_inval | peak RSS "
          "| limits |")
    print("|---|---|---|---|---|---|---|---|")
    base = {}
    for name, source in list(BENIGN.items()) + [(kind, None) for kind in HOSTILE]:
        seconds, rss, summary = run(build(name.split()[1] if source else name, source,
                                          args.packets), args.repeat)
        if source is not None:
            base[name] = seconds
        limits = summary["capture"]["limits"]
        cost = "; ".join("%s %s" % (verb, ", ".join("%s %d" % kv for kv in
                                                     sorted(limits[verb].items())))
                         for verb in ("evicted", "refused") if limits[verb]) or "none reached"
        ratios = ["%.1f×" % (seconds / base[b]) if b in base else "" for b in BENIGN]
        print("| %s | %s | %.2f s | %.2f | %s | %s | %.0f MiB | %s |" % (
            name, "{:,}".format(args.packets), seconds, seconds / args.packets * 1e6,
            ratios[0], ratios[1], rss, cost))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
