"""``rtrs-dissect iostat``: the analysis' IO rows per interval and device, path or
session (analysis/iostat.py), as text like ``iostat -x``, JSON lines or CSV
(docs/iostat.md)."""

import csv
import json
import math

import numpy as np

from ..analysis import iorows, iostat
from ..spec.constants import RNBD_OP_DISCARD, RNBD_OP_FLUSH, RNBD_OP_READ, \
    RNBD_OP_SECURE_ERASE, RNBD_OP_WRITE, RNBD_OP_WRITE_ZEROES
from .words import utc_iso

BY = ("device", "path", "session")
#: an RNBD operation's kind (iostat.KINDS) as the block layer counts it
_KIND_OF_OP = {RNBD_OP_READ: 0, RNBD_OP_WRITE: 1, RNBD_OP_WRITE_ZEROES: 1,
               RNBD_OP_DISCARD: 2, RNBD_OP_SECURE_ERASE: 2, RNBD_OP_FLUSH: 3}
#: (JSON/CSV key, text header, width, format) of the rates and figures shown
COLUMNS = (
    ("r_per_s", "r/s", 8, "%.2f"), ("w_per_s", "w/s", 8, "%.2f"),
    ("rkB_per_s", "rkB/s", 9, "%.1f"), ("wkB_per_s", "wkB/s", 9, "%.1f"),
    ("d_per_s", "d/s", 7, "%.2f"), ("f_per_s", "f/s", 7, "%.2f"),
    ("r_await_ms", "r_await", 7, "%.2f"), ("w_await_ms", "w_await", 7, "%.2f"),
    ("p99_ms", "p99", 7, "%.2f"), ("server_ms", "srv_ms", 7, "%.3f"),
    ("aqu_sz", "aqu-sz", 6, "%.2f"), ("util_pct", "%util", 6, "%.1f"),
    ("errors", "errors", 6, "%d"),
)
LINK = (("retransmissions", "retrans", 7, "%d"), ("stalls", "stalls", 6, "%d"))
#: what only devices have (the RTRS operations are reads and writes)
DEVICE_ONLY = ("discards", "flushes", "discard_bytes", "d_per_s", "f_per_s")
COUNT_KEYS = ("reads", "writes", "discards", "flushes", "read_bytes", "write_bytes",
              "discard_bytes", "errors")


class UnknownDevice(ValueError):
    """``--device`` names no device of the capture; the message lists the known ones."""


class TooManyLines(ValueError):
    """More intervals × groups than iostat.MAX_LINES; the message says the interval to use."""


def session_label(session, path):
    """A session's name, else the start of its paths_uuid, else its path's client."""
    if session is None:
        return "-" if path is None else str(path.client)
    return session.sessname or (session.paths_uuid or "")[:8] or "-"


class Table:
    """The records of one table (one dict per interval and group, see records()), made
    one at a time as they are read: a capture of hours at 1 s per device makes 10⁵
    of them, written out as they come, never all held at once."""

    def __init__(self, columns, labels, by, edges):
        self.columns, self.labels, self.by, self.edges = columns, labels, by, edges

    def __bool__(self):
        return bool(self.labels)    # every interval has a record per group

    def __iter__(self):
        return _as_records(self.columns, self.labels, self.by, self.edges)


def records(result, batches, by="device", interval_s=1.0, devices=()):
    """(label keys, one dict per interval and group) of an analysis and its IO rows:
    batches of them, or what iostat.kept_rows() kept of them."""
    return list(table(result, batches, by, interval_s, devices))


def table(result, batches, by="device", interval_s=1.0, devices=()):
    """The Table of records() (the figures computed, the records made as it is read)."""
    rows = iorows.Wide(iostat.kept_rows(batches).take())
    paths = result.analyzer.path_list
    group, labels, kind, size, events = _groups(rows, paths, by)
    if devices:
        group, labels = _only(group, labels, devices)
    capture = result.summary_parts()[0]["capture"]   # no session's summary is made
    first = _ns(capture.get("first_ts")) if capture.get("first_ts") is not None else 0
    last = _ns(capture.get("last_ts")) if capture.get("last_ts") is not None else first
    end, step = max(last, first + 1), max(1, int(round(interval_s * 1e9)))
    lines = iostat.intervals(first, end, step) * max(len(labels), 1)
    if lines > iostat.MAX_LINES:
        shortest = (end - first) / 1e9 * max(len(labels), 1) / iostat.MAX_LINES
        raise TooManyLines("%d intervals × %d lines is more than %d lines; the capture spans "
                           "%.0f s: use --interval %g or longer" % (
                               lines // max(len(labels), 1), max(len(labels), 1),
                               iostat.MAX_LINES, (end - first) / 1e9,
                               10 ** math.ceil(math.log10(shortest))))
    edges = iostat.bins(first, end, step)
    columns = iostat.table(rows, group, kind, size, len(labels), edges, events)
    return Table(columns, labels, by, edges)


