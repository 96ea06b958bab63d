"""The report's figures drawn by Plotly (html.py embeds them): the same figure
data of figures.py as plots.py draws with matplotlib, written as plotly.js's JSON
(plotly_spec.py says why)."""

import html

import numpy as np
from plotly.colors import sequential

from . import figures as F
from .plotly_spec import Figure
from .words import size

#: the heatmap's colours, as plotly.js is given them (its own "Viridis" has more stops)
VIRIDIS = [[k / (len(sequential.Viridis) - 1), colour]
           for k, colour in enumerate(sequential.Viridis)]



def timeline(capture, rows, paths, title):
    tl = F.Timeline(capture, rows, paths, title)
    lanes = tl.lanes
    heights = [170, 170, 170] + ([max(60, 26 * len(lanes))] if lanes else [])  # pixels
    fig = Figure(rows=len(heights), cols=1, shared_xaxes=True, vertical_spacing=0.035,
                 row_heights=[h / sum(heights) for h in heights])
    x = tl.buckets.edges
    for op, (iops, bps) in tl.rates.items():
        colour = F.OP_COLOUR[op]
        fig.add("scatter", **_stairs(x, iops, op + " requests/s", colour, op), row=1, col=1)
        fig.add("scatter", **_stairs(x, bps / tl.byte_unit[1],
                                     "%s %s/s" % (op, tl.byte_unit[0]), colour, op, False),
                row=2, col=1)
    centres = tl.buckets.starts + tl.buckets.width / 2
    for name, values in tl.percentiles.items():
        fig.add("scatter", x=centres, y=values, name="latency " + name,
                mode="lines+markers", marker={"size": 4},
                line={"color": F.PERCENTILE_COLOUR[name], "width": 1.5}, row=3, col=1)
    for kind, group in _by_kind(tl.events):
        colour, shape = F.EVENT_STYLE.get(kind, F.OTHER_EVENT)
        lasting = [e for e in group if e.until is not None]
        if lasting:   # how long it lasted: a line on its lane (None breaks the line)
            fig.add("scatter", x=[t for e in lasting for t in (e.time, e.until, None)],
                    y=[y for e in lasting for y in (e.lane, e.lane, None)], mode="lines",
                    line={"color": colour, "width": 3}, hoverinfo="skip", showlegend=False,
                    row=4, col=1)
        fig.add("scatter", x=[e.time for e in group], y=[e.lane for e in group],
                mode="markers", name=kind, marker={"color": colour, "symbol": shape, "size": 10},
                text=[e.text for e in group], customdata=[e.frame for e in group],
                hovertemplate="%{text}<extra></extra>", showlegend=False, row=4, col=1)
    if tl.outages:   # shaded across every row
        fig.update(shapes=[{"type": "rect", "xref": "x", "yref": "paper", "x0": down,
                            "x1": up, "y0": 0, "y1": 1, "fillcolor": "#999999",
                            "opacity": 0.25, "line": {"width": 0}, "layer": "below"}
                           for down, up in tl.outages])
    fig.yaxes(title={"text": "requests/s"}, row=1, col=1)
    fig.yaxes(title={"text": "%s/s" % tl.byte_unit[0]}, row=2, col=1)
    fig.yaxes(title={"text": "latency µs"}, type="log", row=3, col=1)
    if lanes:
        fig.yaxes(type="category", categoryorder="array", categoryarray=lanes,
                  autorange="reversed", row=4, col=1)
    fig.xaxes(title={"text": _x_title(capture)}, row=len(heights), col=1,
              range=[tl.start, tl.end])
    more = ", first %d of %d events" % (len(tl.events), tl.event_total) \
        if tl.event_total > len(tl.events) else ""
    _layout(fig, "%s (buckets of %g s%s)" % (title, tl.buckets.width, more),
            height=sum(heights) + 190)
    return fig

def _x_title(capture):
    return "seconds since the capture start (%s)" % capture.start

