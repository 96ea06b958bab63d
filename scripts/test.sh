#!/usr/bin/env bash
# The one test command of the project.
#
#   scripts/test.sh [pytest args...]
#
# Works on a fresh Debian 12 machine (as root, or as a user with sudo) and from
# any directory: installs tshark (with dumpcap), lua5.2 (luac5.2), chromium with
# chromium-driver, tmux, man-db, prometheus and python3-venv when missing, creates .venv in the
# repository root, installs the package with its test extra (which takes the scale one), runs
# pytest.  The suite refuses skipped tests (tests/no_skips.py): whatever a test
# needs is installed here.
set -euo pipefail

cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
. scripts/setup-venv.sh

# tshark: the reference dissector of the differential tests, and the plugin's host
if ! command -v tshark >/dev/null 2>&1; then
    echo "test.sh: installing tshark" >&2
    if command -v debconf-set-selections >/dev/null 2>&1; then
        echo "wireshark-common wireshark-common/install-setuid boolean false" \
            | ${SUDO[@]+"${SUDO[@]}"} debconf-set-selections
    fi
    apt_install tshark
fi

# luac5.2: the generated plugin is compiled and checked for globals (Lua 5.2, as in tshark 4.0)
if ! command -v luac5.2 >/dev/null 2>&1; then
    echo "test.sh: installing lua5.2" >&2
    apt_install lua5.2
fi

# chromium + chromedriver: the HTML report is tested in a real (headless) browser
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    echo "test.sh: installing chromium and chromium-driver" >&2
    apt_install chromium chromium-driver
fi

# tmux: the terminal view of `rtrs-dissect watch` is tested in a tmux pane
if ! command -v tmux >/dev/null 2>&1; then
    echo "test.sh: installing tmux" >&2
    apt_install tmux
fi

# man-db: the generated man pages are rendered with man -l (tests/test_docs_pages.py)
if ! command -v man >/dev/null 2>&1; then
    echo "test.sh: installing man-db" >&2
    apt_install man-db
fi

# prometheus: PromQL over `watch --prometheus` is held to the summary
# (tests/test_watch_promql.py)
if ! command -v prometheus >/dev/null 2>&1; then
    echo "test.sh: installing prometheus" >&2
    apt_install prometheus
fi

ensure_venv "[test]"
exec .venv/bin/python -m pytest -q "$@"