def _ns(seconds):
    return int(round(seconds * 1e9))


def _groups(rows, paths, by):
    """Per row its group, the groups' labels, kinds, sizes, and the stalls."""
    path_ids = rows.columns["path"]     # narrow: an index needs no int64 copy
    sessions, session_of_path = _owners(paths)
    if by == "device":
        io = (rows.columns["rnbd_op"] >= 0) & (rows.columns["failed_over"] == 0)
        key = session_of_path[path_ids[io]] << 32
        key |= rows.columns["device_id"][io].astype(np.int64) & 0xFFFFFFFF
        keys, inverse = np.unique(key, return_inverse=True)
        del key
        group = np.full(len(io), -1, dtype=np.int32)   # fewer groups than rows
        group[io] = inverse.reshape(-1)
        del inverse
        labels = []
        for k in keys.tolist():
            owner = sessions[k >> 32]
            device_id = k & 0xFFFFFFFF
            labels.append({"session": session_label(_session(owner), _path(owner)),
                           "device_id": device_id, "device": _device_name(owner, device_id)})
        lookup = np.full(256, 0, dtype=np.int64)
        for op, k in _KIND_OF_OP.items():
            lookup[op] = k
        kind = lookup.astype(np.int8)[np.clip(rows.columns["rnbd_op"], 0, 255)]
        return group, labels, kind, rows.columns["bi_size"], None
    kind = rows.columns["op"] - 1
    row_session = session_of_path[path_ids]
    if by == "path":
        members = sorted(set(np.unique(path_ids).tolist()))
        group = np.searchsorted(np.array(members, dtype=np.int64), path_ids)
        labels = [_path_label(paths[p]) for p in members]
        stalls = [(s["time"], k, s["retransmissions"]) for k, p in enumerate(members)
                  if paths[p] is not None for s in paths[p].stalls]
    else:
        members = sorted(set(row_session.tolist()))
        group = np.searchsorted(np.array(members, dtype=np.int64), row_session)
        labels = [{"session": session_label(_session(sessions[s]), _path(sessions[s]))}
                  for s in members]
        stalls = [(s["time"], k, s["retransmissions"]) for k, m in enumerate(members)
                  for pid in np.flatnonzero(session_of_path == m).tolist()
                  if paths[pid] is not None for s in paths[pid].stalls]
    events = (np.array([_ns(t) for t, _, _ in stalls], dtype=np.int64),
              np.array([g for _, g, _ in stalls], dtype=np.int64),
              np.array([r for _, _, r in stalls], dtype=np.int64))
    return group, labels, kind, rows.columns["bytes"], events


def _path_label(path):
    """A path's label keys; an evicted path (None, analysis/bounds.py) has no names."""
    if path is None:
        return {"session": "-", "client": None, "server": None, "sess_uuid": None}
    return {"session": session_label(_session(path.session), path), "client": str(path.client),
            "server": str(path.server), "sess_uuid": path.sess_uuid}


def _owners(paths):
    """The sessions of the paths (a path without a session is its own), and per path
    id the index of its own."""
    owners, index = [], np.zeros(max(len(paths), 1), dtype=np.int64)
    for pid, path in enumerate(paths):
        owner = path.session if path is not None and path.session is not None else path
        known = next((k for k, o in enumerate(owners) if o is owner), None)
        if known is None:
            owners.append(owner)
            known = len(owners) - 1
        index[pid] = known
    return owners, index


def _session(owner):
    return owner if owner is not None and hasattr(owner, "paths") else None


def _path(owner):
    return owner if owner is not None and not hasattr(owner, "paths") else None


def _device_name(owner, device_id):
    """The path the client opened, from the OPEN of any path of the session."""
    members = owner.paths if _session(owner) is not None else [owner] if owner else []
    for path in members:
        if device_id in path.devices:
            return path.devices[device_id]
    return None


