"""Bounds on the plugin's state, exported into wireshark/rtrs.lua.

A capture nobody vetted may open a million QPs or CM transactions; every table
of runtime.lua that grows with the file holds at most this many entries.  When
a table is full the entries idle for the longest are evicted (two generations:
the older half goes), counted, and shown on the frame that caused it.  Real
RTRS traffic stays far below: a session has paths x (CPUs + 1) connections of
two QPs, a few messages in reassembly and at most queue_depth requests in flight.
"""

#: table -> (Lua key, entries, what it holds)
LIMITS = (
    ("streams", 16384, "QP streams (PSN state, connection learnt from CM or content)"),
    ("messages", 1024, "multi-packet messages in reassembly"),
    ("message_bytes", 4194304, "bytes of one message in reassembly (counted; a request keeps its tail)"),
    ("psns", 1024, "recent PSNs per QP stream, to link a retransmission to its original"),
    ("cm", 4096, "CM transactions and communication ids"),
    ("domains", 1024, "sessions and paths (pairing domains)"),
    ("reads", 4096, "READ requests per domain awaiting their data or invalidation"),
)


def limit(name):
    """The bound of one table, by its Lua key."""
    for key, entries, _what in LIMITS:
        if key == name:
            return entries
    raise KeyError(name)
