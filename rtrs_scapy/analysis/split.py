"""Where the time of an IO goes on the wire, btt's split from the capture
(docs/latency.md): columns of IO rows (iorows.py) in, the parts out.

    request   the request's first packet to its last
    server    the request's last packet to the first packet of the answer:
              a read's data, else the response
    data      a read's data, first packet to last (0 for an IO without data)
    response  the rest: the data's last packet (else the response's first) to
              the response's last packet
    wire      their sum: the request's first packet to the response's last

-1 where the capture cannot tell: no response, a request whose first packets
precede the capture (request, wire), a read that succeeded without its data in
the capture (server, data, response).
"""

import numpy as np

from ..capture.jit import int_array
from ..engine import split_parts
from ..engine.split_parts import PARTS
from .iorows import ANSWERED


def parts_ns(rows):
    """{part: int64 ns array, -1 unknown} of a batch of IO rows."""
    return dict(zip(PARTS, parts_matrix(rows)))


def parts_matrix(rows, order=None):
    """The parts of the IO rows ``order`` (all: None), a row of ns per part (PARTS),
    -1 unknown: the compiled rule of engine/split_parts.py."""
    order = np.arange(len(rows["outcome"])) if order is None else order
    out = np.empty((len(PARTS), len(order)), dtype=np.int64)
    split_parts.split(*(int_array(values) for values in (
        order, rows["outcome"] == ANSWERED, rows["request_first_ns"], rows["time_ns"],
        rows["response_first_ns"], rows["response_ns"], rows["data_first_ns"],
        rows["data_last_ns"], rows["op"], rows["errno"], rows["desc_key"])), out)
    return out
