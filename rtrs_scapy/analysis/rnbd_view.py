"""What the block device saw: RNBD IO per session, device and operation, apart
from the control messages, made of the IO rows (docs/PROTOCOL.md#rnbd-messages).

The RTRS counts of the summary stay what the kernel's stats/rdma counts (every
RTRS request, RNBD control included, ``data_len + usr_len`` bytes); this view
counts RNBD IO by its own fields: one IO per RNBD_MSG_IO header, ``bi_size``
bytes, by operation (read, write, flush, discard, secure_erase, write_zeroes),
with its latency, sizes and access pattern, and the control messages
(sess_info, open, close) apart.  Devices come from the OPEN (path, access mode)
and its reply (id, size, logical block size); a device opened again after a
reconnect with another size is a size change.

Requests whose RNBD header the capture's snaplen cut (header-only, counted by
their RTRS op) leave the figures of that direction unknown: they are null then,
never the part that was seen (docs/PROTOCOL.md#header-only-captures).
"""

from collections import Counter

import numpy as np

from ..spec.constants import RNBD_MSG_CLOSE, RNBD_MSG_IO, RNBD_SECTOR_SIZE as SECTOR, \
    rnbd_access_mode, rnbd_end_sector, rnbd_op_name, short_name
from ..engine.distinct import distinct, group_runs, lexsort, runs
from . import iorows, rnbd, split
from .growing import GATHER, MICRO, Growing
from .io import WRITE
from .summary import latency_stats

CONTROL = ("sess_info", "open", "close")
#: the RTRS op (rnbd-clt.c: rq_data_dir(), READ for a flush) of RNBD ops and control messages
RTRS_OP_OF = {"read": "read", "flush": "read", "sess_info": "read", "open": "read"}


def rtrs_op_of(name):
    return RTRS_OP_OF.get(name, "write")


#: the columns of the IO rows (iorows.py) that a session's view reads
VIEW_COLUMNS = ("frame", "rnbd_type", "rnbd_op", "device_id", "outcome", "errno", "bi_size")
#: those it gathers: with the path and what failovers (_SessionView.failed_over) and the
#: split (split.parts_ns) read
WAITING_COLUMNS = VIEW_COLUMNS + ("path", "failed_over", "op", "latency_ns", "time_ns",
                                  "request_first_ns", "response_first_ns", "response_ns",
                                  "data_first_ns", "data_last_ns", "desc_key")


