"""What an analysis leaves behind and how high its memory went, measured in a fresh
interpreter of its own (``python memory_probe.py summary|watch CAPTURE``) so that
nothing of the test process counts:

- ``retained``: the bytes of Python objects and numpy arrays still alive after the
  analysis (tracemalloc, after a collection): a leak of one byte per packet shows;
- ``numba_live``: the allocations numba's runtime made and never freed (its own
  counters, ``NUMBA_NRT_STATS``), which tracemalloc does not see; the engine runs
  under numba's JIT for it (``RTRS_SCAPY_ENGINE=numba``): the code the native
  module is built from, with the runtime's counters in reach;
- ``held``: the bytes of Python objects and numpy arrays alive at the end of the
  analysis, while it is still held (summary: the state the end of the capture reads,
  which grows with the requests of the capture, within its bounds);
- ``peak``: the whole process's peak resident set (``VmHWM``: Python, numpy, numba
  and the compiled code alike; a fresh process's own, not its parent's).
"""

import gc
import json
import os
import subprocess
import sys
import tracemalloc


def probe(mode, capture):
    """The measures of one analysis of ``capture`` (``summary``: what ``rtrs-dissect
    summary`` runs, with the summary under ``output``; ``watch``: the watcher's 1 s
    intervals, each made and dropped, with their number)."""
    env = dict(os.environ, NUMBA_NRT_STATS="1", RTRS_SCAPY_ENGINE="numba")
    done = subprocess.run([sys.executable, __file__, mode, str(capture)], env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _peak():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/self/status")


def _run(mode, capture):
    """(output, bytes alive while the analysis is held)."""
    if mode == "summary":
        from rtrs_scapy.analysis import analyze
        analysis = analyze(capture, keep_messages=False)
        gc.collect()
        return analysis.summary, tracemalloc.get_traced_memory()[0]
    from rtrs_scapy.capture import open_capture
    from rtrs_scapy.watch.pacing import capture_intervals
    from rtrs_scapy.watch.watcher import Watcher
    with open_capture(capture) as cap:
        intervals = sum(1 for interval in capture_intervals(cap, Watcher(), 1.0)
                        if interval.json())
    gc.collect()
    return intervals, tracemalloc.get_traced_memory()[0]


def main(mode, capture):
    from numba.core.runtime import rtsys
    tracemalloc.start()
    output, held = _run(mode, capture)
    gc.collect()
    retained = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    stats = rtsys.get_allocation_stats()
    json.dump({"retained": retained, "held": held, "numba_live": stats.alloc - stats.free,
               "numba_allocations": stats.alloc, "peak": _peak(), "output": output},
              sys.stdout)


if __name__ == "__main__":
    main(*sys.argv[1:])
