"""What each figure shows, computed once for both renderers (plots.py draws it
with matplotlib, html.py with Plotly): binned series of the IO rows, the
summary's events and each path's ladder."""

import numpy as np

from ..spec.constants import RNBD_OP_FLUSH
from ..analysis import split
from . import series
from .view import EVENT_KINDS

#: time buckets of the over-time figures, and of the access heatmaps
MAX_BUCKETS = 300
HEATMAP_BUCKETS = 120
#: event markers (and outages) of one figure (a thousand flapping paths have more);
#: lanes per path up to MAX_LANES, else one lane per kind for all paths
MAX_EVENTS = 1000
MAX_LANES = 16
#: colour and marker shape of each event kind (both renderers); others are grey dots
EVENT_STYLE = {
    "connect": ("#2ca02c", "triangle-up"), "reconnect": ("#17becf", "triangle-up"),
    "reconnect_failed": ("#d62728", "x"), "reject": ("#d62728", "square"),
    "disconnect": ("#9467bd", "triangle-down"), "outage": ("#7f7f7f", "square"),
    "stall": ("#8c564b", "hourglass"),
    "heartbeat_gap": ("#bcbd22", "diamond"), "heartbeat_lost": ("#e377c2", "diamond"),
    "failover": ("#ff7f0e", "star"), "io_error": ("#d62728", "circle"),
    "first_io": ("#1f77b4", "circle"), "last_io": ("#1f77b4", "circle"),
}
OTHER_EVENT = ("#555555", "circle")
#: colours of the RTRS operations and of the percentiles
OP_COLOUR = {"read": "#1f77b4", "write": "#ff7f0e"}
PERCENTILE_COLOUR = {"p50": "#2ca02c", "p99": "#d62728"}


#: byte units of the throughput axes, the largest that keeps the peak at 1 or more
BYTE_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1))
#: a figure of some paths spans their time, and this share of it more on each side
WINDOW_MARGIN = 0.02


def byte_unit(peak):
    """(unit name, bytes per unit) for an axis whose largest value is ``peak`` bytes."""
    return next((u for u in BYTE_UNITS if peak >= u[1]), BYTE_UNITS[-1])


def window(capture, paths):
    """(start, span) in seconds since the capture start of a figure of ``paths``: the
    whole capture for all of its paths, else their first to last request or event (a
    0.3 s session is not a spike on a minute's axis)."""
    if not paths or len(paths) == len(capture.paths):
        return 0.0, capture.duration
    times = [p.rows.time for p in paths]
    for path in paths:
        events = path.events()
        times.append(np.array([e.time for e in events] +
                              [e.until for e in events if e.until is not None], dtype=float))
    times = np.concatenate(times)
    if not len(times):
        return 0.0, capture.duration
    first, last = float(times.min()), float(times.max())
    margin = max(last - first, 1e-3) * WINDOW_MARGIN
    start = max(0.0, first - margin)
    return start, min(capture.duration, last + margin) - start


def path_title(path, paths):
    """A path among ``paths``: by its ends, with its session when they span several."""
    if len({id(p.session) for p in paths}) > 1:
        return "%s: %s" % (path.session.label, path.label)
    return path.label


class Timeline:
    """IOPS, throughput and latency p50/p99 per bucket, with the events."""

    def __init__(self, capture, rows, paths, title):
        self.title = title
        self.start, span = window(capture, paths)
        self.buckets = series.Buckets(span, MAX_BUCKETS, self.start)
        self.end = self.start + max(span, self.buckets.width)
        self.rates = series.rates(rows, self.buckets)
        peak = max([float(bps.max()) for _, bps in self.rates.values() if len(bps)] + [0.0])
        self.byte_unit = byte_unit(peak)
        self.percentiles = series.latency_percentiles(rows, self.buckets)
        events = []
        for path, name in zip(paths, _path_names(paths)):
            for event in path.events():
                if name:
                    event.text = "%s: %s" % (name, event.text)
                events.append((name, event))
        events.sort(key=lambda ne: ne[1].time)
        self.event_total = len(events)
        events = events[:MAX_EVENTS]
        if len({(name, e.lane) for name, e in events}) <= MAX_LANES:  # else: by kind only
            for name, event in events:
                if name:
                    event.lane = "%s: %s" % (name, event.lane)
        self.events = [e for _, e in events]
        self.outages = sorted(span for path in paths for span in path.outages())[:MAX_EVENTS]
        self.lanes = list(dict.fromkeys(e.lane for e in sorted(self.events, key=_lane_order)))


