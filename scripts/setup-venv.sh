# Sourced by scripts/test.sh and scripts/dissect.sh: apt helpers and the .venv.
# Works on a fresh Debian 12 machine (root, or a user with sudo).

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
        echo "$0: need to install $* but not root and sudo is missing" >&2
        exit 1
    fi
    if [ "$apt_updated" -eq 0 ]; then
        ${SUDO[@]+"${SUDO[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get update -q
        apt_updated=1
    fi
    ${SUDO[@]+"${SUDO[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"
}

# ensure_venv EXTRAS: .venv in the repository root with the package installed
ensure_venv() {
    if [ ! -x .venv/bin/python ]; then
        command -v python3 >/dev/null 2>&1 || apt_install python3
        if ! python3 -m venv .venv; then
            echo "$0: python3 -m venv failed, installing python3-venv" >&2
            rm -rf .venv
            apt_install python3-venv
            python3 -m venv .venv
        fi
    fi
    # pip resolves every requirement again even when all are there (about 20 s): it runs
    # when setup.cfg or pyproject.toml changed since this venv was installed with these
    # extras, or when a distribution they ask for is missing (tests/installed.py)
    local stamp extras
    stamp=".venv/.installed$1-$(cat setup.cfg pyproject.toml | sha256sum | cut -c1-16)"
    extras="${1#[}"
    extras="${extras%]}"
    if [ ! -e "$stamp" ] || ! .venv/bin/python tests/installed.py "$extras" 2>/dev/null; then
        .venv/bin/python -m pip install -q --disable-pip-version-check -e ".$1"
        touch "$stamp"
    fi
    # the engine's machine code, compiled here once rather than on the first capture
    # (docs/install.md): about 45 s the first time, a second once it is there; its native
    # module is built with a C and C++ compiler against Python's headers
    if ! command -v g++ >/dev/null 2>&1 || ! .venv/bin/python -c \
            'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
        apt_install g++ python3-dev
    fi
    .venv/bin/rtrs-dissect compile >&2
    # the package's bytecode, written even where PYTHONDONTWRITEBYTECODE is set: the
    # suite starts the CLI hundreds of times, each would compile ~60 modules (0.15 s)
    .venv/bin/python -m compileall -q rtrs_scapy >/dev/null
}
