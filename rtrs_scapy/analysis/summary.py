"""The analyzer's model as the documented JSON shape of `--format json` (README.md).

Keys may be added, never renamed.  UUIDs as canonical strings, addresses as
text, frames 1-based, latencies in microseconds.
"""

import numpy as np

from ..engine import transport as T
from .heartbeat import TIMEOUT_S
from .model import OPS
from .naming import unique_labels
from ..capture.links import address_text, mirror_entry

PERCENTILES = (("p50", 50), ("p90", 90), ("p99", 99))


def latency_stats(values, unit_ns=None):
    """count/min/percentiles/max in µs (nearest-rank percentiles), None when empty;
    ``values`` seconds (a sequence or an array: one float array, not Python floats),
    or with ``unit_ns`` integers counting that many ns (a Growing's values as kept:
    the ranks are picked among them, in their narrow type, and only the values picked
    become seconds, as the ns / 1e9 of all would have).  The values are sorted: numpy's
    vectorized sort takes a quarter of the time of a partition at the five ranks, from
    fifty values to millions (docs/benchmarks.md)."""
    if not len(values):
        return {"count": 0, "min": None, "p50": None, "p90": None, "p99": None, "max": None}
    if unit_ns is None:
        values = np.asarray(values, dtype=np.float64)
    count = len(values)
    ranks = [max(1, -(-pct * count // 100)) - 1 for _, pct in PERCENTILES]  # ceil(pct% of count)
    ordered = np.sort(values)
    picked = [ordered[0]] + [ordered[rank] for rank in ranks] + [ordered[-1]]
    if unit_ns is not None:
        picked = [int(value) * unit_ns / 1e9 for value in picked]
    names = ("min",) + tuple(name for name, _ in PERCENTILES) + ("max",)
    return {"count": count, **dict(zip(names, map(_us, picked)))}


def _us(seconds):
    return round(float(seconds) * 1e6, 1)


def path_summary(path):
    return {
        "sess_uuid": path.sess_uuid,
        "client": path.client,
        "server": path.server,
        "endpoints": [address_text(path.client_raw), address_text(path.server_raw)],
        "port": path.port,
        "protocol_version": path.protocol_version,
        "queue_depth": path.queue_depth,
        "queue_depth_inferred": path.queue_depth_inferred,
        "queue_depth_source": path.queue_depth_source,
        "max_io_size": path.max_io_size,
        "max_hdr_size": path.max_hdr_size,
        "always_invalidate": path.always_invalidate,
        "pathname": path.pathname,
        "cid_num": path.cid_num,
        "chunks": path.chunks,
        "connections": [{"cid": c.cid, "client_qpn": c.client_qpn, "server_qpn": c.server_qpn,
                         "recon_cnt": c.recon_cnt, "state": c.state, "frame": c.req_frame}
                        for c in path.connections],
        "io": {op: {"count": path.io[op].count, "bytes": path.io[op].bytes,
                    "errors": path.io[op].errors} for op in OPS},
        "latency_us": {op: latency_stats(*path.latencies[op].kept()) for op in OPS},
        "heartbeats": dict(path.heartbeats),
        "rkey_refreshes": path.rkey_refreshes,
        "reconnects": path.reconnects,
        "reconnect_attempts": path.reconnect_attempts,
        "connect_attempts": [_attempt(a) for a in path.attempts],
        "failovers": path.failovers,
        "failover_delay_us": latency_stats(path.failover_delays),
        "failovers_unseen": path.failovers_unseen,
        "failover_list": [dict(f) for f in path.failover_list],
        "aborted_requests": path.aborted,
        "partial_requests": path.partial_requests,
        "header_only_requests": path.header_only_requests,
        "responses_without_request": path.responses_without_request,
        "in_flight_at_end": path.in_flight_at_end,
        "lost_requests": path.aborted + (path.in_flight_at_end if path.up is False else 0),
        "rejects": list(path.rejects),
        "errors": list(path.errors),
        "disconnects": list(path.disconnects),
        "outages": _outages(path),
        "stalls": [dict(s) for s in path.stalls],
        "heartbeat": _heartbeat(path),
        "events": _events(path),
        "transport": dict(path.transport),
        "devices": {str(k): v for k, v in sorted(path.devices.items())},
        "link": path.link,
    }


#: the queue figures of a path or device without an answered IO
NO_QUEUE = {"max_in_flight": 0, "queue_full_s": 0.0}


def _queues(analyzer):
    """The deepest queue and the time at the queue depth, per path and device
    (analysis/inflight.py); none when the analyzer kept no latencies (watch)."""
    if analyzer.in_flight is None:
        return {}
    paths = analyzer.path_list

    def session_of(pid):     # an evicted path (None) or one without a session: its own
        return paths[pid].session or paths[pid] if paths[pid] is not None else ("gone", pid)
    return analyzer.in_flight.figures(
        session_of, lambda pid: paths[pid].queue_depth if paths[pid] is not None else 0)


def _attempt(attempt):
    return {"frame": attempt.frame, "time": attempt.time, "recon_cnt": attempt.recon_cnt,
            "reconnect": attempt.reconnect, "outcome": attempt.outcome,
            "end_frame": attempt.end_frame, "end_time": attempt.end_time}


def _outages(path):
    """Closed outages, then the one still running at the end of the capture.  An outage
    starts at the link's stall when one precedes the kernel's verdict (the heartbeat
    timeout, a disconnect): the verdict is kept as ``verdict_frame``/``verdict_time``
    (docs/PROTOCOL.md#stalls)."""
    outages = [dict(o) for o in path.outages]
    down = path.down
    if down is not None and down["outage"]:
        outages.append({"down_frame": down["down_frame"], "down_time": down["down_time"],
                        "up_frame": None, "up_time": None, "duration_s": None,
                        "cause": down["cause"]})
    since = None
    for outage in outages:
        outage["verdict_frame"], outage["verdict_time"] = (outage["down_frame"],
                                                           outage["down_time"])
        stall = next((s for s in path.stalls if s["time"] <= outage["down_time"]
                      and (since is None or s["time"] > since)), None)
        if stall is not None:
            outage["down_frame"], outage["down_time"] = stall["frame"], stall["time"]
            outage["stall_sender"] = stall["sender"]
            if outage["up_time"] is not None:
                outage["duration_s"] = round(outage["up_time"] - stall["time"], 6)
        since = outage["up_time"]
    return outages


def _heartbeat(path):
    """The last heartbeat seen and when the kernel's heartbeat timer would give up."""
    if not path.heartbeats_lost and path.last_heartbeat is None:
        return {"last_frame": None, "last_time": None, "timeout_time": None}
    if path.last_heartbeat is not None:
        frame, last = path.last_heartbeat
    else:  # the path came back (or not) after a loss: the lost one is the last seen
        frame, last = path.heartbeats_lost[-1]["frame"], path.heartbeats_lost[-1]["last_time"]
    return {"last_frame": frame, "last_time": last,
            "timeout_time": round(last + TIMEOUT_S, 6)}


def _events(path):
    """The path's timeline from the CM exchange and the heartbeats, with the events
    the IO analysis added (``path.events``), in time order."""
    events = list(path.events)
    for reject in path.rejects:
        events.append(dict(reject, kind="reject"))
    for disc in path.disconnects:
        events.append(dict(disc, kind="disconnect"))
    for attempt in path.attempts:
        if attempt.outcome == "established":
            events.append({"time": attempt.end_time, "frame": attempt.end_frame,
                           "kind": "reconnect" if attempt.reconnect else "connect",
                           "recon_cnt": attempt.recon_cnt, "attempt_frame": attempt.frame})
        elif attempt.outcome == "failed" and attempt.reconnect:
            events.append({"time": attempt.end_time, "frame": attempt.end_frame,
                           "kind": "reconnect_failed", "recon_cnt": attempt.recon_cnt,
                           "attempt_frame": attempt.frame})
    for outage in _outages(path):
        events.append({"time": outage["down_time"], "frame": outage["down_frame"],
                       "kind": "outage", "cause": outage["cause"],
                       "duration_s": outage["duration_s"], "up_frame": outage["up_frame"]})
    for stall in path.stalls:
        events.append(dict(stall, kind="stall"))
    for lost in path.heartbeats_lost:
        events.append(dict(lost, kind="heartbeat_lost"))
    events.sort(key=lambda e: (e["time"], e["frame"] if e["frame"] is not None else 0))
    return events


def summarize(analyzer, capture_info):
    """The whole summary: :func:`summary_head` with its sessions in place."""
    summary = summary_head(analyzer, capture_info)
    summary["sessions"] = list(session_summaries(analyzer))
    return summary


def session_summaries(analyzer):
    """Each session's summary, made when asked for: a caller that writes them one by
    one holds one at a time, not the thousands of a capture of short sessions."""
    analyzer.cm.finish()
    queues = _queues(analyzer)
    models = list(analyzer.sessions.values())
    labels = unique_labels([s.label for s in models], [s.paths_uuid for s in models])
    for session, label in zip(models, labels):
        paths = []
        for path in session.paths:
            paths.append(path_summary(path))
            paths[-1].update(queues.get(("path", path.id), NO_QUEUE))
        rnbd = analyzer.rnbd_view.summary(session)
        for device_id, device in rnbd["devices"].items():
            device.update(queues.get(("device", session, int(device_id)), NO_QUEUE))
        yield {
            "sessname": session.sessname,
            "paths_uuid": session.paths_uuid,
            "label": label,
            "paths": paths,
            "rnbd": rnbd,
        }


def summary_head(analyzer, capture_info):
    """The summary with an empty list of sessions: the capture, the anomalies, the
    other RDMA traffic (the keys in the order the JSON shape has them)."""
    analyzer.cm.finish()
    capture = dict(capture_info)
    capture.update({
        "packets": analyzer.frames,
        "ib_packets": analyzer.ib_frames,
        "rtrs_packets": analyzer.rtrs_packets,
        "first_ts": analyzer.first_ts,
        "last_ts": analyzer.last_ts,
        "malformed": analyzer.malformed,
        "cm_retransmissions": analyzer.cm.cm_retransmissions,
        "unmatched_responses": analyzer.unmatched_responses,
        "cnps": analyzer.cnps,
        "capture_lost_packets": analyzer.capture_lost_packets,
        "limits": analyzer.bounds.summary(analyzer.engine.streams.counters),
    })
    mirrors = [mirror_entry(code) for code in sorted(analyzer.mirrors)]
    if mirrors:
        capture["mirror"] = mirrors[0] if len(mirrors) == 1 else mirrors
    if capture.get("cut_records"):     # docs/PROTOCOL.md#header-only-captures
        counters = analyzer.engine.streams.counters
        capture["cut_mads"] = int(counters[T.G_CUT_MADS])
        capture["cut_headers"] = int(counters[T.G_CUT_HEADERS])
    return {"capture": capture, "sessions": [], "anomalies": list(analyzer.anomalies),
            "anomaly_counts": dict(sorted(analyzer.anomaly_log.counts.items())),
            "other_rdma": analyzer.cm.others.summary()}
