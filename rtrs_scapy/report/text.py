"""Human-readable rendering of a summary dict (the JSON shape); no protocol logic."""

from ..analysis.model import OPS


def _size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return "%d %s" % (n, unit) if unit == "B" else "%.1f %s" % (n, unit)
        n /= 1024.0


def _latency(stats):
    if not stats["count"]:
        return "-"
    return "min %s  p50 %s  p90 %s  p99 %s  max %s µs" % tuple(
        stats[k] for k in ("min", "p50", "p90", "p99", "max"))


def render_path(path, out):
    qd = path["queue_depth"]
    qd_text = "%s%s" % (qd, " (inferred)" if path["queue_depth_inferred"] else "")
    out.append("  path %s → %s  port %s  sess_uuid %s" % (
        path["client"], path["server"], path["port"] if path["port"] is not None else "?",
        path["sess_uuid"] or "(handshake not captured)"))
    inval = path["always_invalidate"]
    out.append("    handshake: protocol %s  queue_depth %s  max_io_size %s  max_hdr_size %s  "
               "always_invalidate %s" % (
                   path["protocol_version"] or "?", qd_text, path["max_io_size"] or "?",
                   path["max_hdr_size"] or "?", {True: "Y", False: "N"}.get(inval, "?")))
    conns = path["connections"]
    if conns:
        out.append("    connections: " + ", ".join(
            "cid %s qp %s↔%s (recon_cnt %s, %s)" % (
                c["cid"], _hex(c["client_qpn"]), _hex(c["server_qpn"]), c["recon_cnt"],
                c["state"]) for c in conns))
    for op in OPS:
        io = path["io"][op]
        out.append("    %-5s %6d requests  %10s  %d errors   latency %s" % (
            op, io["count"], _size(io["bytes"]), io["errors"], _latency(path["latency_us"][op])))
    hb = path["heartbeats"]
    out.append("    heartbeats: client→server %d (acked %d), server→client %d (acked %d)" % (
        hb["client_to_server"], hb["acks_server_to_client"], hb["server_to_client"],
        hb["acks_client_to_server"]))
    out.append("    rkey refreshes %d  reconnects %d  retransmissions %d  NAKs %d" % (
        path["rkey_refreshes"], path["reconnects"], path["transport"]["retransmissions"],
        path["transport"]["naks"]))
    if path["devices"]:
        out.append("    RNBD devices: " + ", ".join("%s=%s" % kv for kv in path["devices"].items()))
    for reject in path["rejects"]:
        cause = "errno %d" % reject["errno"] if reject["errno"] else "CM reject, no RTRS errno"
        out.append("    REJECT frame %d: %s (%s)" % (reject["frame"], reject["name"], cause))
    errors = path["errors"]
    if errors:
        by_name = {}
        for err in errors:
            what = err["op"] + (" (RNBD %s)" % err["rnbd"] if err.get("rnbd") else "")
            by_name.setdefault((what, err["name"]), []).append(err["frame"])
        for (what, name), frames in sorted(by_name.items()):
            out.append("    IO errors: %d × %s %s (first frame %d)" % (len(frames), what, name,
                                                                     frames[0]))
    for disc in path["disconnects"]:
        out.append("    disconnect at frame %d, started by the %s" % (disc["frame"],
                                                                     disc["initiator"]))


def _hex(value):
    return "?" if value is None else "0x%x" % value


def render(summary):
    cap = summary["capture"]
    out = ["%s: %d packets (%d RTRS), %s, %s%s" % (
        cap["path"], cap["packets"], cap["rtrs_packets"], cap["link_type"], cap["format"],
        ", TRUNCATED" if cap.get("truncated") else "")]
    if cap["first_ts"] is not None:
        out.append("  %.6f … %.6f (%.3f s)" % (cap["first_ts"], cap["last_ts"],
                                               cap["last_ts"] - cap["first_ts"]))
    if not summary["sessions"]:
        out.append("no RTRS session found")
    for session in summary["sessions"]:
        out.append("")
        out.append("session %s  paths_uuid %s  (%d path%s)" % (
            session["sessname"] or "(name not captured)", session["paths_uuid"] or "-",
            len(session["paths"]), "" if len(session["paths"]) == 1 else "s"))
        for path in session["paths"]:
            render_path(path, out)
    anomalies = summary["anomalies"]
    out.append("")
    if anomalies:
        out.append("anomalies (%d):" % len(anomalies))
        for item in anomalies[:50]:
            out.append("  frame %s: %s: %s" % (item["frame"], item["kind"], item["detail"]))
        if len(anomalies) > 50:
            out.append("  … %d more (see --format json)" % (len(anomalies) - 50))
    else:
        out.append("no anomalies")
    return "\n".join(out) + "\n"
