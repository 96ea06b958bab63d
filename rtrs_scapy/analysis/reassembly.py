"""Per-QP request streams: PSN continuity and reassembly of multi-packet SENDs
and RDMA WRITEs (docs/PROTOCOL.md#psn-sequence-and-retransmissions,
docs/PROTOCOL.md#chunks-and-what-the-client-writes).

A stream is one direction of one QP pair, keyed by (destination address,
destination QP).  Duplicate PSNs (go-back-N retransmissions) are dropped and
counted; a jump forward is a gap: the message in progress is abandoned, never
completed with invented bytes.  A message keeps its first bytes and its last
bytes (bounded), which is where RTRS puts everything the analyzer reads.
"""

from collections import deque

PSN_MASK = 0xFFFFFF
HALF_PSN = 0x800000
HEAD_LIMIT = 8192            # a READ request and the RNBD replies sit at the start
SEND_LIMIT = 1 << 20        # SENDs are kept whole (info_rsp: 8 + 16*65535 at most)
TAIL_KEEP = 8192             # a WRITE's user header and trailer sit at the end


class Message:
    """A message being reassembled.  It keeps references to the packets' bytes
    (no copies): the first ones up to ``head_limit`` bytes and the last ones
    covering at least TAIL_KEEP bytes; the middle of a large write is dropped."""
    __slots__ = ("first_frame", "first_time", "va", "rkey", "dma_len", "length",
                 "head", "head_len", "tail", "tail_len", "head_limit", "packets", "dropped")

    def __init__(self, frame, time, head_limit, reth=None):
        self.first_frame = frame
        self.first_time = time
        self.va, self.rkey, self.dma_len = reth if reth else (None, None, None)
        self.length = 0
        self.head = []
        self.head_len = 0
        self.tail = deque()
        self.tail_len = 0
        self.head_limit = head_limit
        self.packets = 0
        self.dropped = False

    def add(self, buf, start, end):
        self.packets += 1
        if end > start:
            self.length += end - start
            self._keep(buf, start, end)

    def add_run(self, buf, starts, ends, total):
        """Many packets at once (the batch path); same result as add() on each."""
        count = len(starts)
        self.packets += count
        self.length += total
        i = 0
        while i < count and self.head_len < self.head_limit and not self.tail:
            self._keep(buf, starts[i], ends[i])
            i += 1
        if i == count:
            return
        j, kept = count, 0
        while j > i and kept < TAIL_KEEP:
            j -= 1
            kept += ends[j] - starts[j]
        if j > i:  # the packets between head and the new tail are not needed
            self.tail.clear()
            self.tail_len = 0
            self.dropped = True
        for k in range(j, count):
            self._keep(buf, starts[k], ends[k])

    def _keep(self, buf, start, end):
        if self.head_len < self.head_limit and not self.tail:
            self.head.append((buf, start, end))
            self.head_len += end - start
            return
        self.tail.append((buf, start, end))
        self.tail_len += end - start
        while self.tail_len - (self.tail[0][2] - self.tail[0][1]) >= TAIL_KEEP:
            _, s, e = self.tail.popleft()
            self.tail_len -= e - s
            self.dropped = True

    @property
    def whole(self):
        """True when every byte is kept (the message fits the head)."""
        return not self.tail

    def data(self):
        """The whole message (only when ``whole``)."""
        return _join(self.head)

    def last_bytes(self):
        """The end of the message: all of it when nothing was dropped, else >= TAIL_KEEP."""
        if self.dropped:
            return _join(self.tail)
        return _join(self.head) + _join(self.tail)


def _join(segments):
    return b"".join([buf[s:e] for buf, s, e in segments])


class Stream:
    """One direction of one RC QP pair."""
    __slots__ = ("key", "next_psn", "message", "conn", "client_to_server", "src", "dst",
                 "dqpn", "seen", "acks", "path_inferred", "last_frame", "synced", "first_frame")

    def __init__(self, key, src, dst, dqpn):
        self.key = key
        self.src, self.dst, self.dqpn = src, dst, dqpn
        self.next_psn = None
        self.message = None
        self.conn = None
        self.client_to_server = None  # None until the CM or the content tells
        self.path_inferred = None     # the path guessed from content, without CM
        self.seen = 0
        self.acks = 0
        self.last_frame = None
        self.synced = False   # a message start was seen since the beginning or a gap
        self.first_frame = None  # the frame that created the stream

    @property
    def path(self):
        return self.conn.path if self.conn is not None else self.path_inferred

    def check_psn(self, psn):
        """'ok', 'duplicate' or 'gap'; advances the expected PSN unless duplicate."""
        self.seen += 1
        expected = self.next_psn
        if expected is None or psn == expected:
            self.next_psn = (psn + 1) & PSN_MASK
            return "ok"
        if (psn - expected) & PSN_MASK >= HALF_PSN:
            return "duplicate"
        self.next_psn = (psn + 1) & PSN_MASK
        return "gap"
