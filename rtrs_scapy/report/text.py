"""Human-readable rendering of a summary dict (the JSON shape); no protocol logic.

Everything the JSON knows is shown, in words: values the capture cannot tell are
said once ("handshake not captured") instead of printed as placeholders.  Keys
that only newer analyzers fill (queue_depth_source, outages, events, rnbd, …) are
shown when present.
"""

from ..analysis.naming import summary_label
from ..spec.constants import RNBD_OP_NAMES, RNBD_SECTOR_SIZE as SECTOR
from .words import (
    access_mode, clock_offset_text, encapsulation_texts, errno_text, plural, reason_name, size,
    utc_iso,
)

OPS = ("read", "write")
SPLIT_PARTS = ("request", "server", "data", "response", "wire")
RNBD_CONTROL = ("sess_info", "open", "close")
MAX_ANOMALIES = 50
MAX_EVENTS = 40
QUEUE_DEPTH_SOURCE = {
    "handshake": "",
    "inferred": " (inferred from the traffic)",
    "assumed": " (assumed: the kernel default, the capture cannot tell)",
    "forced": " (given with --queue-depth)",
}


class Clock:
    """Capture times as offsets from its first packet: '+4.738 s'."""

    def __init__(self, first_ts):
        self.first_ts = first_ts

    def at(self, ts):
        if ts is None or self.first_ts is None:
            return ""
        return "+%.3f s" % (ts - self.first_ts)

    def frame(self, frame, ts=None):
        when = self.at(ts)
        return "frame %d%s" % (frame, " (%s)" % when if when else "")


def _percentiles(stats):
    return "min %s  p50 %s  p90 %s  p99 %s  max %s" % tuple(
        stats[k] for k in ("min", "p50", "p90", "p99", "max"))


def _latency(stats):
    return "latency µs " + _percentiles(stats) if stats["count"] else ""


def _count_with_errors(count, errors):
    return "%d%s" % (count, " (%d failed)" % errors if errors else "")


# -- path ------------------------------------------------------------------------

def _handshake(path):
    """What the CM handshake told, or that it was not captured."""
    qd = path["queue_depth"]
    source = path.get("queue_depth_source") or (
        "inferred" if path["queue_depth_inferred"] else "handshake")
    inval = {True: "Y", False: "N"}.get(path["always_invalidate"])
    if path["sess_uuid"] is None:
        known = ["queue_depth %d%s" % (qd, QUEUE_DEPTH_SOURCE[source])] if qd else \
            ["queue_depth unknown"]
        if inval:
            known.append("always_invalidate %s (seen in the responses)" % inval)
        return "handshake not captured: " + ", ".join(known)
    if path["max_io_size"] is None:  # a conn_req, but no conn_rsp accepted it
        text = "handshake: protocol %s requested, no conn_rsp accepted it" % (
            path["protocol_version"])
        return text + ("; queue_depth %d%s" % (qd, QUEUE_DEPTH_SOURCE[source]) if qd else "")
    return "handshake: protocol %s  queue_depth %d%s  max_io_size %d  max_hdr_size %d  " \
           "always_invalidate %s" % (path["protocol_version"], qd, QUEUE_DEPTH_SOURCE[source],
                                     path["max_io_size"], path["max_hdr_size"], inval)


def _link(link):
    """An inferred path merged into the handshake path it continues, or why not."""
    if not link:
        return ""
    if link["merged"]:
        return "before its handshake: IO and heartbeats from frame %s to %s, merged (%s)" % (
            link["inferred_first_frame"], link["inferred_last_frame"], link["reason"])
    return "not the past of the handshake path %s: %s" % (link["candidate"], link["reason"])


def _connections(conns):
    """Grouped by recon_cnt: each reconnect opens a new set of cids."""
    groups = {}
    for c in conns:
        groups.setdefault(c["recon_cnt"], []).append(c)
    lines = []
    for recon_cnt, group in groups.items():
        states = sorted({c["state"] for c in group})
        lines.append("recon_cnt %d: %s (%s)" % (recon_cnt, ", ".join(
            "cid %d %s↔%s" % (c["cid"], _qpn(c["client_qpn"]), _qpn(c["server_qpn"]))
            for c in group), ", ".join(states)))
    return lines


