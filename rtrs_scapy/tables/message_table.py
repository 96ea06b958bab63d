"""The ``messages`` table from the records' columns (analysis/records.py), a row
group at a time: numpy columns become Arrow arrays; only the two JSON columns
(``fields``, ``rnbd``) are made per row, from templates.  The rare rich records
(CM, info exchange, RNBD control messages, failovers) are made as build.py makes
any record: from its dict.  The rows are the same as build._message_row's.
"""

import json

import numpy as np
import pyarrow as pa

from ..analysis import records as R
from ..report.messages import _path_key
from ..report.words import errno_text
from ..spec.constants import RNBD_OP_FLUSH, RNBD_OP_MASK, rnbd_op_name

_dumps = json.dumps


def message_tables(view, result, capture, path_ids, table_schema, rows_per_table, row_of):
    """Arrow tables of ``rows_per_table`` records; ``row_of(rec)`` the row of a record
    dict (build._message_row), for the rich ones."""
    records = result.messages.records
    request_of = records.partners()[0]
    refs = [view._by_path.get(_path_key(dict(zip(("sess_uuid", "client", "server"), n))))
            for n in records.names]
    per_names = {
        "session": [r.label if r else None for r in refs],
        "paths_uuid": [r.paths_uuid if r else None for r in refs],
        "sess_uuid": [n[0] for n in records.names], "client": [n[1] for n in records.names],
        "server": [n[2] for n in records.names],
        "path_id": [path_ids.get(n[0] or (n[1], n[2])) for n in records.names]}
    per_names = {k: _objects(v) for k, v in per_names.items()}
    addrs, msgs = _objects(records.addrs), _objects(records.msg_names)
    take = records.cols.take
    order = records.order
    for start in range(0, len(order), rows_per_table):
        idx = order[start:start + rows_per_table]
        col = take(("frame", "time", "src", "dst", "qpn", "cid", "msg", "names", "paired",
                    "latency", "rich", "flags", "buf_id", "errno"), idx)
        n = len(idx)
        names = col["names"]
        flags = col["flags"]
        io = (flags & (R.F_REQUEST | R.F_RESPONSE)) != 0
        response = (flags & R.F_RESPONSE) != 0
        # a response shows the RNBD header of the request it answers
        header = np.where(response, request_of[idx], idx)
        h = take(("flags", "rw", "device_id", "sector", "bi_size"), np.maximum(header, 0))
        has_header = (header >= 0) & ((h["flags"] & R.F_RNBD_IO) != 0)
        rw = h["rw"]
        sector_known = has_header & ((rw & RNBD_OP_MASK) != RNBD_OP_FLUSH)
        out = {
            "capture": [capture] * n, "frame": col["frame"],
            "time": np.rint(col["time"] * 1e6).astype(np.int64) * 1000,
            **{k: v[names].tolist() for k, v in per_names.items()},
            "src": addrs[col["src"]].tolist(), "dst": addrs[col["dst"]].tolist(),
            "dst_qpn": col["qpn"], "cid": _nulls(col["cid"], col["cid"] < 0),
            "msg": msgs[col["msg"]].tolist(),
            "buf_id": _nulls(col["buf_id"], ~io),
            "errno": _nulls(col["errno"], ~response),
            "rnbd_msg": np.where(has_header, "io", None).tolist(),
            "rnbd_op": _op_names(rw, has_header),
            "device_id": _nulls(h["device_id"], ~has_header),
            "sector": _nulls(h["sector"], ~sector_known),
            "bi_size": _nulls(h["bi_size"], ~has_header),
            "paired_frame": _nulls(col["paired"], col["paired"] < 0),
            "latency_us": [None if v != v else round(v * 1e6, 1)
                           for v in col["latency"].tolist()],
        }
        out["fields"], out["rnbd"] = _json_columns(records, idx, col)
        for name in ("frame", "time", "dst_qpn"):
            out[name] = out[name].tolist()
        slow = col["rich"] >= 0
        if records.extras or records.rnbd or records.replies:
            special = np.fromiter(list(records.extras) + list(records.rnbd)
                                  + list(records.replies), dtype=np.int64)
            slow |= np.isin(idx, special) | np.isin(header, special)
        for k in np.flatnonzero(slow).tolist():
            row = row_of(records.record(int(idx[k])))
            for name, value in zip(table_schema.names, row):
                out[name][k] = value
        yield pa.Table.from_arrays([pa.array(out[f.name], f.type) for f in table_schema],
                                   schema=table_schema)


