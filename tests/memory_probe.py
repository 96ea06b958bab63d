"""What an analysis leaves behind and how high its memory went, measured in a fresh
interpreter of its own (``python memory_probe.py summary|watch CAPTURE``) so that
nothing of the test process counts:

- ``retained``: the bytes of Python objects and numpy arrays still alive after the
  analysis (tracemalloc, after a collection): a leak of one byte per packet shows;
- ``numba_live``: the allocations numba's runtime made and never freed (its own
  counters, ``NUMBA_NRT_STATS``), which tracemalloc does not see;
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


#: message records per chunk kept on disk in ``messages`` mode: small, so that a short
#: capture spills as a long one does with the default
MESSAGE_CHUNK = 64


def probe(mode, capture):
    """The measures of one analysis of ``capture`` (``summary``: what ``rtrs-dissect
    summary`` runs, with the summary under ``output``; ``watch``: the watcher's 1 s
    intervals, each made and dropped, with their number; ``messages``: the message
    records made, formatted as ``messages`` text and JSON lines and as ``export``'s
    table, with their number and what the summary's analysis alone holds).
    ``traced_peak``: the most bytes of Python objects and numpy arrays alive at once."""
    env = dict(os.environ, NUMBA_NRT_STATS="1")
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
    if mode == "messages":
        return _messages(capture)
    from rtrs_scapy.capture import open_capture
    from rtrs_scapy.watch.pacing import capture_intervals
    from rtrs_scapy.watch.watcher import Watcher
    with open_capture(capture) as cap:
        intervals = sum(1 for interval in capture_intervals(cap, Watcher(), 1.0)
                        if interval.json())
    gc.collect()
    return intervals, tracemalloc.get_traced_memory()[0]


def _messages(capture):
    """What ``messages`` (text, JSON) and ``export``'s messages table do with the
    records, and what the summary's analysis alone holds (``summary_held``, made and
    dropped first): the records' share is the difference."""
    from rtrs_scapy.analysis import analyze
    from rtrs_scapy.report.message_lines import MessageLines
    from rtrs_scapy.report.messages import MessageView
    from rtrs_scapy.tables.build import messages_tables
    analysis = analyze(capture, keep_messages=False)
    gc.collect()
    summary_held = tracemalloc.get_traced_memory()[0]
    del analysis
    gc.collect()
    analysis = analyze(capture, keep_messages=True, message_chunk=MESSAGE_CHUNK)
    view = MessageView(analysis.summary, analysis.messages)
    for fmt in ("text", "json"):
        for _ in MessageLines(view, analysis.messages).batches(fmt):
            pass
    for _ in messages_tables(analysis, str(capture)):
        pass
    gc.collect()
    return {"records": len(analysis.messages), "summary_held": summary_held}, \
        tracemalloc.get_traced_memory()[0]


def main(mode, capture):
    from numba.core.runtime import rtsys
    tracemalloc.start()
    output, held = _run(mode, capture)
    traced_peak = tracemalloc.get_traced_memory()[1]
    gc.collect()
    retained = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    stats = rtsys.get_allocation_stats()
    json.dump({"retained": retained, "held": held, "traced_peak": traced_peak,
               "numba_live": stats.alloc - stats.free,
               "numba_allocations": stats.alloc, "peak": _peak(), "output": output},
              sys.stdout)


if __name__ == "__main__":
    main(*sys.argv[1:])