def _qpn(value):
    return "none" if value is None else "0x%x" % value


def _counters(path):
    """The path's event counters, zero ones left out except the usual three."""
    parts = ["rkey refreshes %d" % path["rkey_refreshes"]]
    attempts = path.get("reconnect_attempts", path["reconnects"])
    text = "reconnects %d" % path["reconnects"]
    if attempts != path["reconnects"]:
        text += " of %d attempts (%d failed)" % (attempts, attempts - path["reconnects"])
    parts.append(text)
    if path.get("failovers"):
        delay = path.get("failover_delay_us") or {}
        if delay.get("count") == 1:
            after = " (re-sent after %s µs)" % delay["max"]
        else:
            after = " (re-sent after µs %s)" % _percentiles(delay) if delay.get("count") else ""
        unseen = path.get("failovers_unseen")
        if unseen:
            after = ", %d with the original not on the wire%s" % (unseen, after)
        parts.append("failovers %d%s" % (path["failovers"], after))
    for key, label in (("aborted_requests", "aborted requests"),
                       ("lost_requests", "lost requests"),
                       ("in_flight_at_end", "in flight at the end"),
                       ("partial_requests", "requests begun before the capture"),
                       ("responses_without_request", "responses to requests before the "
                                                     "capture")):
        if path.get(key):
            parts.append("%s %d" % (label, path[key]))
    return "  ".join(parts)


def _queue(item):
    """The deepest queue and the time all permits were taken (analysis/inflight.py)."""
    if not item.get("max_in_flight"):      # no answered IO (or a summary without it)
        return ""
    return "queue: max in flight %d, at the queue depth %.3f s" % (item["max_in_flight"],
                                                                  item["queue_full_s"])


def _transport(transport):
    parts = ["retransmissions %d" % transport["retransmissions"], "NAKs %d" % transport["naks"]]
    for key, label in (("rnr_naks", "RNR NAKs"), ("cnps", "CNPs"),
                       ("capture_lost_packets", "lost by the capture")):
        if transport.get(key):
            parts.append("%s %d" % (label, transport[key]))
    return "transport: " + "  ".join(parts)


def _heartbeats(path, clock):
    hb = path["heartbeats"]
    text = "heartbeats: client→server %d (acked %d), server→client %d (acked %d)" % (
        hb["client_to_server"], hb["acks_server_to_client"], hb["server_to_client"],
        hb["acks_client_to_server"])
    last = path.get("heartbeat")
    if last and last.get("last_frame") is not None:
        text += "; last %s" % clock.frame(last["last_frame"], last["last_time"])
        if last.get("timeout_time") is not None:
            text += ", the kernel's timeout at %s" % clock.at(last["timeout_time"])
    return text


def _reject(reject, clock):
    causes = []
    if reject.get("reason") is not None:
        causes.append("%s (reason %d)" % (reason_name(reject["reason"]), reject["reason"]))
    if reject.get("errno"):
        causes.append("errno " + errno_text(reject["errno"]))
    cause = ", ".join(causes) or reject["name"]
    sender = " by the %s" % reject["sender"] if reject.get("sender") else ""
    return "REJECT %s%s: %s" % (clock.frame(reject["frame"], reject.get("time")), sender, cause)


def _disconnect(disc, clock):
    text = "disconnect %s, started by the %s" % (clock.frame(disc["frame"], disc.get("time")),
                                                 disc["initiator"])
    if disc.get("crossed"):
        text += " (crossed: the %s sent DREQs before it saw the %s's, %s)" % (
            _other_side(disc["initiator"]), disc["initiator"],
            clock.frame(disc["answer_frame"]))
    elif disc.get("answered_by"):
        text += " (the %s answered with DREQs of its own, %s)" % (
            disc["answered_by"], clock.frame(disc["answer_frame"]))
    return text