def latency(capture, lat):
    if not lat.groups:
        return None
    fig = Figure(rows=1, cols=2, subplot_titles=("histogram", "CDF"), horizontal_spacing=0.08)
    for k, (label, count, edges, counts, x, shares) in enumerate(lat.groups):
        colour = _colour(k)
        fig.add("scatter", **_stairs(edges, counts, "%s (%d)" % (label, count), colour,
                                     label), row=1, col=1)
        fig.add("scatter", x=x, y=shares, name=label, legendgroup=label, showlegend=False,
                line={"color": colour, "shape": "hv"},
                hovertemplate="%{x:.1f} µs: %{y:.1%}<extra>" + html.escape(label) + "</extra>",
                row=1, col=2)
    fig.xaxes(type="log", title={"text": "latency µs"})
    fig.yaxes(title={"text": "requests"}, row=1, col=1)
    fig.yaxes(title={"text": "share of requests"}, range=[0, 1.02], row=1, col=2)
    _layout(fig, lat.title, height=380)
    return fig

def inflight(capture, fl):
    fig = Figure()
    start, end = fl.start, fl.end
    for k, (label, peaks, depth) in enumerate(fl.paths):
        colour = _colour(k)
        fig.add("scatter", **_stairs(fl.buckets.edges, np.where(peaks > 0, peaks, np.nan),
                                     label + " in flight", colour, label))
        if depth:
            fig.add("scatter", x=[start, end], y=[depth, depth], mode="lines",
                    name="queue depth %d" % depth, legendgroup=label,
                    line={"color": colour, "dash": "dash"})
    fig.yaxes(type="log", title={"text": "requests in flight (most per bucket)"})
    fig.xaxes(title={"text": _x_title(capture)}, range=[start, end])
    _layout(fig, "%s (buckets of %g s; none in flight: no line)"
            % (fl.title, fl.buckets.width), height=340)
    return fig

def load(capture, ld):
    fig = Figure(rows=1, cols=2, subplot_titles=("requests", ld.byte_unit[0]))
    labels = [ld.label(p, cid) for p, cid, _ in ld.bars]
    for op, colour in F.OP_COLOUR.items():
        fig.add("bar", x=labels, y=[ops[op][0] for _, _, ops in ld.bars], name=op,
                legendgroup=op, marker={"color": colour}, row=1, col=1)
        fig.add("bar", x=labels, y=[ops[op][1] / ld.byte_unit[1] for _, _, ops in ld.bars],
                name=op, legendgroup=op, showlegend=False, marker={"color": colour},
                row=1, col=2)
    fig.update(barmode="group")
    _layout(fig, ld.title, height=380)
    return fig

def sizes(capture, sz):
    fig = Figure()
    distinct = sorted({int(v) for _, values, _ in sz.ops for v in values})
    for k, (op, values, counts) in enumerate(sz.ops):
        fig.add("bar", x=[size(int(v)) for v in values], y=counts, name=op,
                marker={"color": _colour(k)})
    fig.xaxes(type="category", categoryorder="array",
              categoryarray=[size(v) for v in distinct], title={"text": "IO size"})
    fig.yaxes(title={"text": "requests"})
    fig.update(barmode="group")
    _layout(fig, sz.title, height=320)
    return fig

def split(capture, sp):
    """Stacked horizontal bars: one per operation and band of wire time."""
    fig = Figure()
    labels = ["%s %s (%s IOs)" % (op, band, _number(count)) for op, band, count, _ in sp.bars]
    for k, part in enumerate(sp.PARTS):
        fig.add("bar", y=labels, x=[means[part] for *_, means in sp.bars], name=part,
                orientation="h", marker={"color": _colour(k)},
                hovertemplate="%{y}: " + part + " %{x:.1f} µs<extra></extra>")
    fig.update(barmode="stack")
    fig.xaxes(title={"text": "mean µs on the wire (request, server, read data, response)"})
    fig.yaxes(autorange="reversed")
    _layout(fig, sp.title, height=140 + 28 * max(len(labels), 1))
    return fig


