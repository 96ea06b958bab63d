"""The IO of one batch of rows: requests counted, paired with their responses,
latencies and errors, path by path once the path's queue depth is known.

A path without a handshake feeds its requests and responses to its queue depth
rule (qdepth.py) and keeps them here until the rule decides
(docs/PROTOCOL.md#queue-depth-inference); the batches settle in capture order
(settling.py).
"""

import numpy as np

from ..spec.constants import RNBD_MSG_IO, errno_name, rnbd_op_name
from ..engine import transport as T
from ..engine.distinct import among, distinct, distinct_inverse, lexsort, places
from ..engine.io_fields import READ, WRITE
from ..spec.imm import IMM_PAYLOAD_MASK
from . import decode as D
from . import iorows, pairing, rnbd
from .linking import link_by_failover, link_undelivered, unlinked

OPS = ("read", "write")       # by op - 1
#: what a re-send repeats of its original (rtrs_clt_get_copy_req(): the user header)
HEADER = ("op", "rnbd_type", "device_id", "sector", "bi_size", "rnbd_op")


def per_id(ids, value):
    """``value(id)`` for each id of an int64 array, called once per distinct id: a
    batch costs its own size, never the number of paths or connections."""
    distinct, inverse = distinct_inverse(ids)
    values = np.array([value(int(i)) for i in distinct.tolist()], dtype=np.int64)
    return values[inverse.reshape(ids.shape)] if len(distinct) else np.zeros(ids.shape,
                                                                            dtype=np.int64)


def subset(array, index):
    """``array[index]`` for an ``index`` of distinct rows in order: ``array`` itself, not
    a copy, when it takes them all (the usual: every path of a batch settles at once)."""
    return array if len(index) == len(array) else array[index]


def failover_record(kind, frame, stamp_ns, buf_id, request, original_path, original_frame=None,
                    response_frame=None, delay_us=None):
    """One failover as the path that took the request over lists it; ``request`` holds
    the op and RNBD header (HEADER's columns) of the copy or of its original."""
    record = {"frame": frame, "time": stamp_ns / 1e9, "kind": kind, "buf_id": buf_id,
              "original_frame": original_frame, "original_path": original_path,
              "response_frame": response_frame, "delay_us": delay_us, "wait_us": None,
              "op": OPS[int(request["op"]) - 1]}
    if request["rnbd_op"] >= 0:
        record.update(device_id=int(request["device_id"]), sector=int(request["sector"]),
                      bi_size=int(request["bi_size"]),
                      rnbd_op=rnbd_op_name(int(request["rnbd_op"])))
    return record


def count_failover(an, taker, record, old, delay_ns):
    """One failover (``record``, of the request ``old``: REQUEST_COLUMNS), counted and
    listed on the path ``taker`` that took it over; the original's IO row goes out as
    failed over."""
    taker.failovers += 1
    taker.failover_delays.append(delay_ns / 1e9)
    if record["kind"] == "response_not_delivered" and old["op"] == WRITE:
        record["executed_twice"] = True     # the server answered the first: it ran
    taker.failover_list.append(record)
    taker.failover_list.sort(key=lambda r: r["frame"])
    state = an.failover_state
    state.failover_of[record["frame"]] = old["frame"]
    state.failed_over.add(old["frame"])
    an.release(old["frame"], failed_over=1)


def acknowledged(state, slot, gen, psn):
    """Whether the client acknowledged the response packet ``psn`` of stream ``slot``
    (arrays or ints): 1 yes, 0 not (yet), -1 unknown (a stream without its CM pairing)."""
    slot, gen, psn = np.asarray(slot), np.asarray(gen), np.asarray(psn)
    peer = state[slot, T.PEER]     # the columns read, not the streams' whole rows
    at = np.maximum(peer, 0)
    known = (state[slot, T.GEN] == gen) & (peer >= 0) & (state[at, T.GEN]
                                                         == state[slot, T.PEER_GEN])
    acked = state[at, T.ACK_IN]
    yes = (acked >= 0) & ((acked - psn) & T.PSN_MASK < T.HALF_PSN)
    out = np.where(known, yes.astype(np.int64), -1)
    return int(out) if out.ndim == 0 else out


