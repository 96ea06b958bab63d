"""The HTML report in a real browser: Debian's headless Chromium (with
chromium-driver, both installed by scripts/test.sh) opens what ``rtrs-dissect
report`` wrote, from file://, with the network services of the browser off.

For the real captures with reconnects, errors and three sessions, multipath and
load, the crafted failover and reconnect-timeout fixtures, and two captures read
as one: no console
message, no request but the file itself, every figure drawn (at least six), the
numbers on the page equal to ``rtrs-dissect summary --format json`` of the same
capture (another process), each session by name and each path's read and write
counts, frame links that say how to reach the frame in Wireshark, and each figure's
screenshot with its background and every colour its traces ask for."""

import io
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from PIL import Image, ImageColor
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from cli_run import run
from conftest import PROJECT_PCAPS, real_pcap
from watch_util import summary as watch_summary

#: each a capture: one file, or several read as one (in time order)
CAPTURES = [(real_pcap("errors"),), (real_pcap("multipath"),), (real_pcap("load"),),
            (PROJECT_PCAPS / "failover_inflight.pcap",),
            (PROJECT_PCAPS / "reconnect_timeout.pcap",),
            (real_pcap("errors"), real_pcap("multipath"))]
SINGLE = [files for files in CAPTURES if len(files) == 1]
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--window-size=1400,1000")
MIN_PLOTS = 6
#: generous: the suite shares two cores with whatever else runs
RENDER_TIMEOUT_S = 300


