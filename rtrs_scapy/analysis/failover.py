"""Failovers whose original never reached the wire (docs/PROTOCOL.md#failover-from-the-wire).

When a path fails, ``fail_all_outstanding_reqs()`` (rtrs-clt.c) walks the failed
path's requests by permit, ``reqs[0]`` … ``reqs[queue_depth - 1]``, and re-sends
each one in use on an alive path (``rtrs_clt_failover_req()``), the copy keeping
the permit, i.e. the buf_id (``rtrs_clt_get_copy_req()``).  The copies of one
failure therefore leave in ascending buf_id order, one after another.

The copies whose original is on the wire (io.py: unanswered, or answered but the
answer never acknowledged) are proven; they fix that order.  A request of an
alive path of the same session is taken for the copy of an original that never
reached the wire when it lies in that run and fits its order: sent after the
failed path's last request on the wire and before the run's last proven copy,
its buf_id above the buf_ids of the proven copies sent before it and below
those sent after it, not a proven copy's buf_id, the last such request of its
buf_id.  This is an inference, not a proof: a new request that happens to take
such a permit at such a moment is indistinguishable on the wire, and a copy
after the run's last proven copy (or of a failure without any proven copy) is
not found.  Such failovers are counted (``failovers``) and listed apart
(``failovers_unseen``, kind ``original_not_on_wire``).
"""

from collections import deque

import numpy as np

from ..spec.constants import RNBD_MSG_IO
from ..spec.limits import limit

from .growing import Gathered, Growing
from .io import HEADER, count_failover, failover_record
from .linking import merge_sessions

#: IO rows kept for this rule (the newest; the run of one failure is far shorter), as
#: many as the plugin keeps requests per session
KEEP = limit("failover_log")
#: the columns the rules read, a response as: whether there is one, its time and frame
#: after the request's (a few bytes, where the instant and frame themselves take 8 and 4)
KEPT = ("frame", "time_ns", "path", "buf_id", "answered", "response_after_ns",
        "response_after") + HEADER


class FailoverState:
    """The analyzer's failover part (io.py finds failovers in capture order, this module
    at the end): answered requests whose response the client has not acknowledged, by
    (session, buf_id); copy frame -> original frame; the originals; a copy's first
    send, until its response; the IO rows held until their answer's fate is known;
    the last IO rows (for ``infer``)."""

    def __init__(self):
        self.undelivered = {}
        self.failover_of = {}
        self.failed_over = set()
        self.first_stamp = {}
        self.held_rows = {}         # frame -> IO row of an answer not acknowledged (yet)
        # the engine's ``acknowledgements`` when the two above were last looked at
        self.checked_at = None
        self.request_log = RequestLog()

    def acknowledgements_moved(self, engine):
        """Whether the answers waiting may have been acknowledged since the last look
        (a map/reduce's streams learn their ACKs where the files join: looking at every
        waiting answer for each batch of a file was quadratic in its answers)."""
        moved = engine.acknowledgements != self.checked_at
        self.checked_at = engine.acknowledgements
        return moved

    def rename_session(self, old_id, new_id):
        """Two sessions are one (linking.py): ``old_id``'s waiting answers are ``new_id``'s."""
        self.undelivered = {(new_id if s == old_id else s, key): entry
                            for (s, key), entry in self.undelivered.items()}
        for entry in self.undelivered.values():
            if entry["request"]["sess"] == old_id:
                entry["request"]["sess"] = new_id


