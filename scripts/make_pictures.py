"""Make the pictures of docs/plot.md and docs/report.md (docs/img/*.png) from the
real captures in pcaps/real/: ``rtrs-dissect plot`` for the figures, headless
Chromium for a view of the HTML report that ``rtrs-dissect report`` writes.

    .venv/bin/python scripts/make_pictures.py

Needs the package with its test extras and Debian's chromium and chromium-driver
(scripts/test.sh installs all of them).
"""

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "img"
REAL = REPO / "pcaps" / "real"
#: picture -> rtrs-dissect plot arguments (captures relative to pcaps/real)
PLOTS = {
    "timeline-errors.png": ["timeline", "errors.pcap", "--session", "lab1"],
    "latency-multipath.png": ["latency", "multipath.pcap"],
    "inflight-load.png": ["inflight", "load.pcap.gz"],
    "heatmap-load.png": ["heatmap", "load.pcap.gz"],
    "ladder-multipath.png": ["ladder", "multipath.pcap"],
}
#: picture -> (capture, section of the report in view)
REPORTS = {"report-errors.png": ("errors.pcap", "session-2")}
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--hide-scrollbars",
                  "--window-size=1400,1000")


def rtrs_dissect(*args):
    subprocess.run([str(Path(sys.executable).with_name("rtrs-dissect")), *map(str, args),
                    "-q"], check=True)


def plot(name, kind, capture, *options):
    rtrs_dissect("plot", kind, REAL / capture, *options, "-o", OUT / name)


def report_view(name, capture, anchor, work):
    """A browser window's view of the report, scrolled to ``anchor``, every figure drawn."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    html = Path(work) / "report.html"
    rtrs_dissect("report", REAL / capture, "-o", html)
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in CHROMIUM_FLAGS + ("--user-data-dir=%s/profile" % work,):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        driver.get(html.as_uri())
        deadline = time.monotonic() + 60
        while not driver.execute_script("return document.body.dataset.plotsDone"):
            if time.monotonic() > deadline:
                raise SystemExit("the report's figures were not drawn in 60 s")
            time.sleep(0.1)
        driver.execute_script("document.getElementById(arguments[0]).scrollIntoView()", anchor)
        driver.save_screenshot(str(OUT / name))
    finally:
        driver.quit()


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for name, args in PLOTS.items():
        plot(name, *args)
        print("wrote", OUT / name)
    for name, (capture, anchor) in REPORTS.items():
        with tempfile.TemporaryDirectory(prefix="rtrs-pictures-") as work:
            report_view(name, capture, anchor, work)
        print("wrote", OUT / name)


if __name__ == "__main__":
    main()
