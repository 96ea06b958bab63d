"""The ground truth of a crafted session: what went into the capture, counted as
the kernel counts it (rtrs-client stats per path), as a JSON-serialisable dict
stored next to each corpus file."""

from ..spec.constants import errno_name
from ..layers.cm import cm_rej_reasons
from .params import C, S

SIDES = {C: "client", S: "server"}


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
            # what the capture holds: a request sent into a dead link is not in it (the
            # kernel's stats/rdma counts it, failover.pcap: 363 reads, 360 on the wire)
            if r["path"] == path.index and not r["_unsent"]:
                key = "read" if r["dir"] == "read" else "write"
                stats[key + "s"] += 1
                stats[key + "_bytes"] += r["data_len"] + r["usr_len"]
        mine = [e for e in events if e["path"] == path.index]
        entry = {
            "index": path.index, "client_addr": path.client.ip, "server_addr": path.server.ip,
            "sess_uuid": path.sess_uuid, "cid_num": path.cid_num,
            "recon_cnt": path.recon_cnt, "connects": path.connects,
            "reconnects": sum(1 for e in mine if e["kind"] == "reconnect"),
            "state": path.state, "stats": stats,
            # the client's sysfs: stats/reconnects and stats/rdma failover_cnt
            "kernel": {"reconnects": {
                "successful": sum(1 for e in mine if e["kind"] == "reconnect"),
                "failed": sum(1 for e in mine if e["kind"] == "reconnect_failed")},
                "failover_cnt": sum(1 for r in reqs if r["path"] == path.index and r["failover"])},
            "lost_requests": sum(1 for r in reqs if r["path"] == path.index and r["lost"]),
            "rejects": [{"cid": e["cid"], "sender": SIDES[e["sender"]], "reason": e["reason"],
                         "reason_name": cm_rej_reasons[e["reason"]], "errno": e["errno"] or None,
                         "errno_name": e["errno_name"]}
                        for e in mine if e["kind"] == "reject"],
            "disconnects": [{"initiator": SIDES[e["side"]], "crossed": e["crossed"],
                             "answered_by": SIDES[1 - e["side"]] if e.get("answered") else None}
                            for e in mine if e["kind"] == "disconnect"],
            "heartbeat_lost": sum(1 for e in mine
                                  if e["kind"] == "path_error" and e["cause"] == "heartbeat"),
        }
        entry["outages"] = _outages(mine)
        paths.append(entry)
    totals = {k: sum(p["stats"][k] for p in paths)
              for k in ("reads", "read_bytes", "writes", "write_bytes")}
    errors = {}
    for r in reqs:
        if r["errno"]:  # None: never answered (the request failed over)
            name = errno_name(r["errno"])
            errors[name] = errors.get(name, 0) + 1
    rejects = [dict({k: e[k] for k in ("path", "cid", "errno", "errno_name", "reason")},
                    sender=SIDES[e["sender"]]) for e in events if e["kind"] == "reject"]
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
        # answered into a dead link, then re-sent: a write the server ran twice
        "executed_twice": sum(1 for r in reqs if r["_undelivered"] and r["dir"] == "write"),
        "retransmitted_messages": sum(1 for e in events if e["kind"] == "retransmission"),
        "devices": {str(k): v for k, v in sorted(s.device_log.items())},
        # on_wire false: sent into a dead link, never in the capture (its copy is)
        "ios": [dict({k: r[k] for k in ("t", "path", "cid", "buf_id", "dir", "op", "data_len",
                                        "usr_len", "errno", "failover")},
                     on_wire=not r["_unsent"]) for r in reqs],
    }


def _outages(events):
    """When one path was down: from a disconnect (or the heartbeats running out) while
    it was up, to the next connect; only when the client tries to reconnect or the
    heartbeats ran out (a path closed for good has no outage)."""
    outages, up, down = [], False, None
    for e in events:
        kind = e["kind"]
        if kind == "connected":
            if down is not None:
                outages.append({"cause": down["cause"], "up": True})
            up, down = True, None
        elif kind == "path_error" and e["cause"] == "heartbeat" and up:
            up, down = False, {"cause": "heartbeat_lost", "outage": True}
        elif kind == "disconnect" and up:
            up, down = False, {"cause": SIDES[e["side"]] + "_disconnect", "outage": False}
        elif kind == "cm_req" and down is not None:
            down["outage"] = True
    if down is not None and down["outage"]:
        outages.append({"cause": down["cause"], "up": False})
    return outages

