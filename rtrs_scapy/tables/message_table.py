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
    data = records.cols.data
    order = records.order
    for start in range(0, len(order), rows_per_table):
        idx = order[start:start + rows_per_table]
        col = {name: data[name][idx] for name in (
            "frame", "time", "src", "dst", "qpn", "cid", "msg", "names", "paired", "latency",
            "rich", "flags", "buf_id", "errno")}
        n = len(idx)
        names = col["names"]
        flags = col["flags"]
        io = (flags & (R.F_REQUEST | R.F_RESPONSE)) != 0
        response = (flags & R.F_RESPONSE) != 0
        # a response shows the RNBD header of the request it answers
        header = np.where(response, request_of[idx], idx)
        has_header = (header >= 0) & ((data["flags"][np.maximum(header, 0)] & R.F_RNBD_IO) != 0)
        at = np.maximum(header, 0)
        rw = data["rw"][at]
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
            "device_id": _nulls(data["device_id"][at], ~has_header),
            "sector": _nulls(data["sector"][at], ~sector_known),
            "bi_size": _nulls(data["bi_size"][at], ~has_header),
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
    data = records.cols.data
    get = {name: data[name][idx].tolist() for name in (
        "offset", "usr_len", "data_len", "sg_cnt", "first_frame", "desc_addr", "desc_key",
        "desc_len", "rkey_buf_id", "rkey", "inv", "device_id", "sector", "rw", "bi_size",
        "prio")}
    fields, rnbd = [], []
    texts = {}
    for k, (flags, buf_id, err) in enumerate(zip(col["flags"].tolist(), col["buf_id"].tolist(),
                                                 col["errno"].tolist())):
        if flags & R.F_REQUEST:
            text = '{"buf_id": %d, ' % buf_id
            if flags & R.F_CUT:
                text += '"data_len": null, '
            else:
                text += '"data_len": %d, ' % get["data_len"][k]
            if flags & R.F_DESC:
                text += '"desc": {"addr": %d, "key": %d, "len": %d}, ' % (
                    get["desc_addr"][k], get["desc_key"][k], get["desc_len"][k])
            text += '"first_frame": %d, ' % get["first_frame"][k]
            if flags & R.F_CUT:
                text += '"header_only": true, '
            if get["inv"][k] >= 0:
                text += '"invalidate_frame": %d, ' % get["inv"][k]
            text += '"offset": %d, ' % get["offset"][k]
            if flags & R.F_CUT:
                text += '"sg_cnt": null, "usr_len": null}'
            else:
                if flags & R.F_PARTIAL:
                    text += '"partial": true, '
                text += '"sg_cnt": %d, "usr_len": %d}' % (get["sg_cnt"][k], get["usr_len"][k])
        elif flags & R.F_RESPONSE:
            text = '{"errno": %d, ' % err
            if err:
                text += '"errno_name": "%s", ' % errno_text(err).split()[1]
            text += '"msg_id": %d, ' % buf_id
            if flags & R.F_RKEY:
                text += '"rkey_rsp": {"buf_id": %d, "rkey": %d}, ' % (get["rkey_buf_id"][k],
                                                                      get["rkey"][k])
            text += '"with_invalidate": %s}' % ("true" if flags & R.F_WITH_INV else "false")
        else:
            text = "{}"
        fields.append(text)
        if flags & R.F_RNBD_IO:
            rw = get["rw"][k]
            names = texts.get(rw)
            if names is None:
                names = texts[rw] = (_dumps(rnbd_op_name(rw)), _dumps(R.rnbd.rw_str(rw)))
            sector = get["sector"][k] if rw & RNBD_OP_MASK != RNBD_OP_FLUSH else "null"
            rnbd.append('{"bi_size": %d, "device_id": %d, "msg": "io", "op": %s, "prio": %d, '
                        '"rw": %d, "rw_str": %s, "sector": %s, "type": %d}' % (
                            get["bi_size"][k], get["device_id"][k], names[0], get["prio"][k],
                            rw, names[1], sector, R.RNBD_MSG_IO))
        else:
            rnbd.append(None)
    return fields, rnbd
