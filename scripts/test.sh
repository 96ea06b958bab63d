#!/usr/bin/env bash
# The one test command of the project.
#
#   scripts/test.sh [pytest args...]
#
# Works on a fresh Debian 12 machine (as root, or as a user with sudo) and from
# any directory: installs tshark and python3-venv when missing, creates .venv in
# the repository root, installs the package with its test extras, runs pytest.
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

# lua5.2: the plugin's queue depth rule runs under plain Lua in tests/test_lua_qdepth.py
if ! command -v lua5.2 >/dev/null 2>&1; then
    apt_install lua5.2
fi

ensure_venv "[test]"
exec .venv/bin/python -m pytest -q "$@"
