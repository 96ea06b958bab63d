"""One analysis run as the report and the plots see it: the capture, its sessions
(by name), their paths (client → server) and RNBD devices, each with its IO rows.

Everything comes from one ``analyze()`` run: the figures from its summary (the
dict ``rtrs-dissect summary --format json`` prints, so the two cannot disagree),
the series from its IO rows (``analysis/iorows.py``, binned by ``series.py``),
the events from the summary's per-path timeline, and the CM ladder of each path
from the message records.

The IO rows are kept once, narrowed (``kept_rows``): a session, path or device
holds the positions of its rows, and reads a column when a figure asks for it.
"""

import os

import numpy as np

from ..analysis import iorows, split
from ..analysis.inflight import slices
from ..analysis.naming import match_device, match_sessions, summary_label
from ..analysis.spill import SpilledList
from .text import Clock, error_text, event_text
from ..spec.constants import rnbd_end_sector, rnbd_op_name
from .words import errno_text, utc_iso

#: session summaries a file when they go to disk (about 20 KB each in memory)
SUMMARIES_PER_FILE = 64
#: the message records a path's ladder is drawn from, and the RTU (from the model)
LADDER_MESSAGES = ("conn_req", "conn_rsp", "conn_rej", "info_req", "info_rsp", "disconnect")
#: at most this many ladder steps per path (a flapping path has thousands)
MAX_LADDER_STEPS = 200
#: event kinds in the order of their lanes; kinds not listed come after them
EVENT_KINDS = ("connect", "reconnect", "reconnect_failed", "reject", "disconnect", "stall",
               "outage", "heartbeat_gap", "heartbeat_lost", "failover", "io_error", "first_io",
               "last_io")
#: the lane of a failover whose original never reached the wire (analysis/failover.py)
INFERRED_FAILOVER = "failover (original not on the wire)"
#: kinds whose time a path stops carrying requests at (what ends a request never answered)
DOWN_KINDS = ("disconnect", "outage", "heartbeat_lost", "reconnect_failed", "reject")


#: the IO row columns the report reads (the rest are not kept), and the parts of each
#: IO's wire time (split.py, as ``part_request``…) in place of the columns they come from
ROW_COLUMNS = ("time_ns", "frame", "path", "cid", "op", "bytes", "rnbd_op", "device_id",
               "sector", "bi_size", "response_ns", "latency_ns", "failover_from",
               "failed_over")


def _parts(rows):
    return {"part_" + name: column for name, column in split.parts_ns(rows).items()}


def kept_rows(batches=()):
    """What the report keeps of IO rows: an io_sink (iorows.Kept) to analyse into, or
    the rows of ``batches`` (IO row batches, or such a sink fed already)."""
    return iorows.Kept.of(batches, ROW_COLUMNS, _parts)


class Rows:
    """A subset of the capture's IO rows (``index``: their positions in ``columns``,
    None: all of them), with times relative to the capture start.  A column is read
    when asked for, as int64: a subset holds its positions, not a copy of its rows."""

    def __init__(self, columns, t0_ns, index=None):
        self.columns, self.t0_ns, self.index = columns, t0_ns, index

    def __len__(self):
        return len(self.columns["time_ns"]) if self.index is None else len(self.index)

    def __getitem__(self, name):
        column = self.columns[name]
        return (column if self.index is None else column[self.index]).astype(np.int64,
                                                                            copy=False)

    @property
    def time(self):
        """Seconds since the capture start of each request."""
        return (self["time_ns"] - self.t0_ns) / 1e9

    @property
    def latency_us(self):
        """Latency of each request, µs (NaN: no response)."""
        latency = self["latency_ns"]
        return np.where(latency >= 0, latency / 1e3, np.nan)

    @property
    def answered_at(self):
        """Seconds since the capture start of each response (NaN: none)."""
        response = self["response_ns"]
        return np.where(response >= 0, (response - self.t0_ns) / 1e9, np.nan)

    def where(self, mask):
        at = np.flatnonzero(mask)
        return Rows(self.columns, self.t0_ns, iorows.narrow(
            at if self.index is None else self.index[at]))

    @property
    def data_io(self):
        """RNBD IO requests (data, not the control messages), each block IO once: a
        request failed over to another path is its copy's row (analysis/rnbd_view.py)."""
        return self.where((self["rnbd_op"] >= 0) & (self["failed_over"] == 0))

    def rnbd_ops(self):
        """(name, rows) of each RNBD operation present, in the order of its code."""
        ops = self["rnbd_op"]
        return [(rnbd_op_name(int(code)), self.where(ops == code))
                for code in np.unique(ops) if code >= 0]


