"""Session analysis: what every RTRS session in a capture did (docs/PROTOCOL.md#flows,
docs/PROTOCOL.md#analysis-rules, docs/PROTOCOL.md#rnbd).

``analyze(path)`` reads a capture through the fast path and returns an
:class:`Analysis` with ``summary`` (the JSON shape) and ``messages``.
"""

import contextlib
import gc

from .analyzer import Analyzer
from .batch import feed_batch
from .summary import summarize
from ..fastpath.reader import CaptureError, batches, link_name, open_capture

__all__ = ["Analysis", "Analyzer", "CaptureError", "analyze"]

BATCH_FRAMES = 16384  # frames per numpy batch: large enough to amortise, small in memory


class Analysis:
    """The result of one capture: the analyzer state, the summary dict, problems."""

    def __init__(self, analyzer, capture):
        self.analyzer = analyzer
        self.truncated = capture.truncated
        self.problems = list(capture.problems)
        self.link_types = analyzer.link_types or {capture.link_type}
        info = {"path": str(capture.path), "format": capture.fmt,
                "link_type": link_name(analyzer.link_type if analyzer.link_type is not None
                                       else capture.link_type),
                "truncated": capture.truncated}
        self.summary = summarize(analyzer, info)
        for frame, kind, detail in self.problems:
            self.summary["anomalies"].append({"frame": frame, "kind": kind, "detail": detail})

    @property
    def messages(self):
        return self.analyzer.messages


@contextlib.contextmanager
def _no_cyclic_gc():
    """The analyzer's state is long-lived and acyclic garbage is freed by reference
    counting; Python's cyclic collector would rescan that growing state again and
    again (measured: 4M packets 20.6 s with it, 14.6 s without)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def analyze(path, keep_messages=True, queue_depth=None, progress=None, batch=True,
            until_frame=None):
    """Analyze a capture file; ``progress(bytes_done)`` is called now and then.

    ``batch`` selects the numpy batch path (same results as frame by frame).
    ``until_frame`` stops reading after the batch holding that frame (a summary of
    what was read: ``rtrs-dissect show`` needs no more).
    """
    analyzer = Analyzer(keep_messages=keep_messages, queue_depth=queue_depth)
    with open_capture(path) as capture, _no_cyclic_gc():
        if batch:
            for group in batches(capture, BATCH_FRAMES):
                feed_batch(analyzer, *group)
                if progress is not None:
                    progress(capture.position())
                if until_frame is not None and group[0] + len(group[3]) > until_frame:
                    break
        else:
            feed = analyzer.feed
            for count, frame in enumerate(capture, 1):
                feed(*frame)
                if progress is not None and not count & 0x3FFF:
                    progress(capture.position())
                if count == until_frame:
                    break
        analyzer.close()
        return Analysis(analyzer, capture)
