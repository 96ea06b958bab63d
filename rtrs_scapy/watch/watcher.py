"""The summary's engine and analyzer driven chunk by chunk, read out per interval.

``Watcher.feed(chunk)`` runs the engine; ``Watcher.interval(now, seconds)``
flushes it (the IO rows of the interval come out), sums the rows per path
(stats.py) and reads the path state from the analyzer: queue depth, requests
in flight, reconnects, the last heartbeat and the summary's events; and from
the engine's streams the retransmissions and the transmissions still not
acknowledged (a path whose oldest one waits for more than an interval is
``stalled``, docs/PROTOCOL.md#stalls).  Ages are on the capture's clock: for
live input, the last record's stamp plus the wall time since it was read.  The
analyzer keeps no latency lists (its percentiles are the summary's, the
interval's come from the rows), so memory stays flat with the stream's length;
paths that went quiet (no IO, heartbeat or CM message for ``age_out`` seconds)
leave the view, their totals stay with the exporter.
"""

import datetime
import time
from dataclasses import dataclass, field

import numpy as np

from ..analysis import Analyzer
from ..analysis.summary import path_summary
from ..engine import Engine
from ..engine import transport as T
from .stats import OPS, IntervalRows, PathStats

#: seconds without IO, heartbeat or CM message after which a path leaves the view
AGE_OUT_S = 60.0
#: the summary's event kinds shown as they happen (IO errors and failovers come from the rows)
CM_EVENTS = ("connect", "reconnect", "reconnect_failed", "reject", "disconnect", "outage",
             "heartbeat_lost", "heartbeat_gap")


def iso(seconds):
    """ISO 8601 UTC with microseconds, e.g. 2026-11-29T15:15:15.625237Z."""
    stamp = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class PathRow:
    """One path in one interval: the JSON line's path object and what the screen
    and the exporter need beside it."""
    id: int
    session: str
    sess_uuid: object
    client: str
    server: str
    state: str
    stats: PathStats
    inflight: int
    queue_depth: object
    reconnects: int             # in this interval
    reconnects_total: int
    heartbeat_age_s: object
    devices: dict = field(default_factory=dict)
    details: dict = field(default_factory=dict)   # for the screen's path details
    retransmissions: int = 0    # in this interval
    stall: object = None        # the oldest transmission not acknowledged: frame, time, sender

    def json(self):
        ops = {op: {"count": self.stats.ops[op].count, "bytes": self.stats.ops[op].bytes,
                    "latency_us": self.stats.ops[op].latency_us()} for op in OPS}
        return {"session": self.session, "sess_uuid": self.sess_uuid, "client": self.client,
                "server": self.server, "state": self.state, "read": ops["read"],
                "write": ops["write"], "inflight": self.inflight,
                "queue_depth": self.queue_depth, "errors": dict(self.stats.errors),
                "reconnects": self.reconnects, "heartbeat_age_s": self.heartbeat_age_s,
                "retransmissions": self.retransmissions,
                "stall": None if self.stall is None else dict(self.stall,
                                                              time=iso(self.stall["time"]))}


@dataclass
class Interval:
    end: float                  # seconds since the epoch (capture clock or wall clock)
    seconds: float
    paths: list                 # PathRow, grouped by session
    events: list                # dicts with "time" (epoch s), "session", "client", ...
    final: bool = False
    # (session, device, op) -> totals so far; empty unless the watcher keeps them
    rnbd: dict = field(default_factory=dict)

    def json(self):
        return {"time": iso(self.end), "interval_s": round(self.seconds, 6),
                "paths": [p.json() for p in self.paths],
                "events": [dict(e, time=iso(e["time"])) for e in self.events]}


def session_name(path):
    return session_label(path.session)


def session_label(session):
    return session.label


