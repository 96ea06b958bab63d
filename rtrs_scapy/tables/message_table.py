"""The ``messages`` table from the records' columns (analysis/records.py), a row
group at a time: numpy columns become Arrow arrays, names are taken from the few
distinct ones, and the two JSON columns (``fields``, ``rnbd``) are written by the
compiled line writer (engine/text.py), so no Python runs per row.  The rare rich
records (CM, info exchange, RNBD control messages, failovers) are made as build.py
makes any record: from its dict.  The rows are the same as build._message_row's
(tests/test_message_lines.py).
"""

import json

import numpy as np
import pyarrow as pa

from ..analysis import records as R
from ..engine.text import Pool, Template
from ..report.messages import _path_key
from ..report.words import errno_text, rounded
from ..spec.constants import RNBD_OP_FLUSH, RNBD_OP_MASK, rnbd_op_name
from .arrays import Texts, by_key, repeated, strings
from .encoding import arriving
from .schema import TIME

_dumps = json.dumps


def message_tables(view, record_list, capture, path_ids, table_schema, rows_per_table, row_of):
    """Arrow tables of ``rows_per_table`` records of ``record_list`` (its columnar
    records); ``row_of(rec)`` the row of a record dict (build._message_row), for the
    rich ones."""
    records = record_list.records
    so_far = None if records.answered_first else R.RequestsSoFar()
    request_of = records.partners()[0] if so_far is None else None
    whole_capture = view.request_of
    refs = [view._by_path.get(_path_key(dict(zip(("sess_uuid", "client", "server"), n))))
            for n in records.names]
    per_names = {
        "session": [r.label if r else None for r in refs],
        "paths_uuid": [r.paths_uuid if r else None for r in refs],
        "sess_uuid": [n[0] for n in records.names], "client": [n[1] for n in records.names],
        "server": [n[2] for n in records.names],
        "path_id": [path_ids.get(n[0] or (n[1], n[2])) for n in records.names]}
    path_ids_named = per_names.pop("path_id")
    path_id = np.array([-1 if p is None else p for p in path_ids_named], dtype=np.int64)
    path_unknown = np.array([p is None for p in path_ids_named], dtype=bool)
    path_type = table_schema.field("path_id").type
    per_names = {k: Texts(texts) for k, texts in per_names.items()}
    addrs, msgs = Texts(records.addrs), Texts(records.msg_names)
    take = records.cols.take
    order = records.order
    json_columns = _JsonColumns()
    special = None      # per record: fields gained late, an RNBD header or a reply kept apart
    if records.extras or records.rnbd or records.replies:
        special = np.zeros(len(records.cols), dtype=bool)
        special[list(records.extras) + list(records.rnbd) + list(records.replies)] = True
    try:
        for start in range(0, len(order), rows_per_table):
            idx = order[start:start + rows_per_table]
            col = take(("frame", "time", "src", "dst", "qpn", "cid", "msg", "names", "paired",
                        "latency", "rich", "flags", "buf_id", "errno"), idx)
            n = len(idx)
            flags = col["flags"]
            io = (flags & (R.F_REQUEST | R.F_RESPONSE)) != 0
            response = (flags & R.F_RESPONSE) != 0
            # a response shows the RNBD header of the request it answers
            if so_far is None:
                answered = request_of[idx]
            else:
                answered = so_far(idx, col["msg"], col["frame"], col["paired"])
                view.request_of = _AnsweredWithin(whole_capture, records, col["frame"], answered)
            header = np.where(response, answered, idx)
            h = take(("flags", "rw", "device_id", "sector", "bi_size"), np.maximum(header, 0))
            has_header = (header >= 0) & ((h["flags"] & R.F_RNBD_IO) != 0)
            rw = h["rw"]
            sector_known = has_header & ((rw & RNBD_OP_MASK) != RNBD_OP_FLUSH)
            out = {
                "capture": repeated(capture, n),
                "frame": pa.array(col["frame"], pa.int64()),
                "time": pa.array(np.rint(col["time"] * 1e6).astype(np.int64) * 1000, TIME),
                **{k: texts.take(col["names"]) for k, texts in per_names.items()},
                "path_id": _column(path_id[col["names"]], path_type, path_unknown[col["names"]]),
                "src": addrs.take(col["src"]), "dst": addrs.take(col["dst"]),
                "dst_qpn": _column(col["qpn"], pa.int64()),
                "cid": _column(col["cid"], pa.int32(), col["cid"] < 0),
                "msg": msgs.take(col["msg"]),
                "buf_id": _column(col["buf_id"], pa.int32(), ~io),
                "errno": _column(col["errno"], pa.int32(), ~response),
                "rnbd_msg": repeated("io", n, ~has_header),
                "rnbd_op": _texts_by_value(rw, rnbd_op_name, ~has_header),
                "device_id": _column(h["device_id"], pa.int32(), ~has_header),
                "sector": _column(h["sector"], pa.int64(), ~sector_known),
                "bi_size": _column(h["bi_size"], pa.int64(), ~has_header),
                "paired_frame": _column(col["paired"], pa.int64(), col["paired"] < 0),
                "latency_us": _round_1(col["latency"] * 1e6),
            }
            slow = col["rich"] >= 0
            if special is not None:
                slow |= special[idx] | (special[np.maximum(header, 0)] & (header >= 0))
            rows = [row_of(records.record(int(i))) for i in idx[slow].tolist()]
            own = dict(zip(table_schema.names, zip(*rows)))     # the rich rows' values
            out["fields"], out["rnbd"] = json_columns(records, idx, col, slow, own)
            if rows:
                at = np.flatnonzero(slow).tolist()
                for field in table_schema:
                    if field.name not in _JsonColumns.NAMES:
                        out[field.name] = _with_rich(out[field.name], at, own[field.name],
                                                     field.type)
            pieces = arriving(table_schema, out)
            yield pa.Table.from_arrays([out[f.name] for f in pieces], schema=pieces)
    finally:
        view.request_of = whole_capture


