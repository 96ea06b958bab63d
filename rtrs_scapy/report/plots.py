"""The report's figures as images (matplotlib): ``rtrs-dissect plot KIND``.

Each kind draws the figure data of figures.py for a selection of the capture
(all of it, a session, a path or a device) into one matplotlib Figure, saved as
PNG or SVG.  No pyplot: figures are made and saved without a GUI backend.
"""

import matplotlib
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from . import figures as F
from .words import size

#: at most this many devices or paths side by side in one image, lines or bar groups
MAX_PANELS = 4
MAX_LINES = 8
MAX_BARS = 12
#: marker shapes of figures.EVENT_STYLE in matplotlib's names
MARKERS = {"triangle-up": "^", "triangle-down": "v", "x": "X", "square": "s",
           "diamond": "D", "star": "*", "circle": "o", "hourglass": "8"}
#: a heatmap's colours go logarithmic beyond this many requests in one cell
LOG_COLOURS_ABOVE = 50
PLAIN = FuncFormatter(lambda v, _: "%g" % v)


def _plain_log(axis):
    """A log axis labelled 100, 1000, 10000 rather than 10^2…"""
    axis.set_major_formatter(PLAIN)
    axis.set_minor_formatter(NullFormatter())


def _x_label(capture):
    return "seconds since the capture start (%s)" % capture.start


def timeline(capture, chosen):
    tl = F.Timeline(capture, chosen.rows, chosen.paths, chosen.title)
    lanes = tl.lanes
    ratios = [3, 3, 3] + ([max(1.2, 0.35 * len(lanes) + 0.6)] if lanes else [])
    fig = Figure(figsize=(11, 2.3 * 3 + (ratios[-1] if lanes else 0) * 0.8),
                 layout="constrained")
    axes = fig.subplots(len(ratios), 1, sharex=True, height_ratios=ratios)
    x = tl.buckets.edges
    for op, (iops, bps) in tl.rates.items():
        axes[0].stairs(iops, x, label=op, color=F.OP_COLOUR[op])
        axes[1].stairs(bps / tl.byte_unit[1], x, label=op, color=F.OP_COLOUR[op])
    centres = tl.buckets.starts + tl.buckets.width / 2
    for name, values in tl.percentiles.items():
        axes[2].plot(centres, values, marker=".", markersize=4, linewidth=1, label=name,
                     color=F.PERCENTILE_COLOUR[name])
    axes[0].set_ylabel("requests/s")
    axes[1].set_ylabel("%s/s" % tl.byte_unit[0])
    axes[2].set_ylabel("latency µs")
    if any((v > 0).any() for v in tl.percentiles.values()):
        axes[2].set_yscale("log")
        _plain_log(axes[2].yaxis)
    for ax in axes[:3]:
        ax.legend(loc="upper right", fontsize="small")
        ax.grid(alpha=0.3)
    for ax in axes:
        for down, up in tl.outages:
            ax.axvspan(down, up, color="#999999", alpha=0.25, linewidth=0)
    if lanes:
        ax = axes[3]
        for event in tl.events:
            colour, shape = F.EVENT_STYLE.get(event.kind, F.OTHER_EVENT)
            lane = lanes.index(event.lane)
            ax.scatter(event.time, lane, color=colour, marker=MARKERS[shape], s=40, zorder=3)
            if event.until is not None:
                ax.hlines(lane, event.time, event.until, color=colour, linewidth=2)
        ax.set_yticks(range(len(lanes)), lanes, fontsize="small")
        ax.set_ylim(len(lanes) - 0.5, -0.5)
        ax.grid(axis="x", alpha=0.3)
    axes[-1].set_xlabel(_x_label(capture))
    axes[-1].set_xlim(tl.start, tl.end)
    fig.suptitle("%s (buckets of %g s%s)" % (tl.title, tl.buckets.width, _more_events(tl)))
    return fig


def _more_events(tl):
    return ", first %d of %d events" % (len(tl.events), tl.event_total) \
        if tl.event_total > len(tl.events) else ""


