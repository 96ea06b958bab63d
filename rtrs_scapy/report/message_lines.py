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
from ..engine.text import Pool, Template, exact_decimals
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
        self._pool = Pool()
        self._template = self._named = self._extra_keys = None

    def batches(self, fmt):
        """Lists of lines (text) or JSON objects, in frame order."""
        for start in range(0, len(self.records.order), BATCH):
            yield self.batch(fmt, start)

    def batch(self, fmt, start):
        """The lines of the records ``start`` to ``start + BATCH`` in frame order."""
        idx = self.records.order[start:start + BATCH]
        return self.json_batch(idx) if fmt == "json" else self.text_batch(idx)

    def block(self, fmt, start):
        """:meth:`batch` as UTF-8, each line ended."""
        if fmt == "json":
            return self.json_block(self.records.order[start:start + BATCH])
        return _block(self.batch(fmt, start))

    def blocks(self, fmt):
        """The output as UTF-8, a batch of lines a block, in frame order, formatted on
        every core (forked.py)."""
        return forked.blocks(lambda k: self.block(fmt, k * BATCH),
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

    def json_block(self, idx):
        """The JSON lines of the records ``idx`` (storage indices) as UTF-8, written by
        the template (engine/text.py); rich records go through MessageView as dicts."""
        records, view = self.records, self.view
        c = records.cols.take(COLUMNS, idx)
        flags = c["flags"]
        texts = []

        def text(k, line):
            texts.append(line)
            return len(texts) - 1

        whole = np.full(len(idx), -1, dtype=np.int64)
        rich = (c["rich"] >= 0)
        if records.replies:
            rich |= np.isin(idx, np.fromiter(records.replies, dtype=np.int64))
        for k in np.flatnonzero(rich).tolist():
            whole[k] = text(k, _dumps(view.as_json(records.record(int(idx[k])))) + "\n")
        cols = {"frame": c["frame"], "qpn": c["qpn"], "cid": c["cid"], "paired": c["paired"],
                "named": self._named_entries()[c["names"]],
                "msg": self._msg_entries()[c["msg"]]}
        route_key = c["src"].astype(np.int64) << 32 | c["dst"].astype(np.int64)
        addrs, jtext = records.addrs, self._json
        cols["route"] = self._pooled(route_key, lambda v: ROUTE % (
            jtext(addrs[v >> 32]), jtext(addrs[v & 0xFFFFFFFF])))
        seconds, cols["micro"] = _iso_parts(c["time"], self._pooled)
        cols["seconds"] = seconds
        self._floats(cols, texts, "time", c["time"], 6)
        self._floats(cols, texts, "rel", rounded(c["time"] - view.first_ts, 6), 6)
        latency = rounded(c["latency"] * 1e6, 1)
        self._floats(cols, texts, "latency", latency, 1)
        cols["latency_null"] = latency != latency
        self._fields_columns(idx, c, cols, text)
        io = (flags & R.F_RNBD_IO) != 0
        cols["io"] = io
        sector = (c["rw"] & RNBD_OP_MASK) != RNBD_OP_FLUSH
        cols["io_sector"], cols["io_flush"] = io & sector, io & ~sector
        for name in ("device_id", "rw", "bi_size", "prio"):
            cols[name] = c[name]
        cols["sector"] = c["sector"].view(np.int64)
        cols["rw_tail"] = self._pooled(c["rw"], lambda v: ', "msg": "io", "rw_str": %s, '
                                       '"op": %s}' % (_dumps(R.rnbd.rw_str(v)),
                                                      _dumps(rnbd_op_name(v))))
        header = np.full(len(idx), -1, dtype=np.int64)
        for k in np.flatnonzero(~rich & ~io).tolist():
            found = records.rnbd.get(int(idx[k]))
            if found is not None:
                header[k] = text(k, _dumps(json_rnbd(found)))
        cols["rnbd_text"] = header
        cols["rnbd_null"] = ~io & (header < 0)
        return self._json_template().write(cols, whole, texts)

    def json_batch(self, idx):
        """The JSON lines of the records ``idx``, as a list of str."""
        return self.json_block(idx).decode().split("\n")[:-1]

    def _json_template(self):
        if self._template is None:
            self._template = _json_template(self._pool)
        return self._template

    def _pooled(self, values, text):
        """The pool entry of ``text(v)`` for each value, worked out once per distinct
        value."""
        unique, inverse = np.unique(values, return_inverse=True)
        entries = np.array([self._pool.add(text(v)) for v in unique.tolist()], dtype=np.int64)
        return entries[inverse.reshape(-1)]

    def _named_entries(self):
        """Per names id: the pool entry of its session, paths_uuid and names."""
        if self._named is None:
            jtext = self._json
            self._named = np.array([self._pool.add(NAMED % (
                jtext(r.label) if r else "null", jtext(r.paths_uuid) if r else "null",
                jtext(m[0]), jtext(m[1]), jtext(m[2])))
                for r, m in zip(self.refs, self.records.names)], dtype=np.int64)
        return self._named

    def _msg_entries(self):
        return np.array([self._pool.add(name) for name in self.records.msg_names],
                        dtype=np.int64)

    @staticmethod
    def _floats(cols, texts, name, values, places):
        """The columns that write ``values`` as Python's repr: N with its guard where
        the decimal is exact, the repr as the batch's text elsewhere (NaN: neither)."""
        cols[name], exact = exact_decimals(values, places)
        cols[name + "_exact"] = exact
        reprs = np.full(len(values), -1, dtype=np.int64)
        for k in np.flatnonzero(~exact & (values == values)).tolist():
            texts.append(repr(float(values[k])))
            reprs[k] = len(texts) - 1
        cols[name + "_repr"] = reprs

    def _fields_columns(self, idx, c, cols, text):
        """The columns of the ``fields`` objects: what each kind of record shows, and
        the fields records gained late (the side dict) as the batch's texts."""
        records = self.records
        flags = c["flags"]
        req = (flags & R.F_REQUEST) != 0
        rsp = (flags & R.F_RESPONSE) != 0
        cut = (flags & R.F_CUT) != 0
        cols.update(req=req, rsp=rsp, req_cut=req & cut, req_full=req & ~cut,
                    req_partial=req & ~cut & ((flags & R.F_PARTIAL) != 0),
                    req_desc=req & ((flags & R.F_DESC) != 0),
                    rsp_inv=rsp & ((flags & R.F_WITH_INV) != 0),
                    rsp_noinv=rsp & ((flags & R.F_WITH_INV) == 0),
                    rsp_rkey=rsp & ((flags & R.F_RKEY) != 0))
        for name in ("buf_id", "offset", "usr_len", "data_len", "sg_cnt", "first_frame",
                     "desc_addr", "desc_key", "desc_len", "errno", "rkey_buf_id", "rkey", "inv"):
            cols[name] = c[name]
        cols["errno_tail"] = self._pooled(c["errno"], lambda v: ', "errno_name": "%s"}' % (
            errno_text(v).split()[1]) if v else "}")
        late = np.full(len(idx), -1, dtype=np.int64)
        extra = np.zeros(len(idx), dtype=bool)
        other = np.full(len(idx), -1, dtype=np.int64)
        if records.extras:
            inv, inv_at = c["inv"], c["inv_at"]
            if self._extra_keys is None:
                self._extra_keys = np.fromiter(records.extras, dtype=np.int64)
            for k in np.flatnonzero(np.isin(idx, self._extra_keys)).tolist():
                extras = records.extras[int(idx[k])]
                extra[k] = True
                if req[k] or rsp[k]:
                    late[k] = text(k, _extras_json(extras, int(inv[k]), int(inv_at[k])))
                elif extras:
                    other[k] = text(k, _dumps(json_fields(records.msg_names[c["msg"][k]],
                                                          extras)))
        cols["late"], cols["other"] = late, other
        cols["late_inv"] = (req | rsp) & ~extra & (c["inv"] >= 0)
        cols["other_empty"] = ~req & ~rsp & (other < 0)

def _json_template(pool):
    """MessageView.as_json's object of a record, from the columns json_block makes."""
    t = Template(pool)
    t.text('{"frame": ').number("frame").text(', "time": ')
    _float(t, "time", 6)
    t.text(', "time_iso": "').text_of("seconds").text(".").padded("micro", 6)
    t.text('Z", "time_rel": ')
    _float(t, "rel", 6)
    t.text(", ").text_of("named").text(", ").text_of("route").text(', "dst_qpn": ')
    t.number("qpn").text(', "cid": ').number("cid", or_null=True).text(', "msg": "')
    t.text_of("msg").text('", "fields": ')
    with t.where("req"):
        t.text('{"buf_id": ').number("buf_id").text(', "offset": ').number("offset")
        t.text(", ")
    with t.where("req_cut"):
        t.text('"usr_len": null, "data_len": null, "sg_cnt": null, "first_frame": ')
        t.number("first_frame").text(', "header_only": true')
    with t.where("req_full"):
        t.text('"usr_len": ').number("usr_len").text(', "data_len": ').number("data_len")
        t.text(', "sg_cnt": ').number("sg_cnt").text(', "first_frame": ').number("first_frame")
    t.text(', "partial": true', when="req_partial")
    with t.where("req_desc"):
        t.text(', "desc": {"addr": ').number("desc_addr").text(', "key": ').number("desc_key")
        t.text(', "len": ').number("desc_len").text("}")
    with t.where("rsp"):
        t.text('{"msg_id": ').number("buf_id").text(', "errno": ').number("errno").text(", ")
    t.text('"with_invalidate": true', when="rsp_inv")
    t.text('"with_invalidate": false', when="rsp_noinv")
    with t.where("rsp_rkey"):
        t.text(', "rkey_rsp": {"buf_id": ').number("rkey_buf_id").text(', "rkey": ')
        t.number("rkey").text("}")
    t.text(', "invalidate_frame": ', when="late_inv").number("inv", when="late_inv")
    t.text_of("late", batch=True)
    t.text("}", when="req").text_of("errno_tail", when="rsp")
    t.text("{}", when="other_empty").text_of("other", batch=True)
    t.text(', "rnbd": ')
    with t.where("io"):
        t.text('{"type": %d, "device_id": ' % R.RNBD_MSG_IO).number("device_id")
        t.text(', "sector": ')
    t.number("sector", when="io_sector", unsigned=True).text("null", when="io_flush")
    with t.where("io"):
        t.text(', "rw": ').number("rw").text(', "bi_size": ').number("bi_size")
        t.text(', "prio": ').number("prio").text_of("rw_tail")
    t.text_of("rnbd_text", batch=True).text("null", when="rnbd_null")
    t.text(', "paired_frame": ').number("paired", or_null=True).text(', "latency_us": ')
    _float(t, "latency", 1)
    return t.text("null", when="latency_null").text("}\n")


def _float(template, name, places):
    """The steps of a float column made by MessageLines._floats."""
    template.decimal(name, places, when=name + "_exact").text_of(name + "_repr", batch=True)


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


def _iso_parts(times, per_value=None):
    """The whole second as ISO text (or what ``per_value`` makes of it) and the
    microseconds (utc_iso's rounding)."""
    whole = np.trunc(times)
    micro = np.rint((times - whole) * 1e6).astype(np.int64)
    up, down = micro >= 1000000, micro < 0
    whole = whole + up - down
    micro = micro - 1000000 * up + 1000000 * down
    seconds = (per_value or _per_value)(whole, lambda v: utc_iso(v)[:-8])
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
