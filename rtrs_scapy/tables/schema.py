"""The tables' schema: one place that says every table, column, type and meaning.

The Parquet files carry it (each field's ``description`` in its metadata, the
table name and ``SCHEMA_VERSION`` in the file's key-value metadata), and
docs/TABLES.md is generated from it (``python -m rtrs_scapy.tables.docs``).

Versioning: ``SCHEMA_VERSION`` is MAJOR.MINOR.  A new column or table raises
MINOR; a column renamed, retyped, dropped or given another meaning raises MAJOR.
Readers that select columns by name keep working across MINOR versions.
"""

import pyarrow as pa

SCHEMA_VERSION = "1.1"
#: key-value metadata keys of every Parquet file written
META_TABLE = b"rtrs_scapy.table"
META_VERSION = b"rtrs_scapy.schema_version"

TIME = pa.timestamp("ns", tz="UTC")
#: the columns whose texts are JSON objects
JSON_TEXTS = frozenset(("fields", "rnbd", "devices", "detail"))

_CAPTURE = ("capture", pa.string(), False,
            "the capture as it was given: its file (or directory, or -), or its files joined "
            "by ', ' (several files are one capture, merged in time order; frames are "
            "numbered in the merged capture)")
_SESSION = [
    ("session", pa.string(), True, "the session's one name: the RNBD session name (the "
     "client's sessname), else a short label (docs/cli.md#sessions-and-devices)"),
    ("paths_uuid", pa.string(), True, "the session's paths_uuid, null without a handshake"),
    ("sess_uuid", pa.string(), True, "the path's sess_uuid, null without a handshake"),
    ("client", pa.string(), True, "the path's client address"),
    ("server", pa.string(), True, "the path's server address"),
    ("path_id", pa.int32(), False, "the path's number in this capture (paths.path_id)"),
]

