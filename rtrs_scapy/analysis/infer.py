"""Queue depth (mem_bits) of a path whose handshake is not in the capture
(docs/PROTOCOL.md#queue-depth-inference).

Every request whose trailer offset is known (data_len + usr_len) rules out the
mem_bits values b with ``payload & (2**b - 1) != offset``; the largest value
still possible is the guess (it is exact once an odd buf_id was seen).  A
response's msg_id narrows it further: b must give ``payload >> b == msg_id``
for the request it answers.
"""

from ..imm import IMM_TYPE_SHIFT

MIN_MEM_BITS = 12   # queue depth 65535
MAX_MEM_BITS = IMM_TYPE_SHIFT  # queue depth 1


class MemBitsGuess:
    def __init__(self):
        self.candidates = set(range(MIN_MEM_BITS, MAX_MEM_BITS + 1))

    @property
    def value(self):
        return max(self.candidates) if self.candidates else None

    def add_request(self, payload, offset):
        """Narrow by a request's known trailer offset; True when the guess changed."""
        before = self.value
        kept = {b for b in self.candidates if payload & ((1 << b) - 1) == offset}
        if kept:
            self.candidates = kept
        return self.value != before

    def matching(self, payload, msg_id):
        """mem_bits values that make this request carry ``msg_id``."""
        return {b for b in self.candidates if payload >> b == msg_id}

    def restrict(self, values):
        before = self.value
        if values & self.candidates:
            self.candidates &= values
        return self.value != before

    @staticmethod
    def queue_depth(mem_bits):
        """The largest queue depth that gives these mem_bits."""
        return 1 << (IMM_TYPE_SHIFT - mem_bits)