class RnbdView:
    """Per session: IO by operation and device, control messages, devices.  The IO
    rows are taken in a block of GATHER rows at a time (growing.py: a batch costs its
    two dozen numpy calls whatever its length), each row for the session its
    path had when it came; what reads the view, or changes what the rows would
    change, takes in the rows gathered so far first (``flush``)."""

    def __init__(self, keep_latencies=True):
        self.sessions = {}      # session -> _SessionView
        self.keep_latencies = keep_latencies    # False: no latency lists (watch)
        self.waiting = []       # (the rows' columns, the session of each of their paths)
        self.waiting_rows = 0

    def of(self, session):
        view = self.sessions.get(session)
        if view is None:
            view = self.sessions[session] = _SessionView(self.keep_latencies)
        return view

    def seen(self):
        """The sessions of the view."""
        self.flush()
        return list(self.sessions)

    def rows(self, batch, paths):
        """A batch of IO rows (iorows.py) of the analyzer's ``paths``."""
        if not len(batch["path"]):
            return
        pids = distinct(batch["path"]).tolist()
        self.waiting.append(({k: batch[k] for k in WAITING_COLUMNS},
                             {pid: paths[pid].session for pid in pids}))
        self.waiting_rows += len(batch["path"])
        if self.waiting_rows >= GATHER:
            self.flush()

    def flush(self):
        """The rows gathered so far taken in.  A request that was failed over is the
        same block IO as its copy: only the copy counts; a write the server answered
        before the client re-sent it ran twice on the server."""
        if not self.waiting:
            return
        waiting, self.waiting, self.waiting_rows = self.waiting, [], 0
        owners, index = [], {}          # the sessions, and each one's place among them
        for _, sessions in waiting:
            for session in sessions.values():
                if id(session) not in index:
                    index[id(session)] = len(owners)
                    owners.append(session)
        batch = iorows.concat([columns for columns, _ in waiting]) if len(waiting) > 1 \
            else dict(waiting[0][0])
        batch["owner"] = np.concatenate([
            _owners(columns["path"], {pid: index[id(s)] for pid, s in sessions.items()})
            for columns, sessions in waiting])
        if batch["failed_over"].any():
            for k in distinct(batch["owner"][batch["failed_over"] == 1]).tolist():
                self.of(owners[k]).failed_over(batch, batch["owner"] == k)
            batch = {k: v[batch["failed_over"] == 0] for k, v in batch.items()}
        # by session; in a session, its IO by device, op and size, then the rest: one
        # gather a column, then a slice a session and one a device's op, whose sizes
        # are then runs (what an op keeps of its IOs does not depend on their order)
        io = batch["rnbd_type"] == RNBD_MSG_IO
        order = lexsort((batch["bi_size"], batch["rnbd_op"], batch["device_id"], ~io,
                            batch["owner"]))
        columns = {k: batch[k][order] for k in VIEW_COLUMNS}
        timings = _timings(batch, order) if self.keep_latencies else None
        for k, start, stop in runs(batch["owner"][order]):
            self.of(owners[k]).add({c: v[start:stop] for c, v in columns.items()},
                                   None if timings is None else timings[start:stop])

    def requests(self, session, reqs, order):
        """Requests as they are settled, in capture order: the access pattern."""
        view = self.of(session)
        io = reqs["rnbd_type"][order] == RNBD_MSG_IO
        devices = reqs["device_id"][order][io]
        sectors, sizes = reqs["sector"][order][io], reqs["bi_size"][order][io]
        for device_id in distinct(devices).tolist():
            mine = devices == device_id
            view.device(device_id).pattern(sectors[mine], sizes[mine])

    def copy_without_original(self, session):
        """A failover whose original never reached the wire (failover.py)."""
        failovers = self.of(session).failovers
        failovers["failed_over"] += 1
        failovers["original_not_on_wire"] += 1

    def opened(self, session, request, reply, frame, time):
        """An OPEN answered by its OPEN_RSP (after the rows before it: a CLOSE's)."""
        self.flush()
        self.of(session).opened(request, reply, frame, time)

    def summary(self, session):
        self.flush()
        return self.sessions.get(session, _SessionView()).summary()

    def header_only(self, session, op, count):
        """``count`` requests of RTRS op ``op`` whose RNBD header was not captured."""
        if count:
            self.of(session).blind[op] += count

    def device_ids(self, session):
        self.flush()
        view = self.sessions.get(session)
        return list(view.devices) if view is not None else []

    def merge(self, old, new):
        """``old``'s view into ``new``'s: one session seen under two identities."""
        self.flush()
        view = self.sessions.pop(old, None)
        if view is not None:
            self.of(new).merge(view)


#: what a device's op keeps of each answered IO, side by side in one growing array:
#: its latency, then the split's parts (a short session's few IOs cost one array per
#: op, not six); a part the capture cannot tell is kept as UNKNOWN
TIMINGS = ("latency",) + split.PARTS
#: ns; a negative whole number of µs, so it leaves the array in µs (growing.py)
UNKNOWN = -MICRO


def _owners(path, owner_of):
    """The owner of each row, by its path (``owner_of``: path id -> owner)."""
    if len(owner_of) == 1:
        return np.full(len(path), next(iter(owner_of.values())), dtype=np.int64)
    out = np.empty(len(path), dtype=np.int64)
    for pid, owner in owner_of.items():
        out[path == pid] = owner
    return out


