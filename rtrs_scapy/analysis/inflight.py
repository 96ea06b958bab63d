"""IOs in flight as a step function of time: the queue size, the busy time, the
deepest queue and the time spent at the queue depth (docs/iostat.md).

An answered IO is in flight from its first send to its response (its latency);
an IO never answered has no end on the wire and is left out.  Everything is
computed from sorted starts and ends, without a loop over IOs.
"""

from dataclasses import dataclass

import numpy as np

from ..engine.distinct import runs
from .growing import Gathered, Growing
from .iorows import ANSWERED


def spans(rows):
    """(mask, start_ns, end_ns) of the answered IOs of a batch of IO rows."""
    answered = (rows["outcome"] == ANSWERED) & (rows["latency_ns"] >= 0)
    end = rows["response_ns"]
    return answered, end - rows["latency_ns"], end


#: the instants (ns) a step's key holds: twice one, and a bit, fit 64 bits
KEYED = 1 << 62


def levels(start, end):
    """(time, count): the event times in order and the IOs in flight from each on
    (at a tie the ends go first).  Each event is one integer, its time doubled and a
    start's bit added, and the events are sorted as those (numpy's vectorized sort of
    one column: a fifth of the time of a sort by time, then by start or end)."""
    time = np.concatenate((start, end))
    if time.dtype.kind != "i" or not len(time) or time.min() < -KEYED \
            or time.max() >= KEYED:     # (not integers, none, or a hostile file's instants)
        delta = np.concatenate((np.ones(len(start), np.int8), -np.ones(len(end), np.int8)))
        order = np.lexsort((delta, time))
        return time[order], np.cumsum(delta[order], dtype=np.int64)
    keys = time.astype(np.int64) << 1
    keys[:len(start)] += 1
    keys.sort()
    return keys >> 1, np.cumsum((keys & 1) * 2 - 1)


def peak(count):
    return int(count.max()) if len(count) else 0


def at_least(time, count, depth):
    """Seconds with ``depth`` or more IOs in flight."""
    if not len(time) or not depth:
        return 0.0
    return float(np.diff(time)[count[:-1] >= depth].sum()) / 1e9


@dataclass
class Steps:
    """The in-flight count between event times: ``count[i]`` IOs from ``time[i]``
    to ``time[i + 1]``; ``area`` and ``busy`` are cumulative at ``time``."""
    time: np.ndarray
    count: np.ndarray
    area: np.ndarray       # ∫ in flight dt, ns
    busy: np.ndarray       # ∫ [in flight ≥ 1] dt, ns

    @classmethod
    def of(cls, start, end):
        time, count = levels(start, end)
        dt = np.diff(time)
        area = np.concatenate(([0], np.cumsum(count[:-1] * dt))) if len(time) else time
        busy = np.concatenate(([0], np.cumsum((count[:-1] > 0) * dt))) if len(time) else time
        return cls(time, count, area, busy)

    def at(self, edges):
        """(area, busy) cumulative at ``edges`` (ns)."""
        if not len(self.time):
            zero = np.zeros(len(edges))
            return zero, zero
        return (np.interp(edges, self.time, self.area),
                np.interp(edges, self.time, self.busy))

    def peak(self):
        return peak(self.count)

    def at_least(self, depth):
        return at_least(self.time, self.count, depth)


class InFlight:
    """The answered IOs' spans per path and device, gathered from the IO rows for
    the summary's deepest queue and time at the queue depth."""

    def __init__(self):
        # per answered IO: path id, device id, an RNBD IO or not, its end and its
        # length (the start is the end minus the length), each one growing array, the
        # batches gathered before they go in
        self.kept = {"path": Growing(), "device": Growing(), "io": Growing(),
                     "end": Growing(times=True, instants=True), "length": Growing(times=True)}
        self.gathered = Gathered(self.kept)

    def add(self, rows):
        mask, start, end = spans(rows)
        self.gathered.extend({"path": rows["path"][mask], "device": rows["device_id"][mask],
                              "io": rows["rnbd_op"][mask] >= 0, "end": end[mask],
                              "length": (end - start)[mask]})

    def figures(self, session_of, depth_of):
        """{("path", path id) | ("device", session, device id): {"max_in_flight",
        "queue_full_s"}}.  A path's own deepest queue, and the time its session's
        permits were all taken (the permits are the session's: ``session_of(path
        id)``, ``depth_of(path id)``); a device's deepest queue, and the time its own
        IOs held all the permits."""
        self.gathered.flush()
        kept = self.kept
        path, device, is_io = (kept[c].values() for c in ("path", "device", "io"))
        end, length = kept["end"], kept["length"]
        if not len(path):
            return {}
        by_path = dict(slices(path))        # path id -> positions of its IOs
        owners, paths_of, index = [], [], {}     # index: id(owner) -> its position
        for pid in sorted(by_path):
            owner = session_of(pid)
            known = index.get(id(owner))
            if known is None:
                owners.append(owner)
                paths_of.append([])
                known = index[id(owner)] = len(owners) - 1
            paths_of[known].append(pid)
        # the steps of a session of one path are its path's, and those of a device that
        # has every IO of its session the session's (the same IOs in the same order)
        out = {("path", pid): {} for pid in by_path}
        devices = {}
        for sid, pids in enumerate(paths_of):
            if len(pids) > 1:   # (before the session's steps: one set of steps at a time)
                for pid in pids:
                    out[("path", pid)]["max_in_flight"] = peak(
                        _levels(end, length, by_path[pid])[1])
            at = np.concatenate([by_path[pid] for pid in pids])
            session = _levels(end, length, at)
            for pid in pids:
                if len(pids) == 1:
                    out[("path", pid)]["max_in_flight"] = peak(session[1])
                out[("path", pid)]["queue_full_s"] = round(at_least(*session,
                                                                    depth_of(pid) or 0), 6)
            depth = min(depth_of(pid) or 0 for pid in pids)   # the smallest of its paths
            io = at[is_io[at] != 0]
            for key, mine in slices(device[io].astype(np.int64) & 0xFFFFFFFF):
                time, count = session if len(mine) == len(at) else \
                    _levels(end, length, io[mine])
                devices[("device", owners[sid], key)] = {
                    "max_in_flight": peak(count),
                    "queue_full_s": round(at_least(time, count, depth), 6)}
        out.update(devices)
        return out


def _levels(end, length, at):
    """levels() of the IOs at positions ``at`` of the kept ends and lengths."""
    end = end.take(at)
    return levels(end - length.take(at), end)


def slices(keys):
    """(key, positions) of each distinct value of an int array: one sort, no mask per key."""
    order = np.argsort(keys, kind="stable")
    for key, start, stop in runs(keys[order]):
        yield key, order[start:stop]
