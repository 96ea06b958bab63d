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

from ..engine.io_fields import READ
from .iorows import ANSWERED

PARTS = ("request", "server", "data", "response", "wire")


def parts_ns(rows):
    """{part: int64 ns array, -1 unknown} of a batch of IO rows."""
    answered = rows["outcome"] == ANSWERED
    first, last = rows["request_first_ns"], rows["time_ns"]
    rsp_first, rsp_last = rows["response_first_ns"], rows["response_ns"]
    data_first, data_last = rows["data_first_ns"], rows["data_last_ns"]
    has_data = answered & (data_first >= 0)
    # a read answered with success has data when it carried a descriptor
    data_unseen = answered & ~has_data & (rows["op"] == READ) & (rows["errno"] == 0) \
        & (rows["desc_key"] >= 0)
    answer = np.where(has_data, data_first, rsp_first)
    after_data = np.where(has_data, data_last, rsp_first)
    known = answered & ~data_unseen
    whole = answered & (first >= 0)
    return {
        "request": np.where(whole, last - first, -1),
        "server": np.where(known, answer - last, -1),
        "data": np.where(known, np.where(has_data, data_last - data_first, 0), -1),
        "response": np.where(known, rsp_last - after_data, -1),
        "wire": np.where(whole, rsp_last - first, -1),
    }

