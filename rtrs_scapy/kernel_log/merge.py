"""A kernel log in capture time: its clock offset from events both show, its lines
in the paths' timelines, the client's device names it reveals (docs/kernel-log.md).

The offset is the one on which most of the log's events meet a capture event of
their kind (a failed IO's response and the ``I/O error`` line, a failed OPEN, a
reject, a disconnect) within TOLERANCE; it is their median, and its uncertainty
half their spread (unknown from one event).
"""

import bisect
import re
import statistics

from ..analysis.naming import summary_label
from .events import event_of

TOLERANCE = 0.05     # s: a log line and its wire event, beyond the stamps' resolution
FIT_EVENTS = 64      # log events of each kind the offset is fitted on
FIT_CANDIDATES = 256  # capture events of a kind each is tried against
#: events logged where the wire event happens (a disconnect's line may lag the DREQ)
PRECISE = ("io_error", "io_failed", "open_failed")
_SESSION = re.compile(r"<(?:/[^@>]*@)?([^>@]+)>|on session (\S+)")
_PATH = re.compile(r"ip:([0-9A-Fa-f:.]+)@ip:([0-9A-Fa-f:.]+)")


def merge(summary, logs):
    """Put each KernelLog of ``logs`` into ``summary``: ``summary["kernel_logs"]``
    (one entry per log: clock offset, uncertainty, events matched, device names),
    ``kernel_log`` events in the paths' timelines, ``client_name`` of the devices.
    Returns the placed lines (time, log, text, session, client, server), in time
    order, for the message view."""
    sessions = summary["sessions"]
    capture = _capture_events(sessions)
    placed = []
    entries = summary.setdefault("kernel_logs", [])
    for log in logs:
        events = [(line, event_of(line.text)) for line in log.lines]
        fit = _fit([(line.stamp, e) for line, e in events if e is not None], capture,
                   max(TOLERANCE, 2 * log.resolution))
        entry = {"file": log.name, "clock": log.clock, "lines": len(log.lines),
                 "offset_s": None, "uncertainty_s": None, "events_matched": 0,
                 "device_names": {}}
        entries.append(entry)
        if fit is None and log.clock == "wall":
            fit = (0.0, None, 0)     # no shared event: the log's own (UTC) clock
        if fit is None:
            continue
        offset, spread, matched = fit
        entry.update(offset_s=round(offset, 6), events_matched=matched,
                     uncertainty_s=None if spread is None
                     else round(max(spread, log.resolution / 2), 6))
        matched = _matches(events, offset, capture, max(TOLERANCE, 2 * log.resolution))
        names = {event["dev"]: (cap["index"], cap["device_id"])
                 for event, cap in matched.values()
                 if event["kind"] == "io_error" and cap["device_id"] is not None}
        aliases = {event["session"]: cap["index"] for event, cap in matched.values()
                   if event.get("session")}
        for dev, (index, device_id) in sorted(names.items()):
            device = sessions[index]["rnbd"]["devices"].get(str(device_id))
            if device is not None:
                device["client_name"] = dev
            entry["device_names"][dev] = "%s@%s" % (
                device["name"] if device and device.get("name") else "device %d" % device_id,
                summary_label(sessions[index]))
        for line, event in events:
            cap = matched.get(line.number, (None, None))[1]
            where = _place(line.text, cap, aliases, sessions)
            row = {"time": round(line.stamp + offset, 6), "log": log.name, "text": line.text,
                   "session": None, "client": None, "server": None}
            if where is not None:
                index, path = where
                row.update(session=summary_label(sessions[index]), client=path["client"],
                           server=path["server"])
                path["events"].append({"time": row["time"], "frame": None,
                                       "kind": "kernel_log", "log": log.name,
                                       "text": line.text})
            placed.append(row)
    for session in sessions:
        for path in session["paths"]:
            path["events"].sort(key=lambda e: (e["time"], e["frame"] or 0))
    placed.sort(key=lambda row: row["time"])
    return placed


def _capture_events(sessions):
    """kind -> time-ordered capture events a log line can show."""
    out = {"io_error": [], "io_failed": [], "open_failed": [], "reject": [], "disconnect": []}
    for index, session in enumerate(sessions):
        for path in session["paths"]:
            base = {"index": index, "sessname": session["sessname"],
                    "client": path["client"], "server": path["server"]}
            for err in path["errors"]:
                event = dict(base, time=err["time"], errno=err["errno"],
                             device_id=err.get("device_id"), sector=err.get("sector"),
                             op=err.get("rnbd_op"), device=err.get("device"))
                out["io_failed"].append(event)
                if err.get("rnbd") == "io":
                    out["io_error"].append(event)
                elif err.get("rnbd") == "open":
                    out["open_failed"].append(event)
            out["reject"] += [dict(base, time=r["time"]) for r in path["rejects"]]
            out["disconnect"] += [dict(base, time=d["time"]) for d in path["disconnects"]]
    for events in out.values():
        events.sort(key=lambda e: e["time"])
    return out


