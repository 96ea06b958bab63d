"""Rendering of the analyzer's message records: filters, one-line text, the
session context of a single frame (for ``rtrs-dissect show``)."""

from scapy.config import conf

from ..capture import open_capture

_KEY_FIELDS = {
    "conn_req": ("cid", "cid_num", "recon_cnt", "first_conn", "sess_uuid"),
    "conn_rsp": ("errno", "queue_depth", "max_io_size", "max_hdr_size", "flags"),
    "conn_rej": ("errno", "reason"),
    "info_req": ("pathname",),
    "info_rsp": ("sg_cnt",),
    "read": ("buf_id", "offset", "usr_len", "data_len"),
    "write": ("buf_id", "offset", "usr_len", "data_len"),
    "io_rsp": ("msg_id", "errno", "with_invalidate"),
    "rkey_rsp": ("msg_id", "errno", "rkey_rsp"),
    "disconnect": ("cm", "initiator"),
}


def _paths(result):
    for session in result.summary["sessions"]:
        for path in session["paths"]:
            yield session, path


def _matches_session(result, record, wanted):
    ends = {record["src"], record["dst"]}
    for session, path in _paths(result):
        if wanted in (session["sessname"], session["paths_uuid"], path["sess_uuid"]) \
                and ends == set(path["endpoints"]):
            return True
    return False


def select(result, session=None, kinds=(), errors=False):
    for record in result.messages:
        if kinds and record["msg"] not in kinds:
            continue
        if errors and not record["fields"].get("errno"):
            continue
        if session and not _matches_session(result, record, session):
            continue
        yield record


def message_line(record):
    fields = record["fields"]
    keys = _KEY_FIELDS.get(record["msg"], ())
    parts = ["%s=%s" % (k, fields[k]) for k in keys if k in fields]
    rnbd = record.get("rnbd")
    if rnbd:
        if rnbd["msg"] == "io":
            parts.append("RNBD %s dev %s sector %s len %s" % (
                rnbd["rw_str"], rnbd["device_id"], rnbd["sector"], rnbd["bi_size"]))
        else:
            parts.append("RNBD %s" % rnbd["msg"])
    if record["paired_frame"] is not None:
        parts.append("↔ %d (%.0f µs)" % (record["paired_frame"], record["latency"] * 1e6))
    return "%6d %17.6f %s → %s qp 0x%x cid %s %-10s %s" % (
        record["frame"], record["time"], record["src"], record["dst"], record["qpn"],
        "-" if record["cid"] is None else record["cid"], record["msg"], " ".join(parts))


def _read_frame(capture, frame_no):
    with open_capture(capture) as cap:
        for number, _ts, buf, start, end, link_type in cap:
            if number == frame_no:
                cls = conf.l2types.get(link_type, conf.raw_layer)
                return cls(bytes(buf[start:end]))
    return None


def frame_context(result, capture, frame_no):
    """(Scapy packet, lines of session context) of one frame."""
    import rtrs_scapy  # noqa: F401  (layers bound)
    from ..layers.ib import ImmDt
    packet = _read_frame(capture, frame_no)
    if packet is None:
        return None, []
    lines = []
    records = [r for r in result.messages if r["frame"] == frame_no]
    for record in records:
        path = next((p for _, p in _paths(result)
                     if {record["src"], record["dst"]} == set(p["endpoints"])), None)
        if path is not None and ImmDt in packet and path["queue_depth"]:
            packet[ImmDt].queue_depth = path["queue_depth"]
        lines.append(message_line(record))
        if path is not None:
            lines.append("path %s → %s, queue_depth %s%s" % (
                path["client"], path["server"], path["queue_depth"],
                " (inferred)" if path["queue_depth_inferred"] else ""))
        if record["paired_frame"] is not None:
            role = "answers the request in" if record["msg"] in ("io_rsp", "rkey_rsp") \
                else "answered in"
            lines.append("%s frame %d after %.1f µs" % (role, record["paired_frame"],
                                                       record["latency"] * 1e6))
    if not records:
        lines.append("no RTRS message completes in this frame (ACK, middle packet, "
                     "non-RTRS traffic, or a duplicate)")
    return packet, lines
