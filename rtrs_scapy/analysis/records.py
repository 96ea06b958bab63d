"""Message records: one per RTRS/RNBD message, for ``rtrs-dissect messages``,
``export``, ``show`` and the Scapy session (only built when asked for).

A record: frame, time, src, dst, qpn (destination QP), cid, msg, fields,
rnbd, rnbd_reply (OPEN/SESS_INFO reads), paired_frame, latency (s), and the
sess_uuid, client and server of its path (they tell sessions between the same
hosts apart).

They are kept as numpy columns (a dict per record was ~2 KiB, and building it
cost more than the analysis of its packets): requests and responses, the bulk of
a capture, are columns through and through; the rare rich records (CM, info
exchange, other protocols) keep their fields dicts in a side table.  The few
fields a record gains late (failover_from, not_delivered, ...) go to a side
dict in the order they came.  ``RecordList`` shows them as dicts (views).
``Records`` is the analyzer's ``records`` part (docs/design.md#the-analyzers-parts):
the analyzer, io.py, failover.py and linking.py change it through its methods.
"""

from collections.abc import Mapping, Sequence

import numpy as np

from ..engine import transport as T
from ..engine.distinct import distinct_inverse
from ..engine.recent import Recent
from ..engine.record_columns import AddressIds, pair_by_frame, record_rows, split_kinds
from ..layout.plans import plan
from ..spec.constants import RNBD_MSG_IO
from . import decode as D
from . import rnbd
from .columns import Columns
from .spill import SpilledList

_info_req = plan("RtrsMsgInfoReq")
_info_rsp = plan("RtrsMsgInfoRsp")


#: the names a request or response record takes once paired ("pending" until then)
IO_MESSAGES = frozenset(("read", "write", "io_rsp"))
#: a message of another RDMA protocol's connection (other_rdma.py): kept when asked for
OTHER = "other"
#: msg codes: the first ones fixed, others (CM, info, ...) numbered as they come
PENDING, READ, WRITE, IO_RSP, HB_MSG, HB_ACK = range(6)
FIXED = ("pending", "read", "write", "io_rsp", "hb_msg", "hb_ack")

#: flags of a record's columnar fields
F_REQUEST = 1       # buf_id, offset, usr_len, data_len, sg_cnt, first_frame
F_CUT = 2           # the snaplen cut the trailer: header_only
F_PARTIAL = 4
F_DESC = 8          # a READ's descriptor (desc_addr, desc_key, desc_len)
F_RESPONSE = 16     # msg_id (in buf_id), errno, with_invalidate
F_WITH_INV = 32
F_RKEY = 64         # rkey_rsp (rkey_buf_id, rkey)
F_RNBD_IO = 128     # an RNBD IO header in the rnbd_* columns

#: the RNBD IO header's fields, as rnbd.decode names them
RNBD_IO_NAMES = ("type", "device_id", "sector", "rw", "bi_size", "prio")

_I64, _I32, _U32 = np.int64, np.int32, np.uint32
#: the columns: (dtype, value until set); a wire field of 32 bits or less in 32 bits
SPEC = {
    "frame": (_I64, 0), "time": (np.float64, 0.0), "src": (_I32, 0), "dst": (_I32, 0),
    "qpn": (_I32, 0), "cid": (_I32, -1), "msg": (np.int16, 0), "names": (_I32, -1),
    "paired": (_I64, -1), "latency": (np.float64, np.nan), "rich": (_I32, -1),
    "flags": (np.int16, 0), "buf_id": (_I64, 0), "offset": (_I64, 0),
    "usr_len": (_I64, 0), "data_len": (_I64, 0), "sg_cnt": (np.int8, 0),
    "first_frame": (_I64, 0), "desc_addr": (_I64, 0), "desc_key": (_U32, 0),
    "desc_len": (_U32, 0), "errno": (_I32, 0), "rkey_buf_id": (_U32, 0), "rkey": (_U32, 0),
    "inv": (_I64, -1),
    "device_id": (_U32, 0), "sector": (np.uint64, 0), "rw": (_U32, 0),
    "bi_size": (_U32, 0), "prio": (np.uint16, 0),
}