def _other_side(side):
    return "server" if side == "client" else "client"


def _outage(outage, clock):
    text = "outage from %s" % clock.frame(outage["down_frame"], outage["down_time"])
    if outage.get("up_frame") is None:
        text += ", not up again in the capture"
    else:
        text += " to %s: %.3f s" % (clock.frame(outage["up_frame"], outage["up_time"]),
                                    outage["duration_s"])
    cause = outage["cause"].replace("_", " ") if outage.get("cause") else None
    if outage.get("stall_sender") and outage.get("verdict_frame") is not None:
        cause = "link stalled; %s at %s" % (cause or "down",
                                        clock.frame(outage["verdict_frame"],
                                                    outage["verdict_time"]))
    return text + (" (%s)" % cause if cause else "")


def _failover(record, clock):
    """One failover on the path that took it over, with its original."""
    text = "%s buf_id %d %s" % (clock.frame(record["frame"], record["time"]),
                                record["buf_id"], record["op"].upper())
    if record.get("sector") is not None:
        text += " sector %d, %d bytes" % (record["sector"], record["bi_size"])
    if record["original_frame"] is not None:
        text += ": failed over from frame %d on %s" % (record["original_frame"],
                                                       record["original_path"])
        if record["kind"] == "response_not_delivered":
            text += " (response frame %d not delivered)" % record["response_frame"]
        else:
            text += " (no response)"
        text += ", re-sent after %.1f µs" % record["delay_us"]
        if record.get("wait_us") is not None:
            text += ", waited %.1f µs in all" % record["wait_us"]
    else:
        text += ": failed over from %s, original not on the wire (the kernel's permit " \
                "order)" % record["original_path"]
    if record.get("executed_twice"):
        text += "; executed twice on the server"
    return text


def _stall(stall, clock):
    text = "stall from %s: the %s's transmissions never acknowledged" % (
        clock.frame(stall["frame"], stall["time"]), stall["sender"])
    if stall.get("acked_frame") is not None:
        text += " (last ACK frame %d)" % stall["acked_frame"]
    return text + ", %s" % plural(stall["retransmissions"], "retransmission")


def error_text(err):
    """One failed request, in the words of the kernel's log line where it has one:
    'I/O error, dev /dev/loop0, sector 14336, op READ, 4096 bytes: EIO'."""
    kind = err.get("rnbd")
    name = err["name"]
    if kind == "io" and err.get("rnbd_op"):
        dev = err.get("device") or ("id %d" % err["device_id"] if err.get("device_id")
                                    is not None else "unknown")
        text = "I/O error, dev %s" % dev
        if err.get("sector") is not None and err["rnbd_op"] != "flush":
            text += ", sector %d" % err["sector"]
        text += ", op %s" % err["rnbd_op"].upper()
        if err.get("bi_size"):
            text += ", %d bytes" % err["bi_size"]
        return text + ": " + name
    if kind == "open":
        return "OPEN%s failed: %s" % (" " + err["device"] if err.get("device") else "", name)
    if kind == "close" and err.get("device_id") is not None:
        return "CLOSE of device %d failed: %s" % (err["device_id"], name)
    what = "RNBD %s" % kind if kind else "RTRS"
    return "%s %s request failed: %s" % (what, err["op"], name)


def _errors(errors, clock):
    ordered = sorted(errors, key=lambda e: (e.get("time") or 0, e["frame"]))
    lines = []
    for err in ordered:
        where = clock.frame(err["frame"], err.get("time"))
        if err.get("request_frame") is not None:
            where += ", request frame %d" % err["request_frame"]
        if err.get("cid") is not None:
            where += ", cid %d" % err["cid"]
        lines.append("%s: %s" % (where, error_text(err)))
    return lines