class RequestLog:
    """The last KEEP IO rows (whole batches), the columns the rules at the end read,
    each one growing array, the batches gathered before they go in (growing.py);
    ``table()`` sorts them by frame once, in place."""

    def __init__(self):
        self.columns = {c: Growing(times=c in ("time_ns", "response_after_ns"),
                                   instants=c == "time_ns") for c in KEPT}
        self.gathered = Gathered(self.columns)
        self.lengths = deque()      # the rows of each batch kept, oldest first
        self.size = 0
        self.dropped = 0            # of the oldest rows, those to drop once gathered
        self.ordered = False

    def add(self, batch):
        answered = batch["response_frame"] >= 0
        kept = dict(batch, answered=answered,
                    response_after_ns=np.where(answered, batch["response_ns"] - batch["time_ns"],
                                               0),
                    response_after=np.where(answered, batch["response_frame"] - batch["frame"],
                                            0))
        self.gathered.extend({c: kept[c] for c in KEPT})
        self.lengths.append(len(batch["frame"]))
        self.size += self.lengths[-1]
        self.ordered = False
        while self.size - self.lengths[0] >= KEEP:
            gone = self.lengths.popleft()
            self.size -= gone
            self.dropped += gone
        if not self.gathered.waiting:
            self._drop()

    def _drop(self):
        """The rows beyond the KEEP last dropped, once they are in the arrays."""
        for column in self.columns.values():
            column.drop(self.dropped)
        self.dropped = 0

    def table(self):
        """The columns the rules match on (frame, path, buf_id, HEADER), in frame
        order (sorted once, in place), in their narrowed types; a row's instants:
        ``time_ns(k)``, ``response(k)``."""
        self.gathered.flush()
        self._drop()
        if not self.ordered:
            order = np.argsort(self.columns["frame"].values(), kind="stable")
            for column in self.columns.values():
                column.reorder(order)
            self.ordered = True
        return {c: self.columns[c].values() for c in ("frame", "path", "buf_id") + HEADER}

    def time_ns(self, k):
        """The instant of row ``k`` of ``table()``."""
        return self.columns["time_ns"].at(k)

    def response(self, k):
        """(capture time, frame) of the response to the request of row ``k`` of the
        table, (-1, -1) without one."""
        if not self.columns["answered"].at(k):
            return -1, -1
        return (self.time_ns(k) + self.columns["response_after_ns"].at(k),
                self.columns["frame"].at(k) + self.columns["response_after"].at(k))


def runs(records):
    """The proven failovers of one failed path, in frame order, split where a gap of
    more than a second separates two (another failure)."""
    out = []
    for record in sorted(records, key=lambda r: r["frame"]):
        if out and out[-1][-1]["original_path"] == record["original_path"] and \
                record["time"] - out[-1][-1]["time"] <= 1.0:
            out[-1].append(record)
        else:
            out.append([record])
    return out


def infer(an, session):
    """The copies of originals that never reached the wire, per the rule above, added
    to the failovers of the paths that took them over."""
    paths = [p for p in session.paths if p is not None]
    proven = [r for p in paths for r in p.failover_list if r["kind"] != "original_not_on_wire"]
    if not proven:
        return
    log = an.failover_state.request_log
    rows = log.table()
    ids = {p.id for p in paths}
    by_client = {p.client: p for p in paths}
    mine = np.isin(rows["path"], list(ids))
    unseen = {}      # copy frame -> the failed path, for the message records
    for run in runs(proven):
        failed = by_client[run[0]["original_path"]]
        bufs = [r["buf_id"] for r in run]
        if bufs != sorted(bufs):
            continue           # not the kernel's order: nothing to infer from
        frames = [r["frame"] for r in run]
        earlier = mine & (rows["path"] == failed.id) & (rows["frame"] < frames[0])
        start = int(rows["frame"][earlier].max()) if earlier.any() else -1
        window = np.flatnonzero(mine & (rows["path"] != failed.id) & (rows["frame"] > start)
                                & (rows["frame"] < frames[-1]))
        chosen = {}
        for k in window.tolist():
            frame, buf = int(rows["frame"][k]), int(rows["buf_id"][k])
            if frame in frames or buf in bufs:
                continue
            below = [b for f, b in zip(frames, bufs) if f < frame]
            above = [b for f, b in zip(frames, bufs) if f > frame]
            if all(b < buf for b in below) and all(b > buf for b in above):
                chosen[buf] = k          # the last one of its buf_id
        for buf, k in sorted(chosen.items(), key=lambda item: rows["frame"][item[1]]):
            taker = an.path_list[int(rows["path"][k])]
            record = failover_record("original_not_on_wire", int(rows["frame"][k]),
                                     log.time_ns(k), buf,
                                     {c: rows[c][k] for c in HEADER}, failed.client)
            taker.failover_list.append(record)
            taker.failover_list.sort(key=lambda r: r["frame"])
            taker.failovers += 1
            taker.failovers_unseen += 1
            if int(rows["rnbd_type"][k]) == RNBD_MSG_IO:
                an.rnbd_view.copy_without_original(session)
            unseen[record["frame"]] = failed.client
            taker.events.append({"time": record["time"], "frame": record["frame"],
                                 "kind": "failover", "buf_id": buf,
                                 "original": "not on the wire"})
    if unseen and an.records is not None:
        records = an.records
        for index in records.of_frames(unseen).tolist():
            records.mark(index, "failover_unseen",
                         unseen[int(records.cols.get("frame", index))])


