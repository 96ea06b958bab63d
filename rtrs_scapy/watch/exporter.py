"""The Prometheus exporter of ``watch --prometheus``.

A custom collector of the official ``prometheus_client``: the watcher adds each
interval's sums (``add()``), a scrape reads the totals under a lock.  Counters
stay when a path leaves the view, so they keep adding up to the summary of the
input; gauges are those of the paths in view.  A counter is shown at 0 on the
first scrape that finds it, its value from the next one on: Prometheus's
``increase()`` and ``rate()`` then count what happened before that first scrape
too (a series that appears with its value loses it).  Labels: ``session`` (the
session's one name, analysis/naming.py), ``path`` (``client->server``), ``op``
(read/write, the RTRS request), ``errno`` (its name), and for RNBD ``device``
and ``op`` (the RNBD operation: the summary's RNBD view, IO by its own fields).
"""

import threading

import numpy as np
from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily, REGISTRY)
from prometheus_client import start_http_server

from .stats import OPS

#: latency histogram buckets, seconds
BUCKETS = (25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3,
           100e-3, 250e-3, 500e-3, 1.0, 2.5, 5.0)
_BUCKET_NS = np.array([b * 1e9 for b in BUCKETS])


def path_label(row):
    return "%s->%s" % (row.client, row.server)


class Exporter:
    def __init__(self, registry=REGISTRY):
        self.lock = threading.Lock()
        self.requests = {}      # (session, path, op) -> [count, bytes, buckets, sum_s]
        self.errors = {}        # (session, path, errno name) -> count
        self.reconnects = {}    # (session, path) -> count
        self.retransmissions = {}   # (session, path) -> RC packets sent again
        self.gauges = {}        # (session, path) -> (inflight, queue_depth, heartbeat_age)
        self.rnbd = {}          # (session, device, op) -> (count, bytes, errors), the
                                # summary's RNBD view
        self.intervals = 0
        self.scraped = set()    # (family, labels…) of the counters scraped once
        self.registry = registry
        registry.register(self)

    def serve(self, addr, port):
        start_http_server(port, addr=addr, registry=self.registry)

    def add(self, interval):
        """One interval's sums."""
        with self.lock:
            self.intervals += 1
            gauges = {}
            for row in interval.paths:
                labels = (row.session, path_label(row))
                for op in OPS:
                    stats = row.stats.ops[op]
                    entry = self.requests.get(labels + (op,))
                    if entry is None:
                        entry = self.requests[labels + (op,)] = [
                            0, 0, np.zeros(len(BUCKETS) + 1, np.int64), 0.0]
                    entry[0] += stats.count
                    entry[1] += stats.bytes
                    if len(stats.latencies_ns):
                        where = np.searchsorted(_BUCKET_NS, stats.latencies_ns, side="left")
                        entry[2] += np.bincount(where, minlength=len(BUCKETS) + 1)
                        entry[3] += float(stats.latencies_ns.sum()) / 1e9
                for name, count in row.stats.errors.items():
                    key = labels + (name,)
                    self.errors[key] = self.errors.get(key, 0) + count
                self.reconnects[labels] = self.reconnects.get(labels, 0) + row.reconnects
                self.retransmissions[labels] = self.retransmissions.get(labels, 0) + \
                    row.retransmissions
                gauges[labels] = (row.inflight, row.queue_depth, row.heartbeat_age_s)
            self.gauges = gauges
            self.rnbd = dict(interval.rnbd)

    def collect(self):
        with self.lock:
            yield from self._families()

    def _families(self):
        labels = ["session", "path", "op"]
        requests = CounterMetricFamily("rtrs_requests", "RTRS requests (the kernel's "
                                       "stats/rdma accounting)", labels=labels)
        size = CounterMetricFamily("rtrs_bytes", "bytes of RTRS requests (data_len + "
                                   "usr_len)", labels=labels)
        latency = HistogramMetricFamily("rtrs_request_latency_seconds", "response time of "
                                        "answered RTRS requests", labels=labels)
        for key, (count, nbytes, buckets, total) in sorted(self.requests.items()):
            shown = self._scraped_before("requests", key)
            requests.add_metric(list(key), count if shown else 0)
            size.add_metric(list(key), nbytes if shown else 0)
            cumulative = np.cumsum(buckets).tolist() if shown else [0] * (len(BUCKETS) + 1)
            latency.add_metric(list(key), [(repr(b), c) for b, c in zip(BUCKETS, cumulative)]
                               + [("+Inf", cumulative[-1])], total if shown else 0.0)
        errors = CounterMetricFamily("rtrs_errors", "RTRS requests answered with an errno",
                                     labels=["session", "path", "errno"])
        for key, count in sorted(self.errors.items()):
            errors.add_metric(list(key), count if self._scraped_before("errors", key) else 0)
        reconnects = CounterMetricFamily("rtrs_reconnects", "successful reconnects of a path",
                                         labels=["session", "path"])
        for key, count in sorted(self.reconnects.items()):
            reconnects.add_metric(list(key), count if self._scraped_before("reconnects", key)
                                  else 0)
        retransmissions = CounterMetricFamily(
            "rtrs_retransmissions", "RC packets of the path sent again (go-back-N)",
            labels=["session", "path"])
        for key, count in sorted(self.retransmissions.items()):
            retransmissions.add_metric(list(key), count if self._scraped_before(
                "retransmissions", key) else 0)
        yield from (requests, size, errors, reconnects, retransmissions, latency)
        yield from self._gauges()
        yield from self._rnbd()
        yield CounterMetricFamily("rtrs_watch_intervals", "intervals read", value=self.intervals)

    def _gauges(self):
        names = (("rtrs_inflight_requests", "requests in flight (sent, not yet answered)"),
                 ("rtrs_queue_depth", "queue depth of the path (buffers of the session)"),
                 ("rtrs_heartbeat_age_seconds", "time since the last heartbeat of the path"))
        families = [GaugeMetricFamily(n, h, labels=["session", "path"]) for n, h in names]
        for key, values in sorted(self.gauges.items()):
            for family, value in zip(families, values):
                if value is not None:
                    family.add_metric(list(key), value)
        return families

    def _rnbd(self):
        labels = ["session", "device", "op"]
        count = CounterMetricFamily("rtrs_rnbd_requests", "RNBD IO requests", labels=labels)
        size = CounterMetricFamily("rtrs_rnbd_bytes", "bytes of RNBD IO (bi_size)",
                                   labels=labels)
        errors = CounterMetricFamily("rtrs_rnbd_errors", "RNBD IO answered with an errno",
                                     labels=labels)
        for key, values in sorted(self.rnbd.items()):
            shown = self._scraped_before("rnbd", key)
            for family, value in zip((count, size, errors), values):
                family.add_metric(list(key), value if shown else 0)
        return count, size, errors

    def _scraped_before(self, family, key):
        """Has a scrape found this counter already?  (The first one shows it at 0.)"""
        seen = (family,) + tuple(key)
        if seen in self.scraped:
            return True
        self.scraped.add(seen)
        return False
