"""What waits for a stream without its handshake to prove it is RTRS's.

A stream the CM did not bind may be RTRS's (the capture started mid-session,
docs/PROTOCOL.md#rtrs-without-a-handshake) or another protocol's
(docs/PROTOCOL.md#other-rdma-protocols).  Until its content tells, the analyzer
keeps here what it would report of it: its anomalies (``unproven``), whether it
carried an RTRS immediate type (``immediates``: a DREQ naming its QP may be RTRS's),
its heartbeats (``unattributed``: counted at the end, once the capture has told
which path the stream belongs to) and its AETH NAKs (``naks``).  Streams are keyed
by (slot, gen) of the transport's stream table.
"""

from collections import Counter


class UnboundStreams:
    def __init__(self, bounds):
        self.bounds = bounds
        # (slot, gen) -> (first anomalies, counts by kind) of a stream not yet RTRS's
        self.unproven = {}
        self.immediates = set()        # (slot, gen) of unbound streams with RTRS immediates
        self.unattributed = []      # heartbeats of streams not yet tied to a path
        self.naks = []                 # (frame, syndrome, conn, slot, gen) of AETH NAKs

    def anomaly(self, key, frame, kind, detail, args):
        """An anomaly of the stream ``key``, kept until the stream proves RTRS's."""
        examples, counts = self.unproven.setdefault(key, ([], Counter()))
        if counts[kind] < self.bounds.size["examples"]:
            examples.append((frame, kind, detail, args))
        counts[kind] += 1

    def proven(self, key):
        """The stream ``key`` is RTRS's: (its anomalies kept, its counts by kind)."""
        return self.unproven.pop(key, ((), {}))

    def carried_immediates(self, keys):
        """Streams ``keys`` carried an RTRS immediate type."""
        self.immediates.update(keys)

    def heartbeat(self, entry):
        """(stream, frame, stamp, src, dst, is_msg) of a heartbeat, within the limit."""
        self.bounds.keep("unattributed", self.unattributed, entry)

    def nak(self, entry):
        """(frame, syndrome, conn, slot, gen) of an AETH NAK, within the limit: reported
        if its stream turns out to be RTRS's."""
        self.bounds.keep("unattributed", self.naks, entry)

    def forget(self, gens):
        """Streams the transport evicted (their slot has a newer generation) leave."""
        self.unproven = {key: waiting for key, waiting in self.unproven.items()
                         if gens[key[0]] == key[1]}
        self.immediates = {key for key in self.immediates if gens[key[0]] == key[1]}
