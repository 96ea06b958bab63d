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

import html
import json
from importlib.metadata import version

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from . import figures as F
from .series import SECTOR
from .text import error_text
from .words import size, utc_iso

#: paths and sessions with sections of their own; the rest are rows of the tables
MAX_PATH_SECTIONS = 16
MAX_SESSION_SECTIONS = 16
#: paths drawn in one session figure (latency by path, load per cid)
MAX_PATHS_PER_FIGURE = 12
#: rows of the failed-IO, event and anomaly tables
MAX_TABLE_ROWS = 500
TEMPLATE = "plotly_white"
PLOT_CONFIG = {"displaylogo": False, "responsive": True}
MIB = 1024.0 * 1024.0
#: Plotly's marker symbols for the shapes of figures.EVENT_STYLE
SYMBOLS = {"triangle-up": "triangle-up", "triangle-down": "triangle-down", "x": "x",
           "square": "square", "diamond": "diamond", "star": "star", "circle": "circle"}


def render(capture):
    """The report of a CaptureView, as one HTML string."""
    page = Page(capture)
    page.capture_section()
    for session in _ranked(capture.sessions, MAX_SESSION_SECTIONS, _session_rank):
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
        self.shown_paths = set(id(p) for p in _ranked(capture.paths, MAX_PATH_SECTIONS,
                                                       _path_rank))

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

    def figure(self, fig, note=""):
        """A Plotly figure: its spec as JSON, drawn by the page's script (None: no
        figure, nothing to draw)."""
        if fig is None:
            return
        self.figures += 1
        target = "figure-%d" % self.figures
        spec = fig.to_plotly_json()
        spec["layout"].pop("template", None)
        text = json.dumps(spec, cls=_Encoder, separators=(",", ":")).replace("</", "<\\/")
        self.body.append('<div class="figure"><div class="plot" id="%s"></div>%s'
                         '<script type="application/json" class="figure-spec" data-for="%s">'
                         '%s</script></div>' % (target, note, target, text))

    def heading(self, level, prefix, name, anchor, summary_pointer=None):
        """A section heading (and its entry in the side bar); ``name`` tagged with its
        summary pointer when it is one."""
        shown = _esc(name) if summary_pointer is None else \
            '<span data-summary="%s">%s</span>' % (_esc(summary_pointer), _esc(name))
        self.body.append('<h%d id="%s">%s%s</h%d>' % (level, anchor, _esc(prefix), shown,
                                                       level))
        self.nav.append((level, anchor, prefix + name))

    def add(self, text):
        self.body.append(text)

    # -- sections -----------------------------------------------------------------

    def capture_section(self):
        capture, cap = self.capture, self.capture.summary["capture"]
        self.heading(2, "capture ", capture.name, "capture")
        rows = [("file", _esc(cap["path"])), ("format", "%s, %s" % (
            _esc(cap["format"]), _esc(cap["link_type"])))]
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
        if len(capture.rows):
            self.figure(self.timeline_fig(capture.rows, capture.paths,
                                          "IO over time, the whole capture"))
            self.figure(self.latency_fig(F.latency_by_op(capture.rows,
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
                row = ['<a href="#%s">%s</a>' % (session.anchor, _esc(session.label)), link]
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
            self.add("<p class=note>%d paths have rows above but no section of their own "
                     "(the %d with errors, rejects, outages or the most IO have one), to "
                     "keep the report small.</p>" % (hidden, len(self.shown_paths)))

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
        pointer = "sessions/%d/sessname" % session.index if session.name else None
        self.heading(2, "session ", session.label, session.anchor, pointer)
        self.add(self.table(None, [
            ("name", _esc(session.name or "not in the capture")),
            ("paths_uuid", _esc(s["paths_uuid"] or "handshake not captured")),
            ("paths", len(session.paths))], "keys"))
        self.failed_io(session)
        rows = session.rows
        if len(rows):
            self.figure(self.timeline_fig(rows, session.paths,
                                          "IO over time, session %s" % session.label))
            self.figure(self.latency_fig(F.latency_by_op(
                rows, "latency of RNBD IO by operation, session %s" % session.label)))
            shown = _ranked(session.paths, MAX_PATHS_PER_FIGURE, lambda p: p.busy)
            if len(session.paths) > 1:
                self.figure(self.latency_fig(F.latency_by_path(
                    shown, "latency of RTRS requests by path, session %s" % session.label)))
            self.figure(self.load_fig(F.Load(shown, "load per path and connection (cid), "
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
                                          else e.get("dev_path", "–"))
            sector = e.get("sector") if e.get("rnbd_op") not in (None, "flush") else None
            rows.append((self.when(e.get("time")), _esc(session.paths[j].label),
                         _esc(device), _number(sector), _number(e.get("bi_size")),
                         _esc(e.get("rnbd_op") or e.get("rnbd") or e["op"]),
                         "%d %s" % (e["errno"], _esc(e["name"])),
                         self.frame(e.get("request_frame")), self.frame(e["frame"]),
                         _esc(error_text(e))))
        self.add(self.table(("time", "path", "device", "sector", "size", "op", "errno",
                             "request frame", "response frame", "as the kernel logs it"),
                            rows, "failed"))
        self._more(len(errors))

    def rnbd(self, session):
        if not session.devices:
            return
        self.add("<h3>RNBD devices</h3>")
        rnbd = session.summary.get("rnbd") or {}
        rows = []
        for device in session.devices:
            info = device.info
            ops = info.get("ops") or {}
            counts = ", ".join("%s %s" % (op, _number(ops[op]["count"])) for op in ops
                               if ops[op].get("count")) or "%s requests in the capture" % (
                _number(len(device.rows)))
            rows.append((_esc(device.id), _esc(device.name or "name not captured"),
                         _esc(info.get("access_mode", "–")),
                         "%s (%s)" % (_number(info["nsectors"]), size(info["nsectors"] * SECTOR))
                         if info.get("nsectors") else "–",
                         self.frame(info.get("opened_frame")), self.frame(info.get("closed_frame")),
                         _esc(counts)))
        self.add(self.table(("id", "name", "access", "sectors", "opened", "closed", "IO"),
                            rows))
        if rnbd.get("ops"):
            self.add(self.rnbd_ops_table(session, rnbd["ops"]))
        for device in session.devices:
            if len(device.rows):
                self.figure(self.sizes_fig(F.Sizes(device)))
                self.figure(self.heatmap_fig(F.Heatmap(self.capture, device)))

    def rnbd_ops_table(self, session, ops):
        rows = []
        for op, stats in ops.items():
            ptr = "sessions/%d/rnbd/ops/%s/" % (session.index, op)
            lat = stats.get("latency_us") or {}
            rows.append([_esc(op), self.summary_value(stats["count"], ptr + "count"),
                         self.summary_value(stats["bytes"], ptr + "bytes"),
                         self.summary_value(stats["errors"], ptr + "errors")] +
                        [self.summary_value(lat.get(k), ptr + "latency_us/" + k, 1)
                         for k in ("p50", "p99", "max")])
        return self.table(("RNBD op", "count", "bytes", "errors", "p50 µs", "p99 µs",
                           "max µs"), rows, "numbers")

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
            ("rkey_refreshes", "rkey refreshes"))]
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
            self.figure(self.timeline_fig(path.rows, [path], "IO over time, path %s"
                                          % path.label))
            self.figure(self.inflight_fig(F.InFlight(self.capture, [path],
                                                     "requests in flight, path %s"
                                                     % path.label)))
        else:
            self.add("<p>no IO requests on this path</p>")
        ladder = F.Ladder(path)
        if ladder.steps:
            self.figure(self.ladder_fig(ladder))

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

    # -- Plotly figures -------------------------------------------------------------

    def timeline_fig(self, rows, paths, title):
        tl = F.Timeline(self.capture, rows, paths, title)
        lanes = tl.lanes
        heights = [0.27, 0.27, 0.27] + ([0.19] if lanes else [])
        fig = make_subplots(rows=len(heights), cols=1, shared_xaxes=True,
                            vertical_spacing=0.035, row_heights=heights)
        x = tl.buckets.edges
        for op, (iops, bps) in tl.rates.items():
            colour = F.OP_COLOUR[op]
            fig.add_trace(_stairs(x, iops, op + " requests/s", colour, op), row=1, col=1)
            fig.add_trace(_stairs(x, bps / MIB, op + " MiB/s", colour, op, False), row=2, col=1)
        centres = tl.buckets.starts + tl.buckets.width / 2
        for name, values in tl.percentiles.items():
            fig.add_trace(go.Scatter(x=centres, y=values, name="latency " + name,
                                     mode="lines+markers", marker={"size": 4},
                                     line={"color": F.PERCENTILE_COLOUR[name], "width": 1.5}),
                          row=3, col=1)
        for kind, group in _by_kind(tl.events):
            colour, shape = F.EVENT_STYLE.get(kind, F.OTHER_EVENT)
            fig.add_trace(go.Scatter(
                x=[e.time for e in group], y=[e.lane for e in group], mode="markers",
                name=kind, marker={"color": colour, "symbol": SYMBOLS[shape], "size": 10},
                text=[e.text for e in group], customdata=[e.frame for e in group],
                hovertemplate="%{text}<extra></extra>", showlegend=False), row=4, col=1)
        for down, up in tl.outages:
            fig.add_vrect(x0=down, x1=up, fillcolor="#999999", opacity=0.25, line_width=0,
                          row="all", col=1)
        fig.update_yaxes(title_text="requests/s", row=1, col=1)
        fig.update_yaxes(title_text="MiB/s", row=2, col=1)
        fig.update_yaxes(title_text="latency µs", type="log", row=3, col=1)
        if lanes:
            fig.update_yaxes(type="category", categoryorder="array", categoryarray=lanes,
                             autorange="reversed", row=4, col=1)
        fig.update_xaxes(title_text=self.x_title(), row=len(heights), col=1,
                         range=[0, max(self.capture.duration, tl.buckets.width)])
        more = ", first %d of %d events" % (len(tl.events), tl.event_total) \
            if tl.event_total > len(tl.events) else ""
        _layout(fig, "%s (buckets of %g s%s)" % (title, tl.buckets.width, more),
                height=620 + 22 * len(lanes))
        return fig

    def x_title(self):
        return "seconds since the capture start (%s)" % self.capture.start

    def latency_fig(self, lat):
        if not lat.groups:
            return None
        fig = make_subplots(rows=1, cols=2, subplot_titles=("histogram", "CDF"),
                            horizontal_spacing=0.08)
        for k, (label, count, edges, counts, x, shares) in enumerate(lat.groups):
            colour = _colour(k)
            fig.add_trace(_stairs(edges, counts, "%s (%d)" % (label, count), colour, label),
                          row=1, col=1)
            fig.add_trace(go.Scatter(x=x, y=shares, name=label, legendgroup=label,
                                     showlegend=False, line={"color": colour, "shape": "hv"},
                                     hovertemplate="%{x:.1f} µs: %{y:.1%}<extra>" +
                                     _esc(label) + "</extra>"), row=1, col=2)
        fig.update_xaxes(type="log", title_text="latency µs")
        fig.update_yaxes(title_text="requests", row=1, col=1)
        fig.update_yaxes(title_text="share of requests", range=[0, 1.02], row=1, col=2)
        _layout(fig, lat.title, height=380)
        return fig

    def inflight_fig(self, fl):
        fig = go.Figure()
        end = fl.buckets.edges[-1]
        for k, (label, peaks, depth) in enumerate(fl.paths):
            colour = _colour(k)
            fig.add_trace(_stairs(fl.buckets.edges, np.where(peaks > 0, peaks, np.nan),
                                  label + " in flight", colour, label))
            if depth:
                fig.add_trace(go.Scatter(x=[0, end], y=[depth, depth], mode="lines",
                                         name="queue depth %d" % depth, legendgroup=label,
                                         line={"color": colour, "dash": "dash"}))
        fig.update_yaxes(type="log", title_text="requests in flight (most per bucket)")
        fig.update_xaxes(title_text=self.x_title(), range=[0, end])
        _layout(fig, "%s (buckets of %g s; none in flight: no line)"
                % (fl.title, fl.buckets.width), height=340)
        return fig

    def load_fig(self, ld):
        fig = make_subplots(rows=1, cols=2, subplot_titles=("requests", "MiB"))
        labels = [ld.label(p, cid) for p, cid, _ in ld.bars]
        for op, colour in F.OP_COLOUR.items():
            fig.add_trace(go.Bar(x=labels, y=[ops[op][0] for _, _, ops in ld.bars], name=op,
                                 legendgroup=op, marker_color=colour), row=1, col=1)
            fig.add_trace(go.Bar(x=labels, y=[ops[op][1] / MIB for _, _, ops in ld.bars],
                                 name=op, legendgroup=op, showlegend=False,
                                 marker_color=colour), row=1, col=2)
        fig.update_layout(barmode="group")
        _layout(fig, ld.title, height=380)
        return fig

    def sizes_fig(self, sz):
        fig = go.Figure()
        distinct = sorted({int(v) for _, values, _ in sz.ops for v in values})
        for k, (op, values, counts) in enumerate(sz.ops):
            fig.add_trace(go.Bar(x=[size(int(v)) for v in values], y=counts, name=op,
                                 marker_color=_colour(k)))
        fig.update_xaxes(type="category", categoryorder="array",
                         categoryarray=[size(v) for v in distinct], title_text="IO size")
        fig.update_yaxes(title_text="requests")
        fig.update_layout(barmode="group")
        _layout(fig, sz.title, height=320)
        return fig

    def heatmap_fig(self, hm):
        counts = hm.counts.astype(float)
        counts[counts == 0] = np.nan
        centres = (hm.sector_edges[:-1] + hm.sector_edges[1:]) / 2
        fig = go.Figure(go.Heatmap(
            z=counts, x=hm.buckets.starts + hm.buckets.width / 2, y=centres,
            colorscale="Viridis", colorbar={"title": {"text": "requests"}},
            hovertemplate="%{x:.3f} s, sector ≈ %{y:.0f}: %{z} requests<extra></extra>"))
        fig.update_xaxes(title_text=self.x_title(), range=[0, hm.buckets.edges[-1]])
        fig.update_yaxes(title_text="sector (512 B), device of %s sectors" % _number(
            hm.sectors), range=[0, hm.sector_edges[-1]])
        _layout(fig, "%s (buckets of %g s)" % (hm.title, hm.buckets.width), height=360)
        return fig

    def ladder_fig(self, ld):
        fig = go.Figure()
        n = len(ld.steps)
        for x in (0, 1):
            fig.add_shape(type="line", x0=x, x1=x, y0=0.6, y1=-n + 0.2,
                          line={"color": "#444444", "width": 2})
        for i, step in enumerate(ld.steps):
            start, end = (0, 1) if step.from_client else (1, 0)
            red = step.label.startswith(("REJ", "DREQ")) or "refused" in step.label
            fig.add_annotation(x=end, y=-i - 0.3, ax=start, ay=-i, xref="x", yref="y",
                               axref="x", ayref="y", showarrow=True, arrowhead=2,
                               arrowwidth=1.5, arrowcolor="#d62728" if red else "#1f77b4",
                               text="")
        times = [self.capture.clock.at(s.time) if s.time is not None else "" for s in ld.steps]
        fig.add_trace(go.Scatter(
            x=[0.5] * n, y=[-i + 0.08 for i in range(n)], mode="text",
            text=[s.label for s in ld.steps], textposition="top center",
            hoverinfo="skip", showlegend=False))
        fig.add_trace(go.Scatter(
            x=[1.06] * n, y=list(range(0, -n, -1)), mode="markers+text",
            marker={"size": 6, "color": "#888888"}, textposition="middle right",
            text=["frame %d %s" % (s.frame, t) for s, t in zip(ld.steps, times)],
            customdata=[s.frame for s in ld.steps],
            hovertext=["%s: %s" % (s.label, s.detail) if s.detail else s.label
                       for s in ld.steps],
            hovertemplate="%{hovertext}<extra></extra>", showlegend=False))
        fig.update_xaxes(range=[-0.15, 1.75], tickvals=[0, 1],
                         ticktext=["client %s" % ld.client, "server %s" % ld.server],
                         side="top", showgrid=False, zeroline=False)
        fig.update_yaxes(range=[-n + 0.1, 1.0], visible=False)
        shown = "" if ld.total == n else " (first %d of %d)" % (n, ld.total)
        _layout(fig, ld.title + shown, height=110 + 34 * n)
        fig.update_layout(showlegend=False)
        return fig

    # -- the page -----------------------------------------------------------------

    def html(self):
        template = pio.templates[TEMPLATE].to_plotly_json()
        cap = self.capture.summary["capture"]
        nav = "".join('<li class="l%d"><a href="#%s">%s</a></li>' % (level, anchor, _esc(text))
                      for level, anchor, text in self.nav)
        return PAGE.format(
            title=_esc("RTRS/RNBD report: %s" % self.capture.name),
            heading=_esc(self.capture.name), version=_esc(version("rtrs-scapy")),
            capture=_esc(cap["path"]), nav=nav, body="\n".join(self.body),
            plotly=get_plotlyjs().replace("</script", "<\\/script"),
            template=json.dumps(template, cls=_Encoder).replace("</", "<\\/"),
            config=json.dumps(PLOT_CONFIG), script=SCRIPT, style=STYLE)


class _Encoder(json.JSONEncoder):
    """numpy values as JSON (Plotly's own types are already plain here)."""

    def default(self, o):
        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, np.generic):
            return o.item()
        return super().default(o)


def _stairs(edges, values, name, colour, group, legend=True):
    """A step line over buckets: value i from edge i to edge i+1."""
    values = np.asarray(values, dtype=float)
    y = np.append(values, values[-1] if len(values) else np.nan)
    return go.Scatter(x=np.asarray(edges, dtype=float), y=y, name=name, legendgroup=group,
                      showlegend=legend, mode="lines",
                      line={"color": colour, "shape": "hv", "width": 1.5})


def _by_kind(events):
    groups = {}
    for e in events:
        groups.setdefault(e.kind, []).append(e)
    return groups.items()


def _colour(k):
    return ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
            "#7f7f7f", "#bcbd22", "#17becf")[k % 10]


def _qpn(value):
    return "–" if value is None else "0x%x" % value


def _layout(fig, title, height):
    fig.update_layout(title={"text": _esc(title), "font": {"size": 14}}, height=height,
                      margin={"l": 70, "r": 30, "t": 60, "b": 50},
                      legend={"orientation": "h", "y": -0.12 if height < 400 else -0.06},
                      hovermode="closest")


SCRIPT = """
(function () {
  var bar = document.getElementById('frame-bar');
  var command = document.getElementById('frame-command');
  function showFrame(frame) {
    var text = "wireshark -r '" + bar.dataset.capture + "' -g " + frame;
    document.getElementById('frame-number').textContent = frame;
    document.getElementById('frame-filter').value = 'frame.number == ' + frame;
    command.value = text;
    bar.hidden = false;
    command.select();
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).catch(function () {});
    }
  }
  document.addEventListener('click', function (ev) {
    var link = ev.target.closest('a.frame');
    if (link) { ev.preventDefault(); showFrame(link.dataset.frame); }
  });
  document.getElementById('frame-close').addEventListener('click', function () {
    bar.hidden = true;
  });
  async function drawAll() {
    var specs = document.querySelectorAll('script.figure-spec');
    var done = 0;
    for (var i = 0; i < specs.length; i++) {
      var div = document.getElementById(specs[i].dataset.for);
      var fig = JSON.parse(specs[i].textContent);
      fig.layout.template = TEMPLATE;
      await Plotly.newPlot(div, fig.data, fig.layout, CONFIG);
      div.on('plotly_click', function (ev) {
        var point = ev.points && ev.points[0];
        if (point && point.customdata != null) { showFrame(point.customdata); }
      });
      done += 1;
      document.body.dataset.plotsRendered = String(done);
    }
    document.body.dataset.plotsDone = 'true';
  }
  drawAll().catch(function (err) { console.error('figure failed: ' + err); });
})();
"""

STYLE = """
body { font-family: system-ui, sans-serif; margin: 0; color: #222; }
header { background: #27364a; color: #fff; padding: 10px 20px; }
header h1 { margin: 0; font-size: 20px; }
header small { color: #c8d2e0; }
nav { position: fixed; top: 0; bottom: 0; left: 0; width: 230px; overflow-y: auto;
      background: #f4f6f9; border-right: 1px solid #dde; padding: 8px 0; font-size: 13px; }
nav ul { list-style: none; padding: 0 10px; margin: 0; }
nav li.l3 { padding-left: 14px; } nav li.l4 { display: none; }
nav a { color: #27364a; text-decoration: none; display: block; padding: 2px 0; }
main { margin-left: 250px; padding: 0 20px 80px 0; max-width: 1280px; }
h2 { border-bottom: 2px solid #27364a; padding-top: 14px; }
h3 { margin-top: 28px; }
table { border-collapse: collapse; margin: 8px 0 14px; font-size: 13px; }
th, td { border: 1px solid #dde; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #eef1f6; }
table.numbers td { text-align: right; } table.numbers td:nth-child(-n+2) { text-align: left; }
table.keys td:first-child { color: #555; }
td small { color: #777; }
.side { display: flex; gap: 24px; flex-wrap: wrap; }
.figure { margin: 10px 0 18px; border: 1px solid #e4e7ee; }
.note { color: #666; font-size: 13px; }
a.frame { font-family: monospace; }
#frame-bar { position: fixed; left: 250px; right: 20px; bottom: 10px; background: #fffbe6;
             border: 1px solid #d8c36a; padding: 8px 12px; font-size: 13px;
             box-shadow: 0 2px 8px rgba(0,0,0,.2); }
#frame-bar input { font-family: monospace; width: 28em; }
"""

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
<div id="frame-bar" hidden data-capture="{capture}">Frame <b id="frame-number"></b>
in Wireshark: <i>Go → Go to Packet…</i> (Ctrl+G), or run
<input id="frame-command" readonly> or filter <input id="frame-filter" readonly>
<button id="frame-close" type="button">close</button></div>
<script>var TEMPLATE = {template}; var CONFIG = {config};</script>
<script>{script}</script>
</body></html>
"""
