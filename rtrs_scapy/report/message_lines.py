"""``rtrs-dissect messages`` a batch of records at a time, from their columns
(analysis/records.py): the text lines and JSON objects that MessageView.line and
as_json make of one record dict, without the dicts, written by compiled code from a
template of each (engine/text.py).

Requests, responses and heartbeats, the bulk of a capture, are formatted here; the
rare records (CM, info exchange, RNBD control messages, failovers) go through
MessageView as dicts.  The output is the same byte for byte
(tests/test_message_lines.py).
"""

import json

import numpy as np

from ..analysis import records as R
from ..engine.distinct import places
from ..engine.text import Pool, Template, exact_decimals, fixed_decimals, shortest_decimals
from ..spec.constants import RNBD_OP_FLUSH, RNBD_OP_MASK, rnbd_op_name
from . import forked
from .messages import MessageView, _path_key, json_fields, json_rnbd
from .words import errno_text, rounded, utc_iso

BATCH = 4096
#: the decimals of a record's time in JSON (its repr): a capture's times in ns
TIME_PLACES = 9
#: MessageView.as_json's names of the path and its two addresses
NAMED = '"session": %s, "paths_uuid": %s, "sess_uuid": %s, "client": %s, "server": %s'
ROUTE = '"src": %s, "dst": %s'
_dumps = json.dumps
#: the columns a batch reads
COLUMNS = ("frame", "time", "src", "dst", "qpn", "cid", "msg", "names", "paired", "latency",
           "rich", "flags", "buf_id", "offset", "usr_len", "data_len", "sg_cnt",
           "first_frame", "desc_addr", "desc_key", "desc_len", "errno", "rkey_buf_id", "rkey",
           "inv", "device_id", "sector", "rw", "bi_size", "prio")


