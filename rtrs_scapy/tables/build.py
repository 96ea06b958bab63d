"""The tables that follow from a finished analysis: ``messages``, ``sessions``,
``paths`` and ``events`` (``ios`` is written while the capture is read, ios.py).

Each is built from what the summary and ``rtrs-dissect messages --format json``
say, so the tables and the JSON outputs cannot disagree.
"""

import functools
import json

import pyarrow as pa

from ..analysis.naming import session_identity
from ..analysis.records import RecordList
from ..report.messages import MessageView, json_fields, json_rnbd
from ..report.words import has_sector
from ..spec.constants import rnbd_op_name
from .names import PATH_COLUMNS, path_names
from .schema import schema

MESSAGE_ROWS = 1 << 14       # message records per Arrow table (a Parquet row group), built whole in memory


def _table(name, rows):
    """An Arrow table of ``name`` from a list of row dicts (schema order and types)."""
    table_schema = schema(name)
    columns = {field.name: [row.get(field.name) for row in rows] for field in table_schema}
    return pa.Table.from_pydict(columns, schema=table_schema)


def _ns(seconds):
    """Epoch seconds (float, µs precision) as integer ns for a timestamp column."""
    return None if seconds is None else int(round(seconds * 1e6)) * 1000


def _named(capture, path_id, path):
    row = dict(zip(PATH_COLUMNS, path_names(path)))
    row.update(capture=capture, path_id=path_id)
    return row


#: sessions whose rows are gathered as dicts before they become Arrow tables: of a
#: capture's thousands of short sessions, the rows held as Python objects are a block's
SESSION_BLOCK = 512


def summary_tables(result, capture, tables):
    """The ``tables`` among sessions, paths and events, as Arrow tables, and the
    summary that names sessions for the messages table (its sessions' identities:
    analysis/naming.py).  One pass over the summary's sessions, made one at a time
    (``Analysis.summary_parts``), their rows Arrow tables a block of sessions at a
    time; events in time order (then frame; no time last), as they come for equal
    ones."""
    wanted = [table for table in ("sessions", "paths", "events") if table in tables]
    rows = {table: [] for table in wanted}
    made = {table: [] for table in wanted}
    head, entries = result.summary_parts()
    identities, event_keys = [], []
    for count, (session, entry) in enumerate(zip(result.analyzer.sessions.values(), entries), 1):
        if "sessions" in rows:
            rows["sessions"].append(_session_row(capture, session, entry))
        for path, summary in zip(session.paths, entry["paths"]):
            named = _named(capture, path.id, path)
            if "paths" in rows:
                rows["paths"].append(_path_row(named, summary))
            if "events" in rows:
                events = list(_event_rows(named, summary))
                rows["events"].extend(events)
                event_keys.extend(_time_order_key(event) for event in events)
        identities.append(session_identity(entry))
        if count % SESSION_BLOCK == 0:
            _to_arrow(rows, made)
    _to_arrow(rows, made)
    whole = {table: pa.concat_tables(pieces) for table, pieces in made.items()}
    if "events" in whole:
        whole["events"] = _in_order(whole["events"], event_keys)
    return whole, dict(head, sessions=identities)


def _to_arrow(rows, made):
    """The rows gathered so far appended to ``made`` as Arrow tables, and let go."""
    for table, table_rows in rows.items():
        made[table].append(_table(table, table_rows))
        table_rows.clear()


def _time_order_key(event):
    """An event row's place in time order: no time last, then time, then frame (none
    as 0)."""
    return event["time"] is None, event["time"] or 0, event["frame"] or 0


def _in_order(table, keys):
    """The rows of ``table`` sorted by their ``keys``, equal ones as they come: slices
    of its runs of consecutive rows (Arrow's sort and take would import its compute
    functions, 33 ms)."""
    order = sorted(range(len(keys)), key=keys.__getitem__)
    if order == list(range(len(keys))):
        return table
    runs, start = [], 0
    for k in range(1, len(order) + 1):
        if k == len(order) or order[k] != order[k - 1] + 1:
            runs.append(table.slice(order[start], k - start))
            start = k
    return pa.concat_tables(runs)


def _path_row(named, s):
    row = dict(named)
    row.update({key: s[key] for key in (
        "port", "protocol_version", "queue_depth", "queue_depth_source", "max_io_size",
        "max_hdr_size", "always_invalidate", "pathname", "cid_num", "chunks",
        "rkey_refreshes", "reconnects", "reconnect_attempts", "failovers",
        "aborted_requests", "lost_requests", "partial_requests",
        "responses_without_request", "in_flight_at_end")})
    row.update(connections=len(s["connections"]), rejects=len(s["rejects"]),
               disconnects=len(s["disconnects"]),
               heartbeats_client_to_server=s["heartbeats"]["client_to_server"],
               heartbeats_server_to_client=s["heartbeats"]["server_to_client"],
               retransmissions=s["transport"]["retransmissions"],
               naks=s["transport"]["naks"])
    for op, plural in (("read", "reads"), ("write", "writes")):
        io, latency = s["io"][op], s["latency_us"][op]
        row.update({plural: io["count"], op + "_bytes": io["bytes"],
                    op + "_errors": io["errors"],
                    op + "_latency_p50_us": latency["p50"],
                    op + "_latency_p99_us": latency["p99"],
                    op + "_latency_max_us": latency["max"]})
    return row


