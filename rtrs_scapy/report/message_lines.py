"""``rtrs-dissect messages`` a batch of records at a time, from their columns
(analysis/records.py): the text lines and JSON objects that MessageView.line and
as_json make of one record dict, without the dicts.

Requests, responses and heartbeats, the bulk of a capture, are formatted here; the
rare records (CM, info exchange, RNBD control messages, failovers) go through
MessageView as dicts.  The output is the same byte for byte (tests/test_cli_messages.py).
"""

import json

import numpy as np

from ..analysis import records as R
from ..spec.constants import rnbd_op_name
from .messages import MessageView, _path_key, json_fields, json_rnbd
from .words import errno_text, has_sector, utc_iso

BATCH = 4096
LINE = "%6d  %-27s %11.6f  %-8s %-31s %7s %3s  %-10s %s"
JSON = ('{"frame": %d, "time": %r, "time_iso": "%s", "time_rel": %r, "session": %s, '
        '"paths_uuid": %s, "sess_uuid": %s, "client": %s, "server": %s, "src": %s, '
        '"dst": %s, "dst_qpn": %d, "cid": %s, "msg": "%s", "fields": %s, "rnbd": %s, '
        '"paired_frame": %s, "latency_us": %s}')
_dumps = json.dumps
#: the columns a batch reads
COLUMNS = ("frame", "time", "src", "dst", "qpn", "cid", "msg", "names", "paired", "latency",
           "rich", "flags", "buf_id", "offset", "usr_len", "data_len", "sg_cnt",
           "first_frame", "desc_addr", "desc_key", "desc_len", "errno", "rkey_buf_id", "rkey",
           "inv", "inv_at", "device_id", "sector", "rw", "bi_size", "prio")