def late_copies(an):
    """Answers not acknowledged whose copy on another path was settled before them: a
    path without a handshake whose queue depth rule decided late (at the end of the
    capture) pairs its IO after the other paths' once more than settling.HOLD requests
    and responses waited for it.  The copy is the first later request of
    another path with the original's buf_id and RNBD header, as io.py finds it in capture
    order; the two paths are then one session (linking.link_by_failover).  The copy's IO
    row went out before: only its original's says so (``failed_over``)."""
    state = an.failover_state
    if not state.undelivered:
        return
    log = state.request_log
    rows = log.table()
    paths = an.path_list
    for key, entry in sorted(state.undelivered.items(), key=lambda item: item[1]["response_frame"]):
        old = entry["request"]
        same = (rows["buf_id"] == old["key"]) & (rows["path"] != old["path"]) \
            & (rows["frame"] > entry["response_frame"])
        for column in HEADER:
            same &= rows[column] == old[column]
        hits = np.flatnonzero(same)
        if not len(hits):
            continue
        k = int(hits[0])
        taker, original = paths[int(rows["path"][k])], paths[old["path"]]
        if taker.session is not original.session:
            if None not in (taker.session.paths_uuid, original.session.paths_uuid):
                continue
            keep, gone = (original.session, taker.session) \
                if original.session.paths_uuid is not None \
                or taker.session.paths_uuid is None else (taker.session, original.session)
            merge_sessions(an, keep, gone)
        del state.undelivered[key]
        frame, stamp = int(rows["frame"][k]), log.time_ns(k)
        record = failover_record("response_not_delivered", frame, stamp, old["key"], old,
                                 original.client, old["frame"], entry["response_frame"],
                                 round((stamp - old["stamp"]) / 1e3, 1))
        response_ns, response_frame = log.response(k)
        if response_ns >= 0:
            record["wait_us"] = round((response_ns - entry["first_stamp"]) / 1e3, 1)
            record["response_frame_of_copy"] = response_frame
        count_failover(an, taker, record, old, stamp - old["stamp"])
        an.listed(taker.events, {"time": stamp / 1e9, "frame": frame, "kind": "failover",
                                 "buf_id": old["key"], "first_frame": entry["first_frame"]})
        if an.records is not None:
            _late_records(an, frame, old["record"], entry["first_frame"],
                          entry["response_record"])


def _late_records(an, frame, original, first_frame, response):
    """The message records of a failover found late (as io.py marks them)."""
    records = an.records
    for index in records.of_frames([frame])[:1].tolist():
        records.mark(index, "failover_from", first_frame)
    if original >= 0:
        records.mark(original, "failed_over_to", frame)
    if response >= 0:
        records.mark(response, "not_delivered", True)
