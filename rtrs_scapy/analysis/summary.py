"""The analyzer's model as the documented JSON shape of `--format json` (README.md).

Keys may be added, never renamed.  UUIDs as canonical strings, addresses as
text, frames 1-based, latencies in microseconds.
"""

from .model import OPS
from .names import address_text

PERCENTILES = (("p50", 50), ("p90", 90), ("p99", 99))


def latency_stats(values):
    """count/min/percentiles/max in µs (nearest-rank percentiles), None when empty."""
    if not values:
        return {"count": 0, "min": None, "p50": None, "p90": None, "p99": None, "max": None}
    ordered = sorted(values)
    count = len(ordered)
    stats = {"count": count, "min": _us(ordered[0])}
    for name, pct in PERCENTILES:
        rank = max(1, -(-pct * count // 100))  # ceil(pct/100 * count)
        stats[name] = _us(ordered[rank - 1])
    stats["max"] = _us(ordered[-1])
    return stats


def _us(seconds):
    return round(seconds * 1e6, 1)


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
        "latency_us": {op: latency_stats(path.latencies[op]) for op in OPS},
        "heartbeats": dict(path.heartbeats),
        "rkey_refreshes": path.rkey_refreshes,
        "reconnects": path.reconnects,
        "reconnect_attempts": path.reconnect_attempts,
        "failovers": path.failovers,
        "aborted_requests": path.aborted,
        "rejects": list(path.rejects),
        "errors": list(path.errors),
        "disconnects": list(path.disconnects),
        "transport": dict(path.transport),
        "devices": {str(k): v for k, v in sorted(path.devices.items())},
    }


def summarize(analyzer, capture_info):
    sessions = []
    for session in analyzer.sessions.values():
        sessions.append({
            "sessname": session.sessname,
            "paths_uuid": session.paths_uuid,
            "paths": [path_summary(p) for p in session.paths],
        })
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
        "partial_messages": analyzer.partial_messages,
        "cnps": analyzer.cnps,
    })
    return {"capture": capture, "sessions": sessions, "anomalies": list(analyzer.anomalies)}