#: the attributes that say how long an event lasted (an outage, a heartbeat gap)
DURATIONS = ("duration_s", "gap_s")


class Event:
    """One timeline entry of a path, placed on its lane; ``details`` in the words of
    the text summary, ``text`` with when and where; ``until``: when an event that
    lasts (an outage, a heartbeat gap) ended, else None."""

    def __init__(self, clock, time, frame, kind, lane, details, until=None):
        self.time, self.frame, self.kind, self.lane = time, frame, kind, lane
        self.details, self.until = details, until
        where = "frame %d " % frame if frame is not None else ""
        self.text = "%s %s%s: %s" % (clock.at(clock.first_ts + time), where, kind, details)


class Step:
    """One arrow of a ladder: a CM or info message between client and server;
    ``alarm``: it refuses or ends the connection (REJ, refused REP, DREQ)."""

    def __init__(self, frame, time, from_client, label, detail, alarm=False):
        self.frame, self.time, self.from_client = frame, time, from_client
        self.label, self.detail, self.alarm = label, detail, alarm


class PathView:
    """A path: what every table row and ranking reads is kept; the rest of its summary
    is read from its session's when a section is drawn."""

    def __init__(self, capture, session, position, summary, model, rows):
        self.capture, self.session, self.position, self.model = \
            capture, session, position, model
        self.rows = rows
        self.label = "%s → %s" % (summary["client"], summary["server"])
        self.anchor = "path-%d" % model.id
        self.queue_depth = summary["queue_depth"]
        io = summary["io"]
        self.busy = io["read"]["count"] + io["write"]["count"]
        self.troubled = bool(summary["errors"] or summary["rejects"]
                             or summary.get("outages") or summary.get("failovers"))

    @property
    def summary(self):
        return self.session.summary["paths"][self.position]

    def events(self):
        """The summary's timeline of this path, plus the failovers (from the IO rows)
        and the failed requests (from the summary's errors) when the timeline does
        not carry them itself."""
        clock = self.capture.clock
        t0 = self.capture.t0
        events = [Event(clock, e["time"] - t0, e.get("frame"), e["kind"], _lane(e),
                        _details(e, clock), _until(e, t0))
                  for e in self.summary.get("events", ())]
        kinds = {e.kind for e in events}
        if "failover" not in kinds:
            moved = self.rows.where(self.rows["failover_from"] >= 0)
            for t, frame, first in zip(moved.time, moved["frame"], moved["failover_from"]):
                events.append(Event(clock, float(t), int(frame), "failover", "failover",
                                    "the request first sent in frame %d, re-sent on this "
                                    "path" % first))
        if "io_error" not in kinds:
            for err in self.summary["errors"]:
                events.append(Event(clock, err["time"] - t0, err["frame"], "io_error",
                                    "io_error", error_text(err)))
        events.sort(key=lambda e: (e.time, e.frame or 0))
        return events

    def outages(self):
        """(down, up) spans in seconds since the capture start; up is the capture end
        for an outage that lasts beyond it."""
        t0, end = self.capture.t0, self.capture.duration
        return [(o["down_time"] - t0, o["up_time"] - t0 if o.get("up_time") is not None
                 else end) for o in self.summary.get("outages", ())]

    def request_ends(self):
        """When each request stopped occupying the path: its response; the re-send
        on another path for a request failed over; else the path's next disconnect,
        outage or heartbeat loss; else the capture end."""
        rows = self.rows
        ends = rows.answered_at
        frames, times = rows["frame"], rows.time
        moved = self.capture.failover_times()
        downs = np.sort([e["time"] - self.capture.t0 for e in self.summary.get("events", ())
                         if e["kind"] in DOWN_KINDS])
        for i in np.nonzero(np.isnan(ends))[0]:
            resend = moved.get(int(frames[i]))
            if resend is not None:
                ends[i] = resend
                continue
            after = np.searchsorted(downs, times[i], side="right")
            ends[i] = downs[after] if after < len(downs) else self.capture.duration
        return ends

    def ladder(self):
        """The path's CM and info messages in frame order (at most MAX_LADDER_STEPS),
        and how many there are."""
        steps = [_step(rec, self.summary) for rec in self.capture.records_of(self)]
        for conn in self.model.connections:
            if conn.established_frame is not None:
                cid = _known(conn.cid)
                steps.append(Step(conn.established_frame, None, True, "RTU cid %s" % cid,
                                  "cid %s established: its RTU, or its first RC packet when "
                                  "the RTU is not in the capture" % cid))
        steps.sort(key=lambda s: s.frame)
        return steps[:MAX_LADDER_STEPS], len(steps)


