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
from ..spec.constants import RNBD_OP_FLUSH, RNBD_OP_MASK, rnbd_op_name
from . import forked
from .messages import LINE, MessageView, _path_key, json_fields, json_rnbd
from .words import errno_text, rounded, utc_iso

BATCH = 4096
#: MessageView's LINE before the details, the time (27 characters) in two: its seconds
#: (utc_iso's 19 characters) and its microseconds
HEAD = LINE[:LINE.rindex("%s")].replace("%-27s", "%s.%06dZ")
#: MessageView.as_json's object: the names of the path and the two addresses in one
JSON = ('{"frame": %d, "time": %r, "time_iso": "%s.%06dZ", "time_rel": %r, %s, %s, '
        '"dst_qpn": %d, "cid": %s, "msg": "%s", "fields": %s, "rnbd": %s, '
        '"paired_frame": %s, "latency_us": %s}')
NAMED = '"session": %s, "paths_uuid": %s, "sess_uuid": %s, "client": %s, "server": %s'
ROUTE = '"src": %s, "dst": %s'
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
        for start in range(0, len(self.records.order), BATCH):
            yield self.batch(fmt, start)

    def batch(self, fmt, start):
        """The lines of the records ``start`` to ``start + BATCH`` in frame order."""
        idx = self.records.order[start:start + BATCH]
        return self.json_batch(idx) if fmt == "json" else self.text_batch(idx)

    def blocks(self, fmt):
        """The output as UTF-8, a batch of lines a block, in frame order, formatted on
        every core (forked.py)."""
        return forked.blocks(lambda k: _block(self.batch(fmt, k * BATCH)),
                             -(-len(self.records.order) // BATCH))

    # -- shared ----------------------------------------------------------------------

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
        flags = records.cols.take(("flags",), partner)["flags"]
        return slow, np.where(answered & (flags & R.F_RNBD_IO != 0), partner, -1)

    def _device_text(self, ref, device_id):
        name = ref.devices.get(str(device_id)) if ref is not None else None
        return "dev %d%s" % (device_id, " (%s)" % name if name else "")

    # -- columns of text --------------------------------------------------------------

    def _rnbd_texts(self, at):
        """The RNBD text of the IO requests ``at`` (storage indices), as
        MessageView._rnbd_text words it."""
        data = self.records.cols.take(("rw", "device_id", "names", "sector", "bi_size"), at)
        rw, device, names = data["rw"], data["device_id"], data["names"]
        words = _per_value(rw, lambda v: "RNBD %s " % R.rnbd.rw_str(v))
        key = names.astype(np.int64) << 32 | device.astype(np.int64)
        devices = _per_value(key, lambda v: self._device_text(self.refs[v >> 32],
                                                                v & 0xFFFFFFFF))
        sector = np.where((rw & RNBD_OP_MASK) != RNBD_OP_FLUSH, _texts(
            " sector %d", data["sector"]), "")
        size = data["bi_size"]
        length = np.where(size != 0, _texts(" len %d", size), "")
        return words + devices + sector + length

    def _heads(self, c):
        """frame, time, +s, session, src → dst, dst_qpn, cid, message: the columns
        before the details (LINE)."""
        seconds, micro = _iso_parts(c["time"])
        sessions = _objects([(r.label if r else None) or "-" for r in self.refs])
        route_key = c["src"].astype(np.int64) << 32 | c["dst"].astype(np.int64)
        routes = _per_value(route_key, lambda v: self._route_text(v >> 32, v & 0xFFFFFFFF))
        qpn = _per_value(c["qpn"], lambda v: "0x%x" % v)
        cid = np.where(c["cid"] < 0, "-", _objects(c["cid"].tolist()))
        return [HEAD % t for t in zip(
            c["frame"].tolist(), seconds.tolist(), micro.tolist(),
            (c["time"] - self.view.first_ts).tolist(), sessions[c["names"]].tolist(),
            routes.tolist(), qpn.tolist(), cid.tolist(),
            _objects(self.records.msg_names)[c["msg"]].tolist())]

    # -- text --------------------------------------------------------------------------

    def text_batch(self, idx):
        records, view = self.records, self.view
        c = records.cols.take(COLUMNS, idx)
        slow, plain_req = self._slow(idx, c)
        details = np.full(len(idx), "", dtype=object)
        flags = c["flags"]
        req = np.flatnonzero(~slow & ((flags & R.F_REQUEST) != 0))
        if len(req):
            f = flags[req]
            text = _texts("buf_id %d  offset %d", c["buf_id"][req], c["offset"][req])
            text = text + np.where((f & R.F_CUT) != 0,
                                   "  header only (usr_len, data_len unknown)",
                                   _texts("  usr_len %d  data_len %d", c["usr_len"][req],
                                          c["data_len"][req]))
            io = np.flatnonzero((f & R.F_RNBD_IO) != 0)
            text[io] = text[io] + "  " + self._rnbd_texts(idx[req][io])
            paired = c["paired"][req]
            rsp = self.response_of[idx[req]]
            err = np.where(rsp >= 0, records.cols.take(("errno",), np.maximum(rsp, 0))["errno"],
                           0)
            result = _per_value(err, lambda v: ": " + errno_text(v) if v else "")
            text = text + np.where(paired >= 0, _texts(
                "  answered in frame %d after %.1f µs", paired, c["latency"][req] * 1e6)
                + result, "  no response in the capture")
            details[req] = text
        rsp = np.flatnonzero(~slow & ((flags & R.F_RESPONSE) != 0))
        if len(rsp):
            f = flags[rsp]
            text = _texts("msg_id %d  ", c["buf_id"][rsp]) + _per_value(
                c["errno"][rsp], lambda v: "errno " + errno_text(v) if v else "OK")
            text = text + np.where((f & R.F_RKEY) != 0, _texts("  new rkey %d", c["rkey"][rsp]),
                                   "")
            text = text + np.where((f & R.F_WITH_INV) != 0, "  with invalidate", "")
            req = self.request_of[idx[rsp]]
            answered = np.flatnonzero(req >= 0)
            text[answered] = text[answered] + _texts(
                "  answers frame %d after %.1f µs",
                records.cols.take(("frame",), req[answered])["frame"],
                c["latency"][rsp][answered] * 1e6)
            plain = plain_req[rsp]
            io = np.flatnonzero(plain >= 0)
            text[io] = text[io] + "  (" + self._rnbd_texts(plain[io]) + ")"
            details[rsp] = text
        lines = [(head + text).rstrip() for head, text in zip(self._heads(c), details.tolist())]
        for k in np.flatnonzero(slow).tolist():
            lines[k] = view.line(records.record(int(idx[k])))
        return lines

    # -- JSON --------------------------------------------------------------------------

    def json_batch(self, idx):
        records, view = self.records, self.view
        c = records.cols.take(COLUMNS, idx)
        n = len(idx)
        rich = (c["rich"] >= 0)
        if records.replies:
            rich |= np.isin(idx, np.fromiter(records.replies, dtype=np.int64))
        jtext = self._json
        refs = self.refs
        named = _objects([NAMED % (
            jtext(r.label) if r else "null", jtext(r.paths_uuid) if r else "null",
            jtext(m[0]), jtext(m[1]), jtext(m[2])) for r, m in zip(refs, records.names)])
        addrs = records.addrs
        route_key = c["src"].astype(np.int64) << 32 | c["dst"].astype(np.int64)
        routes = _per_value(route_key, lambda v: ROUTE % (jtext(addrs[v >> 32]),
                                                          jtext(addrs[v & 0xFFFFFFFF])))
        seconds, micro = _iso_parts(c["time"])
        fields = self._fields_json(idx, c)
        header = np.full(n, "null", dtype=object)
        io = np.flatnonzero((c["flags"] & R.F_RNBD_IO) != 0)
        header[io] = self._rnbd_json(c, io)
        for k in np.flatnonzero(~rich & ((c["flags"] & R.F_RNBD_IO) == 0)).tolist():
            found = records.rnbd.get(int(idx[k]))
            if found is not None:
                header[k] = _dumps(json_rnbd(found))
        latency = [repr(v) if v == v else "null"
                   for v in rounded(c["latency"] * 1e6, 1).tolist()]
        cid = np.where(c["cid"] < 0, "null", _objects(c["cid"].tolist()))
        paired = np.where(c["paired"] < 0, "null", _objects(c["paired"].tolist()))
        out = [JSON % t for t in zip(
            c["frame"].tolist(), c["time"].tolist(), seconds.tolist(), micro.tolist(),
            rounded(c["time"] - view.first_ts, 6).tolist(),
            named[c["names"]].tolist(), routes.tolist(), c["qpn"].tolist(), cid.tolist(),
            _objects(records.msg_names)[c["msg"]].tolist(), fields.tolist(), header.tolist(),
            paired.tolist(), latency)]
        for k in np.flatnonzero(rich).tolist():
            out[k] = _dumps(view.as_json(records.record(int(idx[k]))))
        return out

    def _fields_json(self, idx, c):
        """The ``fields`` objects of a batch's columnar records (the fields they gained
        late, in the order they came, from the side dict)."""
        records = self.records
        flags = c["flags"]
        out = np.full(len(idx), "{}", dtype=object)
        extras = [records.extras.get(i) for i in idx.tolist()] if records.extras \
            else [None] * len(idx)
        inv = c["inv"]
        late = np.where(inv >= 0, _texts(', "invalidate_frame": %d', inv), "")
        for k in np.flatnonzero([e is not None for e in extras]).tolist():
            late[k] = _extras_json(extras[k], int(inv[k]), int(c["inv_at"][k]))
        req = np.flatnonzero((flags & R.F_REQUEST) != 0)
        if len(req):
            f = flags[req]
            cut = (f & R.F_CUT) != 0
            text = _texts('{"buf_id": %d, "offset": %d, ', c["buf_id"][req], c["offset"][req])
            text = text + np.where(cut, _texts(
                '"usr_len": null, "data_len": null, "sg_cnt": null, "first_frame": %d, '
                '"header_only": true', c["first_frame"][req]), _texts(
                '"usr_len": %d, "data_len": %d, "sg_cnt": %d, "first_frame": %d',
                c["usr_len"][req], c["data_len"][req], c["sg_cnt"][req],
                c["first_frame"][req]))
            text = text + np.where(~cut & ((f & R.F_PARTIAL) != 0), ', "partial": true', "")
            desc = np.flatnonzero((f & R.F_DESC) != 0)
            text[desc] = text[desc] + _texts(', "desc": {"addr": %d, "key": %d, "len": %d}',
                                             c["desc_addr"][req][desc],
                                             c["desc_key"][req][desc],
                                             c["desc_len"][req][desc])
            out[req] = text + late[req] + "}"
        rsp = np.flatnonzero((flags & R.F_RESPONSE) != 0)
        if len(rsp):
            f, err = flags[rsp], c["errno"][rsp]
            text = _texts('{"msg_id": %d, "errno": %d, ', c["buf_id"][rsp], err)
            text = text + np.where((f & R.F_WITH_INV) != 0, '"with_invalidate": true',
                                   '"with_invalidate": false')
            text = text + np.where((f & R.F_RKEY) != 0, _texts(
                ', "rkey_rsp": {"buf_id": %d, "rkey": %d}', c["rkey_buf_id"][rsp],
                c["rkey"][rsp]), "")
            out[rsp] = text + late[rsp] + _per_value(
                err, lambda v: ', "errno_name": "%s"}' % errno_text(v).split()[1] if v
                else "}")
        other = np.flatnonzero((flags & (R.F_REQUEST | R.F_RESPONSE)) == 0)
        for k in other.tolist():
            extra = extras[k]
            if extra:
                out[k] = _dumps(json_fields(records.msg_names[c["msg"][k]], extra))
        return out

    def _rnbd_json(self, c, io):
        rw = c["rw"][io]
        names = _per_value(rw, lambda v: ', "rw": %d, "bi_size": ' % v)
        sector = np.where((rw & RNBD_OP_MASK) != RNBD_OP_FLUSH,
                          _objects(c["sector"][io].tolist()), "null")
        tail = _per_value(rw, lambda v: ', "msg": "io", "rw_str": %s, "op": %s}' % (
            _dumps(R.rnbd.rw_str(v)), _dumps(rnbd_op_name(v))))
        return _texts('{"type": %d, "device_id": %%d, "sector": ' % R.RNBD_MSG_IO,
                      c["device_id"][io]) + _texts("%s", sector) + names \
            + _texts('%d, "prio": %d', c["bi_size"][io], c["prio"][io]) + tail


def _block(lines):
    return ("\n".join(lines) + "\n").encode()


def _objects(values):
    """A numpy array of Python objects (strings: they add elementwise)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _texts(fmt, *columns):
    """``fmt % row`` of each row of the columns, as an object array."""
    return _objects([fmt % row for row in zip(*(c.tolist() if hasattr(c, "tolist") else c
                                                for c in columns))])


def _per_value(values, text):
    """``text(v)`` of each value, worked out once per distinct value."""
    unique, inverse = np.unique(values, return_inverse=True)
    return _objects([text(v) for v in unique.tolist()])[inverse.reshape(-1)]


def _iso_parts(times):
    """The whole second as ISO text and the microseconds (utc_iso's rounding)."""
    whole = np.trunc(times)
    micro = np.rint((times - whole) * 1e6).astype(np.int64)
    up, down = micro >= 1000000, micro < 0
    whole = whole + up - down
    micro = micro - 1000000 * up + 1000000 * down
    seconds = _per_value(whole, lambda v: utc_iso(v)[:-8])
    return seconds, micro


def _extras_json(extras, inv, inv_at):
    """The fields a record gained late, invalidate_frame among them where it came."""
    items = list(extras.items()) if extras else []
    if inv >= 0:
        items.insert(inv_at, ("invalidate_frame", inv))
    return "".join(', %s: %s' % (_dumps(key), _dumps(value)) for key, value in items)


def fast(view):
    """Can ``view``'s records be formatted a batch at a time?"""
    return isinstance(view, MessageView) and not view.kernel_lines \
        and isinstance(view.records, R.RecordList) and view.records.records.order is not None
