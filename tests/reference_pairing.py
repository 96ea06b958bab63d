"""The simple reference pairing the tests hold the analyzer's to, written apart from
the package (docs/PROTOCOL.md#pairing-requests-and-responses); used by
tests/ib_decode.py and scripts/make_vectors.py."""


def reference_pairs(events, bits):
    """Each response with the latest request before it whose buf_id (payload >> bits)
    is its msg_id and that no response took yet: (request index, response index).
    ``events``: ("req", payload) or ("rsp", msg_id) tuples in capture order."""
    waiting, pairs = {}, []
    for i, event in enumerate(events):
        if event[0] == "req":
            waiting[event[1] >> bits] = i
        elif event[1] in waiting:
            pairs.append((waiting.pop(event[1]), i))
    return pairs