class DeviceView:
    def __init__(self, session, device_id, name, info, rows):
        self.session, self.id, self.name, self.info, self.rows = \
            session, device_id, name, info, rows
        self.label = "%s %s" % (device_id, name or "(name not captured)")
        if info.get("client_name"):     # learnt from a kernel log, or --device-map
            self.label += " (%s)" % info["client_name"]

    @property
    def sectors(self):
        """The device's size in sectors: from the OPEN response, else the highest
        sector the capture shows."""
        if self.info.get("nsectors"):
            return int(self.info["nsectors"])
        ends = rnbd_end_sector(self.rows["sector"], self.rows["bi_size"])
        return int(ends.max()) if len(ends) else 0


class SessionView:
    def __init__(self, capture, index, summary, model, by_path):
        """``summary``: the session's (read back from the capture's when asked for
        again); ``by_path``: path id -> the positions of its rows."""
        self.capture, self.index = capture, index
        self.name = summary["sessname"]
        self.label = summary_label(summary)
        self.anchor = "session-%d" % index
        rows = capture.rows
        paths = _checked_paths(summary, model)
        mine = [by_path[p.id] for p in paths if p.id in by_path]
        self.rows = Rows(rows.columns, rows.t0_ns,
                         iorows.narrow(np.sort(np.concatenate(mine)) if mine
                                       else np.zeros(0, dtype=np.int64)))
        self.paths = [PathView(capture, self, j, ps, pm, Rows(
            rows.columns, rows.t0_ns, by_path.get(pm.id, np.zeros(0, dtype=np.int64))))
            for j, (ps, pm) in enumerate(zip(summary["paths"], paths))]
        self.devices = self._devices(summary)

    @property
    def summary(self):
        return self.capture.session_summary(self.index)

    def _devices(self, summary):
        info = (summary.get("rnbd") or {}).get("devices") or {}
        names = {}
        for path in summary["paths"]:
            names.update(path.get("devices", {}))
        data = self.rows.data_io
        ids = sorted(set(int(d) for d in np.unique(data["device_id"])) |
                     set(int(k) for k in info) | set(int(k) for k in names))
        return [DeviceView(self, d, (info.get(str(d)) or {}).get("name") or names.get(str(d)),
                           _facts(info.get(str(d)) or {}), data.where(data["device_id"] == d))
                for d in ids]


def _facts(device):
    """A device's summary without its figures (its ops: read from the session's summary
    when a section shows them)."""
    return {key: value for key, value in device.items() if key != "ops"}


