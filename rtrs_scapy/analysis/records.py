"""Message records: one dict per RTRS/RNBD message, for ``rtrs-dissect
messages``, ``show`` and the Scapy session (only built when asked for).

A record: frame, time, src, dst, qpn (destination QP), cid, msg, fields,
rnbd, rnbd_reply (OPEN/SESS_INFO reads), paired_frame, latency (s), and the
sess_uuid, client and server of its path (they tell sessions between the same
hosts apart).
"""

import numpy as np

from ..engine import transport as T
from ..layout.plans import plan
from . import decode as D
from . import rnbd

_info_req = plan("RtrsMsgInfoReq")
_info_rsp = plan("RtrsMsgInfoRsp")


#: the names a request or response record takes once paired ("pending" until then)
IO_MESSAGES = frozenset(("read", "write", "io_rsp"))
#: a message of another RDMA protocol's connection (other_rdma.py): kept when asked for
OTHER = "other"


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
        self.list = []
        self.reads = {}       # desc key -> recent READ requests (invalidation links)
        self.pathless = []    # (record index, src, dst) of records whose path came later

    def wants(self, msg):
        if self.kinds is None:
            return msg != OTHER
        return bool(self.kinds & IO_MESSAGES) if msg == "pending" else msg in self.kinds

    def add(self, frame, ts, src, dst, qpn, conn, msg, fields, rnbd_fields=None, path=None):
        if not self.wants(msg):
            return None
        an = self.an
        if path is None and conn is not None:
            path = conn.path
        rec = {"frame": frame, "time": ts, "src": an.text(src), "dst": an.text(dst),
               "qpn": qpn, "cid": conn.cid if conn is not None else None, "msg": msg,
               "fields": fields, "rnbd": rnbd_fields, "paired_frame": None, "latency": None,
               "sess_uuid": path.sess_uuid if path is not None else None,
               "client": path.client if path is not None else None,
               "server": path.server if path is not None else None}
        self.list.append(rec)
        return rec

    def rows(self, rows, arena, kind, path_id):
        """Records of a batch of rows (requests and responses get their pairing later);
        returns each row's record index (-1: none)."""
        an = self.an
        index = np.full(len(rows), -1, dtype=np.int64)
        names = {D.K_HB_MSG: "hb_msg", D.K_HB_ACK: "hb_ack"}
        if self.wants(OTHER):
            self._others(rows)
        mine = np.flatnonzero(rows[:, T.R_CONN] >= -1)   # not other protocols'
        picked = rows[mine]
        columns = zip(mine.tolist(), kind[mine].tolist(), path_id[mine].tolist(),
                      *(picked[:, c].tolist() for c in (
                          T.R_CONN, T.R_SRC_HI, T.R_SRC_LO, T.R_DST_HI, T.R_DST_LO,
                          T.R_LAST_FRAME, T.R_LAST_TS, T.R_QPN, T.R_SLOT, T.R_GEN)))
        for (i, k, pid, conn_id, src_hi, src_lo, dst_hi, dst_lo, frame, stamp, qpn, slot,
             gen) in columns:
            conn = an.conns[conn_id][0] if conn_id >= 0 else None
            src, dst = (src_hi, src_lo), (dst_hi, dst_lo)
            bound = conn_id >= 0 or k not in names   # heartbeats: CM-bound only
            path = an.path_list[pid] if pid >= 0 and bound else None
            if k in names:
                msg, fields = names[k], {}
            elif k == D.K_SEND:
                msg, fields = _info_message(D.head_bytes(rows, arena, i))
            elif k in (D.K_REQUEST, D.K_RESPONSE):
                msg, fields = "pending", {}
            else:
                continue
            if msg is None or self.add(frame, stamp / 1e9, src, dst, qpn, conn, msg, fields,
                                       path=path) is None:
                continue
            index[i] = len(self.list) - 1
            if path is None:
                self.pathless.append((index[i], slot, gen, src, dst))
        return index

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
        for index, slot, gen, src, dst in self.pathless:
            path = self.an.stream_path(-1, slot, gen) or self.an.path_between(src, dst)
            if path is not None:
                self.list[index].update(sess_uuid=path.sess_uuid, client=path.client,
                                        server=path.server)
            else:       # a stream never proven RTRS's (docs/PROTOCOL.md#rtrs-without-a-handshake)
                self.list[index]["msg"] = "pending"
        self.list = sorted((r for r in self.list if r["msg"] != "pending"),
                           key=lambda r: r["frame"])   # a deferred CM REQ comes late

    def relabel(self, names, path):
        """Records named (sess_uuid, client, server) ``names`` belong to ``path``: an
        inferred path merged into the handshake path it continues (linking.py)."""
        for rec in self.list:
            if (rec["sess_uuid"], rec["client"], rec["server"]) == names:
                rec.update(sess_uuid=path.sess_uuid, client=path.client, server=path.server)

    def request(self, index, op, fields, usr):
        rec = self.list[index]
        rec["msg"] = op
        rec["fields"] = fields
        rec["rnbd"] = rnbd.decode(usr)
        if fields.get("desc"):
            reads = self.reads.setdefault(fields["desc"]["key"], [])
            reads.append(rec)
            del reads[:-8]     # a client buffer's key comes back: keep the recent reads

    def response(self, index, fields, rkey):
        rec = self.list[index]
        rec["msg"] = "io_rsp"          # named after what it answers; the rkey is an attribute
        if rkey is not None:
            fields["rkey_rsp"] = rkey
        rec["fields"] = fields

    def pair(self, request, response, latency):
        req, rsp = self.list[request], self.list[response]
        req["paired_frame"], req["latency"] = rsp["frame"], latency
        rsp["paired_frame"], rsp["latency"] = req["frame"], latency

    def reply(self, request, frame, reply):
        if request >= 0:
            rec = self.list[request]
            rec["fields"]["reply_frame"] = frame
            rec["rnbd_reply"] = reply

    def invalidate(self, rkey, frame):
        """The server's SEND WITH INVALIDATE of a read's client buffer: the latest read
        with that key before it that is not invalidated yet (whatever the batching)."""
        reads = self.reads.get(rkey, [])
        before = [r for r in reads if r["frame"] < frame]
        if before:
            rec = max(before, key=lambda r: r["frame"])
            rec["fields"]["invalidate_frame"] = frame
            reads.remove(rec)
