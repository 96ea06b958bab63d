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

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
else
    SUDO=()
fi

apt_updated=0
apt_install() {
    if [ "$(id -u)" -ne 0 ] && [ ${#SUDO[@]} -eq 0 ]; then
        echo "test.sh: need to install $* but not root and sudo is missing" >&2
        exit 1
    fi
    if [ "$apt_updated" -eq 0 ]; then
        ${SUDO[@]+"${SUDO[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get update -q
        apt_updated=1
    fi
    ${SUDO[@]+"${SUDO[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"
}

# 1. tshark (used by the dissector tests)
if ! command -v tshark >/dev/null 2>&1; then
    echo "test.sh: installing tshark" >&2
    if command -v debconf-set-selections >/dev/null 2>&1; then
        echo "wireshark-common wireshark-common/install-setuid boolean false" \
            | ${SUDO[@]+"${SUDO[@]}"} debconf-set-selections
    fi
    apt_install tshark
fi

# 2. virtual environment in the repository root
if [ ! -x .venv/bin/python ]; then
    command -v python3 >/dev/null 2>&1 || apt_install python3
    if ! python3 -m venv .venv; then
        echo "test.sh: python3 -m venv failed, installing python3-venv" >&2
        rm -rf .venv
        apt_install python3-venv
        python3 -m venv .venv
    fi
fi

# 3. the package and its test dependencies
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'

# 4. the tests
exec .venv/bin/python -m pytest -q "$@"
