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
exec "$REPO/.venv/bin/rtrs-dissect" "$@"
