"""Crafting RTRS/RNBD captures with the Scapy layers: a session model that
emits what two Linux kernels (rtrs/rnbd over rdma_rxe) put on the wire, named
scenarios, and writers for pcap, pcapng and gzip.

    from rtrs_scapy.craft import craft_scenario, write_capture
    packets, truth = craft_scenario("basic", seed=0)
    write_capture("basic.pcapng", packets)

``truth`` is what the crafter put in (requests and bytes per path with the
kernel's stats accounting, errors by errno, rejects, reconnects, paths); it is
JSON-serialisable and is stored next to each corpus file as ``<file>.truth.json``.
"""

from .capture_files import read_capture, write_capture, write_truth  # noqa: F401
from .encap import Encap  # noqa: F401
from .session import SessionCrafter  # noqa: F401
from .scenarios import SCENARIOS, craft_scenario, scenario_names  # noqa: F401