class CaptureView:
    """The capture, its sessions, paths and devices, each with its rows."""

    def __init__(self, result, batches):
        """``batches``: the analysis' IO rows, or what ``kept_rows()`` kept of them.
        ``summary``: the capture's, without its sessions: a session's summary is kept on
        disk beyond the newest (a capture of thousands of short sessions holds one
        table row each) and read back for the few drawn (``session_summary``)."""
        self.summary, summaries = result.summary_parts()
        cap = self.summary["capture"]
        self.t0 = cap["first_ts"] or 0.0
        self.duration = (cap["last_ts"] - cap["first_ts"]) if cap["first_ts"] else 0.0
        self.clock = Clock(cap["first_ts"])
        self.start = utc_iso(cap["first_ts"]) if cap["first_ts"] else "no packets"
        self.files = cap.get("files") or [cap["path"]]
        self.name = ", ".join(os.path.basename(f) for f in self.files)
        t0_ns = round(self.t0 * 1e9)
        self.rows = Rows(kept_rows(batches).take(), t0_ns)
        # a ladder is drawn for the few paths with a section: of each path, the
        # positions of its records are kept, and its records made when it is drawn
        self._messages = result.messages
        self._ladders = {}
        for at, rec in enumerate(result.messages):
            if rec["msg"] in LADDER_MESSAGES:
                self._ladders.setdefault((rec["sess_uuid"], rec["client"], rec["server"]),
                                         []).append(at)
        self._failover_times = None
        by_path = {pid: iorows.narrow(at) for pid, at in slices(self.rows.columns["path"])}
        self._summaries = SpilledList(SUMMARIES_PER_FILE, "the sessions' summaries")
        self.sessions = []
        for i, (s, m) in enumerate(zip(summaries, result.analyzer.sessions.values())):
            self._summaries.append(s)
            self.sessions.append(SessionView(self, i, s, m, by_path))

    @property
    def paths(self):
        return [p for s in self.sessions for p in s.paths]

    @property
    def devices(self):
        return [d for s in self.sessions for d in s.devices]

    def session_summary(self, index):
        """The summary of the ``index``-th session (``rtrs-dissect summary``'s)."""
        return self._summaries[index]

    def records_of(self, path):
        s = path.summary
        return [self._messages[at] for at in
                self._ladders.get((s["sess_uuid"], s["client"], s["server"]), ())]

    def failover_times(self):
        """frame of a request's first send -> when it was re-sent on another path."""
        if self._failover_times is None:
            moved = self.rows.where(self.rows["failover_from"] >= 0)
            self._failover_times = dict(zip(moved["failover_from"].tolist(),
                                            moved.time.tolist()))
        return self._failover_times


def _checked_paths(summary, model):
    """The analyzer's paths of a session, in the order of the summary's (which is
    built from them)."""
    paths = list(model.paths)
    for ps, pm in zip(summary["paths"], paths):
        if (ps["sess_uuid"], ps["client"], ps["server"]) != (pm.sess_uuid, pm.client,
                                                             pm.server):
            raise ValueError("summary and analyzer disagree on the paths of session %s"
                             % summary["sessname"])
    return paths


def _lane(event):
    """Disconnects by who started them, rejects by who sent them, stalls by who was not
    acknowledged, failovers proven apart from inferred ones."""
    if event["kind"] == "failover" and event.get("original") == "not on the wire":
        return INFERRED_FAILOVER
    if event["kind"] == "stall" and event.get("sender"):
        return "stall (%s)" % event["sender"]
    if event["kind"] == "disconnect" and event.get("initiator"):
        return "disconnect (%s)" % event["initiator"]
    if event["kind"] == "reject" and event.get("sender"):
        return "reject (%s)" % event["sender"]
    return event["kind"]


def _until(event, t0):
    for key in DURATIONS:
        if event.get(key) is not None:
            return event["time"] + event[key] - t0
    return None


