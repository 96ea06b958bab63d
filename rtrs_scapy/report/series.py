"""Binned series of IO rows, computed with numpy: what the report embeds and the
plots draw.  Never a point per request: a 10 M-packet capture gives series of a
few hundred buckets, like a 1000-packet one.

Times are seconds since the capture start, latencies µs, sizes bytes.
"""

import math

import numpy as np

from ..analysis.inflight import Steps

#: the RTRS operation of an IO row (iorows.py: 1 read, 2 write)
RTRS_OPS = (("read", 1), ("write", 2))
#: per-bucket latency percentiles (nearest rank, like the summary's)
PERCENTILES = (("p50", 0.50), ("p99", 0.99))


def nice_width(raw):
    """The smallest 1, 2 or 5 × 10^k (at least 1 µs) not below ``raw``."""
    raw = max(raw, 1e-6)
    exp = math.floor(math.log10(raw))
    for base in (1, 2, 5, 10):
        width = base * 10.0 ** exp
        if width >= raw * (1 - 1e-9):
            return width
    return 10.0 ** (exp + 1)


class Buckets:
    """Equal time buckets over [start, start + span], at most ``max_buckets`` of them;
    the first edge is a multiple of the width at or before ``start``."""

    def __init__(self, span, max_buckets, start=0.0):
        self.width = nice_width(span / max_buckets if span > 0 else 1e-3)
        self.first = math.floor(start / self.width + 1e-9) * self.width
        self.count = max(1, math.ceil((start + span - self.first) / self.width - 1e-9))
        self.edges = self.first + np.arange(self.count + 1) * self.width
        self.starts = self.edges[:-1]

    def index(self, times):
        """The bucket of each time (times outside the edges fall in the first or last)."""
        return np.clip(np.floor((np.asarray(times) - self.first) / self.width)
                       .astype(np.int64), 0, self.count - 1)


def rates(rows, buckets):
    """{op: (requests/s, bytes/s)} per bucket, by the time of the request."""
    out = {}
    idx = buckets.index(rows.time)
    for name, code in RTRS_OPS:
        mine = rows["op"] == code
        count = np.bincount(idx[mine], minlength=buckets.count)
        volume = np.bincount(idx[mine], weights=rows["bytes"][mine], minlength=buckets.count)
        out[name] = (count / buckets.width, volume / buckets.width)
    return out


def latency_percentiles(rows, buckets):
    """{"p50": µs per bucket, "p99": …} of the answered requests (NaN: none)."""
    answered = ~np.isnan(rows.latency_us)
    return grouped_percentiles(buckets.index(rows.time[answered]), rows.latency_us[answered],
                               buckets.count)


def grouped_percentiles(group, values, groups):
    """Nearest-rank percentiles of ``values`` per group 0..groups-1 (NaN: empty)."""
    order = np.lexsort((values, group))
    group, values = group[order], values[order]
    counts = np.bincount(group, minlength=groups)
    starts = np.cumsum(counts) - counts
    has = counts > 0
    out = {}
    for name, q in PERCENTILES:
        rank = np.maximum(np.ceil(q * counts - 1e-9).astype(np.int64), 1)
        series = np.full(groups, np.nan)
        series[has] = values[starts[has] + rank[has] - 1]
        out[name] = series
    return out


def in_flight(starts, ends, buckets):
    """The most requests in flight at once in each bucket, by the one in-flight rule
    (``analysis.inflight.Steps``: +1 at each request, -1 at its end, a response
    leaving before a request of the same instant enters)."""
    steps = Steps.of(starts, ends)
    times, level = steps.time, steps.count
    idx = buckets.index(times)
    peak = np.zeros(buckets.count, dtype=np.int64)
    np.maximum.at(peak, idx, level)
    before = np.searchsorted(idx, np.arange(buckets.count), side="left")
    carried = np.where(before > 0, level[np.maximum(before - 1, 0)], 0)
    return np.maximum(peak, carried)


def log_histogram(values, per_decade=10):
    """(edges, counts) on a log scale covering the values (µs)."""
    values = values[values > 0]
    if not len(values):
        return np.array([1.0, 10.0]), np.zeros(1, dtype=np.int64)
    low = math.floor(math.log10(values.min()) * per_decade) / per_decade
    high = math.ceil(math.log10(values.max()) * per_decade + 1e-9) / per_decade
    high = max(high, low + 1.0 / per_decade)
    edges = 10.0 ** np.linspace(low, high, round((high - low) * per_decade) + 1)
    counts, _ = np.histogram(values, bins=edges)
    return edges, counts


def cdf(values, points=201):
    """(value, share of requests at or below it) at ``points`` evenly spaced shares."""
    if not len(values):
        return np.zeros(0), np.zeros(0)
    shares = np.linspace(0.0, 1.0, points)
    return np.quantile(values, shares, method="inverted_cdf"), shares


def size_counts(sizes):
    """(distinct size, count) of the IO sizes (bytes)."""
    return np.unique(sizes, return_counts=True)


def load(rows):
    """[(cid, {op: (requests, bytes)})] of a path's rows, by cid."""
    out = []
    for cid in np.unique(rows["cid"]):
        mine = rows["cid"] == cid
        out.append((int(cid), {name: (int(np.count_nonzero(mine & (rows["op"] == code))),
                                      int(rows["bytes"][mine & (rows["op"] == code)].sum()))
                               for name, code in RTRS_OPS}))
    return out


def heatmap(rows, buckets, sectors, sector_bins=64):
    """(sector edges, counts[sector bin, time bucket]) of the requests by their first
    sector and time."""
    top = max(int(sectors), 1)
    edges = np.linspace(0, top, min(sector_bins, top) + 1)
    counts, _, _ = np.histogram2d(np.clip(rows["sector"], 0, top - 1), rows.time,
                                  bins=[edges, buckets.edges])
    return edges, counts.astype(np.int64)