class _AnsweredWithin:
    """What the view's request by frame (report/messages.py ``ByFrame``: of a frame's
    records, the first a request answers) says for the rich rows of a row group, from
    its requests so far; at its first and last frame, whose records another row group
    may hold, the whole capture's pairs."""

    def __init__(self, whole_capture, records, frames, answered):
        self.whole_capture = whole_capture
        self.records = records
        self.frames, self.answered = frames, answered

    def get(self, frame, default=None):
        if not self.frames[0] < frame < self.frames[-1]:
            return self.whole_capture.get(frame, default)
        mine = self.answered[self.frames == frame]
        found = mine[mine >= 0]
        return self.records.record(int(found[0])) if len(found) else default


def _with_rich(column, at, values, kind):
    """``column`` with the rich records' ``values`` (plain, of the schema's ``kind``) at
    its rows ``at`` (ascending); most are what the column already holds, which its
    buffers tell.  Made of slices and buffers: Arrow's compute functions (take,
    replace, dictionary encoding) would cost the export their module's import, 33 ms
    before its first row group."""
    values = _wrapped_values(values, kind)
    if _holds(column, at, values):
        return column
    if pa.types.is_dictionary(column.type):
        return _texts_with(column, at, values)
    rich = pa.array(values, kind)
    pieces, done = [], 0
    for k, i in enumerate(at):
        pieces += [column.slice(done, i - done), rich.slice(k, 1)]
        done = i + 1
    return pa.concat_arrays(pieces + [column.slice(done)])


def _holds(column, at, values):
    """Whether ``column`` holds ``values`` (None: null) at its rows ``at``: its numbers,
    times and texts' indices read from its buffers where it has them, else compared by
    Arrow."""
    kind = column.type
    array = column.indices if pa.types.is_dictionary(kind) else column
    numeric = array.type
    if not (pa.types.is_integer(numeric) or pa.types.is_floating(numeric)
            or pa.types.is_timestamp(numeric)):
        return pa.concat_arrays([column.slice(i, 1) for i in at]).equals(pa.array(values, kind))
    rows = np.asarray(at, dtype=np.int64)
    valid = _valid_at(array, rows)
    held = [number if ok else None
            for number, ok in zip(_numbers(array)[rows].tolist(), valid.tolist())]
    if array is not column:
        dictionary = column.dictionary
        held = [None if code is None else dictionary[code].as_py() for code in held]
    return held == values


