"""The ``messages`` table from the records' columns (analysis/records.py), a row
group at a time: numpy columns become Arrow arrays, names are taken from the few
distinct ones, and the two JSON columns (``fields``, ``rnbd``) are joined from
their pieces by Arrow's string functions, so no Python runs per row.  The rare
rich records (CM, info exchange, RNBD control messages, failovers) are made as
build.py makes any record: from its dict.  The rows are the same as
build._message_row's.
"""

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..analysis import records as R
from ..report.messages import _path_key
from ..report.words import errno_text, rounded
from ..spec.constants import RNBD_OP_FLUSH, RNBD_OP_MASK, rnbd_op_name
from .arrays import by_key
from .schema import TIME

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
    per_names = {k: pa.array(v, table_schema.field(k).type) for k, v in per_names.items()}
    addrs, msgs = pa.array(records.addrs, pa.string()), pa.array(records.msg_names, pa.string())
    take = records.cols.take
    order = records.order
    for start in range(0, len(order), rows_per_table):
        idx = order[start:start + rows_per_table]
        col = take(("frame", "time", "src", "dst", "qpn", "cid", "msg", "names", "paired",
                    "latency", "rich", "flags", "buf_id", "errno"), idx)
        n = len(idx)
        names = pa.array(col["names"])
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
            "capture": pa.repeat(pa.scalar(capture, pa.string()), n),
            "frame": pa.array(col["frame"], pa.int64()),
            "time": pa.array(np.rint(col["time"] * 1e6).astype(np.int64) * 1000, TIME),
            **{k: v.take(names) for k, v in per_names.items()},
            "src": addrs.take(pa.array(col["src"])), "dst": addrs.take(pa.array(col["dst"])),
            "dst_qpn": _column(col["qpn"], pa.int64()),
            "cid": _column(col["cid"], pa.int32(), col["cid"] < 0),
            "msg": msgs.take(pa.array(col["msg"])),
            "buf_id": _column(col["buf_id"], pa.int32(), ~io),
            "errno": _column(col["errno"], pa.int32(), ~response),
            "rnbd_msg": pc.if_else(pa.array(has_header), "io", pa.scalar(None, pa.string())),
            "rnbd_op": _texts_by_value(rw, rnbd_op_name, ~has_header),
            "device_id": _column(h["device_id"], pa.int32(), ~has_header),
            "sector": _column(h["sector"], pa.int64(), ~sector_known),
            "bi_size": _column(h["bi_size"], pa.int64(), ~has_header),
            "paired_frame": _column(col["paired"], pa.int64(), col["paired"] < 0),
            "latency_us": _round_1(col["latency"] * 1e6),
        }
        out["fields"], out["rnbd"] = _json_columns(records, idx, col)
        slow = col["rich"] >= 0
        if records.extras or records.rnbd or records.replies:
            special = np.fromiter(list(records.extras) + list(records.rnbd)
                                  + list(records.replies), dtype=np.int64)
            slow |= np.isin(idx, special) | np.isin(header, special)
        if slow.any():
            rows = [row_of(records.record(int(i))) for i in idx[slow].tolist()]
            mask = pa.array(slow)
            for field, values in zip(table_schema, zip(*rows)):
                out[field.name] = pc.replace_with_mask(out[field.name], mask,
                                                       _wrapped(values, field.type))
        yield pa.Table.from_arrays([out[f.name] for f in table_schema], schema=table_schema)


def _column(values, kind, missing=None):
    """A numpy column as an Arrow array of ``kind``, null where ``missing``; a wire
    value beyond the signed type (a hostile u32 device id, u64 sector) wraps as
    in the ``ios`` table, rather than stopping the export."""
    return pa.array(values.astype(kind.to_pandas_dtype()), mask=missing)


def _wrapped(values, kind):
    """Python values as an Arrow array of ``kind``, integers wrapped as _column's."""
    if pa.types.is_integer(kind):
        half = 1 << (kind.bit_width - 1)
        values = [None if v is None else (v + half) % (2 * half) - half for v in values]
    return pa.array(values, kind)


def _round_1(values):
    """``round(v, 1)`` of each value (Python's), null for NaN."""
    return pa.array(rounded(values, 1), mask=np.isnan(values))