def _compatible(log_event, cap):
    kind = log_event["kind"]
    if kind == "io_error":
        return cap["sector"] == log_event["sector"] and cap["op"] == log_event["op"]
    if log_event.get("session") and cap["sessname"] and cap["sessname"] != log_event["session"]:
        return False
    if "errno" in log_event and cap.get("errno") != log_event["errno"]:
        return False
    if log_event.get("client") and (cap["client"], cap["server"]) != (
            log_event["client"], log_event["server"]):
        return False
    if kind == "open_failed" and cap.get("device") and cap["device"] != log_event["device"]:
        return False
    return True


def _fit(log_events, capture, tolerance):
    """(offset, half spread or None, events matched) or None when nothing matches."""
    pairs = []
    seen = {}
    for n, (stamp, event) in enumerate(log_events):
        seen[event["kind"]] = seen.get(event["kind"], 0) + 1
        if seen[event["kind"]] > FIT_EVENTS:
            continue
        candidates = [c for c in capture[event["kind"]] if _compatible(event, c)]
        pairs += [(c["time"] - stamp, n) for c in candidates[:FIT_CANDIDATES]]
    if not pairs:
        return None
    pairs.sort()
    best, end, seen, distinct = None, 0, {}, 0
    for start in range(len(pairs)):      # windows of ``tolerance``, one pass (two ends)
        while end < len(pairs) and pairs[end][0] - pairs[start][0] <= tolerance:
            seen[pairs[end][1]] = seen.get(pairs[end][1], 0) + 1
            distinct += seen[pairs[end][1]] == 1
            end += 1
        spread = pairs[end - 1][0] - pairs[start][0]
        if best is None or (distinct, -spread) > (best[0], -best[1]):
            best = (distinct, spread, start, end)
        seen[pairs[start][1]] -= 1
        distinct -= seen[pairs[start][1]] == 0
    window = pairs[best[2]:best[3]]
    middle = statistics.median(d for d, _ in window)
    chosen = {}
    for d, n in window:
        if n not in chosen or abs(d - middle) < abs(chosen[n] - middle):
            chosen[n] = d
    precise = {n: d for n, d in chosen.items() if log_events[n][1]["kind"] in PRECISE}
    values = sorted((precise or chosen).values())
    offset = statistics.median(values)
    spread = (values[-1] - values[0]) / 2 if len(values) > 1 else None
    return offset, spread, len(chosen)


def _matches(events, offset, capture, tolerance):
    """line number -> (log event, the nearest capture event of its kind that agrees
    with it, in capture time)."""
    times = {kind: [c["time"] for c in caps] for kind, caps in capture.items()}
    out = {}
    for line, event in events:
        if event is None:
            continue
        at = line.stamp + offset
        caps = capture[event["kind"]]
        lo = bisect.bisect_left(times[event["kind"]], at - tolerance)
        hi = min(bisect.bisect_right(times[event["kind"]], at + tolerance),
                 lo + FIT_CANDIDATES)
        near = [c for c in caps[lo:hi] if _compatible(event, c)]
        if near:
            out[line.number] = (event, min(near, key=lambda c: abs(c["time"] - at)))
    return out


def _place(text, cap, aliases, sessions):
    """(session index, path summary) a line is about: the capture event it shows,
    else the session it names (as the capture or another line of the log calls it)."""
    if cap is not None:
        return cap["index"], next(p for p in sessions[cap["index"]]["paths"]
                                  if (p["client"], p["server"]) == (cap["client"],
                                                                    cap["server"]))
    match = _SESSION.search(text)
    name = (match.group(1) or match.group(2)) if match else None
    index = aliases.get(name) if name is not None else None
    if index is None:
        index = next((i for i, s in enumerate(sessions)
                      if name is not None and name in (s["sessname"], summary_label(s))), None)
    if index is None or not sessions[index]["paths"]:
        return None
    paths = sessions[index]["paths"]
    ends = _PATH.search(text)
    if ends:
        for path in paths:
            if (path["client"], path["server"]) == ends.groups():
                return index, path
    return index, paths[0]
