"""The split of an IO's time (analysis/split.py says what each part is), a row at a
time in compiled code: its parts were thirty numpy passes over a batch of IO rows,
which the RNBD view made for every IO of a summary (docs/benchmarks.md)."""

from ..capture.jit import compiled
from .io_fields import READ

#: the parts of an IO's time, in the order of ``split``'s output rows
PARTS = ("request", "server", "data", "response", "wire")
(REQUEST, SERVER, DATA, RESPONSE, WIRE) = range(len(PARTS))


@compiled
def split(order, answered, first, last, rsp_first, rsp_last, data_first, data_last, op, errno,
          desc_key, out):
    """The parts of IO row ``order[i]`` into ``out[:, i]``, -1 where the capture cannot
    tell one.  The columns are the IO rows' (iorows.py): ``first``/``last`` the request's
    first and last packet, ``rsp_*`` the response's, ``data_*`` a read's data (-1 none);
    ``answered`` 1 for a row with a response."""
    for i in range(order.shape[0]):
        j = order[i]
        column = out[:, i]
        for part in range(column.shape[0]):
            column[part] = -1
        if not answered[j]:
            continue
        has_data = data_first[j] >= 0
        if first[j] >= 0:
            column[REQUEST] = last[j] - first[j]
            column[WIRE] = rsp_last[j] - first[j]
        # a read answered with success has data when it carried a descriptor
        if not has_data and op[j] == READ and errno[j] == 0 and desc_key[j] >= 0:
            continue
        if has_data:
            column[SERVER] = data_first[j] - last[j]
            column[DATA] = data_last[j] - data_first[j]
            column[RESPONSE] = rsp_last[j] - data_last[j]
        else:
            column[SERVER] = rsp_first[j] - last[j]
            column[DATA] = 0
            column[RESPONSE] = rsp_last[j] - rsp_first[j]
