"""Scapy layers, bottom to top: ib (transport), cm, rtrs, rtrs_request, rnbd."""
