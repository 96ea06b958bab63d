"""Wireshark support: a Lua dissector generated from the Scapy layers.

``generate.generate()`` turns the layout IR of every RTRS/RNBD layer into Lua
(ProtoFields, value_strings, sizes, one dissect function per message) and
inlines the hand-written rule files of ``lua/`` (heuristics, per-QP state,
reassembly, request/response links; one file per rule).  ``install.install()`` writes the result
into the personal Wireshark plugin folder.
"""