def heatmap(capture, hm):
    counts = hm.counts.astype(float)
    counts[counts == 0] = np.nan
    centres = (hm.sector_edges[:-1] + hm.sector_edges[1:]) / 2
    fig = Figure()
    fig.add("heatmap", z=counts, x=hm.buckets.starts + hm.buckets.width / 2, y=centres,
            colorscale=VIRIDIS, colorbar={"title": {"text": "requests"}},
            hovertemplate="%{x:.3f} s, sector ≈ %{y:.0f}: %{z} requests<extra></extra>")
    fig.xaxes(title={"text": _x_title(capture)}, range=[hm.buckets.edges[0],
                                                        hm.buckets.edges[-1]])
    fig.yaxes(title={"text": "sector (512 B), device of %s sectors" % _number(hm.sectors)},
              range=[0, hm.sector_edges[-1]])
    _layout(fig, "%s (buckets of %g s)" % (hm.title, hm.buckets.width), height=360)
    return fig

def ladder(capture, ld):
    """Arrows between the client's and the server's lifelines, one row per message
    in frame order (annotations with arrowheads), the frame and time at the right."""
    n = len(ld.steps)
    arrows = []
    for i, step in enumerate(ld.steps):
        start, end = (0, 1) if step.from_client else (1, 0)
        arrows.append({"x": end, "y": -i - 0.3, "ax": start, "ay": -i, "xref": "x",
                       "yref": "y", "axref": "x", "ayref": "y", "showarrow": True,
                       "arrowhead": 2, "arrowwidth": 1.5, "text": "",
                       "arrowcolor": "#d62728" if step.alarm else "#1f77b4"})
    lifelines = [{"type": "line", "x0": x, "x1": x, "y0": 0.6, "y1": -n + 0.2,
                  "line": {"color": "#444444", "width": 2}} for x in (0, 1)]
    times = [capture.clock.at(s.time) if s.time is not None else "" for s in ld.steps]
    labels = ("scatter", dict(x=[0.5] * n, y=[-i + 0.08 for i in range(n)], mode="text",
                              text=[s.label for s in ld.steps], textposition="top center",
                              hoverinfo="skip"))
    frames = ("scatter", dict(
        x=[1.06] * n, y=list(range(0, -n, -1)), mode="markers+text",
        marker={"size": 6, "color": "#888888"}, textposition="middle right",
        text=["frame %d %s" % (s.frame, t) for s, t in zip(ld.steps, times)],
        customdata=[s.frame for s in ld.steps],
        hovertext=["%s: %s" % (s.label, s.detail) if s.detail else s.label for s in ld.steps],
        hovertemplate="%{hovertext}<extra></extra>"))
    fig = Figure([labels, frames], layout={"annotations": arrows, "shapes": lifelines})
    fig.xaxes(range=[-0.15, 1.75], tickvals=[0, 1],
              ticktext=["client %s" % ld.client, "server %s" % ld.server],
              side="top", showgrid=False, zeroline=False)
    fig.yaxes(range=[-n + 0.1, 1.0], visible=False)
    shown = "" if ld.total == n else " (first %d of %d)" % (n, ld.total)
    _layout(fig, ld.title + shown, height=max(220, 110 + 34 * n))
    fig.update(showlegend=False)
    return fig


def _stairs(edges, values, name, colour, group, legend=True):
    """A step line over buckets: value i from edge i to edge i+1 (a scatter trace's
    attributes)."""
    values = np.asarray(values, dtype=float)
    y = np.append(values, values[-1] if len(values) else np.nan)
    return dict(x=np.asarray(edges, dtype=float), y=y, name=name, legendgroup=group,
                showlegend=legend, mode="lines", line={"color": colour, "shape": "hv", "width": 1.5})


def _by_kind(events):
    groups = {}
    for e in events:
        groups.setdefault(e.kind, []).append(e)
    return groups.items()


def _colour(k):
    return ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
            "#7f7f7f", "#bcbd22", "#17becf")[k % 10]


def _number(value):
    return "{:,}".format(value)


def _layout(fig, title, height):
    fig.update(title={"text": html.escape(title), "font": {"size": 14}}, height=height,
               margin={"l": 70, "r": 30, "t": 60, "b": 50},
               legend={"x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top"},
               hovermode="closest")
