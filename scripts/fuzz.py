#!/usr/bin/env python3
"""Long mutation-fuzzing runs over the real and crafted captures.

    .venv/bin/python scripts/fuzz.py -n 100000 [--seed 1] [--targets scapy,analyzer,tshark]
                                     [--batch 50] [--timeout 5] [--max-mem-mb 3072]
                                     [--save DIR] [--json]

Targets
* scapy: every input is one mutated frame (bit flips, truncation, byte
  overwrites, sg_cnt/usr_len/CM/IP/UDP/GRH/LRH length blow-ups), decoded with
  debug_dissector off and displayed (summary, show, repr, bytes).
* analyzer (if rtrs_scapy.analysis exists): every ``--batch`` frame inputs also
  make one capture file: a corpus file with those frames mutated in place and,
  sometimes, a corrupted pcap header; ``analyze(path)`` must return or raise
  CaptureError (its documented error).
* tshark (if tshark and wireshark/rtrs.lua exist): the same files through
  ``tshark -X lua_script:wireshark/rtrs.lua -V``; a Lua error in the output or
  a crash exit is a finding.

Documented exceptions as in tests/test_robust.py.  Per-input time limit
(``--timeout``) catches hangs; an address-space limit (``--max-mem-mb``) turns a
huge allocation into a MemoryError finding.  Reports inputs tried, crashes (unique
by exception type and place), hangs, time and peak RSS; exit 1 on any finding.
"""

import argparse
import collections
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from scapy.config import conf  # noqa: E402

from rtrs_scapy.craft.capture_files import write_capture  # noqa: E402
from test_robust import (  # noqa: E402
    Hang, corrupt_pcap, exercise, frame_pool, mutate, time_limit,
)

LUA = REPO / "wireshark" / "rtrs.lua"


def where(exc):
    frames = traceback.extract_tb(exc.__traceback__)
    inside = [f for f in frames if "rtrs_scapy" in f.filename] or frames
    last = inside[-1] if inside else None
    return "%s:%s" % (Path(last.filename).name, last.lineno) if last else "?"


class Report:
    def __init__(self):
        self.tried = collections.Counter()
        self.crashes = collections.Counter()
        self.hangs = collections.Counter()
        self.examples = {}
        self.start = time.monotonic()

    def crash(self, target, exc, data, save):
        key = "%s %s %s" % (target, type(exc).__name__, where(exc))
        self.crashes[key] += 1
        if key not in self.examples:
            self.examples[key] = str(exc)[:200]
            if save:
                name = "%s-%d.bin" % (target, len(self.examples))
                (Path(save) / name).write_bytes(data)

    def peak_rss_mb(self):
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        return round(own / 1024, 1), round(children / 1024, 1)

    def as_dict(self):
        own, children = self.peak_rss_mb()
        return {"inputs": dict(self.tried), "crashes": dict(self.crashes),
                "hangs": dict(self.hangs), "examples": self.examples,
                "seconds": round(time.monotonic() - self.start, 1),
                "peak_rss_mb": own, "peak_rss_children_mb": children}


def fuzz_scapy(rng, pool, report, timeout, save):
    cls, frame, off = rng.choice(pool)
    data = mutate(rng, frame, off)
    report.tried["scapy"] += 1
    exc = exercise(cls, data, timeout)
    if isinstance(exc, Hang):
        report.hangs["scapy"] += 1
        if save:
            (Path(save) / ("hang-%d.bin" % report.hangs["scapy"])).write_bytes(data)
    elif exc is not None:
        report.crash("scapy", exc, data, save)


def make_file(rng, corpus, frames_per_file, workdir):
    """A corpus capture with some frames mutated, sometimes with a corrupted header."""
    from scapy.utils import rdpcap
    src = rng.choice(corpus)
    pkts = rdpcap(str(src))
    frames = [(float(p.time), bytes(p)) for p in pkts]
    linktype = 247 if "_ib" in src.name else 1
    off = 8 if linktype == 247 else 42
    for _ in range(frames_per_file):
        i = rng.randrange(len(frames))
        frames[i] = (frames[i][0], mutate(rng, frames[i][1], off) or b"\0")
    if rng.random() < 0.3:
        del frames[rng.randrange(len(frames)):]
    path = Path(workdir) / "fuzz.pcap"
    write_capture(path, frames, linktype=linktype)
    if rng.random() < 0.2:
        path.write_bytes(corrupt_pcap(rng, path.read_bytes()))
    return path