def rtrs_dissect(*args):
    done = subprocess.run([str(Path(sys.executable).with_name("rtrs-dissect")),
                           *map(str, args)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def browser():
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and driver_path, "scripts/test.sh installs chromium and chromium-driver"
    profile = tempfile.mkdtemp(prefix="rtrs-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS + ("--user-data-dir=" + profile,):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(RENDER_TIMEOUT_S)
    driver.set_script_timeout(RENDER_TIMEOUT_S)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


class Loaded:
    """A report as Chromium showed it."""

    def __init__(self, driver, html, summary):
        self.driver, self.html, self.summary = driver, html, summary
        driver.get("about:blank")
        driver.get_log("browser")
        driver.get_log("performance")
        self.url = html.as_uri()
        start = time.monotonic()
        driver.get(self.url)
        while not driver.execute_script("return document.body.dataset.plotsDone"):
            assert time.monotonic() - start < RENDER_TIMEOUT_S, "figures not drawn in time"
            time.sleep(0.05)
        self.seconds = time.monotonic() - start
        self.console = driver.get_log("browser")
        self.requests = [m["params"]["request"]["url"] for m in (
            json.loads(entry["message"])["message"] for entry in driver.get_log("performance"))
            if m["method"] == "Network.requestWillBeSent"]


def capture_id(files):
    return "+".join(p.name for p in files)


@pytest.fixture(scope="module", params=CAPTURES, ids=capture_id)
def loaded(request, browser, tmp_path_factory):
    files = request.param
    html = tmp_path_factory.mktemp("report") / "report.html"
    # the report written in this process (in its own: test_stdin_gzip.py); the summary
    # it is held to comes from another
    done = run("report", *files, "-o", html, "-q")
    assert done.exit_code == 0, done.output
    # one file: the summary that the watch tests read of it too, run once per test run
    summary = watch_summary(files[0]) if len(files) == 1 else \
        json.loads(rtrs_dissect("summary", "--format", "json", "-q", *files))
    return Loaded(browser, html, summary)


def test_no_console_message_and_no_request_but_the_file(loaded):
    assert loaded.console == []
    # data: URLs are the page's own bytes (Plotly's inline images), not the network
    assert [u for u in loaded.requests if not u.startswith("data:")] == [loaded.url]


def test_every_figure_is_drawn(loaded):
    figures = loaded.driver.execute_script("""
        return [...document.querySelectorAll('.plot')].map(div => {
            const box = div.getBoundingClientRect();
            const svg = div.querySelector('svg.main-svg');
            const drawn = [...div.querySelectorAll('path')].filter(
                p => (p.getAttribute('d') || '').length > 4).length
                + div.querySelectorAll('.textpoint, .heatmaplayer image').length;
            return [div.id, !!svg, box.width, box.height, drawn];
        });""")
    specs = loaded.driver.execute_script(
        "return document.querySelectorAll('script.figure-spec').length")
    assert len(figures) == specs >= MIN_PLOTS
    assert loaded.driver.execute_script("return document.body.dataset.plotsRendered") == \
        str(specs)
    for name, svg, width, height, drawn in figures:
        assert svg and width > 300 and height > 200, name
        assert drawn >= 5, name


def pointer_value(summary, pointer):
    value = summary
    for part in pointer.split("/"):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def test_numbers_shown_are_the_summarys(loaded):
    shown = loaded.driver.execute_script(
        "return [...document.querySelectorAll('[data-summary]')]"
        ".map(e => [e.dataset.summary, e.textContent])")
    assert len(shown) > 10
    for pointer, text in shown:
        want = pointer_value(loaded.summary, pointer)
        if want is None:
            assert text == "–", pointer
        elif isinstance(want, str):
            assert text == want, pointer
        else:
            assert float(text.replace(",", "")) == pytest.approx(want, abs=0.05), pointer
    pointers = {p for p, _ in shown}
    for i, session in enumerate(loaded.summary["sessions"]):
        if session["sessname"]:
            assert "sessions/%d/sessname" % i in pointers
        for j, _path in enumerate(session["paths"]):
            for op in ("read", "write"):
                assert "sessions/%d/paths/%d/io/%s/count" % (i, j, op) in pointers


def test_a_frame_link_says_how_to_reach_it_in_wireshark(loaded):
    driver = loaded.driver
    link = driver.find_elements(By.CSS_SELECTOR, "a.frame")[0]
    frame = link.get_attribute("data-frame")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)
    link.click()
    bar = driver.find_element(By.ID, "frame-bar")
    assert bar.is_displayed()
    command = driver.find_element(By.ID, "frame-command").get_attribute("value")
    assert command.endswith(" -g %s" % frame)
    assert all(name in command for name in loaded.summary["capture"]["files"])
    assert driver.find_element(By.ID, "frame-filter").get_attribute("value") == \
        "frame.number == %s" % frame
    driver.find_element(By.ID, "frame-close").click()
    assert not bar.is_displayed()


@pytest.mark.parametrize("loaded", SINGLE, indirect=True, ids=capture_id)
def test_each_figure_shows_its_traces_colours(loaded):
    """A screenshot of each figure as Chromium drew it: the exact colour of its
    background and of every line, marker and bar its data asks for (Plotly's
    resolved trace colours) among its pixels.  Each single capture: two read as one
    draw the figures of both (their 31 screenshots, 13 s, would show no colour the
    two captures' own do not)."""
    driver = loaded.driver
    figures = driver.execute_script("""
        return [...document.querySelectorAll('.plot')].map(div => [div.id,
            div._fullLayout.paper_bgcolor,
            div._fullData.filter(t => t.visible === true && t.type !== 'heatmap').flatMap(
                t => [t.line && t.line.color, t.marker && t.marker.color])
                .filter(c => typeof c === 'string')]);""")
    assert figures
    for name, background, colours in figures:
        element = driver.find_element(By.ID, name)
        driver.execute_script("arguments[0].scrollIntoView()", element)
        with Image.open(io.BytesIO(element.screenshot_as_png)) as shot:
            shown = {rgb: n for n, rgb in shot.convert("RGB").getcolors(maxcolors=1 << 24)}
        wanted = {background, *colours}
        assert {c for c in wanted if ImageColor.getrgb(c) not in shown} == set(), name


def test_drawn_in_seconds_from_a_small_file(loaded):
    """The figures are binned series: even load.pcap.gz (135,237 frames) is drawn in
    a few seconds (2 s on an idle machine; the bound leaves room for a busy one)
    from a file well under 10 MB."""
    assert loaded.seconds < 30
    assert loaded.html.stat().st_size < 10 * 1024 * 1024
