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
from ..layout.plans import plan
from ..spec.constants import RNBD_MSG_IO
from . import decode as D
from . import rnbd
from .columns import Columns

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
    "inv": (_I64, -1), "inv_at": (np.int8, 0),
    "device_id": (_U32, 0), "sector": (np.uint64, 0), "rw": (_U32, 0),
    "bi_size": (_U32, 0), "prio": (np.uint16, 0),
}


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

    def __init__(self, an, kinds=None):
        self.an = an
        self.kinds = None if kinds is None else frozenset(kinds)
        self.cols = Columns(SPEC)
        self.msg_names = list(FIXED)
        self._msg_code = {name: i for i, name in enumerate(FIXED)}
        self.addrs = []           # address text by id
        self._addr_id = {}
        self.names = []           # (sess_uuid, client, server) by id
        self._names_id = {}
        self.rich = []            # [fields, rnbd] of records not in columns
        self.rnbd = {}            # record -> RNBD header that is not an IO's
        self.replies = {}         # record -> rnbd_reply
        self.extras = {}          # record -> fields it gained late, in order
        self.reads = {}       # desc key -> recent READ request records (invalidation links)
        self.pathless = []    # (record, slot, gen, src, dst) of records whose path came later
        self.order = None     # the records in frame order, once closed
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
        found = self._addr_id.get(raw)
        if found is None:
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
        data = c.data
        data["frame"][i], data["time"][i] = frame, ts
        data["src"][i], data["dst"][i] = self.addr_id(src), self.addr_id(dst)
        data["qpn"][i] = qpn
        if conn is not None and conn.cid is not None:
            data["cid"][i] = conn.cid
        data["msg"][i] = self.msg_code(msg)
        data["names"][i] = self.names_id(path)
        data["rich"][i] = len(self.rich)
        self.rich.append([fields, rnbd_fields])
        return i

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
        at = slice(start, start + len(keep))
        data = c.data
        data["frame"][at] = rows[keep, T.R_LAST_FRAME]
        data["time"][at] = rows[keep, T.R_LAST_TS] / 1e9
        data["qpn"][at] = rows[keep, T.R_QPN]
        data["msg"][at] = msg
        data["cid"][at] = cid
        data["names"][at] = names
        data["src"][at], data["dst"][at] = self._addresses(rows[keep])
        index[keep] = np.arange(start, start + len(keep))
        for i, fields in sends.items():
            data["rich"][index[i]] = len(self.rich)
            self.rich.append([fields, None])
        for j in np.flatnonzero(names < 0).tolist():
            row = rows[keep[j]]
            self.pathless.append((start + j, int(row[T.R_SLOT]), int(row[T.R_GEN]),
                                  (int(row[T.R_SRC_HI]), int(row[T.R_SRC_LO])),
                                  (int(row[T.R_DST_HI]), int(row[T.R_DST_LO]))))
            data["names"][start + j] = self.names_id(None)
        return index

    def _conn_names(self, conn, pid):
        """cid (-1: none) and names id (-1: no path yet) of rows by connection and path."""
        an = self.an
        keys, inverse = np.unique(conn * (1 << 32) + (pid + 1), return_inverse=True)
        cid, names = [], []
        for key in keys.tolist():
            conn_id, path_id = key >> 32, (key & 0xFFFFFFFF) - 1
            known = an.conns[conn_id][0] if conn_id >= 0 else None
            path = an.path_list[path_id] if path_id >= 0 else None
            if path is None and known is not None:
                path = known.path
            cid.append(known.cid if known is not None and known.cid is not None else -1)
            names.append(self.names_id(path) if path is not None else -1)
        inverse = inverse.reshape(-1)
        return np.array(cid, dtype=np.int64)[inverse], np.array(names, dtype=np.int32)[inverse]

    def _addresses(self, rows):
        """Address ids of the rows' sources and destinations."""
        out = []
        for hi, lo in ((T.R_SRC_HI, T.R_SRC_LO), (T.R_DST_HI, T.R_DST_LO)):
            raws = list(zip(rows[:, hi].tolist(), rows[:, lo].tolist()))
            ids = list(map(self._addr_id.get, raws))
            if None in ids:
                ids = [self.addr_id(raw) for raw in raws]
            out.append(np.array(ids, dtype=np.int32))
        return out

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
        data = self.cols.data
        for index, slot, gen, src, dst in self.pathless:
            path = self.an.stream_path(-1, slot, gen) or self.an.path_between(src, dst)
            if path is not None:
                data["names"][index] = self.names_id(path)
            else:       # a stream never proven RTRS's (docs/PROTOCOL.md#rtrs-without-a-handshake)
                data["msg"][index] = PENDING
        kept = np.flatnonzero(self.cols["msg"] != PENDING)
        # a deferred CM REQ comes late
        self.order = kept[np.argsort(self.cols["frame"][kept], kind="stable")]

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
        the user header bytes of each (for the headers that are not a whole IO's)."""
        mine = np.flatnonzero(index >= 0)
        if not len(mine):
            return
        at = index[mine]
        data = self.cols.data
        data["msg"][at] = np.where(is_read[mine], READ, WRITE)
        for name, column in (("buf_id", buf_id), ("offset", offset), ("usr_len", usr_len),
                             ("data_len", data_len), ("sg_cnt", sg_cnt),
                             ("first_frame", first_frame), ("desc_addr", desc_addr),
                             ("desc_key", desc_key), ("desc_len", desc_len)):
            data[name][at] = column[mine]
        desc = is_read[mine] & (sg_cnt[mine] != 0)
        flags = F_REQUEST | np.where(cut[mine], F_CUT, np.where(partial[mine], F_PARTIAL, 0)) \
            | np.where(desc, F_DESC, 0)
        whole = (rnbd_cols["rnbd_type"][mine] == RNBD_MSG_IO) \
            & (rnbd_cols["usr_seen"][mine] >= rnbd.IO_SIZE)
        data["flags"][at] = flags | np.where(whole, F_RNBD_IO, 0)
        for name in ("device_id", "rw", "bi_size", "prio"):
            data[name][at] = rnbd_cols[name][mine]
        data["sector"][at] = rnbd_cols["sector"][mine].view(np.uint64)
        for k in np.flatnonzero(~whole).tolist():
            header = rnbd.decode(usr[mine[k]])
            if header is not None:
                self.rnbd[int(at[k])] = header
        data["inv"][at] = -1
        if self.extras:
            for record in at.tolist():
                self.extras.pop(record, None)
        for record, frame, key in zip(at[desc].tolist(), data["frame"][at[desc]].tolist(),
                                      desc_key[mine][desc].tolist()):
            reads = self.reads.setdefault(key, [])
            reads.append((frame, record))
            del reads[:-8]     # a client buffer's key comes back: keep the recent reads

    def responses(self, index, msg_id, errno, with_invalidate, rkey_rsp, rkey_buf_id, rkey):
        """The responses of a batch: ``index`` their records (-1: none), the rest their
        columns (an rkey_rsp's buf_id and rkey where ``rkey_rsp``)."""
        mine = np.flatnonzero(index >= 0)
        at = index[mine]
        data = self.cols.data
        data["msg"][at] = IO_RSP
        for name, column in (("buf_id", msg_id), ("errno", errno),
                             ("rkey_buf_id", rkey_buf_id), ("rkey", rkey)):
            data[name][at] = column[mine]
        data["flags"][at] = F_RESPONSE | np.where(with_invalidate[mine] != 0, F_WITH_INV, 0) \
            | np.where(rkey_rsp[mine] != 0, F_RKEY, 0)
        if self.extras:
            for record in at.tolist():
                self.extras.pop(record, None)

    def pairs(self, requests, responses, latency):
        """Requests and the responses that answer them, ``latency`` seconds later."""
        data = self.cols.data
        frame = data["frame"]
        data["paired"][requests], data["latency"][requests] = frame[responses], latency
        data["paired"][responses], data["latency"][responses] = frame[requests], latency

    def mark(self, index, key, value):
        """A field a record gains late (failover_from, failed_over_to, not_delivered,
        failover_unseen, reply_frame)."""
        rich = self.cols.data["rich"][index]
        if rich >= 0:
            self.rich[rich][0][key] = value
        else:
            self.extras.setdefault(index, {})[key] = value

    def of_frames(self, frames, msgs=("read", "write")):
        """Records, in the order they were made, of these frames and message names."""
        codes = [self._msg_code[m] for m in msgs if m in self._msg_code]
        c = self.cols
        return np.flatnonzero(np.isin(c["frame"], list(frames)) & np.isin(c["msg"], codes))

    def reply(self, request, frame, reply):
        if request >= 0:
            self.mark(request, "reply_frame", frame)
            self.replies[request] = reply

    def invalidate(self, rkey, frame):
        """The server's SEND WITH INVALIDATE of a read's client buffer: the latest read
        with that key before it that is not invalidated yet (whatever the batching)."""
        reads = self.reads.get(rkey, [])
        before = [r for r in reads if r[0] < frame]
        if before:
            read = max(before, key=lambda r: r[0])
            rec = read[1]
            data = self.cols.data
            data["inv"][rec] = frame
            data["inv_at"][rec] = len(self.extras.get(rec, ()))
            reads.remove(read)

    def partners(self):
        """(request_of, response_of) of the closed records, as ``messages`` pairs them
        by frame: for each record (storage index) the record of the request an
        io_rsp answers, or of the response a request got; -1 where none (of
        several with the same key, the last in frame order wins)."""
        c = self.cols
        order = self.order
        frame, msg, paired = c["frame"], c["msg"], c["paired"]
        rsp = order[msg[order] == IO_RSP]
        req = order[(msg[order] == READ) | (msg[order] == WRITE)]
        rsp_key, rsp_val = _last_by_key(frame[rsp], rsp)
        hit = _lookup(rsp_key, rsp_val, paired[req])
        answered = req[hit >= 0]
        request_of = np.full(len(c), -1, dtype=np.int64)
        response_of = np.full(len(c), -1, dtype=np.int64)
        key, val = _last_by_key(paired[answered], answered)
        request_of[rsp] = _lookup(key, val, frame[rsp])
        key, val = _last_by_key(frame[answered], hit[hit >= 0])
        response_of[req] = _lookup(key, val, frame[req])
        return request_of, response_of

    # -- the records as dicts ------------------------------------------------------------

    def fields(self, i):
        """The fields dict of record ``i``."""
        data = self.cols.data
        rich = int(data["rich"][i])
        if rich >= 0:
            return self.rich[rich][0]
        flags = int(data["flags"][i])
        if flags & F_REQUEST:
            out = {"buf_id": int(data["buf_id"][i]), "offset": int(data["offset"][i]),
                   "usr_len": int(data["usr_len"][i]), "data_len": int(data["data_len"][i]),
                   "sg_cnt": int(data["sg_cnt"][i]),
                   "first_frame": int(data["first_frame"][i])}
            if flags & F_CUT:
                out.update(usr_len=None, data_len=None, sg_cnt=None, header_only=True)
            elif flags & F_PARTIAL:
                out["partial"] = True
            if flags & F_DESC:
                out["desc"] = {"addr": int(data["desc_addr"][i]),
                               "key": int(data["desc_key"][i]),
                               "len": int(data["desc_len"][i])}
        elif flags & F_RESPONSE:
            out = {"msg_id": int(data["buf_id"][i]), "errno": int(data["errno"][i]),
                   "with_invalidate": bool(flags & F_WITH_INV)}
            if flags & F_RKEY:
                out["rkey_rsp"] = {"buf_id": int(data["rkey_buf_id"][i]),
                                   "rkey": int(data["rkey"][i])}
        else:
            out = {}
        extras = self.extras.get(i, {})
        inv = int(data["inv"][i])
        if inv >= 0:
            items = list(extras.items())
            items.insert(int(data["inv_at"][i]), ("invalidate_frame", inv))
            extras = dict(items)
        out.update(extras)
        return out

    def rnbd_of(self, i):
        data = self.cols.data
        rich = int(data["rich"][i])
        if rich >= 0:
            return self.rich[rich][1]
        if data["flags"][i] & F_RNBD_IO:
            out = {"type": RNBD_MSG_IO, "device_id": int(data["device_id"][i]),
                   "sector": int(data["sector"][i]), "rw": int(data["rw"][i]),
                   "bi_size": int(data["bi_size"][i]), "prio": int(data["prio"][i]),
                   "msg": "io"}
            out["rw_str"] = rnbd.rw_str(out["rw"])
            return out
        return self.rnbd.get(i)

    def record(self, i):
        """Record ``i`` as the dict it was before it had columns."""
        data = self.cols.data
        names = self.names[data["names"][i]]
        cid, paired, latency = int(data["cid"][i]), int(data["paired"][i]), \
            float(data["latency"][i])
        out = {"frame": int(data["frame"][i]), "time": float(data["time"][i]),
               "src": self.addrs[data["src"][i]], "dst": self.addrs[data["dst"][i]],
               "qpn": int(data["qpn"][i]), "cid": None if cid < 0 else cid,
               "msg": self.msg_names[data["msg"][i]], "fields": self.fields(i),
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


def _last_by_key(keys, values):
    """Sorted unique keys and, for each, the value of its last occurrence."""
    last = len(keys) - 1 - np.unique(keys[::-1], return_index=True)[1]
    return keys[last], values[last]


def _lookup(keys, values, queries):
    """The value of each query's key (sorted unique ``keys``), -1 where none."""
    if not len(keys):
        return np.full(len(queries), -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(keys, queries), len(keys) - 1)
    return np.where(keys[at] == queries, values[at], -1)