def _json_columns(records, idx, col):
    """``fields`` and ``rnbd`` (sorted-key JSON) of the columnar records of a batch
    (the rich ones are made from their dicts after)."""
    c = records.cols.take((
        "offset", "usr_len", "data_len", "sg_cnt", "first_frame", "desc_addr", "desc_key",
        "desc_len", "rkey_buf_id", "rkey", "inv", "device_id", "sector", "rw", "bi_size",
        "prio"), idx)
    flags, buf_id, err = col["flags"], col["buf_id"], col["errno"]
    fields = pa.repeat(pa.scalar("{}"), len(idx))
    req = (flags & R.F_REQUEST) != 0
    if req.any():
        f = {k: v[req] for k, v in c.items()}
        cut = pa.array((flags[req] & R.F_CUT) != 0)
        desc = pa.array((flags[req] & R.F_DESC) != 0)
        partial = pa.array((flags[req] & (R.F_CUT | R.F_PARTIAL)) == R.F_PARTIAL)
        fields = pc.replace_with_mask(fields, pa.array(req), _join(
            '{"buf_id": ', _text(buf_id[req]), ", ",
            pc.if_else(cut, '"data_len": null, ',
                       _join('"data_len": ', _text(f["data_len"]), ", ")),
            pc.if_else(desc, _join('"desc": {"addr": ', _text(f["desc_addr"]), ', "key": ',
                                   _text(f["desc_key"]), ', "len": ', _text(f["desc_len"]),
                                   "}, "), ""),
            '"first_frame": ', _text(f["first_frame"]), ", ",
            pc.if_else(cut, '"header_only": true, ', ""),
            pc.if_else(pa.array(f["inv"] >= 0),
                       _join('"invalidate_frame": ', _text(f["inv"]), ", "), ""),
            '"offset": ', _text(f["offset"]), ", ",
            pc.if_else(partial, '"partial": true, ', ""),
            pc.if_else(cut, '"sg_cnt": null, "usr_len": null}',
                       _join('"sg_cnt": ', _text(f["sg_cnt"]), ', "usr_len": ',
                             _text(f["usr_len"]), "}"))))
    rsp = (flags & R.F_RESPONSE) != 0
    if rsp.any():
        f = {k: v[rsp] for k, v in c.items()}
        fields = pc.replace_with_mask(fields, pa.array(rsp), _join(
            _texts_by_value(err[rsp], lambda v: '{"errno": %d, ' % v + (
                '"errno_name": "%s", ' % errno_text(v).split()[1] if v else "")),
            '"msg_id": ', _text(buf_id[rsp]), ", ",
            pc.if_else(pa.array((flags[rsp] & R.F_RKEY) != 0),
                       _join('"rkey_rsp": {"buf_id": ', _text(f["rkey_buf_id"]),
                             ', "rkey": ', _text(f["rkey"]), "}, "), ""),
            pc.if_else(pa.array((flags[rsp] & R.F_WITH_INV) != 0),
                       '"with_invalidate": true}', '"with_invalidate": false}')))
    rnbd = pa.nulls(len(idx), pa.string())
    io = (flags & R.F_RNBD_IO) != 0
    if io.any():
        f = {k: v[io] for k, v in c.items()}
        rw = f["rw"]
        rnbd = pc.replace_with_mask(rnbd, pa.array(io), _join(
            '{"bi_size": ', _text(f["bi_size"]), ', "device_id": ', _text(f["device_id"]),
            ", ",
            _texts_by_value(rw, lambda v: '"msg": "io", "op": %s, "prio": ' % _dumps(
                rnbd_op_name(v))),
            _text(f["prio"]), ", ",
            _texts_by_value(rw, lambda v: '"rw": %d, "rw_str": %s, "sector": ' % (
                v, _dumps(R.rnbd.rw_str(v)))),
            pc.if_else(pa.array((rw & RNBD_OP_MASK) != RNBD_OP_FLUSH),
                       _text(f["sector"]), "null"),
            ', "type": %d}' % R.RNBD_MSG_IO))
    return fields, rnbd


def _text(values):
    """A numpy integer column as decimal text (an Arrow string array)."""
    return pc.cast(pa.array(values), pa.string())


def _join(*pieces):
    """Arrow string arrays and literals joined row by row."""
    return pc.binary_join_element_wise(*pieces, "")


def _texts_by_value(values, text, missing=None):
    """``text(v)`` of each value (once per distinct one), null where ``missing``."""
    return by_key(values, text, missing)[0]