_TABLES = {
    "ios": ("One row per RTRS request: the unit the kernel counts in stats/rdma (RNBD "
            "control messages included). Counting rows and summing bytes per op gives the "
            "summary's read/write counts and bytes.", [
        _CAPTURE,
        ("frame", pa.int64(), False, "frame of the request's immediate (1-based)"),
        ("first_frame", pa.int64(), True,
         "frame of the request's first packet, null when it precedes the capture"),
        ("time", TIME, False, "capture time of the request's immediate"),
        *_SESSION,
        ("cid", pa.int32(), True, "connection id, null when the handshake is not captured"),
        ("op", pa.string(), False, "read or write (the RTRS operation)"),
        ("buf_id", pa.int32(), False, "the permit (server chunk) of the request"),
        ("bytes", pa.int64(), False, "data_len + usr_len, the kernel's stats/rdma accounting"),
        ("partial", pa.bool_(), False,
         "the request's first packets precede the capture (counted as the kernel did)"),
        ("rnbd_msg", pa.string(), True,
         "RNBD message of the request: io, open, close, sess_info; null when none"),
        ("rnbd_op", pa.string(), True, "RNBD IO operation: read, write, flush, discard, "
         "secure_erase, write_zeroes; null when not an IO"),
        ("device_id", pa.int32(), True, "RNBD device id of an IO"),
        ("device", pa.string(), True, "the device's path as the client opened it, when the "
         "OPEN is in the capture"),
        ("sector", pa.int64(), True, "first 512-byte sector of an IO (null for a FLUSH)"),
        ("bi_size", pa.int64(), True, "bytes of an IO"),
        ("outcome", pa.string(), False, "answered, replaced (by a newer request with the same "
         "buf_id: failed over or reused), aborted (its path went down) or in_flight (at the "
         "end of the capture)"),
        ("response_frame", pa.int64(), True, "frame of the response, null when unanswered"),
        ("response_time", TIME, True, "capture time of the response"),
        ("latency_us", pa.float64(), True,
         "response time minus the request's first send, µs; null when unanswered"),
        ("errno", pa.int32(), True,
         "the response's errno, negative like the kernel's (0: success); null when unanswered"),
        ("errno_name", pa.string(), True, "the errno's name (EIO), null when 0 or unanswered"),
        ("failover_from", pa.int64(), True,
         "frame of the first send of a request failed over to this path, else null"),
        ("failover_of", pa.int64(), True,
         "frame of the request this one re-sends after a failover (its original on the "
         "failed path), else null"),
        ("failed_over", pa.bool_(), False,
         "re-sent on another path after its path failed: the block IO is its copy's row"),
        ("delivered", pa.bool_(), True,
         "whether the client acknowledged the response (false: the server's answer never "
         "arrived, e.g. to a dead NIC); null when unanswered or not known"),
        ("request_us", pa.float64(), True, "the request's first packet to its last, µs "
         "(docs/latency.md); null when unanswered or its first packets precede the capture"),
        ("server_us", pa.float64(), True, "the request's last packet to the answer's first "
         "(a read's data, else the response), µs; null when unanswered or a read's data is "
         "not in the capture"),
        ("data_us", pa.float64(), True, "a read's data, its first packet to its last, µs "
         "(0 without data); null like server_us"),
        ("response_us", pa.float64(), True, "the data's last packet (else the response's "
         "first) to the response's last, µs; null like server_us"),
        ("wire_us", pa.float64(), True, "the request's first packet to the response's last, "
         "µs: the sum of the four parts; latency_us + request_us unless failed over"),
    ]),
    "messages": ("One row per RTRS/RNBD message record (what rtrs-dissect messages lists): "
                 "CM handshake, info exchange, requests, responses, heartbeats, disconnects.", [
        _CAPTURE,
        ("frame", pa.int64(), False, "frame of the message (its last packet)"),
        ("time", TIME, False, "capture time of the message"),
        *_SESSION[:5],
        ("path_id", pa.int32(), True, "the path's number in this capture (paths.path_id)"),
        ("src", pa.string(), False, "source address"),
        ("dst", pa.string(), False, "destination address"),
        ("dst_qpn", pa.int64(), False, "destination queue pair number"),
        ("cid", pa.int32(), True, "connection id"),
        ("msg", pa.string(), False, "kind: conn_req, conn_rsp, conn_rej, info_req, info_rsp, "
         "read, write, io_rsp, hb_msg, hb_ack, disconnect"),
        ("buf_id", pa.int32(), True, "buf_id of a request, msg_id of a response"),
        ("errno", pa.int32(), True, "errno of a response or conn_rsp (negative; 0: success)"),
        ("rnbd_msg", pa.string(), True, "RNBD message of a request"),
        ("rnbd_op", pa.string(), True, "RNBD IO operation of a request"),
        ("device_id", pa.int32(), True, "RNBD device id of an IO or CLOSE"),
        ("sector", pa.int64(), True, "first 512-byte sector of an IO (null for a FLUSH)"),
        ("bi_size", pa.int64(), True, "bytes of an IO"),
        ("paired_frame", pa.int64(), True, "the response of a request, the request of a response"),
        ("latency_us", pa.float64(), True, "request to response, µs (on both records)"),
        ("fields", pa.string(), False,
         "every decoded field of the message as a JSON object (rtrs-dissect messages "
         "--format json: fields)"),
        ("rnbd", pa.string(), True, "the RNBD header of a request as a JSON object"),
    ]),
    "sessions": ("One row per RTRS session (paths_uuid): its name and the sums of its paths.", [
        _CAPTURE,
        *_SESSION[:2],
        ("path_count", pa.int32(), False, "paths of the session in the capture"),
        ("reads", pa.int64(), False, "read requests (sum over its paths)"),
        ("read_bytes", pa.int64(), False, "bytes of the read requests"),
        ("read_errors", pa.int64(), False, "read requests answered with an errno"),
        ("writes", pa.int64(), False, "write requests"),
        ("write_bytes", pa.int64(), False, "bytes of the write requests"),
        ("write_errors", pa.int64(), False, "write requests answered with an errno"),
        ("devices", pa.string(), False,
         "RNBD devices opened in the capture as a JSON object {device_id: path}"),
    ]),
    "paths": ("One row per RTRS path (sess_uuid, or client and server when the handshake is "
              "not captured): handshake parameters and the summary's figures.", [
        _CAPTURE,
        *_SESSION,
        ("port", pa.int32(), True, "server port (RDMA CM)"),
        ("protocol_version", pa.string(), True, "RTRS protocol version of the handshake (2.0)"),
        ("queue_depth", pa.int32(), True, "the session's queue depth"),
        ("queue_depth_source", pa.string(), True,
         "handshake, inferred (from the traffic), assumed (kernel default) or forced"),
        ("max_io_size", pa.int64(), True, "max_io_size of the conn_rsp"),
        ("max_hdr_size", pa.int64(), True, "max_hdr_size of the conn_rsp"),
        ("always_invalidate", pa.bool_(), True, "the server invalidates each READ's rkey"),
        ("pathname", pa.string(), True, "the client's pathname (info_req)"),
        ("cid_num", pa.int32(), True, "connections per path (conn_req cid_num)"),
        ("chunks", pa.int32(), True, "server chunks (descriptors of the info_rsp)"),
        ("connections", pa.int32(), False, "connections seen (CM REQs of distinct cids)"),
        ("reads", pa.int64(), False, "read requests (the kernel's stats/rdma)"),
        ("read_bytes", pa.int64(), False, "bytes of the read requests"),
        ("read_errors", pa.int64(), False, "read requests answered with an errno"),
        ("read_latency_p50_us", pa.float64(), True, "median read latency, µs"),
        ("read_latency_p99_us", pa.float64(), True, "99th percentile read latency, µs"),
        ("read_latency_max_us", pa.float64(), True, "largest read latency, µs"),
        ("writes", pa.int64(), False, "write requests"),
        ("write_bytes", pa.int64(), False, "bytes of the write requests"),
        ("write_errors", pa.int64(), False, "write requests answered with an errno"),
        ("write_latency_p50_us", pa.float64(), True, "median write latency, µs"),
        ("write_latency_p99_us", pa.float64(), True, "99th percentile write latency, µs"),
        ("write_latency_max_us", pa.float64(), True, "largest write latency, µs"),
        ("rkey_refreshes", pa.int64(), False, "responses that carried a new rkey"),
        ("heartbeats_client_to_server", pa.int64(), False, "heartbeats the client sent"),
        ("heartbeats_server_to_client", pa.int64(), False, "heartbeats the server sent"),
        ("reconnects", pa.int64(), False, "successful reconnects (the kernel's successful_cnt)"),
        ("reconnect_attempts", pa.int64(), False, "all reconnect attempts"),
        ("failovers", pa.int64(), False, "requests failed over to this path (failover_cnt)"),
        ("aborted_requests", pa.int64(), False, "requests aborted when the path went down"),
        ("lost_requests", pa.int64(), False, "unanswered when the path died, never re-sent"),
        ("partial_requests", pa.int64(), False, "requests whose first packets precede the capture"),
        ("responses_without_request", pa.int64(), False,
         "responses whose request precedes the capture"),
        ("in_flight_at_end", pa.int64(), False, "requests unanswered at the end of the capture"),
        ("rejects", pa.int64(), False, "CM REJs of the path"),
        ("disconnects", pa.int64(), False, "disconnects of the path"),
        ("retransmissions", pa.int64(), False, "go-back-N duplicates (PSNs seen again)"),
        ("naks", pa.int64(), False, "AETH NAKs"),
    ]),
    "events": ("One row per entry of each path's timeline (the summary's events): connect, "
               "reconnect, reconnect_failed, reject, disconnect, outage, heartbeat_lost and "
               "what the IO analysis adds (failover, io_error, first_io, last_io, …).", [
        _CAPTURE,
        *_SESSION,
        ("time", TIME, True, "when it happened"),
        ("frame", pa.int64(), True, "the frame that shows it"),
        ("kind", pa.string(), False, "what happened"),
        ("detail", pa.string(), False,
         "the event's other keys (initiator, sender, reason_name, errno, duration_s, …) "
         "as a JSON object"),
    ]),
}

#: table names in the order they are written and documented
TABLES = tuple(_TABLES)


def describe(table):
    """The one-paragraph description of a table."""
    return _TABLES[table][0]


def schema(table):
    """The Arrow schema of a table, with each field's description and the schema
    version in the metadata."""
    fields = [pa.field(name, kind, nullable=nullable, metadata={"description": text})
              for name, kind, nullable, text in _TABLES[table][1]]
    return pa.schema(fields, metadata={META_TABLE: table.encode(),
                                       META_VERSION: SCHEMA_VERSION.encode()})
