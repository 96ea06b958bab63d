"""The watch screen's words: compact figures for an 80-column row, one line per event."""

import datetime

from .stats import OPS


def clock(seconds):
    """HH:MM:SS.mmm UTC."""
    stamp = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    return stamp.strftime("%H:%M:%S.%f")[:-3]


def count(value):
    """12, 999, 1.2k, 12k, 123k, 1.2M: at most 4 characters."""
    if value < 999.5:
        return "%.0f" % value
    for unit, scale in (("k", 1e3), ("M", 1e6), ("G", 1e9)):
        if value < scale * 999.5:
            scaled = value / scale
            return ("%.1f%s" if scaled < 9.95 else "%.0f%s") % (scaled, unit)
    return "%.0fT" % (value / 1e12)


def rate(amount, seconds):
    return amount / seconds if seconds > 0 else 0.0


def megabytes(nbytes, seconds):
    """MB/s (10^6 bytes): one decimal below 100, at most 4 characters."""
    value = rate(nbytes, seconds) / 1e6
    return "%.1f" % value if value < 99.95 else count(value)


def milliseconds(us):
    if us is None:
        return "-"
    ms = us / 1e3
    return "%.2f" % ms if ms < 10 else "%.1f" % ms if ms < 100 else "%.0f" % ms


def path_name(row):
    return "%s→%s" % (row.client, row.server)


def heartbeat(age):
    """Seconds since the last heartbeat, at most 4 characters."""
    if age is None:
        return "-"
    return "%.1fs" % age if age < 9.95 else count(age) + "s" if age < 999.5 else ">1ks"


def event_line(event):
    """One line of the event log."""
    return "%s %s  %s %s→%s" % (clock(event["time"]), event_text(event), event["session"],
                                event["client"], event["server"])


def event_text(event):
    kind = event["kind"]
    if kind in ("connect", "reconnect"):
        return "%s (recon_cnt %s)" % (kind, event.get("recon_cnt"))
    if kind == "reconnect_failed":
        return "reconnect failed (recon_cnt %s)" % event.get("recon_cnt")
    if kind == "reject":
        return "reject by the %s: %s" % (event.get("sender"), event.get("name"))
    if kind == "disconnect":
        return "disconnect by the %s%s" % (event.get("initiator"),
                                           " (crossed)" if event.get("crossed") else "")
    if kind == "outage":
        if event.get("duration_s") is None:
            return "down (%s)" % event.get("cause")
        return "outage %.3f s (%s)" % (event["duration_s"], event.get("cause"))
    if kind == "stalled":
        return "stalled: the %s's frame %d never acknowledged" % (event["sender"],
                                                                  event["frame"])
    if kind == "heartbeat_lost":
        return "heartbeats lost (last %s)" % clock(event["last_time"])
    if kind == "io_error":
        if "sector" in event:
            return "IO error %s: %s %s sector %d, %d bytes" % (
                event["name"], event["rnbd_op"].upper(),
                event.get("device") or "device %d" % event["device_id"], event["sector"],
                event["bi_size"])
        return "IO error %s: %s%s request, frame %d" % (
            event["name"], "RNBD %s, " % event["rnbd"] if "rnbd" in event else "", event["op"],
            event["request_frame"])
    if kind == "failover":
        return "failover: %s buf_id %d first sent in frame %d" % (
            event["op"], event["buf_id"], event["first_frame"])
    return kind.replace("_", " ")


def details(row, totals, seconds, events):
    """The text of a path's details (Enter on its row)."""
    d = row.details
    lines = ["%s  %s" % (row.session, path_name(row)),
             "sess_uuid %s  pathname %s" % (row.sess_uuid, d.get("pathname")),
             "state %s  queue depth %s (%s)  in flight %d  cids %s" % (
                 row.state, row.queue_depth, d.get("queue_depth_source"), row.inflight,
                 d.get("cids")),
             "", "last interval (%.1f s):" % seconds]
    for op in OPS:
        s = row.stats.ops[op]
        lat = s.latency_us()
        lines.append("  %-5s %6s IOPS %8s MB/s  p50 %s ms  p99 %s ms" % (
            op, count(rate(s.count, seconds)), megabytes(s.bytes, seconds),
            milliseconds(lat["p50"]), milliseconds(lat["p99"])))
    lines.append("since the start:")
    for op in OPS:
        lines.append("  %-5s %8d requests %12d bytes" % (op, totals[op][0], totals[op][1]))
    errs = " ".join("%s %d" % kv for kv in sorted(totals["errors"].items())) or "none"
    lines += ["  errors %s" % errs,
              "  reconnects %d of %d attempts  failovers %s  rkey refreshes %s" % (
                  row.reconnects_total, d.get("reconnect_attempts", 0), d.get("failovers"),
                  d.get("rkey_refreshes")),
              "  heartbeats %s" % _heartbeats(d.get("heartbeats", {})),
              "  last heartbeat %s ago" % heartbeat(row.heartbeat_age_s)]
    if row.devices:
        lines.append("  RNBD devices " + " ".join("%s %s" % kv
                                                   for kv in sorted(row.devices.items())))
    if events:
        lines += ["", "events:"] + ["  " + event_line(e) for e in events[-8:]]
    return "\n".join(lines)


def _heartbeats(counts):
    return ", ".join("%s %d (acked %d)" % (label, counts.get(side, 0),
                                           counts.get("acks_" + side, 0))
                     for side, label in (("client_to_server", "client→server"),
                                         ("server_to_client", "server→client")))