def _numbers(array):
    """The values of a fixed-width numeric ``array`` (numbers, times, a dictionary's
    indices) as numpy reads them in its buffer, nulls included."""
    kind = array.type
    width = kind.bit_width // 8
    dtype = np.dtype("%s%d" % ("f" if pa.types.is_floating(kind)
                               else "u" if pa.types.is_unsigned_integer(kind) else "i", width))
    return np.frombuffer(array.buffers()[1], dtype, len(array), width * array.offset)


def _valid_at(array, rows):
    """Whether ``array`` holds a value at each of ``rows`` (its validity bitmap's bits)."""
    bitmap = array.buffers()[0]
    if bitmap is None:
        return np.ones(len(rows), dtype=bool)
    bit = rows + array.offset
    return (np.frombuffer(bitmap, dtype=np.uint8)[bit >> 3] >> (bit & 7)) & 1 == 1


def _texts_with(column, at, texts):
    """A column of texts (a dictionary array) with ``texts`` (None: null) at rows ``at``:
    its indices rewritten, the texts its dictionary lacks added after it."""
    indices = column.indices
    codes = _numbers(indices).astype(np.int32)
    valid = _valid_at(indices, np.arange(len(indices)))
    dictionary = column.dictionary.to_pylist()
    known, added = {}, []
    for k, text in enumerate(dictionary):
        known.setdefault(text, k)
    for i, text in zip(at, texts):
        valid[i] = text is not None
        if text is not None:
            if text not in known:
                known[text] = len(dictionary) + len(added)
                added.append(text)
            codes[i] = known[text]
    whole = pa.concat_arrays([column.dictionary, pa.array(added, pa.string())]) \
        if added else column.dictionary
    return pa.DictionaryArray.from_arrays(pa.array(codes, mask=~valid), whole)


def _column(values, kind, missing=None):
    """A numpy column as an Arrow array of ``kind``, null where ``missing``; a wire
    value beyond the signed type (a hostile u32 device id, u64 sector) wraps as
    in the ``ios`` table, rather than stopping the export."""
    return pa.array(values.astype(kind.to_pandas_dtype()), mask=missing)


def _wrapped_values(values, kind):
    """Python values of ``kind``, integers wrapped as _column's."""
    if pa.types.is_integer(kind):
        half = 1 << (kind.bit_width - 1)
        return [None if v is None else (v + half) % (2 * half) - half for v in values]
    return list(values)


def _round_1(values):
    """``round(v, 1)`` of each value (Python's), null for NaN."""
    return pa.array(rounded(values, 1), mask=np.isnan(values))


