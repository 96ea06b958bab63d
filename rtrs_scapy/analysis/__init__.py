"""Session analysis: what every RTRS session in a capture did (docs/PROTOCOL.md#flows,
docs/PROTOCOL.md#analysis-rules, docs/PROTOCOL.md#rnbd).

``analyze(path)`` reads a capture through the columnar engine and returns an
:class:`Analysis` with ``summary`` (the JSON shape) and ``messages`` (records,
when asked for).
"""

import contextlib
import gc

from ..capture import CaptureError, link_name
from ..capture.inputs import open_inputs
from ..capture.files import CHUNK_RECORDS
from ..engine import Engine
from ..engine.ahead import ahead
from .analyzer import Analyzer
from .records import CHUNK as MESSAGE_CHUNK
from .summary import session_summaries, summarize, summary_head

#: ``keep_latencies`` of a command that shows the paths' latency percentiles alone
PATH_LATENCIES = "paths"

__all__ = ["Analysis", "Analyzer", "CaptureError", "analyze"]


class Analysis:
    """The result of one capture: the analyzer state, the summary dict, problems."""

    def __init__(self, analyzer, capture):
        self.analyzer = analyzer
        self.truncated = capture.truncated
        self.problems = list(capture.problems)
        self.link_types = analyzer.link_types or {capture.link_type}
        self.info = {"path": str(capture.path), "format": capture.fmt,
                     "link_type": link_name(analyzer.link_type
                                            if analyzer.link_type is not None
                                            else capture.link_type),
                     "truncated": capture.truncated, "files": capture.files,
                     "capture_duplicates": capture.duplicates}
        self.info.update(snaplen_info(capture))
        self._summary = None

    @property
    def summary(self):
        """The whole summary (analysis/summary.py), made once when first asked for."""
        if self._summary is None:
            self._summary = self._with_problems(summarize(self.analyzer, self.info))
        return self._summary

    def summary_parts(self, whole=False):
        """The summary and its sessions one by one: what a writer of the summary
        needs, holding one session's summary at a time.  Until the whole summary is
        asked for (``whole``, or before), the first has an empty list of sessions and
        the second makes them."""
        if whole or self._summary is not None:
            summary = self.summary
            return summary, iter(summary["sessions"])
        head = self._with_problems(summary_head(self.analyzer, self.info))
        return head, session_summaries(self.analyzer)

    def _with_problems(self, summary):
        """The problems of reading the capture among the anomalies."""
        counts = summary["anomaly_counts"]
        for frame, kind, detail in self.problems:
            summary["anomalies"].append({"frame": frame, "kind": kind, "detail": detail})
            counts[kind] = counts.get(kind, 0) + 1
        return summary

    @property
    def messages(self):
        return self.analyzer.messages


def snaplen_info(capture):
    """The capture's snaplen and the records it cut (docs/PROTOCOL.md#header-only-captures):
    ``snaplen`` is the longest captured length of a cut record (what the records show:
    a tool that cuts a capture may leave the header's snaplen as it was), else the
    file's (pcap header, pcapng interfaces), None when neither tells; ``cut_records``
    how many records are shorter than on the wire."""
    cut = capture.cut
    return {"snaplen": cut.caplen if cut.records else capture.snaplen or None,
            "cut_records": cut.records}


@contextlib.contextmanager
def _no_cyclic_gc():
    """The analyzer's state is long-lived and acyclic garbage is freed by reference
    counting; Python's cyclic collector would rescan that growing state again and
    again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def analyze(path, keep_messages=True, queue_depth=None, progress=None,
            chunk_records=CHUNK_RECORDS, until_frame=None, io_sink=None, limits=None,
            keep_latencies=True, message_chunk=MESSAGE_CHUNK):
    """Analyze a capture: a file, ``-`` (stdin), a directory, or a list of those (one
    capture, merged in time order); ``progress(bytes_done, bytes_total)`` is called
    now and then.  ``keep_messages``: keep the message records (True), none
    (False), or only those of the message names given (records.py).

    ``chunk_records`` (records per chunk) changes the pace, never the result.
    ``until_frame`` stops reading after the chunk holding that frame (a summary of
    what was read: ``rtrs-dissect show`` needs no more).  ``io_sink`` receives the
    IO rows (one per request, see iorows.py) in batches as their fate is known.
    ``limits`` overrides bounds of rtrs_scapy/spec/limits.py by name.  ``keep_latencies``
    False: the summary without its percentiles and queue figures, for a command whose
    IO rows carry what it shows (iostat): none of their per-IO arrays are kept;
    PATH_LATENCIES: the paths' latencies only, not the RNBD view's latencies and split
    nor the queue figures (export's tables hold none of them).
    ``message_chunk``: message records per chunk kept on disk beyond the newest
    two (records.py; None: all in memory), changes the memory, never the result."""
    analyzer = Analyzer(keep_messages=keep_messages, queue_depth=queue_depth,
                        io_sink=io_sink, limits=limits, keep_latencies=keep_latencies,
                        message_chunk=message_chunk)
    engine = Engine(analyzer, **({"max_streams": limits["streams"]}
                                 if limits and "streams" in limits else {}))
    with open_inputs(path) as capture, _no_cyclic_gc():
        for chunk in ahead(capture.chunks(chunk_records), behind=capture.done,
                           idle=engine.flush_waiting):
            engine.feed(chunk)
            if progress is not None:
                progress(capture.position(), capture.bytes_total)
            if until_frame is not None and chunk.first_frame + len(chunk) > until_frame:
                break
        engine.flush()
        analyzer.close()
        engine.close()
        return Analysis(analyzer, capture)