def _session_row(capture, session, entry):
    paths = entry["paths"]
    devices = {}
    for path in session.paths:
        devices.update(path.devices)
    row = {"capture": capture, "session": entry["label"],
           "paths_uuid": entry["paths_uuid"], "path_count": len(paths),
           "devices": json.dumps({str(k): v for k, v in sorted(devices.items())})}
    for op, plural in (("read", "reads"), ("write", "writes")):
        row[plural] = sum(p["io"][op]["count"] for p in paths)
        row[op + "_bytes"] = sum(p["io"][op]["bytes"] for p in paths)
        row[op + "_errors"] = sum(p["io"][op]["errors"] for p in paths)
    return row


def _event_rows(named, s):
    for event in s["events"]:
        row = dict(named, time=_ns(event.get("time")), frame=event.get("frame"),
                   kind=event["kind"])
        row["detail"] = json.dumps({k: v for k, v in event.items()
                                    if k not in ("time", "frame", "kind")}, sort_keys=True)
        yield row


def path_ids(analyzer):
    """The ``path_id`` of each path by its message records' key (sess_uuid, else its
    addresses)."""
    return {(path.sess_uuid or (path.client, path.server)): path.id
            for path in analyzer.path_list}


def messages_tables(result, capture, rows_per_table=MESSAGE_ROWS, summary=None):
    """The ``messages`` table in pieces of ``rows_per_table`` records (row groups) of
    the table's schema, as its file reads (its texts as strings); ``summary`` names the
    sessions (default: the whole one)."""
    table_schema = schema("messages")
    for piece in message_pieces(result.messages, capture,
                                result.summary if summary is None else summary,
                                path_ids(result.analyzer), rows_per_table):
        yield piece.cast(table_schema)


def message_pieces(records, capture, summary, path_ids, rows_per_table=MESSAGE_ROWS):
    """The ``messages`` table of the message ``records`` (``result.messages``), named
    by ``summary`` (its sessions' identities suffice) and ``path_ids``: what an export
    keeps of the analysis once it has let go of the rest.  Made from columns, its
    texts of a few distinct values come as dictionaries (arrays.py)."""
    view = MessageView(summary, records)
    table_schema = schema("messages")
    if isinstance(records, RecordList) and records.records.order is not None:
        from .message_table import message_tables     # (only where the table is made)
        yield from message_tables(view, records, capture, path_ids, table_schema,
                                  rows_per_table,
                                  lambda rec: _message_row(view, rec, capture, path_ids))
        return
    for start in range(0, len(records), rows_per_table):
        rows = [_message_row(view, rec, capture, path_ids)
                for rec in records[start:start + rows_per_table]]
        arrays = dict(zip(MESSAGE_COLUMNS, zip(*rows)))
        yield pa.Table.from_arrays([pa.array(arrays[field.name], field.type)
                                    for field in table_schema], schema=table_schema)


#: json.dumps(value, sort_keys=True), without a new encoder per call
_sorted_json = json.JSONEncoder(sort_keys=True).encode
#: rnbd_op_name per rw value (a few distinct ones)
_op_name = functools.lru_cache(maxsize=1024)(rnbd_op_name)

#: the order of a ``messages`` row of _message_row
MESSAGE_COLUMNS = ("capture", "frame", "time", "session", "paths_uuid", "sess_uuid", "client",
                   "server", "path_id", "src", "dst", "dst_qpn", "cid", "msg", "buf_id",
                   "errno", "rnbd_msg", "rnbd_op", "device_id", "sector", "bi_size",
                   "paired_frame", "latency_us", "fields", "rnbd")


def _message_row(view, rec, capture, path_ids):
    """A ``messages`` row (MESSAGE_COLUMNS): the record's JSON object, flattened; a
    response gets the RNBD columns of the request it answers."""
    ref = view.session_of(rec)
    fields = json_fields(rec["msg"], rec["fields"])
    rnbd = view.rnbd_of(rec)
    rnbd_msg = rnbd_op = device_id = sector = bi_size = None
    if rnbd is not None:
        rnbd_msg, device_id = rnbd["msg"], rnbd.get("device_id")
        if rnbd_msg == "io":
            rnbd_op, bi_size = _op_name(rnbd["rw"]), rnbd["bi_size"]
            if has_sector(rnbd["rw"]):
                sector = rnbd["sector"]
    own = json_rnbd(rec["rnbd"])
    latency = rec["latency"]
    key = rec["sess_uuid"] or (rec["client"], rec["server"])
    return (capture, rec["frame"], _ns(rec["time"]), ref.label if ref else None,
            ref.paths_uuid if ref else None, rec["sess_uuid"], rec["client"], rec["server"],
            path_ids.get(key), rec["src"], rec["dst"], rec["qpn"], rec["cid"], rec["msg"],
            fields.get("buf_id", fields.get("msg_id")), fields.get("errno"), rnbd_msg,
            rnbd_op, device_id, sector, bi_size, rec["paired_frame"],
            None if latency is None else round(latency * 1e6, 1),
            _sorted_json(fields), _sorted_json(own) if own else None)
