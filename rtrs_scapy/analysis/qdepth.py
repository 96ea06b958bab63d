"""Queue depth (mem_bits) of a path whose handshake is not in the capture.

This module is the specification of the rule
(docs/PROTOCOL.md#queue-depth-inference); the analyzer runs it as it is, and the
Wireshark plugin's lua/qdepth.lua implements the same steps.  tests/vectors/qdepth.json
holds both to the same answers.

An IO_REQ immediate carries ``buf_id << mem_bits | offset`` and the queue
depth decides mem_bits (``imm.mem_bits``), so without the conn_rsp neither
buf_id nor offset can be read off one immediate.  Every mem_bits candidate
(12 … 28, queue depths 65535 … 1) is played out on the path's traffic in
capture order, and none of them feeds on another's guess:

* a request whose trailer gives its offset (data_len + usr_len) rules out the
  candidates b with ``payload & (2**b - 1) != offset`` (unless that would rule
  out all of them: the request is then ignored for narrowing, and the caller
  reports it);
* under each candidate a request is in flight as ``payload >> b`` (a newer
  request with the same buf_id replaces an older one, like the kernel's permit
  reuse), and a response whose msg_id is in flight under b scores one for b;
* after each response, a candidate that trails the leader by PRUNE_MARGIN
  responses or more is dropped;
* the rule decides when one candidate is left ("inferred"), or after
  DECIDE_AFTER events, or at the end of the capture: the candidate with the
  highest score ("inferred" when it is alone there); a tie means the capture
  cannot tell (e.g. only buf_id 0 was ever in flight), and the tied candidate
  nearest to the kernel default (sess_queue_depth 512, mem_bits 19) is taken
  ("assumed").

The winner never contradicts what the capture shows: it is consistent with
every narrowing offset and pairs at least as many responses as any other
candidate that was not dropped.
"""

from ..spec.constants import DEFAULT_QUEUE_DEPTH, MAX_SESS_QUEUE_DEPTH
from ..spec.imm import IMM_TYPE_SHIFT, mem_bits

MIN_MEM_BITS = mem_bits(MAX_SESS_QUEUE_DEPTH)   # 12: queue depth 65535
MAX_MEM_BITS = mem_bits(1)                      # 28: queue depth 1
DEFAULT_MEM_BITS = mem_bits(DEFAULT_QUEUE_DEPTH)  # 19
CANDIDATES = tuple(range(MIN_MEM_BITS, MAX_MEM_BITS + 1))
PRUNE_MARGIN = 64      # responses behind the leader: the candidate is out
DECIDE_AFTER = 65536   # events: a decision is forced (bounded evidence)


def queue_depth_of(bits):
    """The largest queue depth with these mem_bits (what the summary reports)."""
    return min(1 << (IMM_TYPE_SHIFT - bits), MAX_SESS_QUEUE_DEPTH)


class MemBitsInference:
    """Feed a path's requests and responses in capture order until ``decided``."""

    def __init__(self):
        self.pending = {bits: {} for bits in CANDIDATES}   # bits -> {buf_id: event}
        self.score = dict.fromkeys(CANDIDATES, 0)
        self.events = 0
        self.mem_bits = None      # the decision
        self.source = None        # "inferred" or "assumed"
        self.decided_at = None    # the event (0-based) that decided

    @property
    def decided(self):
        return self.mem_bits is not None

    @property
    def alive(self):
        return tuple(self.pending)

    def request(self, payload, offset):
        """A request's 28-bit immediate payload and its offset (None when the
        beginning of the message is not in the capture).  Returns False when the
        offset contradicts every candidate still alive."""
        if self.decided:
            return True
        consistent = True
        if offset is not None:
            keep = [b for b in self.pending if payload & ((1 << b) - 1) == offset]
            consistent = bool(keep)
            for bits in self.pending.keys() - set(keep) if keep else ():
                del self.pending[bits]
        for bits, pending in self.pending.items():
            pending[payload >> bits] = self.events
        self._next()
        return consistent

    def response(self, msg_id):
        if self.decided:
            return
        for bits, pending in self.pending.items():
            if pending.pop(msg_id, None) is not None:
                self.score[bits] += 1
        leader = max(self.score[b] for b in self.pending)
        for bits in [b for b in self.pending if leader - self.score[b] >= PRUNE_MARGIN]:
            del self.pending[bits]
        self._next()

    def _next(self):
        self.events += 1
        if len(self.pending) == 1:
            self._decide(next(iter(self.pending)), "inferred")
        elif self.events >= DECIDE_AFTER:
            self.finish()

    def finish(self):
        """Decide now with what was seen (end of the capture)."""
        if self.decided:
            return
        top = max(self.score[b] for b in self.pending)
        tied = [b for b in self.pending if self.score[b] == top]
        if len(tied) == 1:
            self._decide(tied[0], "inferred")
        else:
            self._decide(min(tied, key=lambda b: (abs(b - DEFAULT_MEM_BITS), -b)), "assumed")

    def _decide(self, bits, source):
        self.mem_bits, self.source = bits, source
        self.decided_at = self.events - 1
        self.pending = {bits: self.pending[bits]}

    @property
    def queue_depth(self):
        return queue_depth_of(self.mem_bits) if self.decided else None


def infer(events):
    """The rule played over ``events`` (("req", payload, offset) and ("rsp", msg_id)
    tuples in capture order) until it decides, then finished: the decided rule."""
    rule = MemBitsInference()
    for event in events:
        if rule.decided:
            break
        if event[0] == "req":
            rule.request(event[1], event[2])
        else:
            rule.response(event[1])
    rule.finish()
    return rule


def pair_events(events, bits):
    """The pairing rule, event by event: ``events`` are ("req", payload, offset)
    and ("rsp", msg_id) tuples in capture order; returns the (request index,
    response index) pairs under ``bits``.  A response answers the latest request
    in flight with its buf_id; a newer request with the same buf_id replaces an
    older unanswered one."""
    pending, pairs = {}, []
    for index, event in enumerate(events):
        if event[0] == "req":
            pending[event[1] >> bits] = index
        else:
            request = pending.pop(event[1], None)
            if request is not None:
                pairs.append((request, index))
    return pairs