def _details(event, clock):
    """An event's attributes as the text summary words them (without when and what)."""
    if event["kind"] == "kernel_log":
        return "%s: %s" % (event["log"], event["text"])
    return event_text(dict(event, time=None, frame=None, kind=""), clock).strip()


def _step(rec, path):
    f = rec["fields"] or {}
    from_client = rec["src"] in (path["client"], path["endpoints"][0])
    msg, cid = rec["msg"], _known(rec["cid"])
    label, detail = msg, ""
    alarm = msg == "conn_rej" or (msg == "disconnect" and f.get("cm") == "DREQ") or (
        msg == "conn_rsp" and bool(f.get("errno")))
    if msg == "conn_req":
        label = "REQ cid %s" % cid
        detail = _said(("recon_cnt", f.get("recon_cnt")), ("cid_num", f.get("cid_num")))
    elif msg == "conn_rsp":
        label = "REP cid %s" % cid
        if f.get("errno"):
            label += " refused: %s" % errno_text(f["errno"])
        else:
            detail = _said(("queue_depth", f.get("queue_depth")),
                           ("max_io_size", f.get("max_io_size")))
    elif msg == "conn_rej":
        label = "REJ %s" % (f.get("name") or "")
        detail = _said(("sender", f.get("sender")),
                       ("reason", f.get("reason_name") or f.get("reason")))
    elif msg == "info_req":
        label, detail = "INFO_REQ", _said(("pathname", f.get("pathname")))
    elif msg == "info_rsp":
        label, detail = "INFO_RSP", _said(("sg_cnt", f.get("sg_cnt")))
    elif msg == "disconnect":
        label = "%s cid %s" % (f.get("cm", "DREQ"), cid)
    return Step(rec["frame"], rec["time"], from_client, label.strip(), detail, alarm)


def _known(value):
    return "?" if value is None else value


def _said(*pairs):
    """'name value' pairs of the values a message carries (none: left out)."""
    return ", ".join("%s %s" % (k, v) for k, v in pairs if v is not None)


class Selection:
    """What a ``plot`` draws: the whole capture, or a session (name, paths_uuid or a
    path's sess_uuid), a path (sess_uuid, client address or CLIENT→SERVER) or a
    device (id or name).  An unknown one raises LookupError naming the choices."""

    def __init__(self, capture, session=None, path=None, device=None):
        sessions = capture.sessions
        if session is not None:
            sessions = [sessions[i] for i in match_sessions([s.summary for s in sessions],
                                                            session)]
        paths = [p for s in sessions for p in s.paths]
        if path is not None:
            wanted = path.replace("->", "→").replace(" ", "")
            chosen = [p for p in paths if wanted in (
                p.summary["sess_uuid"], p.summary["client"], p.label.replace(" ", ""))]
            if not chosen:
                raise LookupError("no path %s in the selection; its paths: %s" % (
                    path, ", ".join(p.label for p in paths) or "none"))
            paths = chosen
            sessions = list(dict.fromkeys(p.session for p in paths))
        devices = [d for s in sessions for d in s.devices]
        if device is not None:
            named = match_device([s.summary for s in capture.sessions], device)
            chosen = [d for d in devices if (d.session.index, d.id) in
                      {(index, device_id) for index, device_id, _, _ in named}]
            if not chosen:
                raise LookupError("no device %s in the selection; its devices: %s" % (
                    device, ", ".join(d.label for d in devices) or "none"))
            devices = chosen
        self.sessions, self.paths, self.devices = sessions, paths, devices
        if path is None and session is None:
            self.rows, self.title = capture.rows, capture.name
            return
        self.rows = capture.rows.where(np.isin(capture.rows["path"],
                                               [p.model.id for p in paths]))
        self.title = "path " + ", ".join(p.label for p in paths) if path is not None \
            else "session " + ", ".join(s.label for s in sessions)
