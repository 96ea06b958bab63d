"""The report as one self-contained HTML file: tables from the summary, figures
drawn by Plotly from the binned series of figures.py, plotly.js inline.  Nothing
is fetched: the file opens from file:// on an offline machine.

Each figure is a JSON spec in a ``<script type="application/json">`` that a few
lines of script hand to ``Plotly.newPlot`` one after another (the page shows at
once; ``body[data-plots-done]`` is set when every figure is drawn).  Frame
numbers (failed IOs, events, anomalies, ladder arrows, event markers) open a bar
that says how to jump to the frame in Wireshark.  Numbers taken from the summary
carry ``data-summary`` = their JSON pointer in ``rtrs-dissect summary --format
json``, so that a test can hold them equal.
"""

import base64
import html
import json
import shlex
from importlib.metadata import version
from importlib.resources import files

import numpy as np
import plotly.io as pio
from plotly.offline import get_plotlyjs

from . import figures as F
from . import interactive as P
from ..spec.constants import RNBD_SECTOR_SIZE as SECTOR
from .text import error_text
from .words import encapsulation_texts, size, utc_iso

#: paths and sessions with sections of their own; the rest are rows of the tables
MAX_PATH_SECTIONS = 16
MAX_SESSION_SECTIONS = 16
#: paths drawn in one session figure (latency by path, load per cid)
MAX_PATHS_PER_FIGURE = 12
#: rows of the failed-IO, event and anomaly tables
MAX_TABLE_ROWS = 500
TEMPLATE = "plotly_white"
PLOT_CONFIG = {"displaylogo": False, "responsive": True}
ASSETS = files(__package__) / "assets"


def render(capture):
    """The report of a CaptureView, as one HTML string."""
    return "".join(render_parts(capture))


def render_parts(capture):
    """The report of a CaptureView: its sections built, then the HTML file's text in
    pieces, in order (Page.html), for a writer that need not hold it whole.  Its figures
    carry no template: the page applies TEMPLATE once."""
    page = Page(capture)
    page.capture_section()
    for session in page.shown_sessions:
        page.session_section(session)
    return page.html()


def _ranked(items, limit, key):
    """The ``limit`` most telling items (by ``key``), in their own order."""
    if len(items) <= limit:
        return list(items)
    chosen = set(id(i) for i in sorted(items, key=key, reverse=True)[:limit])
    return [i for i in items if id(i) in chosen]


def _path_rank(path):
    return (path.troubled, path.busy)


def _session_rank(session):
    return (any(p.troubled for p in session.paths), sum(p.busy for p in session.paths))


def _esc(value):
    return html.escape(str(value), quote=True)


def _number(value, digits=None):
    if value is None:
        return "–"
    if digits is not None:
        return "{:,.{}f}".format(value, digits)
    return "{:,}".format(value)


