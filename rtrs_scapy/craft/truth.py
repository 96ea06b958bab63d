"""The ground truth of a crafted session: what went into the capture, counted as
the kernel counts it (rtrs-client stats per path), as a JSON-serialisable dict
stored next to each corpus file."""

from ..constants import errno_name


def session_truth(crafter, since=None, scenario=None, params=None):
    """The truth of ``crafter``'s session, restricted to what happened from ``since``."""
    s = crafter

    def visible(item):
        return since is None or item["t"] >= since
    reqs = [r for r in s.requests if visible(r)]
    events = [e for e in s.events if visible(e)]
    paths = []
    for path in s.paths:
        stats = {"reads": 0, "read_bytes": 0, "writes": 0, "write_bytes": 0}
        for r in reqs:
            if r["path"] == path.index:
                key = "read" if r["dir"] == "read" else "write"
                stats[key + "s"] += 1
                stats[key + "_bytes"] += r["data_len"] + r["usr_len"]
        paths.append({
            "index": path.index, "client_addr": path.client.ip, "server_addr": path.server.ip,
            "sess_uuid": path.sess_uuid, "cid_num": path.cid_num,
            "recon_cnt": path.recon_cnt, "connects": path.connects,
            "reconnects": sum(1 for e in events
                              if e["kind"] == "reconnect" and e["path"] == path.index),
            "state": path.state, "stats": stats,
        })
    totals = {k: sum(p["stats"][k] for p in paths)
              for k in ("reads", "read_bytes", "writes", "write_bytes")}
    errors = {}
    for r in reqs:
        if r["errno"]:  # None: never answered (the request failed over)
            name = errno_name(r["errno"])
            errors[name] = errors.get(name, 0) + 1
    rejects = [{k: e[k] for k in ("path", "cid", "errno", "errno_name", "reason")}
               for e in events if e["kind"] == "reject"]
    ops = {}
    for r in reqs:
        ops[r["op"]] = ops.get(r["op"], 0) + 1
    return {
        "scenario": scenario, "seed": s.seed, "params": params or {},
        "config": {"encap": s.encap.describe(), "linktype": s.encap.linktype,
                   "path_mtu": s.pmtu, "always_invalidate": s.inval,
                   "queue_depth": s.qd, "cid_num": s.cid_num,
                   "max_io_size": s.max_io_size, "max_hdr_size": s.max_hdr_size,
                   "chunk_size": s.chunk_size, "sessname": s.sessname,
                   "port": s.port},
        "capture_start": round(since, 6) if since is not None else None,
        "session": {"paths_uuid": s.paths_uuid, "sessname": s.sessname},
        "paths": paths,
        "stats": totals,
        "requests": len(reqs),
        "requests_by_op": ops,
        "errors": errors,
        "rejects": rejects,
        "reconnects": sum(p["reconnects"] for p in paths),
        "heartbeats": {
            "hb_msg": sum(1 for e in events if e["kind"] == "hb_msg"),
            "hb_ack": sum(1 for e in events if e["kind"] == "hb_ack"),
            "hb_msg_unanswered": sum(1 for e in events
                                     if e["kind"] == "hb_msg" and not e["answered"]),
        },
        "path_failures": sum(1 for e in events if e["kind"] == "path_error"),
        "failovers": sum(1 for r in reqs if r.get("failover")),
        "retransmitted_messages": sum(1 for e in events if e["kind"] == "retransmission"),
        "devices": {str(k): v for k, v in sorted(s.device_log.items())},
        "ios": [{k: r[k] for k in ("t", "path", "cid", "buf_id", "dir", "op", "data_len",
                                   "usr_len", "errno", "failover")} for r in reqs],
    }