class _JsonColumns:
    """``fields`` and ``rnbd`` (sorted-key JSON) of the columnar records of a batch,
    written by the compiled writer (engine/text.py); the rich ones are made from
    their dicts after."""

    def __init__(self):
        pool = Pool()
        self.pool = pool
        self.fields, self.rnbd = _fields_template(pool), _rnbd_template(pool)

    #: the columns it writes
    NAMES = ("fields", "rnbd")

    def __call__(self, records, idx, col, rich, own):
        """The two columns of the records ``idx``; the ``rich`` ones (a mask) take
        their texts from ``own`` (column name -> texts, None for null), made from
        their dicts: written in place by the writer, not put in after."""
        c = records.cols.take((
            "offset", "usr_len", "data_len", "sg_cnt", "first_frame", "desc_addr", "desc_key",
            "desc_len", "rkey_buf_id", "rkey", "inv", "device_id", "sector", "rw", "bi_size",
            "prio"), idx)
        flags = col["flags"]
        cut = (flags & R.F_CUT) != 0
        rw = c["rw"]
        columns = dict(c, buf_id=col["buf_id"], errno=col["errno"],
                       req=(flags & R.F_REQUEST) != 0, rsp=(flags & R.F_RESPONSE) != 0,
                       cut=cut, full=~cut, desc=(flags & R.F_DESC) != 0,
                       invalidated=c["inv"] >= 0,
                       partial=(flags & (R.F_CUT | R.F_PARTIAL)) == R.F_PARTIAL,
                       new_rkey=(flags & R.F_RKEY) != 0,
                       with_inv=(flags & R.F_WITH_INV) != 0,
                       no_inv=(flags & R.F_WITH_INV) == 0,
                       other=(flags & (R.F_REQUEST | R.F_RESPONSE)) == 0,
                       sector=c["sector"].view(np.int64),
                       has_sector=(rw & RNBD_OP_MASK) != RNBD_OP_FLUSH,
                       flush=(rw & RNBD_OP_MASK) == RNBD_OP_FLUSH,
                       errno_words=self.pool.add_each(col["errno"], _errno_words),
                       op_words=self.pool.add_each(rw, _op_words),
                       rw_words=self.pool.add_each(rw, _rw_words))
        columns["io"] = io = (flags & R.F_RNBD_IO) != 0
        whole = np.full(len(idx), -1, dtype=np.int64)
        at = np.flatnonzero(rich)
        whole[at] = np.arange(len(at))
        made = []
        for name, template, valid in zip(self.NAMES, (self.fields, self.rnbd), (None, io)):
            texts = own.get(name, ())
            if texts:
                valid = np.ones(len(idx), dtype=bool) if valid is None else valid.copy()
                valid[at] = [text is not None for text in texts]
            made.append(strings(template.texts(columns, whole, [t or "" for t in texts]),
                                 valid))
        return made


def _errno_words(errno):
    return '"errno_name": "%s", ' % errno_text(errno).split()[1] if errno else ""


def _op_words(rw):
    return '"msg": "io", "op": %s, "prio": ' % _dumps(rnbd_op_name(rw))


def _rw_words(rw):
    return '"rw": %d, "rw_str": %s, "sector": ' % (rw, _dumps(R.rnbd.rw_str(rw)))


def _fields_template(pool):
    t = Template(pool)
    with t.where("req"):
        t.text('{"buf_id": ').number("buf_id").text(", ")
        t.text('"data_len": null, ', when="cut")
        t.text('"data_len": ', when="full").number("data_len", when="full")
        t.text(", ", when="full")
        with t.where("desc"):
            t.text('"desc": {"addr": ').number("desc_addr").text(', "key": ')
            t.number("desc_key").text(', "len": ').number("desc_len").text("}, ")
        t.text('"first_frame": ').number("first_frame").text(", ")
        t.text('"header_only": true, ', when="cut")
        with t.where("invalidated"):
            t.text('"invalidate_frame": ').number("inv").text(", ")
        t.text('"offset": ').number("offset").text(", ")
        t.text('"partial": true, ', when="partial")
        t.text('"sg_cnt": null, "usr_len": null}', when="cut")
        with t.where("full"):
            t.text('"sg_cnt": ').number("sg_cnt").text(', "usr_len": ').number("usr_len")
            t.text("}")
    with t.where("rsp"):
        t.text('{"errno": ').number("errno").text(", ").text_of("errno_words")
        t.text('"msg_id": ').number("buf_id").text(", ")
        with t.where("new_rkey"):
            t.text('"rkey_rsp": {"buf_id": ').number("rkey_buf_id").text(', "rkey": ')
            t.number("rkey").text("}, ")
        t.text('"with_invalidate": true}', when="with_inv")
        t.text('"with_invalidate": false}', when="no_inv")
    return t.text("{}", when="other")


def _rnbd_template(pool):
    t = Template(pool)
    with t.where("io"):
        t.text('{"bi_size": ').number("bi_size").text(', "device_id": ').number("device_id")
        t.text(", ").text_of("op_words").number("prio").text(", ").text_of("rw_words")
        t.number("sector", when="has_sector", unsigned=True).text("null", when="flush")
        t.text(', "type": %d}' % R.RNBD_MSG_IO)
    return t


def _texts_by_value(values, text, missing=None):
    """``text(v)`` of each value (once per distinct one), null where ``missing``."""
    return by_key(values, text, missing)[0]