def _path_names(paths):
    """How the events of each of ``paths`` are told apart from the others': by session
    (and client) across sessions, by client within one; nothing alone."""
    if len(paths) == 1:
        return [""]
    if len({id(p.session) for p in paths}) == 1:
        return [path.summary["client"] for path in paths]
    return [path.session.label if len(path.session.paths) == 1 else
            "%s %s" % (path.session.label, path.summary["client"]) for path in paths]


def _lane_order(event):
    kind = event.kind
    return (EVENT_KINDS.index(kind) if kind in EVENT_KINDS else len(EVENT_KINDS), event.lane)


class Latency:
    """Histogram (log axis) and CDF of latencies, one group per op or per path."""

    def __init__(self, title, groups):
        self.title = title
        self.groups = []
        for label, values in groups:
            if not len(values):
                continue
            edges, counts = series.log_histogram(values)
            x, shares = series.cdf(values)
            self.groups.append((label, len(values), edges, counts, x, shares))


def latency_by_op(rows, title):
    """RNBD data IO, per RNBD operation."""
    return Latency(title, [(name, _answered(ops)) for name, ops in rows.data_io.rnbd_ops()])


def latency_by_path(paths, title):
    """Every RTRS request of each path (RNBD control included)."""
    return Latency(title, [(path_title(p, paths), _answered(p.rows)) for p in paths])


class InFlight:
    """Most requests in flight per bucket, per path, and the negotiated queue depth."""

    def __init__(self, capture, paths, title):
        self.title = title
        self.start, span = window(capture, paths)
        self.buckets = series.Buckets(span, MAX_BUCKETS, self.start)
        self.end = self.start + max(span, self.buckets.width)
        self.paths = [(path_title(p, paths), series.in_flight(p.rows.time, p.request_ends(),
                                                               self.buckets),
                       p.queue_depth) for p in paths if len(p.rows)]


class Load:
    """Requests and bytes per path and cid, by RTRS operation."""

    def __init__(self, paths, title):
        self.title = title
        self.bars = []   # (path label, cid, {op: (requests, bytes)})
        for path in paths:
            for cid, ops in series.load(path.rows):
                self.bars.append((path_title(path, paths), cid, ops))
        self.byte_unit = byte_unit(max([ops[op][1] for _, _, ops in self.bars
                                        for op in ops] + [0]))

    def label(self, path_label, cid):
        return "%s cid %s" % (path_label, cid if cid >= 0 else "?")


class Sizes:
    """IO sizes of a device, per RNBD operation."""

    def __init__(self, device):
        self.title = "IO sizes, device %s" % device.label
        self.ops = [(name, *series.size_counts(rows["bi_size"]))
                    for name, rows in device.rows.rnbd_ops()]


class Heatmap:
    """Requests by first sector and time, of a device (FLUSH has no sector)."""

    def __init__(self, capture, device):
        self.title = "access pattern, device %s" % device.label
        self.start, span = window(capture, device.session.paths)
        self.buckets = series.Buckets(span, HEATMAP_BUCKETS, self.start)
        rows = device.rows.where(device.rows["rnbd_op"] != RNBD_OP_FLUSH)
        self.sectors = device.sectors
        self.sector_edges, self.counts = series.heatmap(rows, self.buckets, self.sectors)


class Split:
    """Where the wire time of a device's IOs goes (analysis/split.py), per RNBD
    operation: the IOs ranked by wire time in bands (the fastest half, up to the 90th
    and the 99th percentile, the slowest 1 %), each band's mean of every part, so
    that the bars stack to the band's mean wire time."""

    PARTS = ("request", "server", "data", "response")
    BANDS = ((0, 50, "p0–50"), (50, 90, "p50–90"), (90, 99, "p90–99"), (99, 100, "p99–100"))

    def __init__(self, device):
        self.title = "where the time goes, device %s" % device.label
        self.bars = []       # (op, band, IO count, {part: mean µs})
        for name, rows in device.rows.rnbd_ops():
            parts = {p: rows["part_" + p] for p in split.PARTS}
            known = np.all([parts[p] >= 0 for p in split.PARTS], axis=0)
            order = np.argsort(parts["wire"][known], kind="stable")
            n = len(order)
            for low, high, band in self.BANDS:
                chosen = order[n * low // 100:n * high // 100]
                if len(chosen):
                    self.bars.append((name, band, len(chosen), {
                        p: float(parts[p][known][chosen].mean()) / 1e3 for p in self.PARTS}))


class Ladder:
    """A path's CM and info messages, client on the left, server on the right."""

    def __init__(self, path):
        self.title = "handshake and teardown, session %s, path %s" % (path.session.label,
                                                                        path.label)
        self.client, self.server = path.summary["client"], path.summary["server"]
        self.steps, self.total = path.ladder()


def _answered(rows):
    """Latencies (µs) of the requests that got a response."""
    return rows.latency_us[~np.isnan(rows.latency_us)]