def fuzz_analyzer(path, report, timeout, save):
    from rtrs_scapy.analysis import CaptureError, analyze
    report.tried["analyzer"] += 1
    try:
        with time_limit(timeout * 4):
            analyze(str(path))
    except CaptureError:
        pass
    except Hang:
        report.hangs["analyzer"] += 1
        if save:
            shutil.copy(path, Path(save) / ("analyzer-hang-%d.pcap" % report.hangs["analyzer"]))
    except Exception as exc:  # noqa: BLE001
        report.crash("analyzer", exc, path.read_bytes(), save)


def fuzz_tshark(path, report, timeout, save):
    report.tried["tshark"] += 1
    try:
        result = subprocess.run(["tshark", "-X", "lua_script:%s" % LUA, "-r", str(path), "-V"],
                                capture_output=True, text=True, timeout=timeout * 6,
                                errors="replace")
    except subprocess.TimeoutExpired:
        report.hangs["tshark"] += 1
        return
    out = result.stdout + result.stderr
    lua_errors = [line.strip() for line in out.splitlines()
                  if "Lua Error" in line or "lua_script" in line and "rror" in line]
    crashed = result.returncode not in (0, 2) or result.returncode < 0
    if lua_errors or crashed:
        exc = RuntimeError("exit %d: %s" % (result.returncode,
                                            (lua_errors or [out.strip()[-150:]])[0]))
        key = "tshark %s" % ("LuaError" if lua_errors else "exit%d" % result.returncode)
        report.crashes[key] += 1
        report.examples.setdefault(key, str(exc)[:200])
        if save:
            shutil.copy(path, Path(save) / ("tshark-%d.pcap" % report.crashes[key]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--inputs", type=int, default=10000,
                        help="number of mutated frames (scapy inputs)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--targets", default="scapy,analyzer,tshark")
    parser.add_argument("--batch", type=int, default=50,
                        help="one analyzer/tshark file per this many frame inputs")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds per input")
    parser.add_argument("--max-mem-mb", type=int, default=3072)
    parser.add_argument("--save", help="folder for crashing/hanging inputs")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args()

    limit = args.max_mem_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    conf.debug_dissector = False
    targets = set(args.targets.split(","))
    if "analyzer" in targets:
        try:
            import rtrs_scapy.analysis  # noqa: F401
        except ImportError:
            targets.discard("analyzer")
    if "tshark" in targets and (not LUA.exists() or shutil.which("tshark") is None):
        targets.discard("tshark")
    if args.save:
        Path(args.save).mkdir(parents=True, exist_ok=True)

    rng = random.Random(args.seed)
    pool = frame_pool()
    corpus = sorted(p for p in (REPO / "pcaps").glob("*.pcap") if "erf" not in p.name)
    corpus += sorted((REPO / "pcaps" / "real").glob("*.pcap"))
    report = Report()
    with tempfile.TemporaryDirectory() as workdir:
        for i in range(1, args.inputs + 1):
            if "scapy" in targets:
                fuzz_scapy(rng, pool, report, args.timeout, args.save)
            if i % args.batch == 0 and targets & {"analyzer", "tshark"}:
                path = make_file(rng, corpus, args.batch, workdir)
                if "analyzer" in targets:
                    fuzz_analyzer(path, report, args.timeout, args.save)
                if "tshark" in targets:
                    fuzz_tshark(path, report, args.timeout, args.save)
            if i % 5000 == 0:
                print("%d inputs, %d crashes, %d hangs, %.0f s" % (
                    i, sum(report.crashes.values()), sum(report.hangs.values()),
                    time.monotonic() - report.start), file=sys.stderr)
    summary = report.as_dict()
    summary["targets"] = sorted(targets)
    if args.json:
        print(json.dumps(summary, indent=1, sort_keys=True))
    else:
        for key in ("targets", "inputs", "crashes", "hangs", "seconds", "peak_rss_mb",
                    "peak_rss_children_mb"):
            print("%-22s %s" % (key, summary[key]))
        for key, text in summary["examples"].items():
            print("  %s: %s" % (key, text))
    return 1 if report.crashes or report.hangs else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
