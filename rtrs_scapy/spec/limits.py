"""Bounds on the state a capture can make the analyzer and the plugin keep.

A capture nobody vetted may open a million QPs, CM transactions or sessions;
every table that grows with the file holds at most this many entries.  When a
table is full the entries idle for the longest are evicted (or, where an entry
is what the capture proves, new ones are refused), counted, and reported: the
analyzer's ``capture.limits`` block, the plugin's ``rtrs.limit.*`` fields on the
frame that caused it.  Real RTRS traffic stays far below: a session has
paths × (CPUs + 1) connections of two QPs, a few messages in reassembly and at
most queue_depth requests in flight.
"""

#: table -> (entries, what it holds, who keeps it: "plugin" and/or "analyzer")
LIMITS = {
    "streams": (16384, "QP streams (PSN state, connection learnt from CM or content)",
                ("plugin", "analyzer")),
    "messages": (1024, "multi-packet messages in reassembly", ("plugin",)),
    "message_bytes": (4194304, "bytes of one message in reassembly (counted; a request "
                               "keeps its tail)", ("plugin",)),
    "psns": (1024, "recent PSNs per QP stream, to link a retransmission to its original",
             ("plugin",)),
    "answers": (64, "recent answers per QP stream, to tell which ones a go-back-N "
                    "retransmission covers (failovers)", ("plugin",)),
    "cm": (4096, "CM transactions and communication ids", ("plugin", "analyzer")),
    "domains": (1024, "sessions and paths (pairing domains)", ("plugin",)),
    "idle_paths": (1024, "paths named by CM messages only, no traffic yet", ("analyzer",)),
    "paths": (16384, "paths with traffic (each keeps its counters to the end)",
              ("analyzer",)),
    "failover_log": (1048576, "requests per session kept for the failovers whose original "
                              "never reached the wire (their permit order)",
                     ("plugin",)),
    "reads": (4096, "READ requests per domain awaiting their data or invalidation",
              ("plugin",)),
    "requests": (65536, "requests awaiting their response, all paths", ("analyzer",)),
    "examples": (100, "examples kept per anomaly kind (the rest are counted)",
                 ("analyzer",)),
    "listed": (10000, "failed requests and timeline events listed per path (the rest are "
                      "counted)", ("analyzer",)),
    "mirrors": (16, "distinct mirror and tunnel encapsulations named (the rest are counted)",
                ("analyzer",)),
    "unattributed": (65536, "heartbeats and NAKs of streams not yet tied to a path",
                     ("analyzer",)),
}


def limit(name):
    """The bound of one table."""
    return LIMITS[name][0]


def kept_by(who):
    """(name, entries, what) of the tables ``who`` keeps."""
    return [(name, entries, what) for name, (entries, what, users) in LIMITS.items()
            if who in users]