class MessageLines:
    """The closed records of an analysis (RecordList) with their view."""

    def __init__(self, view, record_list):
        self.view = view
        self.records = record_list.records
        self.refs = [view._by_path.get(_path_key(dict(zip(("sess_uuid", "client", "server"),
                                                           names))))
                     for names in self.records.names]
        self._json_text = {}
        self._pool = Pool()
        self._templates = {}
        self._named = self._sessions = None
        self._keys = {}

    def block(self, fmt, start):
        """The lines (text) or JSON objects of the records ``start`` to ``start + BATCH``
        in frame order, as UTF-8, each line ended."""
        idx = self.records.order[start:start + BATCH]
        return self.json_block(idx) if fmt == "json" else self.text_block(idx)

    def serial(self, fmt):
        """Every block in frame order, made here."""
        for start in range(0, len(self.records.order), BATCH):
            yield self.block(fmt, start)

    def blocks(self, fmt):
        """The output as UTF-8, a batch of lines a block, in frame order, formatted on
        every core (forked.py)."""
        if fmt != "json":
            self.records.partners()     # the text's pairs: made once, before the fork
        return forked.blocks(lambda k: self.block(fmt, k * BATCH),
                             -(-len(self.records.order) // BATCH))

    # -- shared ----------------------------------------------------------------------

    def _template(self, fmt):
        if fmt not in self._templates:
            self._templates[fmt] = (_json_template if fmt == "json" else _text_template)(
                self._pool)
        return self._templates[fmt]

    def _json(self, value):
        text = self._json_text.get(value)
        if text is None:
            text = self._json_text[value] = _dumps(value)
        return text

    def _in(self, idx, side):
        """Which records ``idx`` have an entry in the records' side dict ``side``
        ("extras", "rnbd", "replies": all filled by now)."""
        if side not in self._keys:
            found = getattr(self.records, side)
            self._keys[side] = np.sort(np.fromiter(found, dtype=np.int64, count=len(found)))
        return places(self._keys[side], idx) >= 0

    def _route_key(self, c):
        return c["src"].astype(np.int64) << 32 | c["dst"].astype(np.int64)

    def _device_text(self, ref, device_id):
        name = ref.devices.get(str(device_id)) if ref is not None else None
        return "dev %d%s" % (device_id, " (%s)" % name if name else "")

    # -- text --------------------------------------------------------------------------

    def text_block(self, idx):
        """The text lines of the records ``idx`` (storage indices) as UTF-8 (LINE of
        MessageView, trailing spaces dropped); the records MessageView words itself
        (:meth:`_slow`) go through it as dicts."""
        records, view = self.records, self.view
        c = records.cols.take(COLUMNS, idx)
        slow, plain_req = self._slow(idx, c)
        texts = []
        whole = np.full(len(idx), -1, dtype=np.int64)
        for k in np.flatnonzero(slow).tolist():
            texts.append(view.line(records.record(int(idx[k]))) + "\n")
            whole[k] = len(texts) - 1
        flags = c["flags"]
        req = ~slow & ((flags & R.F_REQUEST) != 0)
        rsp = ~slow & ((flags & R.F_RESPONSE) != 0)
        cols = {"frame": c["frame"], "frame_pad": self._pad(c["frame"], 6),
                "session": self._session_entries()[c["names"]], "req": req, "rsp": rsp}
        seconds, cols["micro"] = _iso_parts(c["time"], self._pool.add_each)
        cols["seconds"] = seconds
        rel = c["time"] - view.first_ts
        cols["rel"], cols["rel_fixed"] = fixed_decimals(rel, 6)
        cols["rel_text"] = _batch_texts(texts, ~cols["rel_fixed"], rel, "%11.6f")
        cols["rel_pad"] = self._pad(cols["rel"] // 10 ** 6, 4, ~cols["rel_fixed"])
        addrs = records.addrs
        cols["route"] = self._pool.add_each(self._route_key(c), lambda v: "%-31s" % (
            "%s → %s" % (addrs[v >> 32], addrs[v & 0xFFFFFFFF])))
        cols["qpn"] = self._pool.add_each(c["qpn"], lambda v: "%7s" % ("0x%x" % v))
        cols["cid"] = self._pool.add_each(c["cid"], lambda v: "%3s" % ("-" if v < 0 else v))
        names = records.msg_names
        padded = self._pool.add_all(["%-10s " % name for name in names])   # details follow
        cols["msg"] = np.where(req | rsp, padded[c["msg"]], self._pool.add_all(names)[c["msg"]])
        for name in ("buf_id", "offset", "usr_len", "data_len", "paired", "rkey"):
            cols[name] = c[name]
        cut = (flags & R.F_CUT) != 0
        answered = c["paired"] >= 0
        cols.update(cut=cut, full=~cut, answered=answered, unanswered=~answered,
                    new_rkey=(flags & R.F_RKEY) != 0, inv=(flags & R.F_WITH_INV) != 0)
        latency = c["latency"] * 1e6
        cols["latency"], cols["latency_fixed"] = fixed_decimals(latency, 1)
        request_of, response_of = self.records.partners()
        request = request_of[idx]
        cols["request"] = request >= 0
        cols["latency_text"] = _batch_texts(
            texts, ~cols["latency_fixed"] & ((req & answered) | (rsp & (request >= 0))),
            latency, "%.1f")
        response = response_of[idx]
        err = np.where(req & (response >= 0), records.cols.take(
            ("errno",), np.maximum(response, 0))["errno"], 0)
        cols["result"] = self._pool.add_each(err, lambda v: ": " + errno_text(v) if v else "")
        cols["status"] = self._pool.add_each(c["errno"], lambda v: "errno " + errno_text(v) if v
                                      else "OK")
        cols["request_frame"] = records.cols.take(("frame",), np.maximum(request, 0))["frame"]
        self._rnbd_columns(cols, c, req & ((flags & R.F_RNBD_IO) != 0), rsp & (plain_req >= 0),
                           plain_req)
        return self._template("text").write(cols, whole, texts)

    def _slow(self, idx, col):
        """Which records of a batch go through MessageView as dicts: rich ones, ones
        that gained fields late, and responses whose request is not a plain IO; and
        each response's plain IO request (-1: none)."""
        records = self.records
        slow = col["rich"] >= 0
        if records.extras:
            slow |= self._in(idx, "extras")
        if records.rnbd:
            slow |= self._in(idx, "rnbd")
        req = records.partners()[0][idx]
        answered = req >= 0
        partner = np.where(answered, req, 0)
        if records.rnbd:
            slow |= answered & self._in(partner, "rnbd")
        rsp = col["msg"] == R.IO_RSP
        slow |= rsp & ~answered & (col["paired"] >= 0)
        flags = records.cols.take(("flags",), partner)["flags"]
        return slow, np.where(answered & (flags & R.F_RNBD_IO != 0), partner, -1)

    def _rnbd_columns(self, cols, c, req_io, rsp_io, plain_req):
        """The columns of the RNBD words (MessageView._rnbd_text): of an IO request
        itself, of an answered response its request's."""
        data = {name: c[name].copy() for name in ("rw", "device_id", "names", "sector",
                                                  "bi_size")}
        at = np.flatnonzero(rsp_io)
        if len(at):
            theirs = self.records.cols.take(tuple(data), plain_req[at])
            for name, column in data.items():
                column[at] = theirs[name]
        rw = data["rw"]
        cols["rw_words"] = self._pool.add_each(rw, lambda v: "RNBD %s " % R.rnbd.rw_str(v))
        key = data["names"].astype(np.int64) << 32 | data["device_id"].astype(np.int64)
        cols["device"] = self._pool.add_each(key, lambda v: self._device_text(self.refs[v >> 32],
                                                                      v & 0xFFFFFFFF))
        cols["sector"] = data["sector"].view(np.int64)
        cols["has_sector"] = (rw & RNBD_OP_MASK) != RNBD_OP_FLUSH
        cols["bi_size"] = data["bi_size"]
        cols["has_size"] = data["bi_size"] != 0
        cols["req_io"], cols["rsp_io"] = req_io, rsp_io

    def _session_entries(self):
        if self._sessions is None:
            self._sessions = self._pool.add_all(["%-8s" % ((r.label if r else None) or "-")
                                            for r in self.refs])
        return self._sessions

    def _pad(self, values, width, none=None):
        """The pool entry of the spaces before each value (not negative) right-aligned
        in ``width`` digits; nothing where ``none``."""
        digits = 1 + np.searchsorted(_POWERS, values, side="right")
        pads = self._pool.add_all([" " * n for n in range(width + 1)])
        out = pads[np.clip(width - digits, 0, width)]
        return out if none is None else np.where(none, -1, out)

    # -- JSON --------------------------------------------------------------------------

    def json_block(self, idx):
        """The JSON lines of the records ``idx`` (storage indices) as UTF-8; rich
        records go through MessageView as dicts."""
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
            rich |= self._in(idx, "replies")
        for k in np.flatnonzero(rich).tolist():
            whole[k] = text(k, _dumps(view.as_json(records.record(int(idx[k])))) + "\n")
        cols = {"frame": c["frame"], "qpn": c["qpn"], "cid": c["cid"], "paired": c["paired"],
                "named": self._named_entries()[c["names"]],
                "msg": self._pool.add_all(records.msg_names)[c["msg"]]}
        addrs, jtext = records.addrs, self._json
        cols["route"] = self._pool.add_each(self._route_key(c), lambda v: ROUTE % (
            jtext(addrs[v >> 32]), jtext(addrs[v & 0xFFFFFFFF])))
        seconds, cols["micro"] = _iso_parts(c["time"], self._pool.add_each)
        cols["seconds"] = seconds
        self._floats(cols, texts, "time", c["time"], TIME_PLACES, shortest_decimals)
        self._floats(cols, texts, "rel", rounded(c["time"] - view.first_ts, 6), 6)
        latency = rounded(c["latency"] * 1e6, 1)
        self._floats(cols, texts, "latency", latency, 1)
        cols["latency_null"] = latency != latency
        self._fields_columns(idx, c, cols, text)
        io = (flags & R.F_RNBD_IO) != 0
        cols["io"] = io
        cols["has_sector"] = (c["rw"] & RNBD_OP_MASK) != RNBD_OP_FLUSH
        cols["flush"] = ~cols["has_sector"]
        for name in ("device_id", "rw", "bi_size", "prio"):
            cols[name] = c[name]
        cols["sector"] = c["sector"].view(np.int64)
        cols["rw_tail"] = self._pool.add_each(c["rw"], lambda v: ', "msg": "io", "rw_str": %s, '
                                       '"op": %s}' % (_dumps(R.rnbd.rw_str(v)),
                                                      _dumps(rnbd_op_name(v))))
        header = np.full(len(idx), -1, dtype=np.int64)
        if records.rnbd:
            for k in np.flatnonzero(~rich & ~io & self._in(idx, "rnbd")).tolist():
                header[k] = text(k, _dumps(json_rnbd(records.rnbd[int(idx[k])])))
        cols["rnbd_text"] = header
        cols["rnbd_null"] = ~io & (header < 0)
        return self._template("json").write(cols, whole, texts)

    def _named_entries(self):
        """Per names id: the pool entry of its session, paths_uuid and names."""
        if self._named is None:
            jtext = self._json
            self._named = self._pool.add_all([NAMED % (
                jtext(r.label) if r else "null", jtext(r.paths_uuid) if r else "null",
                jtext(m[0]), jtext(m[1]), jtext(m[2]))
                for r, m in zip(self.refs, self.records.names)])
        return self._named

    @staticmethod
    def _floats(cols, texts, name, values, places, decimals=exact_decimals):
        """The columns that write ``values`` as Python's repr: N with its guard where
        ``decimals`` finds it, the repr as the batch's text elsewhere (NaN: neither)."""
        cols[name], exact = decimals(values, places)
        cols[name + "_exact"] = exact
        cols[name + "_repr"] = _batch_texts(texts, ~exact & (values == values), values, "%r")

    def _fields_columns(self, idx, c, cols, text):
        """The columns of the ``fields`` objects: what each kind of record shows, and
        the fields records gained late (the side dict) as the batch's texts."""
        records = self.records
        flags = c["flags"]
        req = (flags & R.F_REQUEST) != 0
        rsp = (flags & R.F_RESPONSE) != 0
        cols.update(req=req, rsp=rsp, cut=(flags & R.F_CUT) != 0,
                    full=(flags & R.F_CUT) == 0, partial=(flags & R.F_PARTIAL) != 0,
                    desc=(flags & R.F_DESC) != 0, inv=(flags & R.F_WITH_INV) != 0,
                    no_inv=(flags & R.F_WITH_INV) == 0, new_rkey=(flags & R.F_RKEY) != 0)
        for name in ("buf_id", "offset", "usr_len", "data_len", "sg_cnt", "first_frame",
                     "desc_addr", "desc_key", "desc_len", "errno", "rkey_buf_id", "rkey",
                     "inv_frame"):
            cols[name] = c[name if name != "inv_frame" else "inv"]
        cols["errno_tail"] = self._pool.add_each(c["errno"], lambda v: ', "errno_name": "%s"}' % (
            errno_text(v).split()[1]) if v else "}")
        late = np.full(len(idx), -1, dtype=np.int64)
        extra = np.zeros(len(idx), dtype=bool)
        other = np.full(len(idx), -1, dtype=np.int64)
        if records.extras:
            inv = c["inv"]
            for k in np.flatnonzero(self._in(idx, "extras")).tolist():
                extras = records.extras[int(idx[k])]
                extra[k] = True
                if req[k] or rsp[k]:
                    late[k] = text(k, _extras_json(extras, int(inv[k])))
                elif extras:
                    other[k] = text(k, _dumps(json_fields(records.msg_names[c["msg"][k]],
                                                          dict(R.late_fields(extras, -1)))))
        cols["late"], cols["other"] = late, other
        cols["late_inv"] = (req | rsp) & ~extra & (c["inv"] >= 0)
        cols["other_empty"] = ~req & ~rsp & (other < 0)


def _text_template(pool):
    """MessageView.line of a record (its LINE, trailing spaces dropped), from the
    columns text_block makes."""
    t = Template(pool)
    t.text_of("frame_pad").number("frame").text("  ").text_of("seconds").text(".")
    t.padded("micro", 6).text("Z ").text_of("rel_pad").fixed("rel", 6, when="rel_fixed")
    t.text_of("rel_text", batch=True).text("  ").text_of("session").text(" ")
    t.text_of("route").text(" ").text_of("qpn").text(" ").text_of("cid").text("  ")
    t.text_of("msg")
    with t.where("req"):
        t.text("buf_id ").number("buf_id").text("  offset ").number("offset")
        t.text("  header only (usr_len, data_len unknown)", when="cut")
        with t.where("full"):
            t.text("  usr_len ").number("usr_len").text("  data_len ").number("data_len")
        with t.where("req_io"):
            t.text("  ")
            _rnbd_words(t)
        with t.where("answered"):
            t.text("  answered in frame ").number("paired").text(" after ")
            _latency_words(t)
            t.text_of("result")
        t.text("  no response in the capture", when="unanswered")
    with t.where("rsp"):
        t.text("msg_id ").number("buf_id").text("  ").text_of("status")
        t.text("  new rkey ", when="new_rkey").number("rkey", when="new_rkey")
        t.text("  with invalidate", when="inv")
        with t.where("request"):
            t.text("  answers frame ").number("request_frame").text(" after ")
            _latency_words(t)
        with t.where("rsp_io"):
            t.text("  (")
            _rnbd_words(t)
            t.text(")")
    return t.text("\n")


def _rnbd_words(t):
    t.text_of("rw_words").text_of("device")
    t.text(" sector ", when="has_sector").number("sector", when="has_sector", unsigned=True)
    t.text(" len ", when="has_size").number("bi_size", when="has_size")


def _latency_words(t):
    t.fixed("latency", 1, when="latency_fixed").text_of("latency_text", batch=True)
    t.text(" µs")


def _json_template(pool):
    """MessageView.as_json's object of a record, from the columns json_block makes."""
    t = Template(pool)
    t.text('{"frame": ').number("frame").text(', "time": ')
    _float(t, "time", TIME_PLACES)
    t.text(', "time_iso": "').text_of("seconds").text(".").padded("micro", 6)
    t.text('Z", "time_rel": ')
    _float(t, "rel", 6)
    t.text(", ").text_of("named").text(", ").text_of("route").text(', "dst_qpn": ')
    t.number("qpn").text(', "cid": ').number("cid", or_null=True).text(', "msg": "')
    t.text_of("msg").text('", "fields": ')
    with t.where("req"):
        t.text('{"buf_id": ').number("buf_id").text(', "offset": ').number("offset")
        t.text(", ")
        with t.where("cut"):
            t.text('"usr_len": null, "data_len": null, "sg_cnt": null, "first_frame": ')
            t.number("first_frame").text(', "header_only": true')
        with t.where("full"):
            t.text('"usr_len": ').number("usr_len").text(', "data_len": ')
            t.number("data_len").text(', "sg_cnt": ').number("sg_cnt")
            t.text(', "first_frame": ').number("first_frame")
            t.text(', "partial": true', when="partial")
        with t.where("desc"):
            t.text(', "desc": {"addr": ').number("desc_addr").text(', "key": ')
            t.number("desc_key").text(', "len": ').number("desc_len").text("}")
    with t.where("rsp"):
        t.text('{"msg_id": ').number("buf_id").text(', "errno": ').number("errno").text(", ")
        t.text('"with_invalidate": true', when="inv")
        t.text('"with_invalidate": false', when="no_inv")
        with t.where("new_rkey"):
            t.text(', "rkey_rsp": {"buf_id": ').number("rkey_buf_id").text(', "rkey": ')
            t.number("rkey").text("}")
    with t.where("late_inv"):
        t.text(', "invalidate_frame": ').number("inv_frame")
    t.text_of("late", batch=True)
    t.text("}", when="req").text_of("errno_tail", when="rsp")
    t.text("{}", when="other_empty").text_of("other", batch=True)
    t.text(', "rnbd": ')
    with t.where("io"):
        t.text('{"type": %d, "device_id": ' % R.RNBD_MSG_IO).number("device_id")
        t.text(', "sector": ')
        t.number("sector", when="has_sector", unsigned=True).text("null", when="flush")
        t.text(', "rw": ').number("rw").text(', "bi_size": ').number("bi_size")
        t.text(', "prio": ').number("prio").text_of("rw_tail")
    t.text_of("rnbd_text", batch=True).text("null", when="rnbd_null")
    t.text(', "paired_frame": ').number("paired", or_null=True).text(', "latency_us": ')
    _float(t, "latency", 1)
    return t.text("null", when="latency_null").text("}\n")


def _float(template, name, places):
    """The steps of a float column made by MessageLines._floats."""
    template.decimal(name, places, when=name + "_exact").text_of(name + "_repr", batch=True)


def _batch_texts(texts, where, values, fmt):
    """``fmt % value`` of the rows ``where``, appended to the batch's texts: their
    numbers (-1 elsewhere)."""
    out = np.full(len(values), -1, dtype=np.int64)
    for k in np.flatnonzero(where).tolist():
        out[k] = len(texts)
        texts.append(fmt % float(values[k]))
    return out


def _iso_parts(times, per_value):
    """What ``per_value`` makes of each whole second's ISO text, and the microseconds
    (utc_iso's rounding)."""
    whole = np.trunc(times)
    micro = np.rint((times - whole) * 1e6).astype(np.int64)
    up, down = micro >= 1000000, micro < 0
    whole = whole + up - down
    micro = micro - 1000000 * up + 1000000 * down
    return per_value(whole, lambda v: utc_iso(v)[:-8]), micro


#: 10, 100, … : a number's digits are one more than the powers it reaches
_POWERS = 10 ** np.arange(1, 19, dtype=np.int64)


def _extras_json(extras, inv):
    """The fields a record gained late, invalidate_frame among them (records.LATE's
    order)."""
    return "".join(', %s: %s' % (_dumps(key), _dumps(value))
                   for key, value in R.late_fields(extras, inv))


def fast(view):
    """Can ``view``'s records be formatted a batch at a time?"""
    return isinstance(view, MessageView) and not view.kernel_lines \
        and isinstance(view.records, R.RecordList) and view.records.records.order is not None