def path_state(path, stall=None):
    """up, stalled (up, but a transmission waits for its acknowledgement for more than
    an interval), down (its heartbeats lost, disconnected by the server, or reconnecting:
    the client gets it back), closed (for good: the client disconnected it of its own
    accord, or it was never established), connecting, or active (IO seen, handshake not
    in the capture)."""
    if path.up:
        return "stalled" if stall is not None else "up"
    if path.up is False:
        down = path.down
        if down is None or (down["cause"] == "client_disconnect" and not down["outage"]):
            return "closed"
        return "down"
    return "connecting" if path.attempts else "active"


class _View:
    """What the watcher remembers of a path between intervals."""
    __slots__ = ("last_active", "reconnects", "retransmissions", "heartbeat", "events_seen",
                 "state")

    def __init__(self, now):
        self.last_active = now
        self.reconnects = 0
        self.retransmissions = 0
        self.heartbeat = None
        self.events_seen = set()
        self.state = None


class Watcher:
    def __init__(self, queue_depth=None, age_out=AGE_OUT_S, live=False, rnbd_totals=True):
        self.rows = IntervalRows()
        self.analyzer = Analyzer(keep_messages=False, queue_depth=queue_depth,
                                 io_sink=self.rows, keep_latencies=False)
        self.engine = Engine(self.analyzer)
        self.age_out = age_out
        self.views = {}             # path id -> _View, the paths in view
        self.memory = {}            # path id -> _View of every path (small: counters, keys)
        self.cm_paths = set()       # paths a CM MAD or a heartbeat touched since the last interval
        self.unattributed = 0       # heartbeats of streams without handshake looked at
        self.live = live            # intervals of the wall clock (a pipe, an interface)
        # the RNBD totals of every session so far in each interval (the exporter's): made
        # from each session's RNBD summary, they cost an interval as many as the sessions
        self.rnbd_totals = rnbd_totals
        self.last_stamp = None      # the last record's stamp (s) and when it was read
        self.read_at = None
        self._hook_cm()

    def _hook_cm(self):
        """Note which paths the CM tracker's MADs and heartbeats touch (its ``feed``
        returns the Connection or Path a MAD belongs to)."""
        cm, touched = self.analyzer.cm, self.cm_paths
        feed, heartbeat = cm.feed, cm.heartbeat

        def noted_feed(*args):
            known = feed(*args)
            if known is not None:
                touched.add(getattr(known, "path", known))
            return known

        def noted_heartbeat(path, frame, ts):
            heartbeat(path, frame, ts)
            touched.add(path)
            self._memory(path.id, ts).heartbeat = ts

        cm.feed, cm.heartbeat = noted_feed, noted_heartbeat

    def _memory(self, pid, now):
        view = self.memory.get(pid)
        if view is None:
            view = self.memory[pid] = _View(now)
        return view

    def feed(self, chunk):
        self.engine.feed(chunk)
        if len(chunk):
            self.last_stamp, self.read_at = int(chunk.stamps[-1]) / 1e9, time.time()

    def clock(self, now):
        """The capture's clock at the end of an interval that ends at ``now``."""
        if not self.live or self.last_stamp is None:
            return now
        return self.last_stamp + max(0.0, now - self.read_at)

    def interval(self, now, seconds, final=False):
        """The interval that ends at ``now`` (seconds since the epoch)."""
        an = self.analyzer
        self.engine.flush()
        # what the streams evicted so far counted (analysis: streams_evicted), before the
        # end's harvest adds the live ones to it (and merges linked paths' into one)
        harvested = {path.id: path.transport["retransmissions"] for path in an.path_list
                     if path is not None} if final else None
        if final:       # what only the end tells: events of any path
            an.close()
            an.cm.finish()
            self.cm_paths.update(an.path_list)
        stats = self.rows.take()
        clock = self.clock(now)
        transport = self._transport(clock, seconds)
        self._stream_heartbeats(now)
        if final:       # the analysis links paths when it closes (analysis/linking.py)
            self._merge_linked(now)
        touched = sorted({path.id for path in self.cm_paths})
        self.cm_paths.clear()
        events = []
        active = set(stats)
        for pid in touched:
            path, view = an.path_list[pid], self._memory(pid, now)
            fresh = self._cm_events(path, view)
            events.extend(fresh)
            recent = view.heartbeat is not None and clock - view.heartbeat <= self.age_out
            if fresh or recent or path_state(path) != view.state:
                active.add(pid)
        def retransmissions(pid):
            """The path's retransmissions so far: its live streams' and its evicted ones'."""
            live = transport.get(pid, (0, None))[0]
            if harvested is not None:
                return live + harvested.get(pid, 0)
            return live + an.path_list[pid].transport["retransmissions"]

        for pid, (_, stall) in transport.items():
            if stall is not None or retransmissions(pid) != self._memory(pid, now).retransmissions:
                active.add(pid)
        inflight = np.bincount(an.carry["path"], minlength=len(an.path_list))
        for pid in active:
            view = self._memory(pid, now)
            view.last_active = now
            self.views[pid] = view
        rows = []
        for pid in sorted(self.views, key=lambda i: (an.session_ids[an.path_list[i].session], i)):
            path, view = an.path_list[pid], self.views[pid]
            stall = transport.get(pid, (0, None))[1]
            total = retransmissions(pid)
            state = path_state(path, stall)
            if state != view.state:
                if state == "stalled":
                    events.append(self._stalled(path, view, stall))
                view.state, view.last_active = state, now
            if final and path.linked_to is None:
                events.extend(self._stalled(path, view, proven) for proven in path.stalls
                              if ("stalled", proven["sender"]) not in view.events_seen)
            if (now - view.last_active > self.age_out and not inflight[pid]
                    and pid not in stats):
                del self.views[pid]
                continue
            rows.append(self._row(path, view, stats.get(pid) or PathStats(), int(inflight[pid]),
                                  clock, state))
            rows[-1].retransmissions = total - view.retransmissions
            view.retransmissions = total
            rows[-1].stall = stall if state == "stalled" else None
            events.extend(self._io_events(path, rows[-1].stats))
        events.sort(key=lambda e: (e["time"], e["frame"] or 0))
        return Interval(now, seconds, rows, events, final,
                        self._rnbd() if self.rnbd_totals else {})

    def _rnbd(self):
        """The summary's RNBD view so far: IO per session, device and operation
        ((count, bi_size bytes, errors), sessions of the same name added up)."""
        view, totals = self.analyzer.rnbd_view, {}
        for session in view.seen():
            label = session_label(session)
            for device_id, device in view.summary(session)["devices"].items():
                for op, stats in device["ops"].items():
                    if stats is None:      # header-only requests: not all known
                        continue
                    key = (label, device["name"] or device_id, op)
                    count, size, errors = totals.get(key, (0, 0, 0))
                    totals[key] = (count + stats["count"], size + stats["bytes"],
                                   errors + stats["errors"])
        return totals

    def _transport(self, clock, seconds):
        """Per path id: (its live streams' retransmissions so far, the oldest transmission
        of an established connection not acknowledged for more than ``seconds``, or
        None); the evicted streams' are the path's transport counters."""
        an, st = self.analyzer, self.engine.streams.state
        # every interval: the columns read in place, not the used rows gathered first
        used = np.flatnonzero((st[:, T.USED] != 0)
                              & ((st[:, T.DUPS] > 0) | (st[:, T.UNACKED_FRAME] >= 0)))
        out = {}
        for slot, s in zip(used.tolist(), st[used].tolist()):
            path = an.stream_path(s[T.CONN], slot, s[T.GEN])
            if path is None:
                continue
            total, stall = out.get(path.id, (0, None))
            total += s[T.DUPS]
            if s[T.UNACKED_FRAME] >= 0 and s[T.CONN] >= 0 and s[T.PEER] >= 0 \
                    and clock - s[T.UNACKED_TS] / 1e9 > seconds > 0 \
                    and (stall is None or s[T.UNACKED_FRAME] < stall["frame"]):
                conn, c2s = an.conns[s[T.CONN]]
                if conn.state == "established":
                    stall = {"frame": s[T.UNACKED_FRAME], "time": s[T.UNACKED_TS] / 1e9,
                             "sender": "client" if c2s else "server"}
            out[path.id] = (total, stall)
        return out

    def _stream_heartbeats(self, now):
        """Heartbeats of streams whose handshake is not in the capture: the analyzer
        counts them at the end; their time tells the age as soon as the stream's
        path is known."""
        an = self.analyzer
        pending = an.unattributed
        for stream, _frame, stamp, _src, _dst, _is_msg in pending[self.unattributed:]:
            known = an.stream_paths.get(stream)
            if known is None:
                continue
            view = self._memory(known[0], now)
            view.heartbeat = max(view.heartbeat or 0.0, stamp / 1e9)
            self.cm_paths.add(an.path_list[known[0]])
        self.unattributed = len(pending)

    def _row(self, path, view, stats, inflight, clock, state):
        reconnects = path.reconnects - view.reconnects
        view.reconnects = path.reconnects
        age = None if view.heartbeat is None else round(max(0.0, clock - view.heartbeat), 3)
        details = {"queue_depth_source": path.queue_depth_source, "pathname": path.pathname,
                   "reconnect_attempts": path.reconnect_attempts, "failovers": path.failovers,
                   "heartbeats": dict(path.heartbeats), "cids": path.cid_num,
                   "max_io_size": path.max_io_size, "always_invalidate": path.always_invalidate,
                   "rkey_refreshes": path.rkey_refreshes}
        return PathRow(path.id, session_name(path), path.sess_uuid, path.client, path.server,
                       state, stats, inflight, path.queue_depth, reconnects, path.reconnects,
                       age, dict(path.devices), details)

    def _merge_linked(self, now):
        """A path the analysis merged into the one whose handshake continues it
        (analysis/linking.py, at the end) hands its events to that path: what its
        view showed counts as shown there, and it shows none of its own from then on."""
        an = self.analyzer
        for pid in list(self.memory):
            target = an.path_list[pid].linked_to
            if target is not None:
                self._memory(target.id, now).events_seen |= self.memory[pid].events_seen

    def _cm_events(self, path, view):
        """The summary's events of ``path`` not shown before (none of a path merged
        into another: they are that path's)."""
        if path.linked_to is not None:
            return []
        fresh = []
        for event in path_summary(path)["events"]:
            if event["kind"] not in CM_EVENTS:
                continue
            if event["kind"] == "outage":   # one at a time; its start moves to the stall
                key = ("outage", event["cause"], event["up_frame"])   # found at the end
            else:
                key = (event["kind"], event["frame"], event["time"], event.get("up_frame"))
            if key in view.events_seen:
                continue
            view.events_seen.add(key)
            fresh.append(self._event(path, event))
        return fresh

    def _stalled(self, path, view, stall):
        """A ``stalled`` event, once per direction: the one an interval's end saw, or
        at the end the one the analyzer proves (a pipe read faster than an interval can
        take a link's whole death in one interval)."""
        view.events_seen.add(("stalled", stall["sender"]))
        return self._event(path, {"kind": "stalled", "frame": stall["frame"],
                                  "time": stall["time"], "sender": stall["sender"]})

    def _io_events(self, path, stats):
        events = []
        for event in stats.events:
            event = dict(event)
            event["time"] = event.pop("time_ns") / 1e9
            if "device_id" in event:
                event["device"] = path.devices.get(event["device_id"])
            events.append(self._event(path, event))
        return events

    @staticmethod
    def _event(path, event):
        out = {"time": event["time"], "frame": event["frame"], "kind": event["kind"],
               "session": session_name(path), "sess_uuid": path.sess_uuid,
               "client": path.client, "server": path.server}
        out.update((k, v) for k, v in event.items() if k not in out)
        return out