class Page:
    def __init__(self, capture):
        self.capture = capture
        self.body = []
        self.nav = []
        self.figures = 0
        # the sessions and paths with a section of their own
        self.shown_sessions = _ranked(capture.sessions, MAX_SESSION_SECTIONS, _session_rank)
        self.shown_paths = set(id(p) for p in _ranked(
            [p for s in self.shown_sessions for p in s.paths], MAX_PATH_SECTIONS, _path_rank))

    # -- building blocks ----------------------------------------------------------

    def summary_value(self, value, pointer, digits=None):
        """A number of the summary, tagged with its JSON pointer."""
        return '<span data-summary="%s">%s</span>' % (_esc(pointer), _number(value, digits))

    def frame(self, frame):
        if frame is None:
            return "–"
        return '<a class="frame" href="#" data-frame="%d">%d</a>' % (frame, frame)

    def when(self, ts):
        if ts is None:
            return "–"
        return '%s <small>%s</small>' % (self.capture.clock.at(ts), utc_iso(ts))

    def table(self, header, rows, cls=""):
        """A table; ``header`` None for a table of (key, value) rows."""
        out = ['<table class="%s">' % cls]
        if header is not None:
            out += ["<thead><tr>"] + ["<th>%s</th>" % _esc(h) for h in header] + \
                ["</tr></thead>"]
        out.append("<tbody>")
        for row in rows:
            out.append("<tr>" + "".join("<td>%s</td>" % c for c in row) + "</tr>")
        out.append("</tbody></table>")
        return "".join(out)

    def figure(self, fig):
        """A Plotly figure: its spec as JSON, drawn by the page's script (None: no
        figure, nothing to draw)."""
        if fig is None:
            return
        self.figures += 1
        target = "figure-%d" % self.figures
        text = json.dumps(fig.to_plotly_json(), cls=_Encoder,
                          separators=(",", ":")).replace("</", "<\\/")
        self.body.append('<div class="figure"><div class="plot" id="%s"></div>'
                         '<script type="application/json" class="figure-spec" data-for="%s">'
                         '%s</script></div>' % (target, target, text))

    def heading(self, level, prefix, name, anchor, summary_pointer=None, suffix=""):
        """A section heading (and its entry in the side bar); ``name`` tagged with its
        summary pointer when it is one."""
        shown = _esc(name) if summary_pointer is None else \
            '<span data-summary="%s">%s</span>' % (_esc(summary_pointer), _esc(name))
        self.body.append('<h%d id="%s">%s%s%s</h%d>' % (level, anchor, _esc(prefix), shown,
                                                         _esc(suffix), level))
        self.nav.append((level, anchor, prefix + name + suffix))

    def add(self, text):
        self.body.append(text)

    # -- sections -----------------------------------------------------------------

    def capture_section(self):
        capture, cap = self.capture, self.capture.summary["capture"]
        self.heading(2, "capture ", capture.name, "capture")
        rows = [("file", _esc(cap["path"]))] if len(capture.files) == 1 else [
            ("files", "<br>".join(_esc(f) for f in capture.files) + "<br><small>one capture "
             "in time order: frame numbers count its frames (frames in two files once)"
             "</small>"),
            ("frames in two files", self.summary_value(cap.get("capture_duplicates", 0),
                                                       "capture/capture_duplicates"))]
        rows.append(("format", "%s, %s" % (_esc(cap["format"]), _esc(cap["link_type"]))))
        mirror = cap.get("mirror")
        if mirror:
            rows.append(("outer headers", "<br>".join(_esc(text)
                                                      for text in encapsulation_texts(mirror))))
        if cap["first_ts"] is not None:
            rows.append(("first frame", utc_iso(cap["first_ts"])))
            rows.append(("last frame", utc_iso(cap["last_ts"])))
            rows.append(("duration", "%.3f s" % capture.duration))
        for key, label in (("packets", "packets"), ("rtrs_packets", "RTRS packets"),
                           ("cm_retransmissions", "CM retransmissions"),
                           ("unmatched_responses", "responses without a request"),
                           ("malformed", "malformed packets")):
            rows.append((label, self.summary_value(cap[key], "capture/" + key)))
        if cap.get("truncated"):
            rows.append(("truncated", "yes: a summary of what was read"))
        self.add(self.table(None, rows, "keys"))
        self.overview()
        if len(capture.rows) and len(capture.sessions) > 1:  # else: the session's figures
            self.figure(P.timeline(capture, capture.rows, capture.paths,
                                   "IO over time, the whole capture"))
            self.figure(P.latency(capture, F.latency_by_op(capture.rows,
                                                           "latency of RNBD IO by operation")))
        self.anomalies()

    def overview(self):
        """One row per path: the RTRS counts of the summary."""
        header = ("session", "path", "reads", "read bytes", "read errors", "writes",
                  "write bytes", "write errors", "read p50 µs", "read p99 µs",
                  "write p50 µs", "write p99 µs", "reconnects", "failovers")
        rows = []
        for session in self.capture.sessions:
            for j, path in enumerate(session.paths):
                ptr = "sessions/%d/paths/%d/" % (session.index, j)
                s = path.summary
                link = '<a href="#%s">%s</a>' % (path.anchor, _esc(path.label)) \
                    if id(path) in self.shown_paths else _esc(path.label)
                row = ['<a href="#%s">%s</a>' % (session.anchor, _esc(session.label))
                       if session in self.shown_sessions else _esc(session.label), link]
                for op in ("read", "write"):
                    for key in ("count", "bytes", "errors"):
                        row.append(self.summary_value(s["io"][op][key],
                                                      ptr + "io/%s/%s" % (op, key)))
                for op in ("read", "write"):
                    for key in ("p50", "p99"):
                        row.append(self.summary_value(s["latency_us"][op][key],
                                                      ptr + "latency_us/%s/%s" % (op, key), 1))
                row.append(self.summary_value(s["reconnects"], ptr + "reconnects"))
                row.append(self.summary_value(s.get("failovers", 0), ptr + "failovers"))
                rows.append(row)
        if rows:
            self.add("<h3>paths</h3>")
            self.add(self.table(header, rows, "numbers"))
        else:
            self.add("<p>no RTRS session found</p>")
        hidden = len(self.capture.paths) - len(self.shown_paths)
        if hidden > 0:
            self.add("<p class=note>%d paths have a row above but no section of their own: "
                     "to keep the report small, sections go to %d sessions and %d paths, "
                     "those with errors, rejects, outages or failovers first, then those "
                     "with the most IO.</p>" % (hidden, len(self.shown_sessions),
                                                len(self.shown_paths)))

    def anomalies(self):
        items = self.capture.summary["anomalies"]
        if not items:
            self.add("<p>no anomalies</p>")
            return
        self.add("<h3>anomalies (%d)</h3>" % len(items))
        self.add(self.table(("frame", "kind", "detail"), [
            (self.frame(a["frame"]), _esc(a["kind"]), _esc(a["detail"]))
            for a in items[:MAX_TABLE_ROWS]]))
        self._more(len(items))

    def _more(self, total):
        if total > MAX_TABLE_ROWS:
            self.add("<p class=note>… %d more (see rtrs-dissect summary --format json)</p>"
                     % (total - MAX_TABLE_ROWS))

    def session_section(self, session):
        s = session.summary
        if session.name:   # the name as the summary has it, and what tells it apart
            self.heading(2, "session ", session.name, session.anchor,
                         "sessions/%d/sessname" % session.index,
                         session.label[len(session.name):])
        else:
            self.heading(2, "session ", session.label, session.anchor)
        self.add(self.table(None, [
            ("name", _esc(session.name or "not in the capture")),
            ("paths_uuid", _esc(s["paths_uuid"] or "handshake not captured")),
            ("paths", len(session.paths))], "keys"))
        self.failed_io(session)
        rows = session.rows
        capture = self.capture
        if len(rows):
            if len(session.paths) > 1 or id(session.paths[0]) not in self.shown_paths:
                self.figure(P.timeline(capture, rows, session.paths,
                                       "IO over time, session %s" % session.label))
            self.figure(P.latency(capture, F.latency_by_op(
                rows, "latency of RNBD IO by operation, session %s" % session.label)))
            shown = _ranked(session.paths, MAX_PATHS_PER_FIGURE, lambda p: p.busy)
            if len(session.paths) > 1:
                self.figure(P.latency(capture, F.latency_by_path(
                    shown, "latency of RTRS requests by path, session %s" % session.label)))
            self.figure(P.load(capture, F.Load(shown, "load per path and connection (cid), "
                                                      "session %s" % session.label)))
        self.rnbd(session)
        for path in session.paths:
            if id(path) in self.shown_paths:
                self.path_section(path)

    def failed_io(self, session):
        errors = sorted(((j, e) for j, p in enumerate(session.paths)
                         for e in p.summary["errors"]),
                        key=lambda je: (je[1].get("time") or 0, je[1]["frame"]))
        if not errors:
            self.add("<p>no failed requests</p>")
            return
        self.add("<h3>failed requests (%d)</h3>" % len(errors))
        rows = []
        for j, e in errors[:MAX_TABLE_ROWS]:
            device = e.get("device") or (e.get("device_id") if e.get("device_id") is not None
                                          else "–")
            sector = e.get("sector") if e.get("rnbd_op") not in (None, "flush") else None
            rows.append((self.when(e.get("time")), _esc(session.paths[j].label),
                         _esc(device), "–" if sector is None else str(sector),
                         _number(e.get("bi_size")),
                         _esc(e.get("rnbd_op") or e.get("rnbd") or e["op"]),
                         "%d %s" % (e["errno"], _esc(e["name"])),
                         self.frame(e.get("request_frame")), self.frame(e["frame"]),
                         _esc(error_text(e))))
        self.add(self.table(("time", "path", "device", "sector", "size", "op", "errno",
                             "request frame", "response frame", "as the kernel logs it"),
                            rows, "failed"))
        self._more(len(errors))

    def rnbd(self, session):
        """The session's RNBD view: devices, IO per device and operation (data apart
        from the control messages), the size histograms and access heatmaps."""
        if not session.devices:
            return
        self.add("<h3>RNBD devices</h3>")
        rnbd = session.summary.get("rnbd") or {}
        rows = []
        for device in session.devices:
            info = device.info
            sectors = "–"
            if info.get("nsectors"):
                sectors = "%s (%s)" % (_number(info["nsectors"]), size(info["nsectors"] * SECTOR))
            for change in info.get("size_changes", ()):
                sectors += "<br><small>%s from frame %s</small>" % (
                    _number(change["nsectors"]), self.frame(change["frame"]))
            rows.append((_esc(device.id), _esc(device.name or "name not captured"),
                         _esc(info.get("access_mode", "–")), sectors,
                         self.frame(info.get("opened_frame")),
                         self.frame(info.get("closed_frame")),
                         _share(info.get("sequential_share")), _share(info.get("aligned_share")),
                         _number(len(device.rows)), self._queue(session, device.id)))
        self.add(self.table(("id", "name", "access", "sectors", "opened", "closed",
                             "sequential", "aligned", "IO requests",
                             "most in flight, s at the queue depth"), rows))
        ops_rows = []
        devices = rnbd.get("devices") or {}
        for device_id, device in sorted(devices.items(), key=lambda kv: int(kv[0])):
            ops_rows += self.rnbd_ops_rows(
                "%s %s" % (device_id, device.get("name") or ""), device.get("ops") or {},
                "sessions/%d/rnbd/devices/%s/ops/" % (session.index, device_id))
        ops_rows += self.rnbd_ops_rows("all devices", rnbd.get("ops") or {},
                                       "sessions/%d/rnbd/ops/" % session.index)
        if ops_rows:
            self.add(self.table(("device", "RNBD op", "count", "bytes", "errors", "p50 µs",
                                 "p99 µs", "max µs"), ops_rows, "numbers"))
        control = rnbd.get("control") or {}
        shown = ["%s %s" % (kind, self.summary_value(
            stats["count"], "sessions/%d/rnbd/control/%s/count" % (session.index, kind)))
            + (" (%s failed)" % self.summary_value(stats["errors"], "sessions/%d/rnbd/control/"
                                                    "%s/errors" % (session.index, kind))
               if stats.get("errors") else "")
            for kind, stats in control.items() if stats and stats.get("count")]
        if shown:
            self.add("<p>RNBD control messages: %s</p>" % ", ".join(shown))
        for device in session.devices:
            if len(device.rows):
                self.figure(P.sizes(self.capture, F.Sizes(device)))
                self.figure(P.heatmap(self.capture, F.Heatmap(self.capture, device)))
                split = F.Split(device)
                if split.bars:
                    self.figure(P.split(self.capture, split))

    def _queue(self, session, device_id):
        """The device's deepest queue and its time at the queue depth (summary.md)."""
        pointer = "sessions/%d/rnbd/devices/%s/" % (session.index, device_id)
        device = ((session.summary.get("rnbd") or {}).get("devices") or {}).get(str(device_id))
        if device is None or "max_in_flight" not in device:
            return "–"
        return "%s, %s" % (self.summary_value(device["max_in_flight"], pointer + "max_in_flight"),
                           self.summary_value(device["queue_full_s"], pointer + "queue_full_s"))

    def rnbd_ops_rows(self, label, ops, pointer):
        rows = []
        for op, stats in ops.items():
            if stats is None:             # header-only requests: not all known
                rows.append([_esc(label), _esc(op), "unknown (payloads cut)"] + [""] * 5)
                label = ""
                continue
            if not stats.get("count"):
                continue
            ptr = pointer + op + "/"
            lat = stats.get("latency_us") or {}
            rows.append([_esc(label), _esc(op),
                         self.summary_value(stats["count"], ptr + "count"),
                         self.summary_value(stats["bytes"], ptr + "bytes"),
                         self.summary_value(stats["errors"], ptr + "errors")] +
                        [self.summary_value(lat.get(k), ptr + "latency_us/" + k, 1)
                         for k in ("p50", "p99", "max")])
            label = ""
        return rows

    def path_section(self, path):
        s = path.summary
        i, j = path.session.index, path.session.paths.index(path)
        ptr = "sessions/%d/paths/%d/" % (i, j)
        self.heading(3, "path ", "%s (session %s)" % (path.label, path.session.label),
                     path.anchor)
        handshake = [("sess_uuid", _esc(s["sess_uuid"] or "handshake not captured")),
                     ("port", _esc(s["port"] if s["port"] is not None else "–")),
                     ("protocol", _esc(s["protocol_version"] or "–")),
                     ("queue_depth", "%s %s" % (
                         self.summary_value(s["queue_depth"], ptr + "queue_depth"),
                         _esc(s.get("queue_depth_source") or ""))),
                     ("max_io_size", self.summary_value(s["max_io_size"], ptr + "max_io_size")),
                     ("max_hdr_size", self.summary_value(s["max_hdr_size"],
                                                         ptr + "max_hdr_size")),
                     ("always_invalidate", {True: "Y", False: "N"}.get(
                         s["always_invalidate"], "–")),
                     ("connections per path (cid_num)", _number(s["cid_num"])),
                     ("chunks (info_rsp sg_cnt)", _number(s["chunks"]))]
        counters = [(label, self.summary_value(s.get(key, 0), ptr + key)) for key, label in (
            ("reconnects", "reconnects"), ("reconnect_attempts", "reconnect attempts"),
            ("failovers", "failovers to this path"), ("aborted_requests", "aborted requests"),
            ("lost_requests", "lost requests"), ("in_flight_at_end", "in flight at the end"),
            ("partial_requests", "requests begun before the capture"),
            ("rkey_refreshes", "rkey refreshes"), ("max_in_flight", "most IOs in flight"),
            ("queue_full_s", "seconds at the queue depth (all permits taken)"))]
        hb = s["heartbeats"]
        counters.append(("heartbeats client→server / server→client", "%s / %s" % (
            self.summary_value(hb["client_to_server"], ptr + "heartbeats/client_to_server"),
            self.summary_value(hb["server_to_client"], ptr + "heartbeats/server_to_client"))))
        for key in ("retransmissions", "naks"):
            counters.append(("transport " + key, self.summary_value(
                s["transport"][key], ptr + "transport/" + key)))
        self.add('<div class="side">%s%s</div>' % (self.table(("handshake", ""), handshake,
                                                               "keys"),
                                                    self.table(("counters", ""), counters,
                                                               "keys")))
        self.connections(s)
        self.events(path)
        if len(path.rows):
            self.figure(P.timeline(self.capture, path.rows, [path], "IO over time, path %s"
                                          % path.label))
            self.figure(P.inflight(self.capture, F.InFlight(self.capture, [path],
                                                     "requests in flight, path %s"
                                                     % path.label)))
        else:
            self.add("<p>no IO requests on this path</p>")
        ladder = F.Ladder(path)
        if ladder.steps:
            self.figure(P.ladder(self.capture, ladder))

    def connections(self, s):
        if not s["connections"]:
            return
        self.add(self.table(("cid", "client QPN", "server QPN", "recon_cnt", "state",
                             "REQ frame"), [
            (_number(c["cid"]), _qpn(c["client_qpn"]), _qpn(c["server_qpn"]),
             _number(c["recon_cnt"]), _esc(c["state"]), self.frame(c["frame"]))
            for c in s["connections"]]))

    def events(self, path):
        events = path.events()
        if not events:
            return
        self.add("<h4>timeline (%d events)</h4>" % len(events))
        self.add(self.table(("time", "frame", "event", "details"), [
            (self.when(e.time + self.capture.t0), self.frame(e.frame), _esc(e.kind),
             _esc(e.details))
            for e in events[:MAX_TABLE_ROWS]], "events"))
        self._more(len(events))

    # -- the page -----------------------------------------------------------------

    def html(self):
        """The page's text in pieces: plotly.js and the body's parts as they are, never
        joined into one string with the rest (a few MiB less at the end of a large
        capture's report, where its memory peaks)."""
        template = pio.templates[TEMPLATE].to_plotly_json()
        nav = "".join('<li class="l%d"><a href="#%s">%s</a></li>' % (level, anchor, _esc(text))
                      for level, anchor, text in self.nav)
        fields = dict(
            title=_esc("RTRS/RNBD report: %s" % self.capture.name),
            heading=_esc(self.capture.name), version=_esc(version("rtrs-scapy")),
            command=_esc(wireshark_command(self.capture.files)), nav=nav,
            template=json.dumps(template, cls=_Encoder).replace("</", "<\\/"),
            config=json.dumps(PLOT_CONFIG), script=(ASSETS / "report.js").read_text("utf-8"),
            style=(ASSETS / "report.css").read_text("utf-8"))
        head, rest = PAGE.split("{plotly}")
        middle, tail = rest.split("{body}")
        yield head.format(**fields)
        yield get_plotlyjs().replace("</script", "<\\/script")
        yield middle.format(**fields)
        for k, part in enumerate(self.body):
            yield "\n" + part if k else part
        yield tail.format(**fields)


