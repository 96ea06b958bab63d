"""Per-QP request streams: PSN continuity and reassembly of multi-packet SENDs
and RDMA WRITEs (PROTOCOL.md §1.9, §8 items 1, 2, 5, 6).

A stream is one direction of one QP pair, keyed by (destination address,
destination QP).  Duplicate PSNs (go-back-N retransmissions) are dropped and
counted; a jump forward is a gap: the message in progress is abandoned, never
completed with invented bytes.  A message keeps its first bytes and its last
bytes (bounded), which is where RTRS puts everything the analyzer reads (§5.3).
"""

from collections import deque

PSN_MASK = 0xFFFFFF
HALF_PSN = 0x800000
HEAD_LIMIT = 8192            # a READ request and the RNBD replies sit at the start
SEND_LIMIT = 2 * 1024 * 1024  # SENDs are kept whole (info_rsp: 8 + 16*65535 at most)
TAIL_KEEP = 8192             # a WRITE's user header and trailer sit at the end


class Message:
    __slots__ = ("first_frame", "first_time", "va", "rkey", "dma_len", "length",
                 "head", "tail", "tail_len", "head_limit", "packets")

    def __init__(self, frame, time, head_limit, reth=None):
        self.first_frame = frame
        self.first_time = time
        self.va, self.rkey, self.dma_len = reth if reth else (None, None, None)
        self.length = 0
        self.head = bytearray()
        self.tail = deque()
        self.tail_len = 0
        self.head_limit = head_limit
        self.packets = 0

    def add(self, buf, start, end):
        size = end - start
        self.packets += 1
        if size <= 0:
            return
        self.length += size
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += buf[start:start + min(room, size)]
        if self.length > self.head_limit:
            piece = bytes(buf[start:end])
            self.tail.append(piece)
            self.tail_len += size
            while self.tail_len - len(self.tail[0]) >= TAIL_KEEP:
                self.tail_len -= len(self.tail.popleft())

    @property
    def whole(self):
        """True when every byte is kept (the message fits the head)."""
        return self.length <= self.head_limit

    def data(self):
        """The whole message (only when ``whole``)."""
        return bytes(self.head)

    def last_bytes(self):
        """The last bytes of the message: all of it when whole, else >= TAIL_KEEP."""
        if self.whole:
            return bytes(self.head)
        return b"".join(self.tail)


class Stream:
    """One direction of one RC QP pair."""
    __slots__ = ("key", "next_psn", "message", "conn", "client_to_server", "src", "dst",
                 "dqpn", "seen", "acks", "path_inferred", "last_frame", "synced")

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
