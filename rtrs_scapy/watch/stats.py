"""The IO rows of one interval, summed per path and operation.

The analyzer hands out one row per request once its fate is known
(analysis/iorows.py); a row belongs to the interval in which it came out, so
that every request is counted exactly once and the intervals add up to the
summary.  Memory: the rows of the current interval only.
"""

from dataclasses import dataclass, field

import numpy as np

from ..analysis.iorows import ANSWERED
from ..analysis.rnbd import kind_name
from ..spec.constants import errno_name, rnbd_op_name

OPS = ("read", "write")            # iorows op codes 1 and 2
KEPT = ("path", "op", "bytes", "outcome", "latency_ns", "errno", "rnbd_type", "rnbd_op",
        "device_id",
        "bi_size", "sector", "frame", "response_frame", "response_ns", "time_ns",
        "failover_from", "buf_id")
#: IO errors and failovers listed as events per path and interval (all are counted)
EVENTS_PER_PATH = 20


def percentile(ordered, pct):
    """Nearest-rank percentile of sorted values (the summary's definition)."""
    rank = max(1, -(-pct * len(ordered) // 100))
    return ordered[rank - 1]


@dataclass
class OpStats:
    """One path and operation over one interval."""
    count: int = 0
    bytes: int = 0
    latencies_ns: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))

    def latency_us(self):
        """p50/p99 in µs of the requests answered in the interval (None: none)."""
        if not len(self.latencies_ns):
            return {"p50": None, "p99": None}
        ordered = np.sort(self.latencies_ns)
        return {"p50": round(percentile(ordered, 50) / 1e3, 1),
                "p99": round(percentile(ordered, 99) / 1e3, 1)}


@dataclass
class PathStats:
    ops: dict = field(default_factory=lambda: {op: OpStats() for op in OPS})
    errors: dict = field(default_factory=dict)          # errno name -> count
    events: list = field(default_factory=list)          # io_error, failover (rows)


class IntervalRows:
    """Collects IO row batches (the analyzer's ``io_sink``) until ``take()``."""

    def __init__(self):
        self.batches = []

    def __call__(self, rows):
        self.batches.append({name: rows[name] for name in KEPT})

    def take(self):
        """{path id: PathStats} of the rows since the last call."""
        batches, self.batches = self.batches, []
        if not batches:
            return {}
        rows = {name: np.concatenate([b[name] for b in batches]) for name in KEPT}
        stats = {}
        order = np.argsort(rows["path"], kind="stable")
        rows = {name: column[order] for name, column in rows.items()}
        ids, starts = np.unique(rows["path"], return_index=True)
        ends = np.append(starts[1:], len(rows["path"]))
        for pid, a, b in zip(ids.tolist(), starts.tolist(), ends.tolist()):
            stats[pid] = _path_stats({name: column[a:b] for name, column in rows.items()})
        return stats


def _path_stats(rows):
    stats = PathStats()
    answered = rows["outcome"] == ANSWERED
    for code, op in enumerate(OPS, 1):
        mine = rows["op"] == code
        stats.ops[op] = OpStats(int(np.count_nonzero(mine)), int(rows["bytes"][mine].sum()),
                                rows["latency_ns"][mine & answered])
    failed = np.flatnonzero(rows["errno"] != 0)
    for errno in rows["errno"][failed].tolist():
        name = errno_name(errno)
        stats.errors[name] = stats.errors.get(name, 0) + 1
    for i in failed[:EVENTS_PER_PATH].tolist():
        stats.events.append(_io_error(rows, i))
    moved = np.flatnonzero(rows["failover_from"] >= 0)
    for i in moved[:EVENTS_PER_PATH].tolist():
        stats.events.append({"time_ns": int(rows["time_ns"][i]), "frame": int(rows["frame"][i]),
                             "kind": "failover", "first_frame": int(rows["failover_from"][i]),
                             "buf_id": int(rows["buf_id"][i]),
                             "op": OPS[int(rows["op"][i]) - 1]})
    return stats


def _io_error(rows, i):
    errno = int(rows["errno"][i])
    event = {"time_ns": int(rows["response_ns"][i]), "frame": int(rows["response_frame"][i]),
             "kind": "io_error", "request_frame": int(rows["frame"][i]),
             "op": OPS[int(rows["op"][i]) - 1], "errno": errno, "name": errno_name(errno)}
    if rows["rnbd_type"][i] >= 0:
        event["rnbd"] = kind_name(int(rows["rnbd_type"][i]))
    if rows["rnbd_op"][i] >= 0:
        event.update(device_id=int(rows["device_id"][i]),
                     rnbd_op=rnbd_op_name(int(rows["rnbd_op"][i])), sector=int(rows["sector"][i]),
                     bi_size=int(rows["bi_size"][i]))
    return event