#: the fields a record gains late, in the order its lines give them, whenever each was
#: learnt: that order would depend on where the analysis' batches end
LATE = ("reply_frame", "failover_from", "failed_over_to", "invalidate_frame",
        "not_delivered", "failover_unseen")
_LATE_PLACE = {name: k for k, name in enumerate(LATE)}

#: one frame kept per MARK records of the frame order, to find a frame's records
MARK = 256
#: records worked on at a time where the frame order is sorted
SCAN = 65536
#: records per chunk spilled to disk (columns.py): up to three stay in memory, 1.3 MB each
CHUNK = 8192


def _info_message(data):
    """(name, fields) of an info exchange SEND, (None, None) for any other SEND."""
    mtype = int.from_bytes(data[:2], "little") if len(data) >= 2 else None
    if mtype == 0 and len(data) == _info_req.size:
        return "info_req", {"pathname": _info_req.decode(data, 0, len(data))["pathname"]}
    if mtype == 1 and len(data) >= _info_rsp.size:
        return "info_rsp", {"sg_cnt": _info_rsp.reader("sg_cnt")(data, 0)[0]}
    return None, None


class Records:
    """``kinds``: the message names kept (None: all); a report that draws only the
    CM ladder keeps a handful per path, not one per IO."""

    def __init__(self, an, kinds=None, chunk=CHUNK):
        self.an = an
        self.kinds = None if kinds is None else frozenset(kinds)
        self.cols = Columns(SPEC, chunk)
        self.msg_names = list(FIXED)
        self._msg_code = {name: i for i, name in enumerate(FIXED)}
        self.addrs = []           # address text by id
        self._addr_id = {}
        self._known = AddressIds()     # of the addresses numbered, the ones rows give
        self.names = []           # (sess_uuid, client, server) by id
        self._names_id = {}
        # (fields, rnbd) of records not in columns, packed; a few dozen a session, a
        # capture of thousands of sessions holds them by the MB: beyond the newest, on
        # disk, a sixteenth of a chunk a file (they are a few of the records)
        self.rich = SpilledList(max(1, chunk // 16)) if chunk else []
        self._keys = {}           # the key tuples of the packed dicts, each kept once
        self.rnbd = {}            # record -> RNBD header that is not an IO's
        self.replies = {}         # record -> rnbd_reply
        self.extras = {}          # record -> fields it gained late, in order
        self._marked_top = -1     # the latest record ever given one
        self.reads = Recent(depth=8)    # desc key -> the recent READ requests' (frame, record)
        self.new_reads = []       # (desc keys, frames, records): READs since the last match
        self.new_invalidations = []     # (rkeys, frames): invalidations not matched yet
        self.pathless = []    # (record, slot, gen, src, dst) of records whose path came later
        self.order = None     # the records in frame order, once closed
        self._marks = None    # the frame of every MARK-th record of ``order``
        self._partners = None
        # a request paired with a response no later than it (the pairs by frame can then
        # not be made a frame range at a time: message_table.py)
        self.answered_first = False
        self.list = RecordList(self)

    def wants(self, msg):
        if self.kinds is None:
            return msg != OTHER
        return bool(self.kinds & IO_MESSAGES) if msg == "pending" else msg in self.kinds

    # -- ids -------------------------------------------------------------------------

    def msg_code(self, msg):
        code = self._msg_code.get(msg)
        if code is None:
            code = self._msg_code[msg] = len(self.msg_names)
            self.msg_names.append(msg)
        return code

    def addr_id(self, raw):
        """The id of the address ``raw`` (a (hi, lo) pair), numbered as it first comes;
        the table the rows' ids are found in holds each one numbered."""
        found = self._addr_id.get(raw)
        if found is None:
            found = self._numbered(raw)
            self._known.add([raw[0]], [raw[1]], [found])
        return found

    def _numbered(self, raw):
        """The next id, for ``raw`` (not numbered yet)."""
        found = self._addr_id[raw] = len(self.addrs)
        self.addrs.append(self.an.text(raw))
        return found

    def names_id(self, path):
        if path is None:
            key = (None, None, None)
        else:
            key = (path.sess_uuid, path.client, path.server)
        found = self._names_id.get(key)
        if found is None:
            found = self._names_id[key] = len(self.names)
            self.names.append(key)
        return found

    # -- records -----------------------------------------------------------------------

    def add(self, frame, ts, src, dst, qpn, conn, msg, fields, rnbd_fields=None, path=None):
        """A rich record (its fields a dict); returns its index, or None when not kept."""
        if not self.wants(msg):
            return None
        if path is None and conn is not None:
            path = conn.path
        c = self.cols
        i = c.extend(1)
        data, k = c.data, i - c.base
        data["frame"][k], data["time"][k] = frame, ts
        data["src"][k], data["dst"][k] = self.addr_id(src), self.addr_id(dst)
        data["qpn"][k] = qpn
        if conn is not None and conn.cid is not None:
            data["cid"][k] = conn.cid
        data["msg"][k] = self.msg_code(msg)
        data["names"][k] = self.names_id(path)
        data["rich"][k] = len(self.rich)
        self.rich.append((self._pack(fields), self._pack(rnbd_fields)))
        return i

    def _pack(self, fields):
        """A rich record's dict as its keys (one tuple for every dict of the same keys)
        and its values: a capture of thousands of short sessions keeps a few dozen
        control messages a session, and a dict costs several times the tuple."""
        if fields is None:
            return None
        keys = tuple(fields)
        return self._keys.setdefault(keys, keys), tuple(fields.values())

    @staticmethod
    def _unpacked(packed):
        return None if packed is None else dict(zip(*packed))

    def rows(self, rows, arena, kind, path_id):
        """Records of a batch of rows (requests and responses get their pairing later);
        returns each row's record index (-1: none)."""
        index = np.full(len(rows), -1, dtype=np.int64)
        if self.wants(OTHER):
            self._others(rows)
        codes = np.full(len(rows), -1, dtype=np.int64)
        for k, code in ((D.K_HB_MSG, HB_MSG), (D.K_HB_ACK, HB_ACK), (D.K_REQUEST, PENDING),
                        (D.K_RESPONSE, PENDING)):
            if self.wants(FIXED[code]):
                codes[kind == k] = code
        conn = rows[:, T.R_CONN]
        codes[conn < -1] = -1                     # other protocols'
        sends = {}
        for i in np.flatnonzero((kind == D.K_SEND) & (conn >= -1)).tolist():
            name, fields = _info_message(D.head_bytes(rows, arena, i))
            if name is not None and self.wants(name):
                codes[i] = self.msg_code(name)
                sends[i] = fields
        keep = np.flatnonzero(codes >= 0)
        if not len(keep):
            return index
        msg = codes[keep]
        heartbeat = (msg == HB_MSG) | (msg == HB_ACK)
        # heartbeats: CM-bound only
        pid = np.where((conn[keep] >= 0) | ~heartbeat, path_id[keep], -1)
        cid, names = self._conn_names(conn[keep], pid)
        c = self.cols
        start = c.extend(len(keep))
        at = slice(start - c.base, start - c.base + len(keep))
        data = c.data
        self._write_rows(rows, keep, start - c.base)
        data["msg"][at] = msg
        data["cid"][at] = cid
        data["names"][at] = names
        index[keep] = np.arange(start, start + len(keep))
        for i, fields in sends.items():
            data["rich"][index[i] - c.base] = len(self.rich)
            self.rich.append((self._pack(fields), None))
        for j in np.flatnonzero(names < 0).tolist():
            row = rows[keep[j]]
            self.pathless.append((start + j, int(row[T.R_SLOT]), int(row[T.R_GEN]),
                                  (int(row[T.R_SRC_HI]), int(row[T.R_SRC_LO])),
                                  (int(row[T.R_DST_HI]), int(row[T.R_DST_LO]))))
            data["names"][start - c.base + j] = self.names_id(None)
        return index

    def _conn_names(self, conn, pid):
        """cid (-1: none) and names id (-1: no path yet) of rows by connection and path."""
        an = self.an
        span = int(pid.max()) + 2       # a (connection, path) pair as one small number
        keys, inverse = distinct_inverse(conn * span + (pid + 1))
        cid, names = [], []
        for key in keys.tolist():
            conn_id, path_id = divmod(key, span)
            path_id -= 1
            known = an.conns[conn_id][0] if conn_id >= 0 else None
            path = an.path_list[path_id] if path_id >= 0 else None
            if path is None and known is not None:
                path = known.path
            cid.append(known.cid if known is not None and known.cid is not None else -1)
            names.append(self.names_id(path) if path is not None else -1)
        inverse = inverse.reshape(-1)
        return np.array(cid, dtype=np.int64)[inverse], np.array(names, dtype=np.int32)[inverse]

    def _write_rows(self, rows, keep, first):
        """Frame, time, QP and address ids of the rows ``keep`` into the records in
        memory from ``first`` on (engine/record_columns.py): the addresses not numbered
        yet are numbered in the order their rows come, the sources before the
        destinations."""
        data = self.cols.data
        known = self._known
        if not record_rows(rows, keep, first, data["frame"], data["time"], data["qpn"],
                           data["src"], data["dst"], known.keys, known.ids):
            return
        for name, hi, lo in (("src", T.R_SRC_HI, T.R_SRC_LO), ("dst", T.R_DST_HI, T.R_DST_LO)):
            for raw in known.number(rows, keep, hi, lo, data[name], first, len(self.addrs)):
                self._numbered(raw)

    def _others(self, rows):
        """One record per message of another protocol's connection, without RTRS fields:
        the protocol, the operation and its length."""
        an = self.an
        for i in np.flatnonzero(rows[:, T.R_CONN] < -1).tolist():
            row = rows[i]
            op = "SEND" if row[T.R_SEND] else "RDMA WRITE"
            if row[T.R_IMM] >= 0:
                op += " with immediate"
            if row[T.R_IETH] >= 0:
                op += " with invalidate"
            self.add(int(row[T.R_LAST_FRAME]), int(row[T.R_LAST_TS]) / 1e9,
                     (int(row[T.R_SRC_HI]), int(row[T.R_SRC_LO])),
                     (int(row[T.R_DST_HI]), int(row[T.R_DST_LO])), int(row[T.R_QPN]), None,
                     OTHER, {"protocol": an.cm.others.of(row[T.R_CONN]).protocol, "op": op,
                             "length": int(row[T.R_LEN])})

    def close(self):
        """Records whose stream was tied to a path only later get its names (the
        same whatever batches the capture was read in)."""
        c = self.cols
        c.finish()
        for index, slot, gen, src, dst in self.pathless:
            path = self.an.stream_path(-1, slot, gen) or self.an.path_between(src, dst)
            if path is not None:
                c.put("names", index, self.names_id(path))
            else:       # a stream never proven RTRS's (docs/PROTOCOL.md#rtrs-without-a-handshake)
                c.put("msg", index, PENDING)
        count = top = 0
        for _, part in c.scan(("msg", "frame")):
            count += int(np.count_nonzero(part["msg"] != PENDING))
            top = max(top, int(part["frame"].max(initial=0)))
        kept = np.empty(count, dtype=_index_type(len(c)))
        frame = np.empty(count, dtype=_index_type(top + 1))
        done = 0
        for start, part in c.scan(("msg", "frame")):
            mine = np.flatnonzero(part["msg"] != PENDING)
            kept[done:done + len(mine)] = mine + start
            frame[done:done + len(mine)] = part["frame"][mine]
            done += len(mine)
        self.order, frame = _by_frame(kept, frame)
        self._marks = frame[::MARK].astype(np.int64)
        self._partners = None
        self.an = None    # read after the analysis (a report's ladders), not holding it

    def in_frame(self, frame):
        """The closed records of one frame (storage indices, in the order of ``order``)."""
        marks, n = self._marks, len(self.order)
        start = max(int(np.searchsorted(marks, frame, "left")) - 1, 0) * MARK
        stop = min(int(np.searchsorted(marks, frame, "right")) * MARK, n)
        near = self.order[start:stop]
        return near[self.cols.take(("frame",), near)["frame"] == frame]

    def relabel(self, names, path):
        """Records named (sess_uuid, client, server) ``names`` belong to ``path``: an
        inferred path merged into the handshake path it continues (linking.py)."""
        self._names_id.pop(names, None)    # later records of these names get a new id
        for i, known in enumerate(self.names):
            if known == names:
                self.names[i] = (path.sess_uuid, path.client, path.server)

    def requests(self, index, is_read, buf_id, offset, usr_len, data_len, sg_cnt,
                 first_frame, cut, partial, desc_addr, desc_key, desc_len, rnbd_cols,
                 usr):
        """The requests of a batch: ``index`` their records (-1: none), the rest their
        columns; ``rnbd_cols`` the RNBD IO header's columns (decode.rnbd) and ``usr``
        the user header bytes by request (at least of the headers that are not a
        whole IO's)."""
        mine = np.flatnonzero(index >= 0)
        if not len(mine):
            return
        at = index[mine]
        desc = is_read[mine] & (sg_cnt[mine] != 0)
        flags = F_REQUEST | np.where(cut[mine], F_CUT, np.where(partial[mine], F_PARTIAL, 0)) \
            | np.where(desc, F_DESC, 0)
        whole = (rnbd_cols["rnbd_type"][mine] == RNBD_MSG_IO) \
            & (rnbd_cols["usr_seen"][mine] >= rnbd.IO_SIZE)
        columns = {"msg": np.where(is_read[mine], READ, WRITE), "buf_id": buf_id[mine],
                   "offset": offset[mine], "usr_len": usr_len[mine],
                   "data_len": data_len[mine], "sg_cnt": sg_cnt[mine],
                   "first_frame": first_frame[mine], "desc_addr": desc_addr[mine],
                   "desc_key": desc_key[mine], "desc_len": desc_len[mine],
                   "flags": flags | np.where(whole, F_RNBD_IO, 0),
                   "sector": rnbd_cols["sector"][mine].view(np.uint64), "inv": -1}
        columns.update((name, rnbd_cols[name][mine])
                       for name in ("device_id", "rw", "bi_size", "prio"))
        self.cols.put_columns(at, columns)
        for k in np.flatnonzero(~whole).tolist():
            header = rnbd.decode(usr[mine[k]])
            if header is not None:
                self.rnbd[int(at[k])] = header
        self._written(at)
        # a client buffer's key comes back: the recent reads of each are kept
        read = at[desc]
        if len(read):
            self.new_reads.append((desc_key[mine][desc],
                                   self.cols.take(("frame",), read)["frame"], read))

    def responses(self, index, msg_id, errno, with_invalidate, rkey_rsp, rkey_buf_id, rkey):
        """The responses of a batch: ``index`` their records (-1: none), the rest their
        columns (an rkey_rsp's buf_id and rkey where ``rkey_rsp``)."""
        mine = np.flatnonzero(index >= 0)
        at = index[mine]
        self.cols.put_columns(at, {
            "msg": IO_RSP, "buf_id": msg_id[mine], "errno": errno[mine],
            "rkey_buf_id": rkey_buf_id[mine], "rkey": rkey[mine],
            "flags": F_RESPONSE | np.where(with_invalidate[mine] != 0, F_WITH_INV, 0)
            | np.where(rkey_rsp[mine] != 0, F_RKEY, 0)})
        self._written(at)

    def _written(self, at):
        """Records written again lose the fields they gained late; only records
        beyond the oldest ever marked can have some (most batches write none of them)."""
        if self.extras and len(at) and self._marked_top >= int(at.min()):
            for record in self.extras.keys() & at.tolist():
                del self.extras[record]

    def pairs(self, requests, responses, latency):
        """Requests and the responses that answer them, ``latency`` seconds later."""
        c = self.cols
        request_frames = c.take(("frame",), requests)["frame"]
        response_frames = c.take(("frame",), responses)["frame"]
        c.put("paired", requests, response_frames)
        c.put("latency", requests, latency)
        c.put("paired", responses, request_frames)
        c.put("latency", responses, latency)
        self.answered_first |= bool((response_frames <= request_frames).any())

    def mark(self, index, key, value):
        """A field a record gains late (failover_from, failed_over_to, not_delivered,
        failover_unseen, reply_frame: LATE)."""
        if key not in _LATE_PLACE:
            raise ValueError("%s is not a field a record gains late" % key)
        rich = self.cols.get("rich", index)
        if rich >= 0:
            fields, rnbd = self.rich[rich]
            fields = self._unpacked(fields)
            fields[key] = value
            fields = dict([item for item in fields.items() if item[0] not in _LATE_PLACE]
                          + late_fields(fields, -1))
            self.rich[rich] = (self._pack(fields), rnbd)
        else:
            self.extras.setdefault(index, {})[key] = value
            self._marked_top = max(self._marked_top, index)

    def of_frames(self, frames, msgs=("read", "write")):
        """Records, in the order they were made, of these frames and message names."""
        codes = [self._msg_code[m] for m in msgs if m in self._msg_code]
        c = self.cols
        return np.flatnonzero(np.isin(c["frame"], list(frames)) & np.isin(c["msg"], codes))

    def reply(self, request, frame, reply):
        if request >= 0:
            self.mark(request, "reply_frame", frame)
            self.replies[request] = reply

    def invalidate(self, rkeys, frames):
        """The server's SEND WITH INVALIDATE of reads' client buffers (a batch, in frame
        order), held until :meth:`match_invalidations`."""
        self.new_invalidations.append((np.asarray(rkeys, dtype=np.int64),
                                       np.asarray(frames, dtype=np.int64)))

    def match_invalidations(self):
        """The invalidations held, each to the latest read with its key before it that is
        not invalidated yet: the reads settled since the last match and the
        invalidations played together in frame order (engine/recent.py: a key read more
        than ``depth`` times in one batch).  The analyzer matches once the reads before
        them are settled (settling.py: a batch waiting for a queue depth rule holds its
        READs back)."""
        reads = _joined(self.new_reads, 3)
        order = np.argsort(reads[1], kind="stable")
        rkeys, frames = _joined(self.new_invalidations, 2)
        self.new_reads, self.new_invalidations = [], []
        read = self.reads.play(*(column[order] for column in reads), rkeys, frames)
        found = read >= 0
        hit, at = read[found], frames[found]
        if len(hit):
            self.cols.put("inv", hit, at)

    def partners(self):
        """(request_of, response_of) of the closed records, as ``messages`` pairs them
        by frame: for each record (storage index) the record of the request an
        io_rsp answers, or of the response a request got; -1 where none (of
        several with the same key, the last in frame order wins).  Made once."""
        if self._partners is None:
            self._partners = self._pair_by_frame()
        return self._partners

    def _pair_by_frame(self):
        """Made in compiled code (engine/record_columns.py) from the requests' and the
        responses' records, frames and paired frames, gathered in frame order; their
        arrays are sized by a first reading, which leaves the heap without holes
        below the two results."""
        order = self.order
        request_of = np.full(len(self.cols), -1, dtype=order.dtype)
        response_of = np.full(len(self.cols), -1, dtype=order.dtype)
        kinds = np.zeros(len(order), dtype=np.int8)      # 1 a response, 2 a request
        for start, got in self._in_order(("msg",)):
            msg = got["msg"]
            kinds[start:start + len(msg)] = np.where(
                msg == IO_RSP, 1, np.where((msg == READ) | (msg == WRITE), 2, 0))
        rsp, req = order[kinds == 1], order[kinds == 2]
        rsp_frame = np.empty(len(rsp), dtype=np.int64)
        req_frame = np.empty(len(req), dtype=np.int64)
        req_paired = np.empty(len(req), dtype=np.int64)
        done = np.zeros(3, dtype=np.int64)
        for start, got in self._in_order(("frame", "paired")):
            split_kinds(kinds[start:start + len(got["frame"])], got["frame"], got["paired"],
                        rsp_frame, req_frame, req_paired, done)
        del kinds
        answers = np.empty(len(rsp), dtype=np.int64)
        # each request's answer written over its paired frame (read first): one array less
        pair_by_frame(rsp_frame, req_frame, req_paired, req_paired, answers)
        del rsp_frame, req_frame
        response_of[req] = _taken(rsp, req_paired)
        request_of[rsp] = _taken(req, answers)
        return request_of, response_of

    def _in_order(self, names):
        """(place in ``order``, {name: values}) of the closed records, a chunk's length
        at a time: a run of records in storage order is one or two chunks' slices
        (columns.py), where longer pieces spanned more chunks than stay loaded."""
        for start in range(0, len(self.order), CHUNK):
            yield start, self.cols.take(names, self.order[start:start + CHUNK])

    # -- the records as dicts ------------------------------------------------------------

    def fields(self, i):
        """The fields dict of record ``i``."""
        data = self.cols.row(i)
        rich = int(data["rich"])
        if rich >= 0:
            return self._unpacked(self.rich[rich][0])
        flags = int(data["flags"])
        if flags & F_REQUEST:
            out = {"buf_id": int(data["buf_id"]), "offset": int(data["offset"]),
                   "usr_len": int(data["usr_len"]), "data_len": int(data["data_len"]),
                   "sg_cnt": int(data["sg_cnt"]),
                   "first_frame": int(data["first_frame"])}
            if flags & F_CUT:
                out.update(usr_len=None, data_len=None, sg_cnt=None, header_only=True)
            elif flags & F_PARTIAL:
                out["partial"] = True
            if flags & F_DESC:
                out["desc"] = {"addr": int(data["desc_addr"]),
                               "key": int(data["desc_key"]),
                               "len": int(data["desc_len"])}
        elif flags & F_RESPONSE:
            out = {"msg_id": int(data["buf_id"]), "errno": int(data["errno"]),
                   "with_invalidate": bool(flags & F_WITH_INV)}
            if flags & F_RKEY:
                out["rkey_rsp"] = {"buf_id": int(data["rkey_buf_id"]),
                                   "rkey": int(data["rkey"])}
        else:
            out = {}
        out.update(late_fields(self.extras.get(i), int(data["inv"])))
        return out

    def rnbd_of(self, i):
        data = self.cols.row(i)
        rich = int(data["rich"])
        if rich >= 0:
            return self._unpacked(self.rich[rich][1])
        if data["flags"] & F_RNBD_IO:
            out = {"type": RNBD_MSG_IO, "device_id": int(data["device_id"]),
                   "sector": int(data["sector"]), "rw": int(data["rw"]),
                   "bi_size": int(data["bi_size"]), "prio": int(data["prio"]),
                   "msg": "io"}
            out["rw_str"] = rnbd.rw_str(out["rw"])
            return out
        return self.rnbd.get(i)

    def record(self, i):
        """Record ``i`` as the dict it was before it had columns."""
        data = self.cols.row(i)
        names = self.names[data["names"]]
        cid, paired, latency = int(data["cid"]), int(data["paired"]), \
            float(data["latency"])
        out = {"frame": int(data["frame"]), "time": float(data["time"]),
               "src": self.addrs[data["src"]], "dst": self.addrs[data["dst"]],
               "qpn": int(data["qpn"]), "cid": None if cid < 0 else cid,
               "msg": self.msg_names[data["msg"]], "fields": self.fields(i),
               "rnbd": self.rnbd_of(i), "paired_frame": None if paired < 0 else paired,
               "latency": None if latency != latency else latency,
               "sess_uuid": names[0], "client": names[1], "server": names[2]}
        if i in self.replies:
            out["rnbd_reply"] = self.replies[i]
        return out


class RecordList(Sequence):
    """The records as a list of dicts, made when one is looked at: in the order they
    were made while the capture is read, in frame order once it is closed."""

    def __init__(self, records):
        self.records = records

    def indices(self):
        order = self.records.order
        return np.arange(len(self.records.cols)) if order is None else order

    def __len__(self):
        order = self.records.order
        return len(self.records.cols) if order is None else len(order)

    def __getitem__(self, item):
        if isinstance(item, slice):
            return [self.records.record(int(i)) for i in self.indices()[item]]
        if item < 0:
            item += len(self)
        if not 0 <= item < len(self):
            raise IndexError(item)
        order = self.records.order
        return self.records.record(item if order is None else int(order[item]))

    def __iter__(self):
        record = self.records.record
        return (record(i) for i in self.indices().tolist())

    def __eq__(self, other):
        if not isinstance(other, (Sequence, list)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    def live(self, start):
        """Views of the records made since the ``start``-th, that show what the
        analysis adds to them later (a request's response): the Scapy session's."""
        return [RecordView(self.records, i) for i in range(start, len(self.records.cols))]

    def at_frame(self, frame):
        """The records of one frame (a dict each)."""
        if self.records.order is not None:
            return [self.records.record(int(i)) for i in self.records.in_frame(frame)]
        hits = self.indices()
        hits = hits[self.records.cols["frame"][hits] == frame]
        return [self.records.record(int(i)) for i in hits]


class RecordView(Mapping):
    """One record as a read-only dict that follows its columns."""

    def __init__(self, records, index):
        self._records = records
        self._index = index

    def _now(self):
        return self._records.record(self._index)

    def __getitem__(self, key):
        return self._now()[key]

    def __iter__(self):
        return iter(self._now())

    def __len__(self):
        return len(self._now())

    def __repr__(self):
        return repr(self._now())


class RequestsSoFar:
    """The request each response answers, by ``Records.partners``' rule (the last
    request paired with the response's frame: ``pair_by_frame``), made a run of records
    in frame order at a time: a request comes before its answer, so the requests seen
    so far hold it, and the ``messages`` table's first row group need not wait for the
    pairs of the whole capture (0.04 s of 3 M load packets, before the encoder has any
    work).  Where the records hold a request answered no later than itself
    (``Records.answered_first``), only ``partners`` will do."""

    def __init__(self):
        empty = np.zeros(0, dtype=np.int64)
        # the requests that a later record's frame may still name, in frame order
        self.frame, self.paired, self.record = empty, empty, empty

    def __call__(self, idx, msg, frame, paired):
        """Per record ``idx`` (the next in frame order, with their ``msg``, ``frame`` and
        ``paired`` frame): the record of the request a response answers, else -1."""
        asked = ((msg == READ) | (msg == WRITE)) & (paired >= 0)
        frames = np.concatenate([self.frame, frame[asked]])
        keys = np.concatenate([self.paired, paired[asked]])
        records = np.concatenate([self.record, np.asarray(idx, dtype=np.int64)[asked]])
        out = np.full(len(idx), -1, dtype=np.int64)
        answers = np.flatnonzero(msg == IO_RSP)
        if len(answers):
            request_of = np.empty(len(answers), dtype=np.int64)
            pair_by_frame(frame[answers].astype(np.int64, copy=False), frames, keys.copy(),
                          np.empty(len(keys), dtype=np.int64), request_of)
            out[answers] = _taken(records, request_of)
        if len(idx):
            waiting = keys >= frame[-1]
            self.frame, self.paired, self.record = frames[waiting], keys[waiting], records[waiting]
        return out


def _by_frame(kept, frame):
    """``kept`` (records in the order they were made) and their ``frame`` sorted by
    frame, stable: the few records made after a later frame's (a deferred CM REQ)
    are sorted apart and put in their places."""
    late = []
    for start in range(0, len(frame), SCAN):     # a piece at a time: no copy of them all
        piece = frame[start:start + SCAN]
        ahead = np.maximum.accumulate(piece)
        if start:
            ahead = np.maximum(ahead, top)
        late.append(np.flatnonzero(piece < ahead) + start)
        top = ahead[-1]
    late = np.concatenate(late) if late else np.zeros(0, dtype=np.int64)
    if not len(late):
        return kept, frame
    by_frame = np.argsort(frame[late], kind="stable")
    late_kept, late_frame = kept[late][by_frame], frame[late][by_frame]
    kept, frame = np.delete(kept, late), np.delete(frame, late)
    at = np.searchsorted(frame, late_frame, "right")
    return np.insert(kept, at, late_kept), np.insert(frame, at, late_frame)


def _index_type(count):
    """The integer type of record numbers below ``count`` (4 bytes a record when they fit)."""
    return np.int32 if count < 2 ** 31 else np.int64


def _taken(values, places):
    """``values`` at ``places``, -1 where a place is -1."""
    out = np.full(len(places), -1, dtype=np.int64)
    found = places >= 0
    out[found] = values[places[found]]
    return out


def _joined(parts, columns):
    """The int64 columns of ``parts`` (tuples of ``columns`` arrays) joined end to end."""
    if not parts:
        return tuple(np.zeros(0, dtype=np.int64) for _ in range(columns))
    return tuple(np.concatenate(column) for column in zip(*parts))


def late_fields(fields, inv):
    """[(name, value)] of the fields among ``fields`` a record gained late, and its
    invalidate_frame ``inv`` (-1: none), in LATE's order."""
    items = [(name, value) for name, value in (fields or {}).items() if name in _LATE_PLACE]
    if inv >= 0:
        items.append(("invalidate_frame", inv))
    return sorted(items, key=lambda item: _LATE_PLACE[item[0]])