def first_after_an_answer(keys, frames, answer_keys, answer_frames):
    """Which requests (``keys``, ``frames``) come first after an answer waiting with
    their key (``answer_keys``, ``answer_frames``), frame by frame: the only ones that
    may re-send it.  A later request with the key finds the answer taken (a busy
    permit is reused by request after request); one before it is earlier IO."""
    every_key = np.concatenate((answer_keys, keys))
    is_answer = np.arange(len(every_key)) < len(answer_keys)
    order = lexsort((~is_answer, np.concatenate((answer_frames, frames)), every_key))
    key, answer = every_key[order], is_answer[order]
    first = np.zeros(len(order), dtype=bool)
    first[1:] = answer[:-1] & ~answer[1:] & (key[1:] == key[:-1])
    picked = np.empty(len(order), dtype=bool)
    picked[order] = first
    return picked[len(answer_keys):]


class IoBatch:
    def __init__(self, an, rows, arena, req, rsp, path_id, record):
        self.an = an
        # each set of rows copied once (a batch's rows are wide), by take: half the
        # time of an index array's fancy indexing of a 2-D array
        req_rows = rows.take(req, axis=0)
        reqs = D.requests(req_rows, arena)
        bad = reqs["op"] == 0
        for i in np.flatnonzero(bad).tolist():
            an.anomaly(int(req_rows[i, T.R_LAST_FRAME]), "bad_trailer",
                       "IO_REQ message of %d bytes without an RTRS read/write trailer"
                       % req_rows[i, T.R_LEN])
        if bad.any():
            req, req_rows = req[~bad], req_rows[~bad]
            reqs = {k: v[~bad] for k, v in reqs.items()}
        self.reqs = reqs
        self.req_rows = req_rows
        self.req_path = path_id[req]
        self.rsp_rows = rows.take(rsp, axis=0)
        self.rsps = D.responses(self.rsp_rows, arena)
        self.rsp_path = path_id[rsp]
        self.rsp_record = record[rsp] if record is not None else None
        self.usr = self._user_headers(arena)
        self.req_record = record[req] if record is not None else np.full(len(req), -1,
                                                                         dtype=np.int64)
        self._control_reads()
        self._rkeys()
        self.settled = set()
        self.not_delivered = []     # response records whose answer never arrived

    def _user_headers(self, arena):
        """RNBD header bytes that are needed after the arena is reused: those of
        control reads (SESS_INFO, OPEN), and for message records those that are not
        a whole IO header (the records keep an IO header's fields as columns)."""
        reqs = self.reqs
        wanted = among(reqs["rnbd_type"], rnbd.CONTROL_READS) & (reqs["op"] == READ)
        if self.an.records is not None:
            wanted |= (reqs["rnbd_type"] != RNBD_MSG_IO) | (reqs["usr_seen"] < rnbd.IO_SIZE)
        wanted = np.flatnonzero(wanted)
        return {i: arena[reqs["usr_at"][i]:reqs["usr_at"][i] + reqs["usr_seen"][i]].tobytes()
                for i in wanted.tolist()}

    def _user_headers_of(self, req):
        """The user header bytes kept of the requests ``req`` (sorted), by position in
        ``req``: a look-up of the few kept, not one of every request."""
        if not self.usr or not len(req):
            return {}
        kept = np.fromiter(self.usr, dtype=np.int64, count=len(self.usr))
        at = places(req, kept)
        mine = at >= 0
        return {int(a): self.usr[int(k)] for a, k in zip(at[mine], kept[mine])}

    def _control_reads(self):
        """SESS_INFO/OPEN reads: their reply arrives as READ data with the rkey of
        the request's descriptor (docs/PROTOCOL.md#rnbd-session-life-cycle)."""
        reqs = self.reqs
        for i in np.flatnonzero(among(reqs["rnbd_type"], rnbd.CONTROL_READS)
                                & (reqs["op"] == READ)).tolist():
            self.an.control_reads.ask(int(reqs["desc_key"][i]), int(self.req_path[i]),
                                      rnbd.decode(self.usr[i]) or {}, int(self.req_record[i]),
                                      int(self.req_rows[i, T.R_LAST_FRAME]))

    def _rkeys(self):
        paths, rows = self.an.path_list, self.rsp_rows
        for pid in distinct(self.rsp_path).tolist():
            path = paths[pid]
            mine = self.rsp_path == pid
            refreshes = int(np.count_nonzero(self.rsps["rkey_rsp"][mine]))
            path.rkey_refreshes += refreshes
            if path.always_invalidate is None:
                if refreshes:
                    path.always_invalidate = True
                elif np.any(rows[mine, T.R_SEND] == 0):
                    path.always_invalidate = False

    def run(self):
        """Feed the queue depth rules of the undecided paths, then settle in capture
        order (settling.py)."""
        paths = self.an.path_list
        self.involved = distinct(np.concatenate((self.req_path, self.rsp_path))).tolist()
        self.size = len(self.req_path) + len(self.rsp_path)
        for pid in self.involved:
            if paths[pid].inference is not None:
                self._wait(paths[pid])
        self.an.settle_queue.add(self)

    def _wait(self, path):
        """Feed the path's queue depth rule in capture order."""
        rule = path.inference
        mine_req = np.flatnonzero(self.req_path == path.id)
        mine_rsp = np.flatnonzero(self.rsp_path == path.id)
        frames = np.concatenate((self.req_rows[mine_req, T.R_LAST_FRAME],
                                 self.rsp_rows[mine_rsp, T.R_LAST_FRAME]))
        payload = self.req_rows[:, T.R_IMM] & IMM_PAYLOAD_MASK
        for k in np.argsort(frames, kind="stable").tolist():
            if rule.decided:
                break
            if k < len(mine_req):
                i = mine_req[k]
                offset = int(self.reqs["offset"][i])
                if not rule.request(int(payload[i]), offset if offset >= 0 else None):
                    self.an.anomaly(int(self.req_rows[i, T.R_LAST_FRAME]), "offset_mismatch",
                                    "request offset %d fits no queue depth" % offset)
            else:
                rule.response(int(self.rsps["msg_id"][mine_rsp[k - len(mine_req)]]))
        if rule.decided:
            self.an.decided(path)

    def settle_path(self, path):
        self.settle([path.id])

    def settle(self, pids):
        """Count and pair the requests and responses of the paths ``pids``, together."""
        pids = [p for p in pids if p not in self.settled]
        if not pids:
            return
        self.settled.update(pids)
        req = np.flatnonzero(among(self.req_path, pids))
        rsp = np.flatnonzero(among(self.rsp_path, pids))
        new = self._requests(req)
        self._pair(new, rsp)

    # -- requests ------------------------------------------------------------------

    def _requests(self, req):
        """Counters of the requests ``req``; returns them as a pairing table."""
        an = self.an
        paths = an.path_list
        rows = subset(self.req_rows, req)
        reqs = {k: subset(v, req) for k, v in self.reqs.items()}
        rpath = subset(self.req_path, req)
        bits = per_id(rpath, lambda i: paths[i].mem_bits or 0)
        header_only = reqs["op"] == D.HEADER_ONLY
        if header_only.any():      # the snaplen cut the trailer: the immediate tells
            offset = (rows[:, T.R_IMM] & IMM_PAYLOAD_MASK) & ((np.int64(1) << bits) - 1)
            reqs["op"] = np.where(header_only, D.op_from_headers(rows[:, T.R_LEN], offset,
                                                                 reqs["partial"]), reqs["op"])
            reqs["usr_len"] = np.where(header_only, 0, reqs["usr_len"])
            told = reqs["op"] != 0  # else its start is not captured either: as if before it
            if not told.all():
                req, rows, rpath, bits, header_only = (req[told], rows[told], rpath[told],
                                                       bits[told], header_only[told])
                reqs = {k: v[told] for k, v in reqs.items()}
        payload = rows[:, T.R_IMM] & IMM_PAYLOAD_MASK
        buf_id = payload >> bits
        offset = payload & ((np.int64(1) << bits) - 1)
        known = (reqs["offset"] >= 0) | header_only
        for i in np.flatnonzero((reqs["offset"] >= 0) & (offset != reqs["offset"])).tolist():
            if paths[rpath[i]].queue_depth_source == "handshake":
                an.anomaly(int(rows[i, T.R_LAST_FRAME]), "offset_mismatch",
                           "immediate offset %d, message says %d" % (offset[i],
                                                                    reqs["offset"][i]))
        # a request cut at the capture start: the immediate says where its trailer was;
        # one whose trailer the snaplen cut: its size (data_len + usr_len) is the offset
        data_len = np.where(known & ~header_only, reqs["data_len"],
                            np.maximum(offset - reqs["usr_len"], 0))
        size = np.where(header_only, offset, data_len + reqs["usr_len"])
        data_len = np.where(header_only, -1, data_len)
        for pid in distinct(rpath).tolist():
            path, mine = paths[pid], rpath == pid
            for op, code in (("read", READ), ("write", WRITE)):
                hit = mine & (reqs["op"] == code)
                path.io[op].count += int(np.count_nonzero(hit))
                path.io[op].bytes += int(size[hit].sum())
            path.partial_requests += int(np.count_nonzero(mine & ~known))
            path.header_only_requests += int(np.count_nonzero(mine & header_only))
            for op, code in (("read", READ), ("write", WRITE)):
                an.rnbd_view.header_only(path.session, op, int(np.count_nonzero(
                    mine & header_only & (reqs["op"] == code))))
            an.rnbd_view.requests(path.session, reqs, np.flatnonzero(mine))
        cid = an.cid_of(rows[:, T.R_CONN])
        record = subset(self.req_record, req)
        if an.records is not None:
            self._request_records(rows, reqs, buf_id, offset, data_len, record,
                                  self._user_headers_of(req), header_only)
        return {"sess": an.session_of(rpath), "key": buf_id, "frame": rows[:, T.R_LAST_FRAME],
                "stamp": rows[:, T.R_LAST_TS], "first_frame": rows[:, T.R_LAST_FRAME],
                "first_stamp": rows[:, T.R_LAST_TS], "path": rpath, "op": reqs["op"],
                "cid": cid, "bytes": size, "partial": (~known).astype(np.int64),
                "request_first": np.where(known, rows[:, T.R_FIRST_FRAME], -1),
                "rnbd_type": reqs["rnbd_type"], "device_id": reqs["device_id"],
                "sector": reqs["sector"], "bi_size": reqs["bi_size"], "rnbd_op": reqs["rnbd_op"],
                "record": record,
                "request_first_ns": np.where(known, rows[:, T.R_FIRST_TS], -1),
                "desc_key": reqs["desc_key"]}

    def _request_records(self, rows, reqs, buf_id, offset, data_len, record, usr,
                         header_only):
        """The message records of a batch of requests, column by column."""
        self.an.records.requests(
            record, reqs["op"] == READ, buf_id, offset, reqs["usr_len"], data_len,
            reqs["sg_cnt"], rows[:, T.R_FIRST_FRAME], header_only, reqs["offset"] < 0,
            reqs["desc_addr"], reqs["desc_key"], reqs["desc_len"], reqs, usr)

    # -- responses -----------------------------------------------------------------

    def _pair(self, new, rsp):
        an = self.an
        paths = an.path_list
        if len(an.sessions) > 1:
            link_by_failover(an, new, HEADER)
        table = pairing.concat(an.carry, new)
        rows = subset(self.rsp_rows, rsp)
        spath = subset(self.rsp_path, rsp)
        msg_id = subset(self.rsps["msg_id"], rsp)
        result = pairing.pair(table, an.session_of(spath), msg_id, rows[:, T.R_LAST_FRAME])
        delivered = self._undelivered(table, result, rows, len(table["key"]) - len(new["key"]),
                                      self.rsp_record[rsp] if self.rsp_record is not None
                                      else None)
        for j in np.flatnonzero(result.reused).tolist():
            old = int(np.flatnonzero(result.replaced_by == j)[0])
            an.anomaly(int(table["frame"][j]), "buf_id_reused",
                       "buf_id %d still pending from frame %d", table["key"][j],
                       table["frame"][old])
        for j in np.flatnonzero(result.failover).tolist():   # counted where it went
            old = int(np.flatnonzero(result.replaced_by == j)[0])
            self._failover(table, j, old, result, "no_response",
                           delay_ns=table["stamp"][j] - result.first_stamp[j])
        answered = result.response_request >= 0
        req_of = result.response_request[answered]
        latency = rows[answered, T.R_LAST_TS] - result.first_stamp[req_of]
        ops = table["op"][req_of]
        apath = spath[answered] if an.keep_latencies else spath[:0]
        for pid in distinct(apath).tolist():
            mine = apath == pid
            for op, code in (("read", READ), ("write", WRITE)):
                paths[pid].latencies[op].extend(latency[mine & (ops == code)])
        errno = subset(self.rsps["errno"], rsp)
        for k in np.flatnonzero(errno != 0).tolist():
            self._error(rows[k], int(spath[k]), int(errno[k]), int(result.response_request[k]),
                        table)
        for k in np.flatnonzero(~answered).tolist():
            path = paths[spath[k]]
            if path.sess_uuid is not None:   # an anomaly unless the capture lost packets
                path.unmatched += 1
                if len(path.unmatched_examples) < an.bounds.size["examples"]:
                    path.unmatched_examples.append((int(rows[k, T.R_LAST_FRAME]),
                                                    int(msg_id[k])))
            else:
                an.counts.unmatched_response()
                path.responses_without_request += 1
            if errno[k]:   # its request precedes the capture: the failure still shows
                an.listed(path.errors, self._unpaired_error(
                    rows[k], int(errno[k]), bool(self.rsps["with_invalidate"][rsp][k])))
        if an.records is not None:
            self._records(rsp, rows, msg_id, errno, result, table, answered, latency)
            for index in self.not_delivered:
                an.records.mark(index, "not_delivered", True)
        self._waits(table, result, rows, answered, req_of)
        self._io_rows(table, result, rows, answered, req_of, latency, errno, delivered)
        an.pending.carry_over(table, result)
        an.bound_pending()

    def _io_rows(self, table, result, rows, answered, req_of, latency, errno, delivered):
        """IO rows of the requests whose fate this batch decided."""
        done = iorows.from_requests(table, req_of, iorows.ANSWERED)
        done.update(response_frame=rows[answered, T.R_LAST_FRAME],
                    response_ns=rows[answered, T.R_LAST_TS], latency_ns=latency,
                    errno=errno[answered], delivered=delivered[answered],
                    response_first_ns=rows[answered, T.R_FIRST_TS])
        done["data_first_ns"], done["data_last_ns"] = self.an.read_data.lookup(
            table["path"][req_of], table["desc_key"][req_of], table["frame"][req_of],
            done["response_frame"])
        done["failover_from"] = np.where(result.first_frame[req_of] != table["frame"][req_of],
                                         result.first_frame[req_of], -1)
        state = self.an.failover_state
        if state.failover_of:
            frames = table["frame"][req_of].tolist()
            done["failover_of"] = np.array([state.failover_of.get(f, -1) for f in frames],
                                           dtype=np.int64)
            done["failed_over"] = np.array([f in state.failed_over for f in frames],
                                           dtype=np.int64)
        replaced = np.flatnonzero(result.replaced_by >= 0)
        gone = iorows.from_requests(table, replaced, iorows.REPLACED)
        gone["failed_over"] = result.failover[result.replaced_by[replaced]].astype(np.int64)
        # an answer not acknowledged waits for its fate: re-sent (failed over) or not
        held = (done["delivered"] == 0) & (done["failed_over"] == 0)
        at = np.flatnonzero(answered)
        for k in np.flatnonzero(held).tolist():
            x = int(at[k])
            state.held_rows[int(done["frame"][k])] = (
                {c: v[k:k + 1] for c, v in done.items()},
                (int(rows[x, T.R_SLOT]), int(rows[x, T.R_GEN]), int(rows[x, T.R_PSN])))
        if held.any():
            done = {c: v[~held] for c, v in done.items()}
        self.an.io_rows(iorows.concat([done, gone]))

    # -- failovers (docs/PROTOCOL.md#failover-from-the-wire) -------------------------

    def _undelivered(self, table, result, rows, first_new, rsp_record):
        """Answered requests whose response the client never acknowledged, and the
        requests of another path of the session that re-send them (same buf_id and
        RNBD header): failovers of an answer that was not delivered.  Returns per
        response 1 delivered, 0 not acknowledged, -1 unknown."""
        an = self.an
        waiting = an.failover_state.undelivered
        if an.failover_state.acknowledgements_moved(an.engine):
            for key, entry in list(waiting.items()):   # acknowledged since: delivered late
                if acknowledged(an.engine.streams.state, *entry["response"]) == 1:
                    del waiting[key]
            an.release_acknowledged()
        n_rsp = len(result.response_request)
        delivered = np.full(n_rsp, -1, dtype=np.int64)
        ans = np.flatnonzero(result.response_request >= 0)
        if len(ans):
            delivered[ans] = acknowledged(an.engine.streams.state, rows[ans, T.R_SLOT],
                                          rows[ans, T.R_GEN], rows[ans, T.R_PSN])
        unacked = np.flatnonzero(delivered == 0)
        sess = table["sess"]
        # only the requests that may re-send one of them: their (session, buf_id), or
        # their buf_id alone while a session without a handshake may be linked by it
        combined = (sess << 32) | table["key"]
        keys = [(s << 32) | k for s, k in waiting]
        keys += combined[result.response_request[unacked]].tolist()
        if not keys:
            return delivered
        new = np.arange(first_new, len(table["key"]))
        may_link = unlinked(an)     # else link_undelivered has no pair of sessions to try
        if may_link:
            new = new[np.isin(table["key"][new], [k & 0xFFFFFFFF for k in keys])]
        else:
            answers = [entry["response_frame"] for entry in waiting.values()]
            answers += rows[unacked, T.R_LAST_FRAME].tolist()
            new = new[first_after_an_answer(combined[new], table["frame"][new],
                                            np.array(keys, dtype=np.int64),
                                            np.array(answers, dtype=np.int64))]
        events = [(int(rows[k, T.R_LAST_FRAME]), 0, k) for k in unacked.tolist()]
        events += [(int(table["frame"][j]), 1, j) for j in new.tolist()]
        for frame, is_request, x in sorted(events):
            if not is_request:
                j = int(result.response_request[x])
                waiting[(int(sess[j]), int(table["key"][j]))] = {
                    "request": {c: int(table[c][j]) for c in pairing.REQUEST_COLUMNS},
                    "first_frame": int(result.first_frame[j]),
                    "first_stamp": int(result.first_stamp[j]),
                    "response_frame": frame,
                    "response_record": int(rsp_record[x]) if rsp_record is not None else -1,
                    "response": (int(rows[x, T.R_SLOT]), int(rows[x, T.R_GEN]),
                                 int(rows[x, T.R_PSN]))}
                continue
            entry = waiting.get((int(sess[x]), int(table["key"][x])))
            if entry is None and may_link and link_undelivered(an, table, x, HEADER):
                waiting = an.failover_state.undelivered   # the sessions are one now: renamed keys
                entry = waiting.get((int(sess[x]), int(table["key"][x])))
            if entry is None or frame < entry["response_frame"]:
                continue      # (a path whose queue depth rule decided late: earlier IO)
            del waiting[(int(sess[x]), int(table["key"][x]))]
            old = entry["request"]
            if old["path"] == table["path"][x] or any(
                    old[c] != table[c][x] for c in HEADER):
                continue      # the permit was taken again: the client had completed it
            result.first_frame[x] = entry["first_frame"]
            result.first_stamp[x] = entry["first_stamp"]
            self._failover(table, x, old, result, "response_not_delivered",
                           table["stamp"][x] - old["stamp"], entry["response_frame"],
                           entry["response_record"])
        return delivered

    def _failover(self, table, j, old, result, kind, delay_ns, response_frame=None,
                  response_record=None):
        """One failover, counted and listed on the path that took the request over."""
        an = self.an
        if isinstance(old, int):
            old = {c: int(table[c][old]) for c in pairing.REQUEST_COLUMNS}
        frame = int(table["frame"][j])
        record = failover_record(
            kind, frame, int(table["stamp"][j]), int(table["key"][j]), old,
            an.path_list[old["path"]].client, old["frame"], response_frame,
            round((int(table["stamp"][j]) - old["stamp"]) / 1e3, 1))
        count_failover(an, an.path_list[int(table["path"][j])], record, old, delay_ns)
        an.failover_state.first_stamp[frame] = int(result.first_stamp[j])
        records = an.records
        if records is not None:
            if table["record"][j] >= 0:
                records.mark(int(table["record"][j]), "failover_from",
                             int(result.first_frame[j]))
            if old["record"] >= 0:
                records.mark(old["record"], "failed_over_to", frame)
            if response_record is not None and response_record >= 0:
                self.not_delivered.append(response_record)   # after _records() filled it

    def _waits(self, table, result, rows, answered, req_of):
        """The time a failed-over IO waited in all: its original's first send to the
        copy's response."""
        an = self.an
        first_stamp = an.failover_state.first_stamp
        if not first_stamp:
            return
        for k, j in zip(np.flatnonzero(answered).tolist(), req_of.tolist()):
            first = first_stamp.pop(int(table["frame"][j]), None)
            if first is not None:
                for record in an.path_list[int(table["path"][j])].failover_list:
                    if record["frame"] == int(table["frame"][j]):
                        record["wait_us"] = round((int(rows[k, T.R_LAST_TS]) - first) / 1e3, 1)
                        record["response_frame_of_copy"] = int(rows[k, T.R_LAST_FRAME])

    def _unpaired_error(self, row, errno, with_invalidate):
        """A failed response whose request is not in the capture: a read when the
        server invalidated the client's buffer (IO_RSP_W_INV), else unknown."""
        conn = int(row[T.R_CONN])
        return {"frame": int(row[T.R_LAST_FRAME]), "time": int(row[T.R_LAST_TS]) / 1e9,
                "op": "read" if with_invalidate else "unknown", "errno": errno,
                "name": errno_name(errno), "request_frame": None,
                "cid": int(self.an.cid_of(np.array([conn]))[0]) if conn >= 0 else None}

    def _error(self, row, pid, errno, request, table):
        path = self.an.path_list[pid]
        if request < 0:
            return
        op = "read" if table["op"][request] == READ else "write"
        path.io[op].errors += 1
        error = {"frame": int(row[T.R_LAST_FRAME]), "time": int(row[T.R_LAST_TS]) / 1e9,
                 "op": op, "errno": errno, "name": errno_name(errno),
                 "request_frame": int(table["frame"][request]),
                 "cid": int(table["cid"][request]) if table["cid"][request] >= 0 else None}
        kind = int(table["rnbd_type"][request])
        if kind >= 0:
            error["rnbd"] = rnbd.kind_name(kind)
            if error["rnbd"] == "io":
                error.update(device_id=int(table["device_id"][request]),
                             rnbd_op=rnbd_op_name(int(table["rnbd_op"][request])),
                             sector=int(table["sector"][request]),
                             bi_size=int(table["bi_size"][request]))
            elif error["rnbd"] == "open":   # the device the client asked for
                error["device"] = self.an.control_reads.device_asked(error["request_frame"])
        self.an.listed(path.errors, error)

    def _records(self, rsp, rows, msg_id, errno, result, table, answered, latency):
        records = self.an.records
        rsps = self.rsps
        records.responses(self.rsp_record[rsp], msg_id, errno, rsps["with_invalidate"][rsp],
                          rsps["rkey_rsp"][rsp], rsps["rkey_buf_id"][rsp], rsps["rkey"][rsp])
        for j in np.flatnonzero(result.failover).tolist():
            if table["record"][j] >= 0:
                records.mark(int(table["record"][j]), "failover_from",
                             int(result.first_frame[j]))
        req_of = result.response_request[answered]
        req_rec, rsp_rec = table["record"][req_of], self.rsp_record[rsp][answered]
        both = (req_rec >= 0) & (rsp_rec >= 0)
        records.pairs(req_rec[both], rsp_rec[both], (
            rows[answered, T.R_LAST_TS][both] - result.first_stamp[req_of][both]) / 1e9)