def _only(group, labels, wanted):
    """The groups of the devices ``wanted`` (ids or names); UnknownDevice if one is none."""
    keep = []
    for value in wanted:
        hits = [k for k, label in enumerate(labels)
                if value in (str(label["device_id"]), label["device"])]
        if not hits:
            known = ", ".join("%s (%s)" % (label["device_id"], label["device"] or "no name")
                              for label in labels) or "none"
            raise UnknownDevice("no device %r in the capture; its devices: %s" % (value, known))
        keep += hits
    keep = sorted(set(keep))
    remap = np.full(len(labels) + 1, -1, dtype=np.int64)
    remap[keep] = np.arange(len(keep))
    return remap[group], [labels[k] for k in keep]


def _as_records(columns, labels, by, edges):
    widths = np.diff(edges) / 1e9
    rate = {"r_per_s": "reads", "w_per_s": "writes", "d_per_s": "discards",
            "f_per_s": "flushes"}
    for i in range((len(edges) - 1) * len(labels)):
        interval, group = divmod(i, len(labels))
        seconds = widths[interval]
        record = {"interval": interval, "time": utc_iso(edges[interval] / 1e9),
                  "seconds": round(float(seconds), 9), "by": by}
        record.update(labels[group])
        for key in COUNT_KEYS:
            record[key] = int(columns[key][i])
        for key, count in rate.items():
            record[key] = round(columns[count][i] / seconds, 3)
        record["rkB_per_s"] = round(columns["read_bytes"][i] / 1024 / seconds, 3)
        record["wkB_per_s"] = round(columns["write_bytes"][i] / 1024 / seconds, 3)
        for key, source in (("r_await_ms", "read_await_ms"), ("w_await_ms", "write_await_ms"),
                            ("p99_ms", "p99_ms"), ("server_ms", "server_ms")):
            record[key] = _number(columns[source][i], 3)
        record["aqu_sz"] = round(float(columns["aqu_sz"][i]), 3)
        record["util_pct"] = round(float(columns["util_pct"][i]), 2)
        if "stalls" in columns:
            record["retransmissions"] = int(columns["retransmissions"][i])
            record["stalls"] = int(columns["stalls"][i])
        if by != "device":
            for key in DEVICE_ONLY:
                del record[key]
        yield record


def _number(value, digits):
    return None if math.isnan(value) else round(float(value), digits)


def _label(record, by):
    if by == "device":
        return "%s %s%s" % (record["session"], record["device_id"],
                            " " + record["device"] if record["device"] else "")
    if by == "path":
        return "%s %s → %s" % (record["session"], record["client"], record["server"])
    return record["session"]


def text(recs, by):
    """iostat -x's layout: a header per interval, one aligned line per group."""
    return "".join(text_parts(recs, by))


def text_parts(recs, by):
    """text() a line at a time (an interval of thousands of groups is MBs of text);
    ``recs`` a Table or a list of records (the labels' width is the widest group's:
    each interval has a line per group)."""
    columns = [c for c in COLUMNS if by == "device" or c[0] not in DEVICE_ONLY]
    columns += LINK if by != "device" else ()
    width = max([len(_label(r, by)) for r in getattr(recs, "labels", recs)] + [len(by)])
    header = "%-*s" % (width, by) + "".join(" %*s" % (w, h) for _, h, w, _ in columns)
    interval = None
    for record in recs:
        if record["interval"] != interval:
            if interval is not None:
                yield "\n"     # a blank line between intervals
            interval = record["interval"]
            yield "%s  interval %d  (%.3f s)\n%s\n" % (record["time"], interval,
                                                      record["seconds"], header)
        cells = []
        for key, _, w, fmt in columns:
            value = record[key]
            cells.append(" %*s" % (w, "-" if value is None else fmt % value))
        yield "%-*s%s\n" % (width, _label(record, by), "".join(cells))


def json_lines(recs):
    return "".join(json_parts(recs))


def json_parts(recs):
    """json_lines() a record at a time."""
    return (json.dumps(r) + "\n" for r in recs)


def csv_text(recs):
    return "".join(csv_parts(recs))


def csv_parts(recs):
    """csv_text() a record at a time, the header first (the keys of the first)."""
    written, writer = [], None
    for record in recs:
        if writer is None:
            writer = csv.DictWriter(_Appender(written), fieldnames=list(record),
                                    lineterminator="\n")
            writer.writeheader()
        writer.writerow({k: "" if v is None else v for k, v in record.items()})
        yield "".join(written)
        written.clear()


class _Appender:
    """A file whose writes go to a list (the csv writer's lines, taken as made)."""

    def __init__(self, pieces):
        self.write = pieces.append
