"""``rtrs-dissect plot`` and ``report`` as files: images of every kind, PNG and
SVG, of a real size, a PNG with every colour its figure asks for; the HTML report
one file that names nothing outside itself; usage errors exit 2."""

import functools
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import QuadMesh
from matplotlib.colors import to_hex
from PIL import Image

from cli_run import run
from conftest import PROJECT_PCAPS, real_pcap
from rtrs_scapy.analysis import analyze
from rtrs_scapy.report import plots
from rtrs_scapy.report.html import render
from rtrs_scapy.report.view import LADDER_MESSAGES, CaptureView, Selection

CAPTURES = [real_pcap("errors"), real_pcap("multipath"), real_pcap("load"),
            PROJECT_PCAPS / "failover_inflight.pcap", PROJECT_PCAPS / "reconnect_timeout.pcap"]
SVG = "{http://www.w3.org/2000/svg}"
MAX_REPORT_BYTES = 10 * 1024 * 1024


@functools.lru_cache(maxsize=None)
def view_of(pcap):
    batches = []
    result = analyze(str(pcap), keep_messages=True, io_sink=batches.append)
    return CaptureView(result, batches)


def cli(*args):
    """rtrs-dissect as a user runs it (its own process: exit codes, stdout, stderr); the
    other tests run it in this process (cli_run.run)."""
    return subprocess.run([str(Path(sys.executable).with_name("rtrs-dissect")),
                           *map(str, args)], capture_output=True, text=True)


def png_facts(path):
    """(width, height, the set of its colours as #rrggbb) of a PNG."""
    with Image.open(path) as img:
        assert img.format == "PNG"
        colours = img.convert("RGB").getcolors(maxcolors=1 << 24)
        return img.width, img.height, {"#%02x%02x%02x" % rgb for _n, rgb in colours}


def drawn_colours(fig):
    """The colours a matplotlib figure asks to draw as #rrggbb: each visible line with
    points, each opaque bar or patch, each opaque cell of a mesh (a colour bar's scale
    left out)."""
    wanted = set()
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":
            continue
        wanted |= {to_hex(line.get_color()) for line in ax.get_lines()
                   if line.get_visible() and len(line.get_xdata())}
        wanted |= {to_hex(patch.get_facecolor(), keep_alpha=False) for patch in ax.patches
                   if patch.get_visible() and patch.get_alpha() in (None, 1)}
        for mesh in ax.collections:
            if isinstance(mesh, QuadMesh):
                rgba = np.asarray(mesh.to_rgba(mesh.get_array().ravel())).reshape(-1, 4)
                wanted |= {to_hex(c, keep_alpha=False) for c in rgba if c[3] == 1}
    return wanted


def svg_facts(path):
    """(width in pt, height in pt, drawn paths) of an SVG; it links nothing outside
    (its own elements and inline images only)."""
    root = ET.parse(path).getroot()
    assert root.tag == SVG + "svg"
    for element in root.iter():
        for name, value in element.attrib.items():
            if name.endswith("href"):
                assert value.startswith(("#", "data:")), value
    size = [float(root.attrib[k].rstrip("pt")) for k in ("width", "height")]
    return size[0], size[1], sum(1 for _ in root.iter(SVG + "path"))


@pytest.mark.parametrize("kind", sorted(plots.KINDS))
@pytest.mark.parametrize("pcap", CAPTURES, ids=lambda p: p.name)
def test_every_kind_is_a_png_with_something_drawn(pcap, kind, tmp_path):
    """Every colour the figure asks for is among the image's pixels."""
    view = view_of(pcap)
    out = tmp_path / ("%s.png" % kind)
    fig = plots.draw(kind, view, Selection(view))
    wanted = drawn_colours(fig)
    plots.save(fig, out)
    width, height, colours = png_facts(out)
    assert 600 <= width <= 4000 and 250 <= height <= 8000
    assert wanted and wanted - colours == set()


@pytest.mark.parametrize("kind", sorted(plots.KINDS))
def test_every_kind_is_an_svg_with_something_drawn(kind, tmp_path):
    view = view_of(real_pcap("errors"))
    out = tmp_path / ("%s.svg" % kind)
    plots.save(plots.draw(kind, view, Selection(view, session="lab1")), out)
    width, height, paths = svg_facts(out)
    assert 400 <= width <= 3000 and 200 <= height <= 6000
    assert paths >= 20


def test_svg_files_are_reproducible(tmp_path):
    view = view_of(real_pcap("multipath"))
    for name in ("a.svg", "b.svg"):
        plots.save(plots.draw("timeline", view, Selection(view)), tmp_path / name)
    assert (tmp_path / "a.svg").read_bytes() == (tmp_path / "b.svg").read_bytes()


def test_plot_command_writes_png_and_svg(tmp_path):
    for name in ("timeline.png", "ladder.svg"):
        done = cli("plot", name.split(".")[0], real_pcap("errors"), "-o", tmp_path / name, "-q")
        assert done.returncode == 0, done.stderr
        assert done.stdout == ""
    view = view_of(real_pcap("errors"))
    wanted = drawn_colours(plots.draw("timeline", view, Selection(view)))
    assert wanted and wanted - png_facts(tmp_path / "timeline.png")[2] == set()
    assert svg_facts(tmp_path / "ladder.svg")[2] >= 20


def test_several_files_are_one_capture(tmp_path):
    """errors and multipath read as one: both sessions named lab1 (PROVENANCE.md) are
    selected by the name, the multipath session's second path by its client; each
    ladder drawn in the colours of errors.pcap's own ladder."""
    view = view_of(real_pcap("errors"))
    wanted = drawn_colours(plots.draw("ladder", view, Selection(view, session="lab1")))
    for option in (("--session", "lab1"), ("--path", "10.77.1.2")):
        out = tmp_path / ("%s.png" % option[0].strip("-"))
        done = run("plot", "ladder", real_pcap("errors"), real_pcap("multipath"), *option,
                   "-o", out, "-q")
        assert done.exit_code == 0, done.stderr
        assert wanted and wanted - png_facts(out)[2] == set()