def _value(value):
    """An event attribute in words (never a Python repr)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return "%.3f" % value
    if isinstance(value, dict):
        return ", ".join("%s %s" % (k, _value(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_value(v) for v in value)
    return str(value)


def _attribute(key, value, clock):
    """'outage_s', 30.09 -> 'outage 30.090 s'; 'last_time' relative to the capture start;
    other keys as they are."""
    if key.endswith("_time") and isinstance(value, (int, float)):
        return "%s %s" % (key, clock.at(value))
    for suffix, unit in (("_s", "s"), ("_us", "µs")):
        if key.endswith(suffix) and isinstance(value, (int, float)):
            return "%s %s %s" % (key[:-len(suffix)], _value(float(value)), unit)
    return "%s %s" % (key, _value(value))


def event_text(event, clock):
    """One timeline entry: when, frame, kind and its attributes."""
    if event["kind"] == "kernel_log":
        return "%-10s %-13s %-16s %s: %s" % (clock.at(event["time"]), "", "kernel_log",
                                              event["log"], event["text"])
    rest = {k: v for k, v in event.items() if k not in ("time", "frame", "kind")
            and v is not None}
    if rest.get("reason") is not None:
        rest["reason"] = "%d %s" % (rest["reason"], reason_name(rest["reason"]))
        rest.pop("reason_name", None)
        if rest.get("name") == reason_name(event["reason"]):
            rest.pop("name")
    if rest.get("errno"):
        rest["errno"] = errno_text(rest["errno"])
        rest.pop("name", None)
    details = "  ".join(_attribute(k, v, clock) for k, v in rest.items())
    frame = "frame %d" % event["frame"] if event.get("frame") is not None else ""
    return "%-10s %-13s %-16s %s" % (clock.at(event["time"]), frame, event["kind"], details)


def render_path(path, clock, out):
    ends = "  path %s → %s" % (path["client"], path["server"])
    if path["sess_uuid"] is not None:
        ends += "  port %d  sess_uuid %s" % (path["port"], path["sess_uuid"])
    out.append(ends)
    out.append("    " + _handshake(path))
    link = _link(path.get("link"))
    if link:
        out.append("    " + link)
    conns = path["connections"]
    if conns:
        lines = _connections(conns)
        out.append("    connections (client QPN↔server QPN): " + lines[0])
        out.extend("      " + line for line in lines[1:])
    io = path["io"]
    if any(io[op]["count"] for op in OPS):
        out.append("    RTRS requests (counted like the kernel's stats/rdma, RNBD control "
                   "included):")
        for op in OPS:
            latency = _latency(path["latency_us"][op])
            out.append(("      %-5s %6d %-8s %10s  %-10s %s" % (
                op, io[op]["count"], "request" if io[op]["count"] == 1 else "requests",
                size(io[op]["bytes"]), plural(io[op]["errors"], "error") if io[op]["errors"]
                else "no errors", latency)).rstrip())
    else:
        out.append("    no IO requests")
    if any(path["heartbeats"].values()):
        out.append("    " + _heartbeats(path, clock))
    out.append("    " + _counters(path))
    queue = _queue(path)
    if queue:
        out.append("    " + queue)
    out.append("    " + _transport(path["transport"]))
    for reject in path["rejects"]:
        out.append("    " + _reject(reject, clock))
    for disc in path["disconnects"]:
        out.append("    " + _disconnect(disc, clock))
    if path.get("failover_list"):
        out.append("    failovers taken over (%d):" % len(path["failover_list"]))
        out.extend("      " + _failover(f, clock) for f in path["failover_list"])
    for stall in path.get("stalls", ()):
        out.append("    " + _stall(stall, clock))
    for outage in path.get("outages", ()):
        out.append("    " + _outage(outage, clock))
    if path["errors"]:
        out.append("    failed requests (%d, by time):" % len(path["errors"]))
        out.extend("      " + line for line in _errors(path["errors"], clock))
    events = path.get("events")
    if events:
        out.append("    timeline:")
        for event in events[:MAX_EVENTS]:
            out.append(("      " + event_text(event, clock)).rstrip())
        if len(events) > MAX_EVENTS:
            out.append("      … %d more events (see --format json)" % (len(events) - MAX_EVENTS))


# -- RNBD (per session) ------------------------------------------------------------

def _sizes(sizes):
    """{bytes: count} as '4.0 KiB ×20, 128.0 KiB ×2', the most frequent first."""
    ranked = sorted(sizes.items(), key=lambda kv: (-kv[1], int(kv[0])))
    text = ", ".join("%s ×%d" % (size(int(b)), n) for b, n in ranked[:4])
    return text + (", …" if len(ranked) > 4 else "")


def _op_rows(label, ops):
    rows = []
    for op in RNBD_OP_NAMES:
        stats = ops.get(op, {})
        if stats is None:              # header-only requests: not all known
            rows.append("      %-18s %-12s %7s" % (label, op, "unknown (payloads cut)"))
            label = ""
            continue
        if not stats or not stats["count"]:
            continue
        lat = stats["latency_us"]
        cells = [lat[k] for k in ("min", "p50", "p90", "p99", "max")] if lat["count"] else []
        rows.append("      %-18s %-12s %7d %10s %6d  %s  %s" % (
            label, op, stats["count"], size(stats["bytes"]), stats["errors"],
            " ".join("%8.1f" % v for v in cells) if cells else "%44s" % "",
            _sizes(stats.get("sizes") or {})))
        label = ""
    return rows


def _split_rows(label, ops):
    """p50/p99 of each part of the wire time, per op (analysis/split.py)."""
    rows = []
    for op in RNBD_OP_NAMES:
        parts = (ops.get(op) or {}).get("split_us")
        if not parts or not parts["wire"]["count"] and not parts["server"]["count"]:
            continue
        cells = ["%17s" % ("%.1f/%.1f" % (parts[p]["p50"], parts[p]["p99"])
                           if parts[p]["count"] else "-") for p in SPLIT_PARTS]
        rows.append(("      %-18s %-12s " % (label, op) + " ".join(cells)).rstrip())
        label = ""
    return rows


def _device_line(device_id, device):
    parts = []
    if device.get("access_mode") is not None:
        mode = device["access_mode"]
        parts.append(access_mode(mode) if isinstance(mode, int) else str(mode))
    if device.get("nsectors") is not None:
        parts.append("%d sectors (%s)" % (device["nsectors"], size(device["nsectors"] * SECTOR)))
    for change in device.get("size_changes", ()):
        parts.append("%d sectors from frame %d" % (change["nsectors"], change["frame"]))
    if device.get("opened_frame") is not None:
        parts.append("opened frame %d" % device["opened_frame"])
    if device.get("closed_frame") is not None:
        parts.append("closed frame %d" % device["closed_frame"])
    for key, label in (("sequential_share", "sequential"), ("aligned_share", "aligned")):
        if device.get(key) is not None:
            parts.append("%s %.0f %%" % (label, device[key] * 100))
    queue = _queue(device)
    if queue:
        parts.append(queue.replace("queue: ", ""))
    name = device.get("name") or "(name not captured)"
    if device.get("client_name"):
        name += " (the client's %s)" % device["client_name"]
    return "device %s %s: %s" % (device_id, name, ", ".join(parts))


def _mix(ops):
    if ops.get("read", {}) is None or ops.get("write", {}) is None:
        return None
    reads, writes = ops.get("read") or {}, ops.get("write") or {}
    count = reads.get("count", 0) + writes.get("count", 0)
    volume = reads.get("bytes", 0) + writes.get("bytes", 0)
    if not count:
        return None
    text = "read/write mix: %.0f %% reads by count" % (100.0 * reads.get("count", 0) / count)
    if volume:
        text += ", %.0f %% by bytes" % (100.0 * reads.get("bytes", 0) / volume)
    return text


def render_rnbd(session, out):
    """The RNBD view: devices, IO per device and op (data apart from control)."""
    rnbd = session.get("rnbd")
    if rnbd is None:  # before the session-level view: device names from the paths
        names = {}
        for path in session["paths"]:
            names.update(path.get("devices", {}))
        if names:
            out.append("  RNBD devices: " + ", ".join(
                "%s %s" % kv for kv in sorted(names.items(), key=lambda kv: int(kv[0]))))
        return
    devices = rnbd.get("devices") or {}
    ordered = sorted(devices.items(), key=lambda kv: int(kv[0]))
    if ordered:
        out.append("  RNBD devices:")
        out.extend("    " + _device_line(k, d) for k, d in ordered)
    rows = []
    for device_id, device in ordered:
        rows += _op_rows(" ".join(w for w in (device_id, device.get("name"),
                                              device.get("client_name")) if w),
                         device.get("ops", {}))
    rows += _op_rows("all devices" if ordered else "", rnbd.get("ops", {}))
    if rows:
        out.append("  RNBD IO (data only; control messages below):")
        out.append("      %-18s %-12s %7s %10s %6s  %8s %8s %8s %8s %8s  %s" % (
            "device", "op", "count", "bytes", "errors", "min µs", "p50", "p90", "p99", "max",
            "sizes"))
        out.extend(row.rstrip() for row in rows)
    split = []
    for device_id, device in ordered:
        split += _split_rows("%s %s" % (device_id, device.get("name") or ""),
                             device.get("ops", {}))
    if split:
        out.append("  where the time goes (µs p50/p99: request, server, read data, response, "
                   "wire; docs/latency.md):")
        out.append("      %-18s %-12s " % ("device", "op")
                   + " ".join("%17s" % part for part in SPLIT_PARTS))
        out.extend(split)
    control = rnbd.get("control") or {}
    shown = ["%s %s" % (kind, "unknown" if control[kind] is None else _count_with_errors(
        control[kind]["count"], control[kind]["errors"])) for kind in RNBD_CONTROL
        if kind in control and (control[kind] is None or control[kind]["count"])]
    if shown:
        out.append("  RNBD control: " + ", ".join(shown))
    failovers = rnbd.get("failovers") or {}
    if failovers.get("failed_over"):
        unseen = failovers.get("original_not_on_wire")
        out.append("  RNBD IO failed over: %d%s, each counted once; executed twice on the "
                   "server: %s" % (failovers["failed_over"],
                                   " (%d with the original not on the wire)" % unseen
                                   if unseen else "",
                                   plural(failovers["executed_twice"], "write")))
    mix = _mix(rnbd.get("ops", {}))
    if mix:
        out.append("  " + mix)


# -- capture -----------------------------------------------------------------------

def _session_header(session):
    paths = plural(len(session["paths"]), "path")
    name = summary_label(session) if session["sessname"] else \
        "%s (name not in the capture)" % summary_label(session)
    if session["paths_uuid"] is None:  # the path says that the handshake is missing
        return "session %s  (%s)" % (name, paths)
    return "session %s  paths_uuid %s  (%s)" % (name, session["paths_uuid"], paths)


def _capture_counters(cap):
    parts = []
    for key, label in (("cm_retransmissions", "CM retransmissions"),
                       ("unmatched_responses", "responses without a request (no handshake)"),
                       ("partial_messages", "messages begun before the capture"),
                       ("malformed", "malformed packets"), ("cnps", "CNPs")):
        if cap.get(key):
            parts.append("%s %d" % (label, cap[key]))
    limits = cap.get("limits") or {}
    if limits.get("reached"):
        for verb in ("evicted", "refused"):
            if limits[verb]:
                parts.append("limits reached, %s: %s" % (verb, ", ".join(
                    "%s %d%s" % (table, count, " (table of %d)" % limits["sizes"][table]
                                 if table in limits["sizes"] else "")
                    for table, count in sorted(limits[verb].items()))))
    return parts


def _cut_line(summary):
    """What a snaplen that cut the records leaves unknown, said once
    (docs/PROTOCOL.md#header-only-captures)."""
    cap = summary["capture"]
    if not cap.get("cut_records"):
        return None
    blind = sum(path.get("header_only_requests") or 0 for session in summary["sessions"]
                for path in session["paths"])
    text = "  payloads cut at %d bytes (%s)" % (cap["snaplen"],
                                                 plural(cap["cut_records"], "record"))
    if blind:
        return text + ": RNBD devices and sectors of %s unknown" % plural(blind, "request")
    return text + ": every RTRS header and trailer captured"


def _frames(frames):
    return ", ".join(str(f) for f in frames) if frames else "not in the capture"


def render_other_rdma(connections, out):
    """Connections of other RDMA protocols: listed, never part of an RTRS path."""
    if not connections:
        return
    out.append("")
    out.append("other RDMA protocols (%s, not RTRS)" % plural(len(connections), "connection"))
    for conn in connections:
        port = "port %d" % conn["port"] if conn["port"] is not None else \
            "service ID %s" % conn["service_id"]
        qps = "QPs %s ↔ %s" % (_qpn(conn["client_qpn"]), _qpn(conn["server_qpn"]))
        out.append("  %s  %s → %s  %s  %s%s" % (
            conn["protocol"], conn["client"], conn["server"], port, qps,
            "  rejected" if conn["rejected"] else ""))
        out.append("    %s, %s in %s  connect frames %s  disconnect frames %s" % (
            plural(conn["packets"], "packet"), size(conn["bytes"]),
            plural(conn["messages"], "message"), _frames(conn["connect_frames"]),
            _frames(conn["disconnect_frames"])))


def render(summary):
    return "".join(render_parts(summary))


def render_parts(summary, sessions=None):
    """render() a part at a time (the capture's lines, each session's, the end): a
    summary of thousands of sessions is written as it is rendered, never whole.
    ``sessions``: the sessions' summaries as they are made, in place of the summary's
    (analysis.Analysis.summary_parts)."""
    cap = summary["capture"]
    clock = Clock(cap["first_ts"])
    out = ["%s: %s (%d RTRS), %s, %s%s" % (
        cap["path"], plural(cap["packets"], "packet"), cap["rtrs_packets"], cap["link_type"],
        cap["format"], ", TRUNCATED" if cap.get("truncated") else "")]
    if cap["first_ts"] is not None:
        out.append("  %s … %s (%.3f s)" % (utc_iso(cap["first_ts"]), utc_iso(cap["last_ts"]),
                                           cap["last_ts"] - cap["first_ts"]))
    mirror = cap.get("mirror")
    if mirror:
        out.append("  " + "; ".join(encapsulation_texts(mirror)))
    cut = _cut_line(summary)
    if cut:
        out.append(cut)
    if cap.get("capture_lost_packets"):
        out.append("  capture loss: %s not in the capture (PSN gaps no retransmission "
                   "filled): a message whose last packet is lost is not counted"
                   % plural(cap["capture_lost_packets"], "packet"))
    counters = _capture_counters(cap)
    if counters:
        out.append("  " + "  ".join(counters))
    for entry in summary.get("kernel_logs", ()):
        out.append("  kernel log %s: %s" % (entry["file"], clock_offset_text(entry)))
    seen = False
    for session in summary["sessions"] if sessions is None else sessions:
        yield "\n".join(out) + "\n"
        out = ["", _session_header(session)]
        for path in session["paths"]:
            render_path(path, clock, out)
        render_rnbd(session, out)
        seen = True
    if not seen:
        out.append("no RTRS session found")
    render_other_rdma(summary.get("other_rdma") or [], out)
    anomalies = summary["anomalies"]
    out.append("")
    if anomalies:
        counts = summary.get("anomaly_counts") or {}
        if not counts:
            for item in anomalies:
                counts[item["kind"]] = counts.get(item["kind"], 0) + 1
        out.append("anomalies (%d): %s" % (sum(counts.values()), ", ".join(
            "%s %d" % kv for kv in sorted(counts.items()))))
        for item in anomalies[:MAX_ANOMALIES]:
            out.append("  frame %s: %s: %s" % (item["frame"], item["kind"], item["detail"]))
        if len(anomalies) > MAX_ANOMALIES:
            out.append("  … %d more (see --format json)" % (len(anomalies) - MAX_ANOMALIES))
    else:
        out.append("no anomalies")
    yield "\n".join(out) + "\n"
