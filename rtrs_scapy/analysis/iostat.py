"""``iostat -x`` from the wire: per interval and group (a device, a path or a
session) the IO counts, bytes, latencies, queue size and busy time of the IO
rows (iorows.py), computed with numpy over all rows at once (docs/iostat.md).

An IO counts in the interval where it completed (its response), or, never
answered, where it was sent: every row counts once, so the counts summed over
the intervals are the summary's.  Queue size and busy time come from the
answered IOs' spans (inflight.py).
"""

import numpy as np

from .inflight import Steps, slices, spans
from .iorows import ANSWERED, Kept, narrow_type
from .split import parts_ns

#: the kinds of IO counted apart, as the block layer's statistics group them
KINDS = ("read", "write", "discard", "flush")
COUNTS = ("reads", "writes", "discards", "flushes")
BYTES = ("read_bytes", "write_bytes", "discard_bytes", None)


#: the IO row columns the view reads (the rest need not be kept), and the server's
#: time (split.py) in place of the five columns it is computed from
ROW_COLUMNS = ("time_ns", "path", "op", "bytes", "rnbd_op", "device_id", "bi_size",
               "failed_over", "outcome", "response_ns", "latency_ns", "errno")


def _server(rows):
    return {"server_ns": parts_ns(rows)["server"]}


def kept_rows(batches=()):
    """What iostat keeps of IO rows: an io_sink (iorows.Kept) to analyse into, or the
    rows of ``batches`` (IO row batches, or such a sink fed already)."""
    return Kept.of(batches, ROW_COLUMNS, _server)

#: lines of one table at most (intervals × groups): a capture whose stamps span years
#: must not make one line per second of them
MAX_LINES = 1_000_000


def intervals(start_ns, end_ns, interval_ns):
    return max(1, -(-(end_ns - start_ns) // interval_ns))


def bins(start_ns, end_ns, interval_ns):
    """The intervals' edges from ``start_ns`` to ``end_ns`` (the last one may be short)."""
    count = intervals(start_ns, end_ns, interval_ns)
    edges = start_ns + interval_ns * np.arange(count + 1, dtype=np.int64)
    edges[-1] = max(min(edges[-1], end_ns), edges[-2] + 1)
    return edges


def table(rows, group, kind, size, n_groups, edges, events=None):
    """Columns of one record per (interval, group), interval-major: record ``i`` is
    interval ``i // n_groups`` (from ``edges[i // n_groups]``) of group ``i % n_groups``.

    ``rows``: an iorows.Wide; ``group``: per row its group (-1: not counted in this
    view); ``kind``: per row its index in KINDS; ``size``: per row its bytes;
    ``events``: (time_ns, group, retransmissions) of the paths' stalls, or None.
    Computed a group at a time: what is held beyond the rows is one group's.  A
    count is kept in the smallest integer type that holds all the rows, bytes in
    the one that holds all their bytes (a table of 10⁶ lines is most of iostat's
    memory)."""
    n_bins = len(edges) - 1
    cells = n_bins * n_groups
    total = int(np.abs(size).sum(dtype=np.int64))
    narrowest = {"bytes": narrow_type(-total, total) or np.int64,
                 "count": narrow_type(0, len(group)) or np.int64}
    out = {}
    members = dict(slices(group))
    none = np.zeros(0, dtype=np.int64)
    for g in range(n_groups):
        at = members.pop(g, none)
        figures = _group(rows.take(at), kind[at], size[at], edges)
        for name, column in figures.items():
            if name not in out:
                dtype = column.dtype
                if dtype == np.int64:
                    dtype = narrowest["bytes" if name in BYTES else "count"]
                out[name] = np.empty(cells, dtype=dtype)
            out[name][g::n_groups] = column
    if events is not None:
        time, egroup, retrans = events
        ecell = np.clip(np.searchsorted(edges, time, side="right") - 1, 0, n_bins - 1) \
            * n_groups + egroup
        out["stalls"] = np.bincount(ecell, minlength=cells)[:cells].astype(np.int64)
        out["retransmissions"] = np.bincount(ecell, weights=retrans.astype(np.float64),
                                             minlength=cells)[:cells].astype(np.int64)
    return out


def _group(rows, kind, size, edges):
    """The figures of one group's rows per interval."""
    n_bins = len(edges) - 1
    answered = (rows["outcome"] == ANSWERED) & (rows["latency_ns"] >= 0)
    when = np.where(answered, rows["response_ns"], rows["time_ns"])
    at = np.clip(np.searchsorted(edges, when, side="right") - 1, 0, n_bins - 1)

    def per_bin(mask, weights=None):
        return np.bincount(at[mask], weights=None if weights is None else weights[mask],
                           minlength=n_bins)[:n_bins]

    out = {}
    latency = rows["latency_ns"].astype(np.float64)
    for k, (name, count, nbytes) in enumerate(zip(KINDS, COUNTS, BYTES)):
        mine = kind == k
        out[count] = per_bin(mine).astype(np.int64)
        if nbytes is not None:
            out[nbytes] = per_bin(mine, size.astype(np.float64)).astype(np.int64)
        done = per_bin(mine & answered)
        out[name + "_await_ms"] = _mean(per_bin(mine & answered, latency), done) / 1e6
    out["errors"] = per_bin(answered & (rows["errno"] != 0)).astype(np.int64)
    out["p99_ms"] = _p99(at, answered, latency, n_bins) / 1e6
    server = rows["server_ns"]
    known = server >= 0
    out["server_ms"] = _mean(per_bin(known, server.astype(np.float64)), per_bin(known)) / 1e6
    out["aqu_sz"], out["util_pct"] = _queue(rows, edges)
    return out


def _mean(total, count):
    """``total / count``, NaN where count is 0."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _p99(cell, mask, values, cells):
    """The nearest-rank 99th percentile of ``values`` per cell, NaN where empty."""
    cell, values = cell[mask], values[mask]
    order = np.lexsort((values, cell))
    count = np.bincount(cell, minlength=cells)[:cells]
    first = np.concatenate(([0], np.cumsum(count)[:-1]))
    rank = np.maximum(1, -(-99 * count // 100))
    out = np.full(cells, np.nan)
    has = count > 0
    out[has] = values[order][first[has] + rank[has] - 1]
    return out


def _queue(rows, edges):
    """Mean IOs in flight and % of the time with at least one, per interval."""
    answered, start, end = spans(rows)
    width = np.diff(edges).astype(np.float64)
    area, on = Steps.of(start[answered], end[answered]).at(edges)
    return np.diff(area) / width, 100.0 * np.diff(on) / width