def _objects(values):
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _nulls(values, null):
    out = values.tolist()
    for k in np.flatnonzero(null).tolist():
        out[k] = None
    return out


def _op_names(rw, known):
    names = {v: rnbd_op_name(v) for v in np.unique(rw[known]).tolist()}
    return [names[v] if k else None for v, k in zip(rw.tolist(), known.tolist())]


def _json_columns(records, idx, col):
    """``fields`` and ``rnbd`` (sorted-key JSON) of the columnar records of a batch
    (the rich ones are made from their dicts after)."""
    c = records.cols.take((
        "offset", "usr_len", "data_len", "sg_cnt", "first_frame", "desc_addr", "desc_key",
        "desc_len", "rkey_buf_id", "rkey", "inv", "device_id", "sector", "rw", "bi_size",
        "prio"), idx)
    flags, buf_id, err = col["flags"], col["buf_id"], col["errno"]
    fields = np.full(len(idx), "{}", dtype=object)
    req = np.flatnonzero((flags & R.F_REQUEST) != 0)
    if len(req):
        f = {k: v[req] for k, v in c.items()}
        cut = (flags[req] & R.F_CUT) != 0
        desc = (flags[req] & R.F_DESC) != 0
        text = _texts('{"buf_id": %d, ', buf_id[req]) + np.where(
            cut, '"data_len": null, ', _texts('"data_len": %d, ', f["data_len"]))
        text = text + np.where(desc, _texts('"desc": {"addr": %d, "key": %d, "len": %d}, ',
                                            f["desc_addr"], f["desc_key"], f["desc_len"]), "")
        text = text + _texts('"first_frame": %d, ', f["first_frame"])
        text = text + np.where(cut, '"header_only": true, ', "")
        text = text + np.where(f["inv"] >= 0, _texts('"invalidate_frame": %d, ', f["inv"]), "")
        text = text + _texts('"offset": %d, ', f["offset"])
        partial = ~cut & ((flags[req] & R.F_PARTIAL) != 0)
        fields[req] = text + np.where(cut, '"sg_cnt": null, "usr_len": null}', np.where(
            partial, '"partial": true, ', "") + _texts('"sg_cnt": %d, "usr_len": %d}',
                                                       f["sg_cnt"], f["usr_len"]))
    rsp = np.flatnonzero((flags & R.F_RESPONSE) != 0)
    if len(rsp):
        f = {k: v[rsp] for k, v in c.items()}
        text = _per_value(err[rsp], lambda v: '{"errno": %d, ' % v + (
            '"errno_name": "%s", ' % errno_text(v).split()[1] if v else ""))
        text = text + _texts('"msg_id": %d, ', buf_id[rsp])
        rkey = (flags[rsp] & R.F_RKEY) != 0
        text = text + np.where(rkey, _texts('"rkey_rsp": {"buf_id": %d, "rkey": %d}, ',
                                            f["rkey_buf_id"], f["rkey"]), "")
        fields[rsp] = text + np.where((flags[rsp] & R.F_WITH_INV) != 0,
                                      '"with_invalidate": true}', '"with_invalidate": false}')
    rnbd = np.full(len(idx), None, dtype=object)
    io = np.flatnonzero((flags & R.F_RNBD_IO) != 0)
    if len(io):
        f = {k: v[io] for k, v in c.items()}
        rw = f["rw"]
        sector = np.where((rw & RNBD_OP_MASK) != RNBD_OP_FLUSH, _objects(f["sector"].tolist()),
                          "null")
        names = _per_value(rw, lambda v: '"msg": "io", "op": %s, "prio": ' % _dumps(
            rnbd_op_name(v)))
        rw_text = _per_value(rw, lambda v: '"rw": %d, "rw_str": %s, "sector": ' % (
            v, _dumps(R.rnbd.rw_str(v))))
        rnbd[io] = _texts('{"bi_size": %d, "device_id": %d, ', f["bi_size"], f["device_id"]) \
            + names + _texts("%d, ", f["prio"]) + rw_text + _texts("%s", sector) \
            + ', "type": %d}' % R.RNBD_MSG_IO
    return fields.tolist(), rnbd.tolist()


def _texts(fmt, *columns):
    """``fmt % row`` of each row of the columns, as an object array."""
    return _objects([fmt % row for row in zip(*(c.tolist() for c in columns))])


def _per_value(values, text):
    """``text(v)`` of each value, worked out once per distinct value."""
    unique, inverse = np.unique(values, return_inverse=True)
    return _objects([text(v) for v in unique.tolist()])[inverse.reshape(-1)]