def latency(capture, chosen):
    figs = [F.latency_by_op(chosen.rows, "RNBD IO by operation"),
            F.latency_by_path(_busiest(chosen.paths, MAX_LINES), "RTRS requests by path")]
    figs = [f for f in figs if f.groups]
    fig = Figure(figsize=(11, 3.6 * max(len(figs), 1)), layout="constrained")
    if not figs:
        return _nothing(fig, "no answered request in %s" % chosen.title)
    axes = fig.subplots(len(figs), 2, squeeze=False)
    for (hist, cdf), lat in zip(axes, figs):
        for label, count, edges, counts, x, shares in lat.groups:
            hist.stairs(counts, edges, label="%s (%d)" % (label, count))
            cdf.plot(x, shares, label=label, drawstyle="steps-post")
        for ax in (hist, cdf):
            ax.set_xscale("log")
            _plain_log(ax.xaxis)
            ax.set_xlabel("latency µs")
            ax.grid(alpha=0.3)
        hist.set_ylabel("requests")
        hist.set_title("%s: histogram" % lat.title, fontsize="medium")
        cdf.set_ylabel("share of requests")
        cdf.set_title("%s: CDF" % lat.title, fontsize="medium")
        hist.legend(fontsize="small")
    fig.suptitle(chosen.title)
    return fig


def inflight(capture, chosen):
    fl = F.InFlight(capture, _busiest(chosen.paths, MAX_LINES),
                    "requests in flight, " + chosen.title)
    fig = Figure(figsize=(11, 4), layout="constrained")
    ax = fig.subplots()
    for i, (label, peaks, depth) in enumerate(fl.paths):
        colour = "C%d" % (i % 10)
        ax.stairs(peaks, fl.buckets.edges, label=label, color=colour)
        if depth:
            ax.axhline(depth, color=colour, linestyle="--", linewidth=1,
                       label="%s queue depth %d" % (label, depth))
    ax.set_yscale("symlog", linthresh=1)
    ax.yaxis.set_major_formatter(PLAIN)
    ax.set_ylabel("requests in flight (most per bucket)")
    ax.set_xlabel(_x_label(capture))
    ax.set_xlim(fl.start, fl.end)
    ax.grid(alpha=0.3)
    if fl.paths:
        ax.legend(fontsize="small")
    fig.suptitle("%s (buckets of %g s)" % (fl.title, fl.buckets.width))
    return fig


def load(capture, chosen):
    ld = F.Load(_busiest(chosen.paths, MAX_BARS), "load per path and cid, " + chosen.title)
    fig = Figure(figsize=(11, 5), layout="constrained")
    axes = fig.subplots(1, 2)
    labels = [ld.label(p, cid) for p, cid, _ in ld.bars]
    for k, (op, colour) in enumerate(F.OP_COLOUR.items()):
        at = [i + (k - 0.5) * 0.4 for i in range(len(labels))]
        axes[0].bar(at, [ops[op][0] for _, _, ops in ld.bars], 0.4, label=op, color=colour)
        axes[1].bar(at, [ops[op][1] / ld.byte_unit[1] for _, _, ops in ld.bars], 0.4,
                    label=op, color=colour)
    for ax, unit in zip(axes, ("requests", ld.byte_unit[0])):
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize="small")
        ax.set_ylabel(unit)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(ld.title)
    return fig


def _device_panels(chosen, height):
    """(figure, [(axes, device)]) with a panel of ``height`` inches per device with IO
    of a selection (at most MAX_PANELS); no panel: the figure says so."""
    devices = [d for d in chosen.devices if len(d.rows)][:MAX_PANELS]
    fig = Figure(figsize=(11, height * max(len(devices), 1)), layout="constrained")
    if not devices:
        _nothing(fig, "no RNBD IO in " + chosen.title)
        return fig, []
    return fig, list(zip(fig.subplots(len(devices), 1, squeeze=False)[:, 0], devices))


