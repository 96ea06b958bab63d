"""Where to cut a capture: once per situation a cut can leave, instead of every Nth frame.

A capture cut at frame ``f`` (frames 1 … f-1 dropped, as production hands captures
over) starts in a situation that the whole capture shows (the independent decode of
tests/ib_decode.py: tshark's InfiniBand fields and the Scapy request layers, nothing of
the analyzer or the plugin):

* torn: the multi-packet messages the cut goes through, by kind (a write request: RDMA
  WRITE FIRST … LAST WITH IMMEDIATE; READ data: the server's RDMA WRITE FIRST … LAST
  without immediate; a SEND: the INFO response) and by what of it is left: middle
  packets, or the last packet only;
* waiting: the requests sent before ``f`` and answered from ``f`` on (responses without
  their request), by op and by whether the response failed (errno);
* handshakes: each CM REQ and its answer (REP or REJ): both in the cut, the answer
  without its REQ, or neither;
* left: what follows the cut: IO requests, heartbeats only, or CM teardown only;
* depth: the queue depths the decode of the cut itself finds, with where they come from
  (handshake, inferred, assumed: rtrs_scapy/analysis/qdepth.py), which is what the
  requests and responses after the cut can tell.

Every frame of a capture is in exactly one situation (the dataclass below); two cuts in
the same situation test the same thing, two in different ones do not.  A sweep cuts a
capture once per situation (``cut_points``: test_cuts.py, test_linking.py), or, where
each cut costs a tshark or an rtrs-dissect run, where the cuts together have every part
of a situation (a torn message kind and part, a waiting op, ...) that any cut has, each
cut one that no other has (``covering``: test_lua_midsession.py, test_cut_outputs.py).
A cut is at its situation's last frame: the shortest remainder, the cheapest run.
``cm_situations`` does the same for the CM exchange alone (test_failover.py).
"""

import bisect
from dataclasses import dataclass

from rtrs_scapy.spec.imm import decode as decode_imm

from ib_decode import (
    ACK, CM_REJ, CM_REP, CM_REQ, FIRST, LAST, MIDDLE, PSN_MOD, REQUEST_OPS, decode, ib_frames,
)
from once_per_run import once_per_run

SEND_OPS = set(range(0x00, 0x06))   # RC SEND FIRST … ONLY WITH IMMEDIATE
IMM_IO_REQ, IMM_IO_RSP, IMM_IO_RSP_W_INV, IMM_HB_MSG, IMM_HB_ACK = 0, 1, 2, 8, 9


@dataclass(frozen=True)
class Situation:
    torn: tuple            # (message kind, "middle" | "last") of each, sorted
    waiting: frozenset     # {(op, "failed" | "ok")}
    handshakes: frozenset  # {"REQ+REP", "REP only", "REQ+REJ", "REJ only"} of the CM
    #                        exchanges not wholly before the cut
    left: str              # "IO", "heartbeats", "CM"
    depth: frozenset       # {(queue depth, source)} of the cut's requests and responses

    def __str__(self):
        return "; ".join((
            "torn " + (", ".join("%s (%s)" % t for t in self.torn) or "nothing"),
            "waiting " + (", ".join("%s %s" % w for w in sorted(self.waiting)) or "nothing"),
            "handshakes " + (", ".join(sorted(self.handshakes)) or "gone"),
            self.left + " left",
            "depth " + (", ".join("%s %s" % d for d in sorted(self.depth)) or "none")))


def _kind(last):
    """What a multi-packet message is, from its last packet."""
    imm = None if last.imm is None else last.imm >> 28
    if last.opcode in SEND_OPS:
        return "SEND"
    if imm == IMM_IO_REQ and last.opcode in REQUEST_OPS:
        return "write request"
    return "READ data" if imm is None else "RDMA WRITE imm type %d" % imm


def multi_packet_messages(frames):
    """(kind, [frame numbers]) of every message of more than one packet, per stream as
    the decode assembles them (a PSN seen before is a retransmission, a gap loses the
    message in progress)."""
    streams, out = {}, []
    for f in frames:
        if f.opcode is None or f.opcode >= 0x20 or f.opcode == ACK:
            continue
        stream = streams.setdefault((f.dst, f.destqp), {"psn": None, "msg": None})
        if stream["psn"] is not None:
            delta = (f.psn - stream["psn"]) % PSN_MOD
            if delta == 0 or delta >= PSN_MOD // 2:
                continue
            if delta != 1:
                stream["msg"] = None
        stream["psn"] = f.psn
        if f.opcode in FIRST:
            stream["msg"] = [f.number]
        elif f.opcode in MIDDLE | LAST and stream["msg"] is not None:
            stream["msg"].append(f.number)
            if f.opcode in LAST:
                out.append((_kind(f), stream["msg"]))
                stream["msg"] = None
    return out