@pytest.mark.parametrize("args,message", [
    (("plot", "nosuch", "{pcap}", "-o", "x.png"), "KIND"),
    (("plot", "load", "{pcap}", "-o", "x.jpg"), ".png or .svg"),
    (("plot", "load", "{pcap}", "-o", "x.png", "--session", "nosuch"),
     "its sessions: 6c9c36cf: paths_uuid 6c9c36cf-"),
    (("plot", "sizes", "{pcap}", "-o", "x.png", "--device", "7"),
     "0 /dev/loop0 in lab1, 1 /dev/ram1 in lab1"),
    (("report", "{pcap}"), "-o"),
])
def test_usage_errors_exit_2(args, message, tmp_path):
    """Session names and device names as the real capture's test bed set them
    (PROVENANCE.md: labrej, laberr and lab1; /dev/loop0 and /dev/ram1)."""
    done = run(*[a.replace("{pcap}", str(real_pcap("errors"))) for a in args])
    assert done.exit_code == 2
    assert message in done.stderr
    assert not list(tmp_path.iterdir())


def test_an_unreadable_capture_exits_1(tmp_path):
    missing = tmp_path / "missing.pcap"
    done = run("report", missing, "-o", tmp_path / "r.html")
    assert done.exit_code == 1
    assert "missing.pcap" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("pcap", CAPTURES, ids=lambda p: p.name)
def test_report_is_one_file_that_names_nothing_outside(pcap):
    page = render(view_of(pcap))
    assert len(page.encode()) < MAX_REPORT_BYTES
    assert not re.search(r"<(script|img|iframe|link|source|video|audio)\b[^>]*\s(src|href)=",
                         page, re.IGNORECASE)
    assert not re.search(r"@import|url\(\s*['\"]?(https?:)?//", page)
    assert page.count("<script") == 3 + page.count('class="figure-spec"')


def test_report_and_plot_need_no_scapy():
    """Like the summary, the report reads the capture through the generated wire.py:
    rtrs-dissect report and plot start without Scapy."""
    code = ("import sys, rtrs_scapy.cli.report, rtrs_scapy.cli.plot, rtrs_scapy.report.html, "
            "rtrs_scapy.report.plots; print(sorted(m for m in sys.modules "
            "if m.split('.')[0] == 'scapy'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_the_report_keeps_the_ladder_records_of_a_full_analysis_and_no_other(capture):
    """The report keeps only what its ladders draw (a record per IO costs ~1 KiB)."""
    full = analyze(capture).messages
    kept = analyze(capture, keep_messages=LADDER_MESSAGES).messages
    assert kept == [r for r in full if r["msg"] in LADDER_MESSAGES]
    assert 0 < len(kept) < len(full)


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_a_paths_ladder_is_its_records_made_when_it_is_drawn(capture, monkeypatch):
    """The view keeps where each path's ladder records are, not the records (about
    11 KB a session of a capture of thousands of short ones): a ladder's records are
    made when it is drawn, and they are the path's ladder messages in frame order."""
    from rtrs_scapy.analysis.records import Records
    result = analyze(capture, keep_messages=LADDER_MESSAGES)
    every = list(result.messages)
    made = []
    record = Records.record
    monkeypatch.setattr(Records, "record", lambda self, i: made.append(i) or record(self, i))
    view = CaptureView(result, [])
    made.clear()
    assert view.paths
    drawn = 0
    for path in view.paths:
        s = path.summary
        mine = [r for r in every if (r["sess_uuid"], r["client"], r["server"]) ==
                (s["sess_uuid"], s["client"], s["server"])]
        assert mine
        assert view.records_of(path) == mine
        drawn += len(mine)
    assert len(made) == drawn


def test_the_sessions_summaries_are_read_back_from_disk_the_same(monkeypatch):
    """A capture of thousands of short sessions: the view keeps each session's table
    row, its summary goes to disk beyond the newest and is read back when a section
    is drawn.  With one summary a file (errors.pcap's three sessions: the first on
    disk) every session's summary is the analysis' and the HTML the same."""
    from rtrs_scapy.report import view as view_module
    pcap = real_pcap("errors")
    whole = analyze(pcap, keep_messages=False).summary
    html = render(view_of(pcap))
    monkeypatch.setattr(view_module, "SUMMARIES_PER_FILE", 1)
    batches = []
    spilled = CaptureView(analyze(str(pcap), keep_messages=True, io_sink=batches.append),
                          batches)
    assert spilled._summaries.base == 1 and len(spilled._summaries.held) == 2
    assert [s.summary for s in spilled.sessions] == whole["sessions"]
    assert spilled.summary["sessions"] == []
    assert render(spilled) == html


def test_the_analysis_is_freed_before_the_report_is_drawn():
    """What the report draws from keeps nothing of the analyzer (its state is most of
    the memory of a capture of many sessions): the message records the ladders read
    let go of it when the capture ends."""
    import weakref
    from rtrs_scapy.analysis.analyzer import Analyzer
    from rtrs_scapy.cli.report import capture_view
    made = []
    init = Analyzer.__init__

    def tracked(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(weakref.ref(self))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Analyzer, "__init__", tracked)
        view = capture_view([str(real_pcap("errors"))], True, None)
    assert len(made) == 1 and made[0]() is None
    assert len(view.sessions) == 3 and view.records_of(view.paths[0])