def _timings(rows, order):
    """The TIMINGS of the IO rows ``order``, a row each: its latency, then the split's
    parts (split.py), UNKNOWN where the capture cannot tell one."""
    out = np.empty((len(order), len(TIMINGS)), dtype=np.int64)
    out[:, 0] = rows["latency_ns"][order]
    parts = split.parts_matrix(rows, order)
    out[:, 1:] = np.where(parts >= 0, parts, UNKNOWN).T
    return out


class _Ops:
    """count, bytes (bi_size), errors, latencies and sizes of one RNBD operation; the
    latencies and the split's parts as ns, in one growing array (TIMINGS).  A
    device's op keeps them; its session's op is its devices' joined when it is
    summarized (``_joined``)."""

    __slots__ = ("keep_latencies", "count", "bytes", "errors", "timings", "sizes")

    def __init__(self, keep_latencies=True):
        self.keep_latencies = keep_latencies
        self.count = self.bytes = self.errors = 0
        self.timings = Growing(times=True) if keep_latencies else None
        self.sizes = Counter()

    def add(self, sizes, failed, timings):
        """IOs of this op: their ``sizes`` (bi_size, sorted), whether each failed, and
        the TIMINGS rows of the answered ones."""
        self.count += len(sizes)
        self.bytes += int(sizes.sum())
        self.errors += int(np.count_nonzero(failed))
        if self.timings is not None:
            self.timings.extend(timings.ravel())
        for size, start, stop in runs(sizes):
            self.sizes[size] += stop - start

    def merge(self, other):
        self.count += other.count
        self.bytes += other.bytes
        self.errors += other.errors
        if self.timings is not None:
            self.timings.extend(other.timings.values())
        self.sizes.update(other.sizes)

    def summary(self):
        out = {"count": self.count, "bytes": self.bytes, "errors": self.errors,
               "sizes": {str(k): v for k, v in sorted(self.sizes.items())}}
        if self.timings is None:
            out["latency_us"] = latency_stats(())
            return out
        kept, unit_ns = self.timings.kept()
        timings = kept.reshape(-1, len(TIMINGS))
        out["latency_us"] = latency_stats(timings[:, 0], unit_ns)
        out["split_us"] = {part: latency_stats(known[known >= 0], unit_ns)
                           for part, known in zip(split.PARTS, timings[:, 1:].T)}
        return out


def _joined(devices, name, keep_latencies):
    """Op ``name`` of ``devices``, joined (a session's op)."""
    joined = _Ops(keep_latencies)
    for device in devices:
        if name in device.ops:
            joined.merge(device.ops[name])
    return joined


def _session_ops(devices, figures, keep_latencies):
    """A session's figures by op, its devices' joined (``figures``: each device's, by
    op, as ``_ops_figures`` made them): an op of one device only is that device's
    figures, not made a second time (percentiles are most of a summary's time)."""
    holders = {}
    for device, made in zip(devices, figures):
        for name in device.ops:
            holders.setdefault(name, []).append(made)
    return {name: made[0][name] if len(made) == 1
            else _joined(devices, name, keep_latencies).summary()
            for name, made in holders.items()}


