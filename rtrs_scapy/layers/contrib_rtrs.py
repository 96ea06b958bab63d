# SPDX-License-Identifier: GPL-2.0-or-later
# scapy.contrib.description = Linux RTRS/RNBD over InfiniBand and RoCE (rtrs-scapy)
# scapy.contrib.status = loads
"""Entry point for ``load_contrib("rtrs")`` once the rtrs-scapy extension is loaded."""

from rtrs_scapy import *  # noqa: F401,F403
