"""Message records: one dict per RTRS/RNBD message, for ``rtrs-dissect
messages``, ``show`` and the Scapy session (only built when asked for).

A record: frame, time, src, dst, qpn (destination QP), cid, msg, fields,
rnbd, paired_frame, latency.
"""

import numpy as np

from ..engine import transport as T
from ..plans import plan
from . import decode as D
from . import rnbd

_info_req = plan("RtrsMsgInfoReq")
_info_rsp = plan("RtrsMsgInfoRsp")


class Records:
    def __init__(self, an):
        self.an = an
        self.list = []
        self.reads = {}       # desc key -> record of the READ request (invalidation links)

    def add(self, frame, ts, src, dst, qpn, conn, msg, fields, rnbd_fields=None):
        an = self.an
        rec = {"frame": frame, "time": ts, "src": an.text(src), "dst": an.text(dst),
               "qpn": qpn, "cid": conn.cid if conn is not None else None, "msg": msg,
               "fields": fields, "rnbd": rnbd_fields, "paired_frame": None, "latency": None}
        self.list.append(rec)
        return rec

    def rows(self, rows, arena, kind, path_id):
        """Records of a batch of rows (requests and responses get their pairing later);
        returns each row's record index (-1: none)."""
        an = self.an
        index = np.full(len(rows), -1, dtype=np.int64)
        names = {D.K_HB_MSG: "hb_msg", D.K_HB_ACK: "hb_ack"}
        for i in range(len(rows)):
            row = rows[i]
            k = int(kind[i])
            conn = an.conns[int(row[T.R_CONN])][0] if row[T.R_CONN] >= 0 else None
            src = (int(row[T.R_SRC_HI]), int(row[T.R_SRC_LO]))
            dst = (int(row[T.R_DST_HI]), int(row[T.R_DST_LO]))
            frame, ts = int(row[T.R_LAST_FRAME]), int(row[T.R_LAST_TS]) / 1e9
            qpn = int(row[T.R_QPN])
            if k in names:
                rec = self.add(frame, ts, src, dst, qpn, conn, names[k], {})
            elif k == D.K_SEND:
                data = D.head_bytes(rows, arena, i)
                mtype = int.from_bytes(data[:2], "little") if len(data) >= 2 else None
                if mtype == 0 and len(data) == _info_req.size:
                    fields = _info_req.decode(data, 0, len(data))
                    rec = self.add(frame, ts, src, dst, qpn, conn, "info_req",
                                   {"pathname": fields["pathname"]})
                elif mtype == 1 and len(data) >= _info_rsp.size:
                    rec = self.add(frame, ts, src, dst, qpn, conn, "info_rsp",
                                   {"sg_cnt": _info_rsp.reader("sg_cnt")(data, 0)[0]})
                else:
                    continue
            elif k in (D.K_REQUEST, D.K_RESPONSE):
                rec = self.add(frame, ts, src, dst, qpn, conn, "pending", {})
            else:
                continue
            index[i] = len(self.list) - 1
        return index

    def request(self, index, op, fields, usr):
        rec = self.list[index]
        rec["msg"] = op
        rec["fields"] = fields
        rec["rnbd"] = rnbd.decode(usr)
        if fields.get("desc"):
            self.reads[fields["desc"]["key"]] = rec

    def response(self, index, fields, rkey):
        rec = self.list[index]
        rec["msg"] = "rkey_rsp" if rkey is not None else "io_rsp"
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
        rec = self.reads.get(rkey)
        if rec is not None:
            rec["fields"]["invalidate_frame"] = frame

    def drop_pending(self):
        """Requests and responses never settled (a request without trailer)."""
        self.list = [r for r in self.list if r["msg"] != "pending"]