class _Device:
    __slots__ = ("keep_latencies", "info", "ops", "size", "opened_at", "last_end", "io",
                 "sequential", "aligned")

    def __init__(self, keep_latencies=True):
        self.keep_latencies = keep_latencies
        self.info = {"name": None, "access_mode": None, "nsectors": None,
                     "logical_block_size": None, "opened_frame": None, "closed_frame": None,
                     "size_changes": []}
        self.ops = {}
        self.size = None           # nsectors of the latest OPEN reply
        self.opened_at = None      # (frame, time) of the first OPEN reply
        self.last_end = None       # the sector after the last IO (access pattern)
        self.io = self.sequential = self.aligned = 0

    def op(self, code):
        """The figures of RNBD op ``code``."""
        name = rnbd_op_name(code)
        ops = self.ops.get(name)
        if ops is None:
            ops = self.ops[name] = _Ops(self.keep_latencies)
        return ops

    def pattern(self, sectors, sizes):
        """Sequential: an IO that starts where the device's previous one ended; aligned:
        start and size in whole logical blocks."""
        ends = rnbd_end_sector(sectors, sizes)
        before = np.concatenate(([-1 if self.last_end is None else self.last_end], ends[:-1]))
        self.sequential += int(np.count_nonzero(sectors == before))
        block = self.info["logical_block_size"] or SECTOR
        self.aligned += int(np.count_nonzero((sectors * SECTOR % block == 0)
                                             & (sizes % block == 0)))
        self.io += len(sectors)
        self.last_end = int(ends[-1])

    def merge(self, earlier):
        """What the same device did earlier, under another identity of its session."""
        info, before = self.info, earlier.info
        for key in ("name", "access_mode", "logical_block_size"):
            info[key] = info[key] if info[key] is not None else before[key]
        if before["nsectors"] is not None:
            if info["nsectors"] is not None and info["nsectors"] != earlier.size:
                frame, time = self.opened_at
                info["size_changes"].insert(0, {"frame": frame, "time": time,
                                                "nsectors": info["nsectors"]})
            info["nsectors"] = before["nsectors"]
        if before["opened_frame"] is not None:
            info["opened_frame"], self.opened_at = before["opened_frame"], earlier.opened_at
        info["size_changes"] = before["size_changes"] + info["size_changes"]
        _merge_ops(self.ops, earlier.ops)
        self.io += earlier.io
        self.sequential += earlier.sequential
        self.aligned += earlier.aligned

    def summary(self, blind, figures):
        """The device's summary; ``figures``: its ops' (``_ops_figures``)."""
        out = dict(self.info)
        out["ops"] = _ops_summary(figures, blind)
        known = self.io and not (blind and any(blind.values()))
        out["sequential_share"] = round(self.sequential / self.io, 4) if known else None
        out["aligned_share"] = round(self.aligned / self.io, 4) if known else None
        return out


