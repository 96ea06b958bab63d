"""Scapy layers, bottom to top: ib (transport), cm, rtrs, rtrs_request, rnbd.

Importing this package binds all of them into Scapy.
"""

from . import ib, cm, rtrs, rtrs_request, rnbd  # noqa: F401