def cm_exchanges(frames):
    """[REQ frame, answer frame or None, "REP" | "REJ" | None] per CM REQ (first sends)."""
    found = {}
    for f in frames:
        if f.attr == CM_REQ:
            found.setdefault(f.tid, [f.number, None, None])
        elif f.attr in (CM_REP, CM_REJ) and f.tid in found and found[f.tid][1] is None:
            found[f.tid][1:] = [f.number, "REP" if f.attr == CM_REP else "REJ"]
    return list(found.values())


def situations(pcap, with_depth=True, firsts=None):
    """{Situation: [first frames]} of every cut ``f`` of ``pcap`` (``firsts``: a range of
    them; ``with_depth=False`` leaves the depth out, for captures too long to decode
    once per event)."""
    return _situations(pcap, with_depth, firsts)


@once_per_run
def _situations(pcap, with_depth, firsts):
    frames = ib_frames(pcap)
    count = len(frames)
    firsts = range(1, count + 1) if firsts is None else firsts
    lo, hi = firsts[0], firsts[-1]
    whole = decode(pcap, 1)
    by_number = {f.number: f for f in frames}

    torn = [[] for _ in range(count + 2)]
    for kind, numbers in multi_packet_messages(frames):
        for f in range(max(numbers[0] + 1, lo), min(numbers[-1], hi) + 1):
            part = "last" if f > numbers[-2] else "middle"
            torn[f].append((kind, part))
    waiting = [set() for _ in range(count + 2)]
    for rsp, (req, _seconds) in whole.pairs.items():
        op = "read" if req in whole.reads else "write"
        failed = "failed" if decode_imm(by_number[rsp].imm).errno else "ok"
        for f in range(max(req + 1, lo), min(rsp, hi) + 1):
            waiting[f].add((op, failed))
    exchanges = cm_exchanges(frames)
    last_io = max(whole.reads | whole.writes, default=0)
    last_hb = max((f.number for f in frames if f.imm is not None
                   and f.imm >> 28 in (IMM_HB_MSG, IMM_HB_ACK)), default=0)

    depth_from = [1]
    if with_depth:
        # the decode of a cut changes only where a request or response (its immediate), a
        # CM REQ or REP, or the first packet of a write request leaves the cut
        # (test_cut_points.py decodes every cut of two captures to hold this)
        starts = {numbers[0] for kind, numbers in multi_packet_messages(frames)
                  if kind == "write request"}
        changes = {f.number + 1 for f in frames if f.number in starts or f.attr in (CM_REQ, CM_REP)
                   or f.imm is not None and f.imm >> 28 in (IMM_IO_REQ, IMM_IO_RSP,
                                                            IMM_IO_RSP_W_INV)}
        depth_from = sorted({1} | {f for f in changes if f <= count})
    start = depth_from[bisect.bisect_right(depth_from, lo) - 1]
    depths = {b: frozenset(decode(pcap, b).depth.values()) if with_depth else frozenset()
              for b in depth_from if start <= b <= hi}

    out = {}
    for f in firsts:
        shakes = set()
        for req, answer, kind in exchanges:
            if answer is None or answer < f:
                continue
            shakes.add("REQ+%s" % kind if req >= f else "%s only" % kind)
        left = "IO" if last_io >= f else ("heartbeats" if last_hb >= f else "CM")
        depth = depths[depth_from[bisect.bisect_right(depth_from, f) - 1]]
        key = Situation(tuple(sorted(torn[f])), frozenset(waiting[f]), frozenset(shakes), left,
                        depth)
        out.setdefault(key, []).append(f)
    return out


def cut_points(pcap, with_depth=True, firsts=None):
    """[(first frame, Situation)]: the last frame of each situation, in frame order."""
    found = situations(pcap, with_depth, firsts)
    return sorted(((max(numbers), situation) for situation, numbers in found.items()),
                  key=lambda cut: cut[0])


def features(situation):
    """Each thing a situation has, on its own: a torn message kind and part, a waiting
    op and outcome, a handshake state, what is left, a queue depth and its source (or
    the absence of each)."""
    s = situation
    return (set(("torn", t) for t in s.torn) or {("torn", None)}) \
        | ({("waiting", w) for w in s.waiting} or {("waiting", None)}) \
        | ({("handshake", h) for h in s.handshakes} or {("handshake", None)}) \
        | {("left", s.left)} \
        | ({("depth", d) for d in s.depth} or {("depth", None)})


def io_situation(situation):
    """The torn messages and the waiting requests together."""
    return {("io", situation.torn, situation.waiting)}