def wireshark_command(paths):
    """The shell command that opens the capture in Wireshark at a frame, but the
    frame number: Wireshark's -g goes to that packet.  Several files are one
    capture in time order, as mergecap writes them."""
    if len(paths) == 1:
        return "wireshark -r %s -g " % shlex.quote(paths[0])
    return "mergecap -w merged.pcapng %s && wireshark -r merged.pcapng -g " % " ".join(
        shlex.quote(p) for p in paths)


class _Encoder(json.JSONEncoder):
    """numpy values as JSON: an array of floats as plotly.js's typed array (base64 of
    its bytes: JSON has no NaN, which breaks a line where a bucket has no value)."""

    def default(self, o):
        if isinstance(o, np.ndarray):
            if o.dtype.kind != "f":
                return o.tolist()
            typed = {"dtype": "f8", "bdata": base64.b64encode(
                np.ascontiguousarray(o, dtype="<f8")).decode("ascii")}
            if o.ndim > 1:
                typed["shape"] = ", ".join(map(str, o.shape))
            return typed
        if isinstance(o, np.generic):
            return o.item()
        return super().default(o)


def _share(value):
    return "–" if value is None else "%.0f %%" % (100.0 * value)


def _qpn(value):
    return "–" if value is None else "0x%x" % value


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="generator" content="rtrs-scapy {version}">
<title>{title}</title>
<style>{style}</style>
<script>{plotly}</script>
</head>
<body>
<nav><ul>{nav}</ul></nav>
<main>
<header><h1>{heading}</h1><small>RTRS/RNBD report by rtrs-dissect {version}: figures from
the same analysis as <code>rtrs-dissect summary</code>; click a frame number to jump to it
in Wireshark.</small></header>
{body}
</main>
<div id="frame-bar" hidden data-command="{command}">Frame <b id="frame-number"></b>
in Wireshark: <i>Go → Go to Packet…</i> (Ctrl+G), or run
<input id="frame-command" readonly> or filter <input id="frame-filter" readonly>
<button id="frame-close" type="button">close</button></div>
<script>var TEMPLATE = {template}; var CONFIG = {config};</script>
<script>{script}</script>
</body></html>
"""
