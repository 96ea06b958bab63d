"""IO batches settled in capture order, also while a queue depth is being inferred.

A path without a handshake keeps its requests and responses until its queue depth
rule decides (qdepth.py).  Were the other paths settled meanwhile, a failed-over
request's copy on a decided path would be paired before its original on the
undecided one, and its IO row would go out with its own latency and without
``failover_of`` (docs/PROTOCOL.md#failover-from-the-wire).  So a batch waits until
every path it involves is decided, and batches settle in the order they came.

What waits is bounded: beyond HOLD requests and responses the oldest batch settles
its decided paths, and its undecided ones wait for their rule alone (the failovers
are then found at the end, failover.late_copies, and only the summary has them).
The queue is the analyzer's ``settle_queue`` part (docs/design.md#the-analyzers-parts):
io.py adds its batches, the analyzer drains it when a path's rule decides.
"""

from collections import deque

from .qdepth import DECIDE_AFTER

#: requests and responses kept waiting in all (as many as one rule may wait for)
HOLD = DECIDE_AFTER


class SettleQueue:
    def __init__(self, an):
        self.an = an
        self.batches = deque()
        self.held = 0

    @property
    def idle(self):
        """No batch waits in order: every request and response so far is settled, or
        waits on its path alone beyond HOLD."""
        return not self.batches

    def add(self, batch):
        self.batches.append(batch)
        self.held += batch.size
        self.drain()

    def _undecided(self, batch):
        paths = self.an.path_list
        return [p for p in batch.involved
                if paths[p] is not None and paths[p].inference is not None]

    def drain(self):
        """Settle the batches whose paths are all decided, oldest first, and the oldest
        beyond HOLD as far as they can be."""
        while self.batches:
            head = self.batches[0]
            undecided = self._undecided(head)
            if undecided and self.held <= HOLD:
                return
            self.batches.popleft()
            self.held -= head.size
            for pid in undecided:
                self.an.path_list[pid].waiting.append(head)
            head.settle([p for p in head.involved if p not in undecided])