def together(situation):
    """The kinds of the messages torn at once, and the requests waiting at once."""
    return {("torn together", tuple(kind for kind, _part in situation.torn)),
            ("waiting together", situation.waiting)}


def covering(pcap, feature=features, firsts=None, with_depth=True, others=(), keep=()):
    """[(first frame, Situation)]: cuts of ``pcap`` that together have every ``feature``
    value any cut of it has (but those some cut of the captures ``others`` has), each of
    them one that no other chosen cut has, and the cuts at the frames ``keep``.  A cut
    is at the last frame of its situation (a kept one at its frame)."""
    found = situations(pcap, with_depth, firsts)
    seen = set().union(*(feature(s) for other in others for s in situations(other)))
    return cover(found, feature, seen, keep)


def cover(found, feature, seen=frozenset(), keep=()):
    """[(first frame, situation)] of {situation: [first frames]} ``found`` (see
    ``covering``).  Greedy: the situation with the most values still missing, the later
    one on a tie (the shorter remainder); then each cut whose values the others all have
    is dropped."""
    kept = [(first, s) for s, numbers in found.items() for first in keep if first in numbers]
    seen = set(seen).union(*(feature(s) for _first, s in kept))
    missing = set().union(*map(feature, found)) - seen
    chosen = []
    while missing:
        best = max(found, key=lambda s: (len(feature(s) & missing), max(found[s])))
        chosen.append(best)
        missing -= feature(best)
    for situation in list(chosen):
        others_have = seen.union(*(feature(o) for o in chosen if o is not situation))
        if feature(situation) <= others_have:
            chosen.remove(situation)
    return sorted(kept + [(max(found[s]), s) for s in chosen], key=lambda cut: cut[0])


CM_NAMES = {0x10: "REQ", 0x12: "REJ", 0x13: "REP", 0x14: "RTU", 0x15: "DREQ", 0x16: "DREP"}


@once_per_run
def cm_situations(pcap):
    """{(cut through, left): [first frames]} of every cut ``f`` > 1 of ``pcap``, as the CM
    exchange tells it: a CM exchange is a connect (REQ, then REP and RTU, or REJ) or a
    disconnect (DREQ, then DREP) of one transaction, a disconnect crossed when the other
    side of the same addresses sent a DREQ too between the same two REQs.  ``cut
    through``: the part left of each exchange the cut goes through (e.g. the RTU alone,
    the DREP alone), and whether a DREQ after the cut crossed one of the other side's
    that is cut away; ``left``: the kinds of exchange that follow whole (a connect, a
    reject, a disconnect with or without its answer, crossed or not)."""
    frames = ib_frames(pcap)
    exchanges = {}
    for f in frames:
        if f.attr in CM_NAMES:
            name = CM_NAMES[f.attr]
            kind = "disconnect" if name in ("DREQ", "DREP") else "connect"
            exchanges.setdefault((f.tid, kind), []).append((f.number, name))
    requests = [(f.number, frozenset((f.src, f.dst))) for f in frames if f.attr == CM_REQ]
    dreqs = [(f.number, f.src, frozenset((f.src, f.dst))) for f in frames if f.attr == 0x15]

    def between(number, pair):
        """The REQs of the same addresses around frame ``number``."""
        return (max([n for n, p in requests if n < number and p == pair], default=0),
                min([n for n, p in requests if n > number and p == pair], default=1 << 62))

    crossed = {}
    for number, src, pair in dreqs:
        since, until = between(number, pair)
        crossed[number] = [m for m, s, p in dreqs if since < m < until and s != src and p == pair]
    out = {}
    for first in range(2, len(frames) + 1):
        cut, left = set(), set()
        for (_tid, kind), mads in exchanges.items():
            after = tuple(name for number, name in mads if number >= first)
            if after and kind == "disconnect" and crossed.get(mads[0][0]):
                after += ("crossed",)
            if after and mads[0][0] < first:
                cut.add((kind, after))
            elif after:
                left.add((kind, after))
        if any(number >= first and any(m < first for m in crossed[number])
               for number, _src, _pair in dreqs):
            cut.add(("crossed DREQ", "the other side's cut away"))
        out.setdefault((frozenset(cut), frozenset(left)), []).append(first)
    return out


def cm_features(situation):
    """Each part of a CM situation on its own: an exchange cut through and what is left
    of it, a kind of exchange that follows whole (or none of either)."""
    cut, left = situation
    return ({("cut", c) for c in cut} or {("cut", None)}) \
        | ({("left", k) for k in left} or {("left", None)})


def cm_covering(pcap):
    """The first frames of cuts of ``pcap`` that together have every part of a CM
    situation any cut has, each of them one that no other has (``cover``)."""
    return [first for first, _situation in cover(cm_situations(pcap), cm_features)]
