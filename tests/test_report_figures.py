"""Figures that can be read: one title per panel, legends that name the session, a
path's or session's figure on its own time axis, unit prefixes that fit the values,
legends clear of the axis titles.  Checked on the figures' objects (matplotlib's axes,
Plotly's figure JSON as the report embeds it), never on pixels.

The errors capture (PROVENANCE.md): three sessions between the same two hosts, so one
path label (10.77.0.2 → 10.77.0.1) three times; laberr lives 0.06 s of a 58 s capture."""

import functools

import numpy as np
import pytest

from conftest import real_pcap
from rtrs_scapy.analysis import analyze
from rtrs_scapy.report import figures, interactive, plots
from rtrs_scapy.report.view import CaptureView, Selection

ERRORS = real_pcap("errors")


@functools.lru_cache(maxsize=None)
def view_of(pcap):
    batches = []
    result = analyze(str(pcap), keep_messages=True, io_sink=batches.append)
    return CaptureView(result, batches)


@pytest.fixture(scope="module")
def view():
    return view_of(ERRORS)


def session_span(view, name):
    """First and last time (s since the capture start) of a session's events and
    requests, from the summary JSON and the IO rows."""
    (session,) = [s.summary for s in view.sessions if s.summary["label"] == name]
    t0 = view.summary["capture"]["first_ts"]
    times = [e["time"] - t0 for p in session["paths"] for e in p["events"]]
    return min(times), max(times)


def test_ladder_panels_each_have_their_own_title(view):
    fig = plots.draw("ladder", view, Selection(view))
    titles = [ax.get_title() for ax in fig.axes]
    labels = [s.summary["label"] for s in view.sessions]
    assert len(titles) == len(labels) == 3 and len(set(titles)) == 3
    for title, label in zip(titles, labels):
        assert "session %s," % label in title and "10.77.0.2 → 10.77.0.1" in title
    html = interactive.ladder(view, figures.Ladder(view.paths[1])).to_plotly_json()
    assert "session laberr" in html["layout"]["title"]["text"]


def test_legends_name_the_session_when_paths_share_their_ends(view):
    fig = plots.draw("inflight", view, Selection(view))
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    lines = [t for t in legend if "queue depth" not in t]
    assert len(lines) == len(set(lines)) == 2      # labrej sent no request
    assert {t.split(":")[0] for t in lines} == {"laberr", "lab1"}
    load = figures.Load(view.paths, "load")
    assert {bar[0].split(":")[0] for bar in load.bars} == {"laberr", "lab1"}
    lat = figures.latency_by_path(view.paths, "latency")
    assert sorted(g[0] for g in lat.groups) == \
        ["lab1: 10.77.0.2 → 10.77.0.1", "laberr: 10.77.0.2 → 10.77.0.1"]
    # one session: the path alone
    alone = figures.InFlight(view, view.sessions[2].paths, "t")
    assert [p[0] for p in alone.paths] == ["10.77.0.2 → 10.77.0.1"]


@pytest.mark.parametrize("kind", ["timeline", "inflight"])
def test_a_sessions_figure_spans_the_session_not_the_capture(view, kind):
    first, last = session_span(view, "laberr")
    assert last - first < 0.1 < view.duration / 100
    fig = plots.draw(kind, view, Selection(view, session="laberr"))
    low, high = fig.axes[0].get_xlim()
    assert low <= first and high >= last
    assert (high - low) < 2 * (last - first)
    session = view.sessions[1]
    tl = figures.Timeline(view, session.rows, session.paths, "t")
    plotted = interactive.timeline(view, session.rows, session.paths, "t").to_plotly_json()
    ranges = [a["range"] for k, a in plotted["layout"].items()
              if k.startswith("xaxis") and a.get("range")]
    assert ranges == [[tl.start, tl.end]] and tl.start <= first and tl.end >= last
    # the requests per second still add up to the session's requests
    count = sum(p.summary["io"][op]["count"] for p in session.paths for op in ("read", "write"))
    assert round(sum(v.sum() for v, _ in tl.rates.values()) * tl.buckets.width) == count


def test_whole_capture_figures_keep_the_capture_axis(view):
    fig = plots.draw("timeline", view, Selection(view))
    assert fig.axes[0].get_xlim() == (0.0, pytest.approx(view.duration))


def test_throughput_unit_fits_the_values(view):
    """A few KiB a second are KiB/s with a peak of 1 or more, not MiB/s of '300µ'."""
    tl = figures.Timeline(view, view.rows, view.paths, "t")
    unit, factor = tl.byte_unit
    peak = max(bps.max() for _, bps in tl.rates.values())
    assert 1 <= peak / factor < 1024 and factor in (1, 1 << 10, 1 << 20, 1 << 30)
    fig = plots.draw("timeline", view, Selection(view))
    assert fig.axes[1].get_ylabel() == "%s/s" % unit
    plotted = interactive.timeline(view, view.rows, view.paths, "t")
    traces = [t for t in plotted.data if t.get("name", "").endswith(" %s/s" % unit)]
    assert traces and max(np.nanmax(np.asarray(t["y"], float)) for t in traces) >= 1
    assert plotted.layout["yaxis2"]["title"]["text"] == "%s/s" % unit
    load = figures.Load(view.paths, "t")
    assert 1 <= max(ops[op][1] for _, _, ops in load.bars for op in ops) / load.byte_unit[1]


def test_report_legends_stand_clear_of_the_axis_titles(view):
    """Right of the plotting area (x ≥ 1): never on the x axis title below it."""
    session = view.sessions[2]
    shown = [interactive.timeline(view, session.rows, session.paths, "t"),
             interactive.inflight(view, figures.InFlight(view, session.paths, "t")),
             interactive.latency(view, figures.latency_by_path(view.paths, "t")),
             interactive.load(view, figures.Load(view.paths, "t"))]
    for fig in shown:
        legend = fig.to_plotly_json()["layout"]["legend"]
        assert legend["x"] >= 1 and legend.get("orientation", "v") == "v"
