"""One watch run: open the input, read it interval by interval, hand each
interval to the outputs (JSON lines, the screen, the exporter)."""

import gc

from .pacing import capture_intervals, live_intervals
from .watcher import Watcher


class Run:
    """``intervals()`` yields :class:`~rtrs_scapy.watch.watcher.Interval` until the
    input ends (the last one has ``final``) or ``stop`` is set."""

    def __init__(self, source, seconds=1.0, replay=False, speed=1.0, queue_depth=None,
                 age_out=None, stop=None, rnbd_totals=True):
        self.source, self.seconds, self.stop = source, seconds, stop
        self.speed = speed if replay else None
        self.watcher = Watcher(queue_depth=queue_depth, live=source.live,
                               rnbd_totals=rnbd_totals,
                               **({"age_out": age_out} if age_out is not None else {}))
        self.capture = None
        self.ended = False

    def open(self):
        """Open the input now (a file: its errors before the screen starts); else
        ``intervals()`` opens it (a pipe may block until its first bytes)."""
        if self.capture is None:
            self.capture = self.source.open()

    def intervals(self):
        # the analyzer's state is long-lived and acyclic; the cyclic collector
        # would rescan it again and again (as analyze() does, it stays off)
        gc.disable()
        try:
            self.open()
            if self.source.live:
                yield from live_intervals(self.capture, self.watcher, self.seconds, self.stop)
            else:
                yield from capture_intervals(self.capture, self.watcher, self.seconds,
                                             self.speed, self.stop)
            self.ended = True
        finally:
            gc.enable()
            self.source.close()     # first: a capture tool stops, its pipe ends
            if self.capture is not None and not self.source.live:
                self.capture.close()    # a live capture is closed by its reading thread

    def problems(self):
        """What cut the input short: (frame, kind, detail)."""
        return list(self.capture.problems) if self.capture is not None else []