class MessageLines:
    """The closed records of an analysis (RecordList) with their view."""

    def __init__(self, view, record_list):
        self.view = view
        self.records = record_list.records
        self.request_of, self.response_of = self.records.partners()
        self.refs = [view._by_path.get(_path_key(dict(zip(("sess_uuid", "client", "server"),
                                                           names))))
                     for names in self.records.names]
        self._route = {}
        self._json_text = {}

    def batches(self, fmt):
        """Lists of lines (text) or JSON objects, in frame order."""
        order = self.records.order
        make = self.json_batch if fmt == "json" else self.text_batch
        for start in range(0, len(order), BATCH):
            yield make(order[start:start + BATCH])

    # -- shared ----------------------------------------------------------------------

    def _columns(self, idx):
        data = self.records.cols.data
        return {name: data[name][idx].tolist() for name in COLUMNS}

    def _route_text(self, src, dst):
        key = (src, dst)
        text = self._route.get(key)
        if text is None:
            addrs = self.records.addrs
            text = self._route[key] = "%s → %s" % (addrs[src], addrs[dst])
        return text

    def _json(self, value):
        text = self._json_text.get(value)
        if text is None:
            text = self._json_text[value] = _dumps(value)
        return text

    def _slow(self, idx, col):
        """Which records of a batch go through MessageView as dicts: rich ones, ones
        that gained fields late, and responses whose request is not a plain IO."""
        records = self.records
        data = records.cols.data
        slow = np.array(col["rich"]) >= 0
        if records.extras:
            slow |= np.isin(idx, np.fromiter(records.extras, dtype=np.int64))
        if records.rnbd:
            slow |= np.isin(idx, np.fromiter(records.rnbd, dtype=np.int64))
        req = self.request_of[idx]
        answered = req >= 0
        partner = np.where(answered, req, 0)
        if records.rnbd:
            slow |= answered & np.isin(partner, np.fromiter(records.rnbd, dtype=np.int64))
        rsp = np.array(col["msg"]) == R.IO_RSP
        slow |= rsp & ~answered & (np.array(col["paired"]) >= 0)
        return slow, np.where(answered & (data["flags"][partner] & R.F_RNBD_IO != 0),
                              partner, -1)

    def _device_text(self, ref, device_id):
        name = ref.devices.get(str(device_id)) if ref is not None else None
        return "dev %d%s" % (device_id, " (%s)" % name if name else "")

    def _rnbd_text(self, ref, rw, device_id, sector, bi_size):
        text = "RNBD %s %s" % (R.rnbd.rw_str(rw), self._device_text(ref, device_id))
        if has_sector(rw):
            text += " sector %d" % sector
        if bi_size:
            text += " len %d" % bi_size
        return text

    def _request_rnbd_text(self, req):
        data = self.records.cols.data
        ref = self.refs[data["names"][req]]
        return self._rnbd_text(ref, int(data["rw"][req]), int(data["device_id"][req]),
                               int(data["sector"][req]), int(data["bi_size"][req]))

    # -- text --------------------------------------------------------------------------

    def text_batch(self, idx):
        records, view = self.records, self.view
        col = self._columns(idx)
        slow, plain_req = self._slow(idx, col)
        data = records.cols.data
        first_ts = view.first_ts
        refs, names = self.refs, records.msg_names
        rsp_of = self.response_of[idx].tolist()
        out = []
        for k, i in enumerate(idx.tolist()):
            if slow[k]:
                out.append(view.line(records.record(i)))
                continue
            ref = refs[col["names"][k]]
            msg = col["msg"][k]
            flags = col["flags"][k]
            if flags & R.F_REQUEST:
                parts = ["buf_id %d" % col["buf_id"][k], "offset %d" % col["offset"][k]]
                if flags & R.F_CUT:
                    parts.append("header only (usr_len, data_len unknown)")
                else:
                    parts += ["usr_len %d" % col["usr_len"][k],
                              "data_len %d" % col["data_len"][k]]
                if flags & R.F_RNBD_IO:
                    parts.append(self._rnbd_text(ref, col["rw"][k], col["device_id"][k],
                                                 col["sector"][k], col["bi_size"][k]))
                if col["paired"][k] >= 0:
                    rsp = rsp_of[k]
                    err = int(data["errno"][rsp]) if rsp >= 0 else 0
                    parts.append("answered in frame %d after %.1f µs%s" % (
                        col["paired"][k], col["latency"][k] * 1e6,
                        ": " + errno_text(err) if err else ""))
                else:
                    parts.append("no response in the capture")
                details = "  ".join(parts)
            elif flags & R.F_RESPONSE:
                err = col["errno"][k]
                parts = ["msg_id %d" % col["buf_id"][k],
                         "errno " + errno_text(err) if err else "OK"]
                if flags & R.F_RKEY:
                    parts.append("new rkey %d" % col["rkey"][k])
                if flags & R.F_WITH_INV:
                    parts.append("with invalidate")
                req = self.request_of[i]
                if req >= 0:
                    parts.append("answers frame %d after %.1f µs" % (
                        data["frame"][req], col["latency"][k] * 1e6))
                    if plain_req[k] >= 0:
                        parts.append("(%s)" % self._request_rnbd_text(req))
                details = "  ".join(parts)
            else:
                details = ""
            time = col["time"][k]
            cid = col["cid"][k]
            out.append((LINE % (
                col["frame"][k], utc_iso(time), time - first_ts,
                (ref.label if ref else None) or "-",
                self._route_text(col["src"][k], col["dst"][k]), "0x%x" % col["qpn"][k],
                "-" if cid < 0 else cid, names[msg], details)).rstrip())
        return out

    # -- JSON --------------------------------------------------------------------------

    def json_batch(self, idx):
        records, view = self.records, self.view
        col = self._columns(idx)
        rich = col["rich"]
        first_ts = view.first_ts
        refs, names, addrs = self.refs, records.msg_names, records.addrs
        jtext = self._json
        out = []
        for k, i in enumerate(idx.tolist()):
            if rich[k] >= 0 or i in records.replies:
                out.append(_dumps(view.as_json(records.record(i))))
                continue
            ref = refs[col["names"][k]]
            sess_uuid, client, server = records.names[col["names"][k]]
            flags = col["flags"][k]
            extras = records.extras.get(i)
            if flags & R.F_REQUEST:
                fields = self._request_json(col, k, extras)
            elif flags & R.F_RESPONSE:
                fields = self._response_json(col, k, extras)
            elif extras:
                fields = _dumps(json_fields(names[col["msg"][k]], extras))
            else:
                fields = "{}"
            if flags & R.F_RNBD_IO:
                header = self._rnbd_json(col, k)
            else:
                header = records.rnbd.get(i)
                header = "null" if header is None else _dumps(json_rnbd(header))
            time = col["time"][k]
            cid, paired, latency = col["cid"][k], col["paired"][k], col["latency"][k]
            out.append(JSON % (
                col["frame"][k], time, utc_iso(time), round(time - first_ts, 6),
                jtext(ref.label) if ref else "null",
                jtext(ref.paths_uuid) if ref else "null",
                jtext(sess_uuid), jtext(client), jtext(server),
                jtext(addrs[col["src"][k]]), jtext(addrs[col["dst"][k]]), col["qpn"][k],
                "null" if cid < 0 else cid, names[col["msg"][k]], fields, header,
                "null" if paired < 0 else paired,
                "null" if latency != latency else repr(round(latency * 1e6, 1))))
        return out

    def _request_json(self, col, k, extras):
        text = '{"buf_id": %d, "offset": %d, ' % (col["buf_id"][k], col["offset"][k])
        flags = col["flags"][k]
        if flags & R.F_CUT:
            text += ('"usr_len": null, "data_len": null, "sg_cnt": null, "first_frame": %d, '
                     '"header_only": true' % col["first_frame"][k])
        else:
            text += '"usr_len": %d, "data_len": %d, "sg_cnt": %d, "first_frame": %d' % (
                col["usr_len"][k], col["data_len"][k], col["sg_cnt"][k], col["first_frame"][k])
            if flags & R.F_PARTIAL:
                text += ', "partial": true'
        if flags & R.F_DESC:
            text += ', "desc": {"addr": %d, "key": %d, "len": %d}' % (
                col["desc_addr"][k], col["desc_key"][k], col["desc_len"][k])
        return text + _extras_json(col, k, extras) + "}"

    def _response_json(self, col, k, extras):
        flags, err = col["flags"][k], col["errno"][k]
        text = '{"msg_id": %d, "errno": %d, "with_invalidate": %s' % (
            col["buf_id"][k], err, "true" if flags & R.F_WITH_INV else "false")
        if flags & R.F_RKEY:
            text += ', "rkey_rsp": {"buf_id": %d, "rkey": %d}' % (col["rkey_buf_id"][k],
                                                                  col["rkey"][k])
        text += _extras_json(col, k, extras)
        if err:
            text += ', "errno_name": "%s"' % errno_text(err).split()[1]
        return text + "}"

    def _rnbd_json(self, col, k):
        rw = col["rw"][k]
        sector = col["sector"][k] if has_sector(rw) else None
        return ('{"type": %d, "device_id": %d, "sector": %s, "rw": %d, "bi_size": %d, '
                '"prio": %d, "msg": "io", "rw_str": %s, "op": %s}' % (
                    R.RNBD_MSG_IO, col["device_id"][k], "null" if sector is None else sector,
                    rw, col["bi_size"][k], col["prio"][k], self._json(R.rnbd.rw_str(rw)),
                    self._json(rnbd_op_name(rw))))


def _extras_json(col, k, extras):
    """The fields a record gained late, invalidate_frame among them where it came."""
    items = list(extras.items()) if extras else []
    if col["inv"][k] >= 0:
        items.insert(col["inv_at"][k], ("invalidate_frame", col["inv"][k]))
    return "".join(', %s: %s' % (_dumps(key), _dumps(value)) for key, value in items)


def fast(view):
    """Can ``view``'s records be formatted a batch at a time?"""
    return isinstance(view, MessageView) and not view.kernel_lines \
        and isinstance(view.records, R.RecordList) and view.records.records.order is not None