def sizes(capture, chosen):
    fig, panels = _device_panels(chosen, 3.2)
    if not panels:
        return fig
    for ax, device in panels:
        sz = F.Sizes(device)
        distinct = sorted({int(s) for _, values, _ in sz.ops for s in values})
        width = 0.8 / max(len(sz.ops), 1)
        for k, (op, values, counts) in enumerate(sz.ops):
            at = [distinct.index(int(v)) + (k - (len(sz.ops) - 1) / 2) * width for v in values]
            ax.bar(at, counts, width, label=op)
        step = max(1, len(distinct) // 24)
        ax.set_xticks(range(0, len(distinct), step), [size(s) for s in distinct[::step]],
                      rotation=45, ha="right", fontsize="small")
        ax.set_ylabel("requests")
        ax.set_title(sz.title, fontsize="medium")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(chosen.title)
    return fig


def heatmap(capture, chosen):
    fig, panels = _device_panels(chosen, 3.6)
    if not panels:
        return fig
    for ax, device in panels:
        hm = F.Heatmap(capture, device)
        counts = hm.counts.astype(float)
        counts[counts == 0] = float("nan")
        top = max(2, int(hm.counts.max()))
        norm = LogNorm(vmin=1, vmax=top) if top > LOG_COLOURS_ABOVE else Normalize(0, top)
        mesh = ax.pcolormesh(hm.buckets.edges, hm.sector_edges, counts, cmap="viridis",
                             norm=norm)
        fig.colorbar(mesh, ax=ax, label="requests", format=PLAIN)
        ax.set_ylabel("sector (512 B)")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: "%d" % v))
        ax.set_xlabel(_x_label(capture))
        ax.set_title("%s (buckets of %g s)" % (hm.title, hm.buckets.width), fontsize="medium")
    fig.suptitle(chosen.title)
    return fig


def ladder(capture, chosen):
    ladders = [ld for ld in (F.Ladder(p) for p in chosen.paths) if ld.steps][:MAX_PANELS]
    rows = max([len(ld.steps) for ld in ladders] + [1])
    fig = Figure(figsize=(max(7.0, 5.5 * len(ladders)), 1.2 + 0.32 * rows),
                 layout="constrained")
    if not ladders:
        return _nothing(fig, "no CM message in " + chosen.title)
    axes = fig.subplots(1, len(ladders), squeeze=False)[0]
    for ax, ld in zip(axes, ladders):
        for x in (0, 1):
            ax.axvline(x, color="#444444", linewidth=1.5)
        for i, step in enumerate(ld.steps):
            start, end = (0, 1) if step.from_client else (1, 0)
            colour = "#d62728" if step.alarm else "#1f77b4"
            ax.annotate("", xy=(end, -i - 0.25), xytext=(start, -i),
                        arrowprops={"arrowstyle": "->", "color": colour})
            ax.text(0.5, -i + 0.05, step.label, ha="center", va="bottom", fontsize=7)
            when = capture.clock.at(step.time) if step.time is not None else ""
            ax.text(1.04, -i, "frame %d %s" % (step.frame, when), va="center", fontsize=6.5)
        ax.set_xlim(-0.1, 1.6)
        ax.set_ylim(-rows, 0.8)
        ax.set_xticks([0, 1], [ld.client, ld.server], fontsize="small")
        ax.xaxis.tick_top()
        ax.set_yticks([])
        for side in ("left", "right", "bottom", "top"):
            ax.spines[side].set_visible(False)
        shown = "" if ld.total == len(ld.steps) else " (first %d of %d)" % (len(ld.steps),
                                                                              ld.total)
        ax.set_title(ld.title + shown, fontsize="medium", pad=18)
    fig.suptitle(chosen.title)
    return fig


def _busiest(paths, limit):
    """The ``limit`` paths with the most requests, in their own order."""
    chosen = set(id(p) for p in sorted(paths, key=lambda p: p.busy, reverse=True)[:limit])
    return [p for p in paths if id(p) in chosen]


def _nothing(fig, text):
    """A figure that says why it is empty."""
    fig.text(0.5, 0.5, text, ha="center", va="center", fontsize="large")
    return fig


#: what ``rtrs-dissect plot KIND`` draws
KINDS = {"timeline": timeline, "latency": latency, "inflight": inflight, "load": load,
         "sizes": sizes, "heatmap": heatmap, "ladder": ladder}


def draw(kind, capture, chosen):
    """The matplotlib Figure of ``kind`` for a view.Selection."""
    return KINDS[kind](capture, chosen)


def save(fig, path):
    """PNG or SVG by the file's extension; SVG with stable ids (reproducible files)."""
    fmt = str(path).rsplit(".", 1)[-1].lower()
    with matplotlib.rc_context({"svg.hashsalt": "rtrs-scapy", "svg.fonttype": "path"}):
        fig.savefig(path, format=fmt, dpi=100,
                    metadata={"Date": None} if fmt == "svg" else {"Software": None})
