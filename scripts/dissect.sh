#!/usr/bin/env bash
# Install rtrs-scapy (with the scale extra: export, sql, --dask) into .venv and run rtrs-dissect.
#
#   scripts/dissect.sh [rtrs-dissect arguments]   (default: the bundled real capture)
set -euo pipefail

REPO="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
(cd "$REPO" && . scripts/setup-venv.sh && ensure_venv "[scale]") >&2
if [ $# -eq 0 ]; then
    set -- "$REPO/pcaps/real/basic_inval.pcap"
fi

# --- man pages: rtrs-dissect(1) and one page per command, generated from the click
# commands (docs/cli.md#man-pages); as root also where `man` finds them in any shell
(
    cd "$REPO" && . scripts/setup-venv.sh
    command -v man >/dev/null 2>&1 || apt_install man-db
    rm -f .venv/share/man/man1/rtrs-dissect*.1
    .venv/bin/python -m rtrs_scapy.cli.man .venv/share/man/man1 >/dev/null
    if [ "$(id -u)" -eq 0 ]; then
        install -d /usr/local/share/man/man1
        rm -f /usr/local/share/man/man1/rtrs-dissect*.1
        install -m 644 .venv/share/man/man1/rtrs-dissect*.1 /usr/local/share/man/man1/
    fi
) >&2
# --- end of man pages
exec "$REPO/.venv/bin/rtrs-dissect" "$@"