class _SessionView:
    # slots, as _Device's and _Ops': a capture of thousands of sessions keeps one of
    # each per session, device and operation
    __slots__ = ("keep_latencies", "control", "devices", "blind", "failovers")

    def __init__(self, keep_latencies=True):
        self.keep_latencies = keep_latencies
        self.control = {}       # kind -> [count, errors], of the kinds seen
        self.devices = {}
        self.blind = {"read": 0, "write": 0}     # header-only requests by RTRS op
        # block IOs re-sent on another path (counted once): of them, copies whose original
        # is not on the wire (failover.py) and writes the server ran twice
        self.failovers = {"failed_over": 0, "original_not_on_wire": 0, "executed_twice": 0}

    def failed_over(self, rows, mine):
        """IO rows re-sent on another path: an answered write ran on the server before
        its copy did (docs/PROTOCOL.md#failover-from-the-wire)."""
        gone = mine & (rows["failed_over"] == 1) & (rows["rnbd_type"] == RNBD_MSG_IO)
        self.failovers["failed_over"] += int(np.count_nonzero(gone))
        self.failovers["executed_twice"] += int(np.count_nonzero(
            gone & (rows["outcome"] == iorows.ANSWERED) & (rows["op"] == WRITE)))

    def device(self, device_id):
        device = self.devices.get(device_id)
        if device is None:
            device = self.devices[device_id] = _Device(self.keep_latencies)
        return device

    def add(self, rows, timings):
        """A path's IO rows of a batch: first its RNBD IO by device, op and size
        (RnbdView.rows), then the rest; ``timings``: their TIMINGS rows (``_timings``)."""
        io = rows["rnbd_type"] == RNBD_MSG_IO
        ios = int(np.count_nonzero(io))
        device, op, sizes = rows["device_id"][:ios], rows["rnbd_op"][:ios], rows["bi_size"][:ios]
        answered = rows["outcome"] == iorows.ANSWERED
        failed = answered & (rows["errno"] != 0)
        for start, stop in group_runs(device, op):
            told = answered[start:stop]
            self.device(int(device[start])).op(int(op[start])).add(
                sizes[start:stop], failed[start:stop],
                None if timings is None else timings[start:stop][told])
        for code in distinct(rows["rnbd_type"][~io & (rows["rnbd_type"] >= 0)]).tolist():
            kind = rnbd.kind_name(code)
            if kind in CONTROL:
                mine = rows["rnbd_type"] == code
                counts = self.control.setdefault(kind, [0, 0])
                counts[0] += int(np.count_nonzero(mine))
                counts[1] += int(np.count_nonzero(mine & failed))
        closes = rows["rnbd_type"] == RNBD_MSG_CLOSE
        for device_id, frame in zip(rows["device_id"][closes].tolist(),
                                    rows["frame"][closes].tolist()):
            if device_id >= 0:     # frames, not arrival: an OPEN reply may be read later
                info = self.device(device_id).info
                info["closed_frame"] = max(frame, info["closed_frame"] or 0)

    def merge(self, earlier):
        for op, count in earlier.blind.items():
            self.blind[op] += count
        for key, value in earlier.failovers.items():
            self.failovers[key] += value
        for kind, (count, errors) in earlier.control.items():
            counts = self.control.setdefault(kind, [0, 0])
            counts[0] += count
            counts[1] += errors
        for device_id, device in earlier.devices.items():
            self.device(device_id).merge(device)

    def opened(self, request, reply, frame, time):
        device = self.device(reply["device_id"])
        info = device.info
        if device.size is not None and reply["nsectors"] != device.size:
            info["size_changes"].append({"frame": frame, "time": time,
                                         "nsectors": reply["nsectors"]})
        if info["nsectors"] is None:
            info["nsectors"] = reply["nsectors"]      # the size at the first OPEN
        device.size = reply["nsectors"]
        if info["opened_frame"] is None:
            info["opened_frame"], device.opened_at = frame, (frame, time)
        info["name"] = request.get("dev_name") or info["name"]
        mode = request.get("access_mode")
        if mode is not None:
            info["access_mode"] = short_name(rnbd_access_mode, mode, "RNBD_ACCESS_").lower()
        info["logical_block_size"] = reply.get("logical_block_size") or SECTOR
        if info["closed_frame"] is not None and info["closed_frame"] < frame:
            info["closed_frame"] = None      # opened again after its close

    def summary(self):
        blind = self.blind
        control = {kind: None if blind[rtrs_op_of(kind)]
                   else dict(zip(("count", "errors"), self.control.get(kind, (0, 0))))
                   for kind in CONTROL}
        ids, devices = zip(*sorted(self.devices.items())) if self.devices else ((), ())
        figures = [_ops_figures(device.ops) for device in devices]
        ops = _session_ops(devices, figures, self.keep_latencies)
        out = {"ops": _ops_summary(ops, blind), "control": control,
               "failovers": dict(self.failovers),
               "devices": {str(k): device.summary(blind, made)
                           for k, device, made in zip(ids, devices, figures)}}
        if any(blind.values()):
            out["header_only_requests"] = dict(blind)
        return out


def _ops_figures(ops):
    """Each op's figures, by op."""
    return {op: stats.summary() for op, stats in ops.items()}


def _ops_summary(figures, blind):
    """The ops' figures (by op); null for every op of a direction with header-only
    requests (its RNBD IO is not all known), the main op of that direction included."""
    out = dict(sorted(figures.items()))
    for op, count in (blind or {}).items():
        if count:
            out[op] = None
            for name in out:
                if rtrs_op_of(name) == op:
                    out[name] = None
    return dict(sorted(out.items()))


def _merge_ops(ops, earlier):
    for name, stats in earlier.items():
        ops.setdefault(name, _Ops(stats.keep_latencies)).merge(stats)
